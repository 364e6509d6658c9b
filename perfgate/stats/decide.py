"""The decision rule, in one place.

Everything that turns evidence into a verdict, or verdicts into a gate outcome, is here, and
everything that shows or acts on a verdict asks here: the history and paired comparisons, the
text / JSON / markdown / HTML headlines, baselines-as-code, the comment policy and the exit code.

* Worse or better: :meth:`perfgate.models.Direction.worse` (a change in a lower-is-better metric
  is worse when positive), through :func:`change_verdict`.
* A statistical comparison: :func:`classify_change` — significant after adjustment (at
  ``alpha``) and at least the minimum effect, on the ratio scale (a 10% slower time and a
  9.1% lower throughput are the same size), is a change; ``unchanged`` only when the
  interval's worse end lies inside the minimum effect (an equivalence test); otherwise
  inconclusive. :func:`decided` turns the outcome into the verdict and its reason, for the
  history and the A/B comparisons alike. The smallest detectable change is stated at
  ``POWER``.
* A deterministic metric: :func:`deterministic_verdict` — any change beyond the tolerance.
* A result that must not move (the loss on a fixed seed): :func:`numerics_verdict` — a
  change beyond the tolerance either way is a regression, whatever the speed did.
* Which comparisons decide: :func:`deciding` — a benchmark measured in A/B pairs is decided by
  its paired comparisons (job-level noise cancels there), the others by history.
* The overall verdict (:func:`overall_verdict`), the counts a headline shows
  (:func:`verdict_counts`) and whether the gate fails (:func:`gate_fails`) all read only the
  deciding comparisons.
* A budget (:mod:`perfgate.stats.budget`, ``kind`` ``budget``) is judged on the run alone and
  always decides, A/B or not; ``over_budget`` ranks first in the overall verdict, and a
  budget kept (``unchanged``) leaves the overall verdict to the other comparisons
  (:func:`is_budget`).

What a verdict leads to is decided here too, once each, and the use cases and renderers ask:

* Whether a verdict fails the gate: :func:`fails_gate` (a verdict in the policy's ``fail_on``);
  the JUnit failures, the ``::error`` annotations and the exit code all ask it.
* Whether it raises an alert: :func:`raises_alert` and :func:`alerts_raised` (a deciding
  regression of a gate on the base branch; a PR's regression is said in its comment).
* Whether it posts a new PR/MR comment: :class:`CommentMode` and :func:`posts_comment`.
* Whether it earns a second look (``check`` re-measuring, ``run --confirm``):
  :func:`second_look`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from perfgate.models import Comparison, Direction, Verdict

ALPHA = 0.01
"""Significance level of one gate (after Benjamini-Hochberg across its metrics)."""

MIN_BASELINE_RUNS = 3
"""Baseline runs a noisy metric needs before it is judged (fewer: ``no_baseline``)."""

POWER = 0.8
"""The power at which a comparison's smallest detectable change (its MDE) is stated."""

MDE_SHOWN_UP_TO = 1000.0
"""A detectable change larger than this (in %) is shown as "over 1000%": with two A/B pairs
or three runs the t quantile makes it astronomically large, and its digits mean nothing."""


SCIENTIFIC_FROM = 1e9
"""A number this large or larger is written with its exponent (``+1e+263``), never in all
its digits (a change of 1e300 is otherwise a 300-digit percent)."""


def fixed(x: float, spec: str) -> str:
    """``x`` in the fixed-point format ``spec`` (``+.1f``, ``,.0f``), or beyond
    :data:`SCIENTIFIC_FROM` in three significant digits with its exponent (and ``spec``'s
    sign): the one way a report or a reason writes a number that may be huge."""
    if math.isfinite(x) and abs(x) >= SCIENTIFIC_FROM:
        return f"{x:{'+' if spec.startswith('+') else ''}.3g}"
    return f"{x:{spec}}"


def size_text(pct: float) -> str:
    """A detectable change for people: ``12.3%``, or ``over 1000%`` (nothing useful is)."""
    return f"{pct:.1f}%" if pct <= MDE_SHOWN_UP_TO else f"over {MDE_SHOWN_UP_TO:.0f}%"


SEVERITY_ORDER = (
    Verdict.OVER_BUDGET,
    Verdict.REGRESSION,
    Verdict.INCONCLUSIVE,
    Verdict.IMPROVEMENT,
    Verdict.UNCHANGED,
    Verdict.NO_BASELINE,
    Verdict.INCOMPARABLE,
)
"""The verdicts, most severe first: a gate's overall verdict is the first any of its deciding
comparisons has, and a report lists a benchmark's comparisons in this order."""


class Outcome(str, Enum):
    """What :func:`classify_change` found, before the direction is applied."""

    CHANGE = "change"
    UNSURE = "unsure"
    BLIND = "blind"
    UNCHANGED = "unchanged"


def change_verdict(direction: Direction, change: float) -> Verdict:
    """``regression`` when ``change`` makes a metric of ``direction`` worse, else
    ``improvement``."""
    return Verdict.REGRESSION if direction.worse(change) else Verdict.IMPROVEMENT


def worse_sign(direction: Direction) -> float:
    """+1 when an increase makes a metric of ``direction`` worse, -1 when a decrease does."""
    return 1.0 if direction.worse(1.0) else -1.0


def ratio_size(change_pct: float) -> float:
    """How big a relative change is on the ratio scale: |log(1 + change)|. A time 10% slower
    and the throughput 9.1% lower are the same size."""
    if change_pct <= -100.0:
        return math.inf
    return abs(math.log1p(change_pct / 100.0))


def classify_change(
    *,
    change_pct: float,
    p_adjusted: float,
    min_effect_pct: float,
    alpha: float,
    worse_bound_pct: float,
    direction: Direction,
) -> Outcome:
    """The statistical decision rule.

    A change must be significant after adjustment and at least the minimum effect (on the
    ratio scale). Otherwise a change is ``unchanged`` only when ``worse_bound_pct``, the
    interval's end on the worse side of ``direction``, lies inside the minimum effect
    (equivalence); else inconclusive (``UNSURE`` when the change itself
    reaches the minimum effect, ``BLIND`` when it does not).
    """
    limit = math.log1p(max(min_effect_pct, 0.0) / 100.0)
    big_enough = ratio_size(change_pct) >= limit - 1e-12
    if p_adjusted < alpha and big_enough:
        return Outcome.CHANGE
    if big_enough:
        return Outcome.UNSURE
    if worse_bound_pct <= -100.0:
        worse = -math.inf
    else:
        worse = worse_sign(direction) * math.log1p(worse_bound_pct / 100.0)
    return Outcome.UNCHANGED if worse < limit else Outcome.BLIND


@dataclass(frozen=True)
class Words:
    """What a comparison knows to say about its change; :func:`decided` words the reason."""

    moved: str
    """How far and which way: ``5.6% slower``."""
    against: str
    """Against what: ``than the level of its 30 baseline runs``."""
    evidence: str
    """The p-values: ``p=0.0017 after FDR adjustment (raw 0.00017, alpha 0.01)``."""
    effect: str
    """The minimum effect: ``3% minimum effect``."""
    caught: str
    """What this noise can see: ``a change of 6.1% is caught with 80% power``."""
    advice: str = ""
    """What more data would settle it (A/B: more pairs), said when it stays inconclusive."""
    blind: str = ""
    """Why it cannot be called unchanged when the bound alone does not say it."""


def worst_case(direction: Direction, bound_pct: float) -> str:
    """The interval's end on the worse side in words: ``at most 1.5% worse``, or ``at least
    1.5% better`` where even that end is an improvement."""
    if worse_sign(direction) * bound_pct > 0:
        return f"at most {fixed(abs(bound_pct), '.1f')}% worse"
    return f"at least {fixed(abs(bound_pct), '.1f')}% better"


def decided(
    outcome: Outcome,
    direction: Direction,
    change_pct: float,
    bound_pct: float,
    alpha: float,
    words: Words,
) -> tuple[Verdict, str]:
    """The verdict an :class:`Outcome` of :func:`classify_change` gives and its reason: the
    one place a history or an A/B comparison turns its outcome into words."""
    w, bound = words, abs(bound_pct)
    advice = f"; {w.advice}" if w.advice else ""
    if outcome is Outcome.CHANGE:
        return change_verdict(direction, change_pct), (
            f"{w.moved} {w.against}, {w.evidence}, beyond the {w.effect}"
        )
    if outcome is Outcome.UNSURE:
        return Verdict.INCONCLUSIVE, (
            f"{w.moved} {w.against}, but not significant ({w.evidence}); with this noise "
            f"{w.caught}{advice}"
        )
    if outcome is Outcome.BLIND:
        why = w.blind or (
            f"it may be up to {fixed(bound, '.1f')}% worse, beyond the {w.effect} (bound at alpha "
            f"{alpha:g}; {w.evidence})"
        )
        return Verdict.INCONCLUSIVE, (
            f"{w.moved} {w.against}, but it cannot be called unchanged: {why}; {w.caught}{advice}"
        )
    return Verdict.UNCHANGED, (
        f"{w.moved} {w.against}: {worst_case(direction, bound_pct)} (bound at alpha {alpha:g}), "
        f"within the {w.effect} ({w.evidence}); {w.caught}"
    )


def deterministic_verdict(direction: Direction, change_pct: float, tolerance_pct: float) -> Verdict:
    """A deterministic metric (launch counts, op set) needs no statistics: ``unchanged``
    within the tolerance, else a regression or an improvement. (A loss is judged by
    :func:`numerics_verdict`, where no direction is better.)"""
    if abs(change_pct) <= tolerance_pct:
        return Verdict.UNCHANGED
    return change_verdict(direction, change_pct)


def relative_change_pct(baseline: float, current: float) -> float:
    """``current`` against ``baseline`` in % of it; exactly 0 when they are equal (a baseline
    of 0 is taken as 1, so a change from 0 is its size in % of one unit)."""
    if current == baseline:
        return 0.0
    return (current - baseline) * 100.0 / abs(baseline or 1.0)


def numerics_verdict(
    metric: str, baseline: float, current: float, tolerance_pct: float, *, against: str = ""
) -> tuple[Verdict, float, str]:
    """The numerics guard (DESIGN.md §5): a result that must not move, such as the loss at
    the end of the measured window with a fixed seed. Returns the verdict, the change in %
    and the reason in words (``against`` says what ``baseline`` is: " in the base", ...).

    A change beyond the tolerance (a relative %) is a ``regression`` whatever the speed did
    and in either direction: a change meant to cost or save only time must not touch the
    numbers, and a lower loss from it is as broken as a higher one (a dropped term, a skipped
    step, a different reduction order, a changed dtype). A change meant to alter the numerics
    fails here by design, and is accepted as any intended change is. Within the tolerance it
    is ``unchanged``; there is no ``improvement``. A non-finite value is always a change.
    """
    change = relative_change_pct(baseline, current)
    values = (
        f"{metric} {current:.6g} vs {baseline:.6g}{against} ({change:+.2f}%, tolerance "
        f"{tolerance_pct:g}%)"
    )
    if math.isfinite(change) and abs(change) <= tolerance_pct:
        return Verdict.UNCHANGED, change, f"{values}: the numerics held"
    return (
        Verdict.REGRESSION,
        change,
        f"{values}: the numerics changed — a result that must not move moved, whatever the "
        "speed did",
    )


def deciding(comparisons: Iterable[Comparison]) -> tuple[Comparison, ...]:
    """The comparisons a gate decides on: for a benchmark measured in A/B pairs its paired
    comparisons; for the others, history; in both, not those only shown beside them
    (``decides`` False: a wall time where the CPU or device time decides, an operator
    count the suite did not name), and every budget's (judged on the run alone, A/B or
    not)."""
    every = tuple(c for c in comparisons if c.decides)
    paired = {c.benchmark for c in every if c.method == "paired"}
    return tuple(
        c for c in every if c.method == "paired" or is_budget(c) or c.benchmark not in paired
    )


def is_budget(c: Comparison) -> bool:
    """A budget's comparison (absolute limit, judged on the run alone): it always decides,
    and it is never a regression nor part of a false-discovery family."""
    return c.kind == "budget"


def overall_verdict(comparisons: Iterable[Comparison]) -> Verdict:
    """One verdict for a gate, from its deciding comparisons: the worst that occurs, in the
    order over budget, regression, inconclusive, improvement, unchanged, no baseline;
    ``no_baseline`` when nothing was compared; ``incomparable`` when nothing else occurs. A
    budget kept counts for nothing here: a first run within its budgets has no baseline,
    not ``unchanged``."""
    seen = frozenset(
        c.verdict
        for c in deciding(comparisons)
        if not is_budget(c) or c.verdict is Verdict.OVER_BUDGET
    )
    if not seen:
        return Verdict.NO_BASELINE
    return next(v for v in SEVERITY_ORDER if v in seen)


def verdict_counts(comparisons: Iterable[Comparison]) -> dict[Verdict, int]:
    """How many deciding comparisons have each verdict (every verdict present, zeros
    included), in :class:`Verdict` order."""
    decided = deciding(comparisons)
    return {v: sum(1 for c in decided if c.verdict is v) for v in Verdict}


def fails_gate(verdict: Verdict, fail_on: Collection[Verdict]) -> bool:
    """Whether a deciding comparison of ``verdict`` fails the gate under the policy
    ``fail_on`` (the suite's ``fail_on`` or ``--fail-on``; by default a regression and a
    breached budget)."""
    return verdict in fail_on


def gate_fails(comparisons: Iterable[Comparison], fail_on: Collection[Verdict]) -> bool:
    """Whether a gate fails: any deciding comparison has a verdict that :func:`fails_gate`."""
    return any(fails_gate(c.verdict, fail_on) for c in deciding(comparisons))


def deciding_verdicts(comparisons: Iterable[Comparison]) -> frozenset[Verdict]:
    """The set of verdicts among the deciding comparisons."""
    return frozenset(c.verdict for c in deciding(comparisons))


def raises_alert(verdict: Verdict) -> bool:
    """Whether a deciding comparison of a gate on the base branch raises an alert: a
    regression does (a breached budget is said by the gate, every run, and needs no triage)."""
    return verdict is Verdict.REGRESSION


def alerts_raised(
    comparisons: Iterable[Comparison], *, on_base_branch: bool
) -> tuple[Comparison, ...]:
    """The comparisons of a gate that raise an alert (:func:`raises_alert`): none unless the
    gate judged the base branch itself (``on_base_branch``; a PR's regression is the PR's, said
    in its comment), else its deciding regressions."""
    if not on_base_branch:
        return ()
    return tuple(c for c in deciding(comparisons) if raises_alert(c.verdict))


class CommentMode(str, Enum):
    """When a comment is posted: always, on any change (regression, improvement or
    inconclusive), or only on a regression; a breached budget counts in both. An existing
    comment is always kept current."""

    ALWAYS = "always"
    CHANGE = "change"
    REGRESSION = "regression"


_COMMENTED: Mapping[CommentMode, frozenset[Verdict]] = {
    CommentMode.REGRESSION: frozenset({Verdict.REGRESSION, Verdict.OVER_BUDGET}),
    CommentMode.CHANGE: frozenset(
        {Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.INCONCLUSIVE, Verdict.OVER_BUDGET}
    ),
}
"""The deciding verdicts that ask for a new comment under a filtering mode."""


def posts_comment(mode: CommentMode, comparisons: Iterable[Comparison]) -> bool:
    """Whether ``mode`` asks for a new comment on a gate of ``comparisons``: always under
    ``always``; else when a deciding verdict is one the mode names (a breached budget counts
    in both). An existing comment is kept current whatever this says."""
    wanted = _COMMENTED.get(mode)
    return wanted is None or bool(deciding_verdicts(comparisons) & wanted)


def second_look(
    comparisons: Iterable[Comparison], *, method: str | None = None, regression_stands: bool
) -> frozenset[str]:
    """The benchmarks whose deciding comparisons (of ``method``: ``history`` or ``paired``;
    None: any) earn a second look, measured again: every benchmark left inconclusive, and

    * with ``regression_stands`` False (``check``'s two looks at a common level), a regression
      too: judged again at the common level, it stands there or the second look settles it
      (reporting it as it is while re-measuring the others would spend the false-alarm
      budget twice);
    * with ``regression_stands`` True (``run --confirm``, and whether a look of ``check``'s A/B
      decided), not a benchmark with a regression: it stands, and confirming can only add
      detections.
    """
    mine = [c for c in deciding(comparisons) if method is None or c.method == method]
    unsure = {c.benchmark for c in mine if c.verdict is Verdict.INCONCLUSIVE}
    regressed = {c.benchmark for c in mine if c.verdict is Verdict.REGRESSION}
    if regression_stands:
        return frozenset(unsure - regressed)
    return frozenset(unsure | regressed)
