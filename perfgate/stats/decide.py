"""The decision rule, in one place.

Everything that turns evidence into a verdict, or verdicts into a gate outcome, is here, and
everything that shows or acts on a verdict asks here: the history and paired comparisons, the
text / JSON / markdown / HTML headlines, baselines-as-code, the comment policy and the exit code.

* Worse or better: :meth:`perfgate.models.Direction.worse` (a change in a lower-is-better metric
  is worse when positive), through :func:`change_verdict`.
* A statistical comparison: :func:`classify_change` — significant after adjustment, at least
  the minimum effect and (for history) past nearly every baseline run is a change; otherwise
  inconclusive, or unchanged when the data could have seen a change of ``BLIND_FACTOR`` times
  the minimum effect.
* A deterministic metric: :func:`deterministic_verdict` — any change beyond the tolerance.
* Which comparisons decide: :func:`deciding` — a benchmark measured in A/B pairs is decided by
  its paired comparisons (job-level noise cancels there), the others by history.
* The overall verdict (:func:`overall_verdict`), the counts a headline shows
  (:func:`verdict_counts`) and whether the gate fails (:func:`gate_fails`) all read only the
  deciding comparisons.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from enum import Enum

from perfgate.models import Comparison, Direction, Verdict

ALPHA = 0.01
"""Significance level of one gate (after Benjamini-Hochberg across its metrics)."""

BLIND_FACTOR = 4.0
"""A small change is only called ``unchanged`` when the data could have seen a change of
BLIND_FACTOR times the minimum effect; past that the gate is blind and says inconclusive."""

_OVERALL_ORDER = (
    Verdict.REGRESSION,
    Verdict.INCONCLUSIVE,
    Verdict.IMPROVEMENT,
    Verdict.UNCHANGED,
    Verdict.NO_BASELINE,
)


class Outcome(str, Enum):
    """What :func:`classify_change` found, before the direction is applied."""

    CHANGE = "change"
    RANK_BLOCKED = "rank_blocked"
    UNSURE = "unsure"
    BLIND = "blind"
    UNCHANGED = "unchanged"


def change_verdict(direction: Direction, change: float) -> Verdict:
    """``regression`` when ``change`` makes a metric of ``direction`` worse, else
    ``improvement``."""
    return Verdict.REGRESSION if direction.worse(change) else Verdict.IMPROVEMENT


def classify_change(
    *,
    change_pct: float,
    p_adjusted: float,
    mde_pct: float,
    min_effect_pct: float,
    alpha: float = ALPHA,
    p_rank: float | None = None,
    baseline_runs: int = 0,
) -> Outcome:
    """The statistical decision rule.

    A change must be significant after adjustment and at least the minimum effect; for a
    history comparison (``p_rank`` given) it must also lie beyond all but one in ten of the
    ``baseline_runs`` (rank guard: a run that is not past nearly every baseline run is not
    called a change, whatever the interval says; one run in ten may be a spike that
    reverted). A small change is only ``unchanged`` when the data could have seen one of
    ``BLIND_FACTOR`` times the minimum effect.
    """
    significant = p_adjusted < alpha
    big_enough = abs(change_pct) >= min_effect_pct
    if significant and big_enough:
        if p_rank is None:
            return Outcome.CHANGE
        allowed = baseline_runs // 10
        beyond = p_rank <= 2.0 * (allowed + 1) / (baseline_runs + 1) + 1e-12
        return Outcome.CHANGE if beyond else Outcome.RANK_BLOCKED
    if big_enough:
        return Outcome.UNSURE
    if mde_pct > BLIND_FACTOR * max(min_effect_pct, 1.0):
        return Outcome.BLIND
    return Outcome.UNCHANGED


def deterministic_verdict(direction: Direction, change_pct: float, tolerance_pct: float) -> Verdict:
    """A deterministic metric (launch counts, op set, loss on a fixed seed) needs no
    statistics: ``unchanged`` within the tolerance, else a regression or an improvement."""
    if abs(change_pct) <= tolerance_pct:
        return Verdict.UNCHANGED
    return change_verdict(direction, change_pct)


def deciding(comparisons: Iterable[Comparison]) -> tuple[Comparison, ...]:
    """The comparisons a gate decides on: for a benchmark measured in A/B pairs its paired
    comparisons; for the others, history."""
    every = tuple(comparisons)
    paired = {c.benchmark for c in every if c.method == "paired"}
    return tuple(c for c in every if c.method == "paired" or c.benchmark not in paired)


def overall_verdict(comparisons: Iterable[Comparison]) -> Verdict:
    """One verdict for a gate, from its deciding comparisons: the worst that occurs, in the
    order regression, inconclusive, improvement, unchanged, no baseline; ``no_baseline`` when
    nothing was compared; ``incomparable`` when nothing else occurs."""
    seen = deciding_verdicts(comparisons)
    if not seen:
        return Verdict.NO_BASELINE
    for verdict in _OVERALL_ORDER:
        if verdict in seen:
            return verdict
    return Verdict.INCOMPARABLE


def verdict_counts(comparisons: Iterable[Comparison]) -> dict[Verdict, int]:
    """How many deciding comparisons have each verdict (every verdict present, zeros
    included), in :class:`Verdict` order."""
    decided = deciding(comparisons)
    return {v: sum(1 for c in decided if c.verdict is v) for v in Verdict}


def gate_fails(comparisons: Iterable[Comparison], fail_on: Collection[Verdict]) -> bool:
    """Whether a gate fails: any deciding comparison has a verdict in ``fail_on``."""
    return any(c.verdict in fail_on for c in deciding(comparisons))


def deciding_verdicts(comparisons: Iterable[Comparison]) -> frozenset[Verdict]:
    """The set of verdicts among the deciding comparisons."""
    return frozenset(c.verdict for c in deciding(comparisons))
