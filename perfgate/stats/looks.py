"""Measure until decided: the group-sequential design of ``check --mode ab``.

``check --mode ab`` measures the merge-base and the head in pairs, looks at what the pairs
say, and keeps adding pairs to a benchmark while it is undecided and the budget lasts. Every
look applies the one paired rule (:mod:`perfgate.stats.paired`, verdicts by
:mod:`perfgate.stats.decide`) at a level of its own; this module says which level, when the
next look comes, and when to stop.

The design, in plain words:

* **Group-sequential, with an alpha-spending function** (Lan-DeMets), not always-valid
  inference. A look at ``n`` pairs of a benchmark planned to reach ``N`` may have spent
  ``alpha * (n / N) ** RHO`` in all (the Kim-DeMets power family; ``RHO`` 2 lies between
  Pocock's even spending, near 1, and O'Brien-Fleming's, near 3): little early, where only a
  large change can be decided, most of it kept for the last look, where a change near the
  minimum effect is. Its level is what that allows less what the earlier looks spent. A
  mixture SPRT on the log-ratios (always valid at every pair) was the alternative; it was
  not taken because it is a second decision rule: its boundary is not the paired rule's
  t test, pair-order test and equivalence test, and the verdicts, MDEs and "pairs that would
  settle it" the report prints come from those.
* **Looks combined by the union bound** (Bonferroni over looks), not by the joint normal law
  of the looks' statistics. The paired rule's pair-order test is exact under the coin that
  ordered each pair and nothing else, whatever the noise's shape; the exact group-sequential
  boundaries assume normal z statistics with correlation ``sqrt(n_i / n_j)``, which the
  heavy-tailed, two-level pairs measured on a shared runner do not give. With the union
  bound the chance of any false alarm over all looks is at most the sum of their levels,
  which never exceeds ``alpha``, whatever the noise and however the looks fall. Its cost is
  paid at the last look, which gets ``alpha`` less what the interim looks spent: with looks
  doubling up to the plan (``GROWTH``) the last keeps 75% of ``alpha`` or more (its MDE
  about 3% larger than a single test's at ``alpha``); an interim look is taken only where
  the plan leaves room for ``ROOM`` (1.5) times its pairs, so the last keeps 56% or more
  (MDE about 7% larger) even when the plan shrinks later (pairs slower than the first
  ones).
* **A look that cannot decide spends nothing.** With n pairs the pair-order test's smallest
  p is 2 / 2^n two-sided and 1 / 2^n one-sided (:func:`perfgate.stats.paired.
  pairs_to_decide`): at a look whose level is below 1 / 2^n no noisy metric can be called a
  regression, an improvement or unchanged, so that look adds nothing to the union and its
  share is carried to the next. It is still judged: an exact metric (the loss) decides
  without a test.
* **The plan follows the budget, never the benchmark's own pairs.** ``N`` is re-planned at
  every look from the time left and the seconds a pair of each open benchmark took (a budget
  in seconds shared evenly among the open benchmarks), or from the extra pairs a budget in
  pairs grants each; when other benchmarks stop, ``N`` grows. The levels telescope
  (each look's is the spending at its ``n / N`` less what was spent), so their sum stays
  within ``alpha`` for any sequence of plans (a look whose spending at its ``n / N`` is no
  more than was spent, the plan having grown, is not taken); the plans use timings and the
  other benchmarks' stops, which are independent of this benchmark's log-ratios under no
  change.
  The look at which no further pair fits (``N`` reached, the budget spent or
  ``MAX_PAIRS``) is the last and spends what is left.
* **Stop as soon as decided.** A benchmark is decided at a look when one of its deciding
  comparisons is a regression, or none is inconclusive (each regression, improvement or
  equivalence ``unchanged`` at that look's level); it is measured no more, and the budget
  left goes to the undecided ones. ``unchanged`` is equivalence at the look's level (the
  worse bound inside the minimum effect, and the pair-order test rejecting the minimum
  effect), so a missed regression of the minimum effect is bounded by the same sum.
* **Within the gate** the p-values of one look are adjusted with Benjamini-Hochberg across
  the gate's metrics as at a single look (:func:`perfgate.stats.paired.decide_paired`).

:func:`measure_until_decided` runs the loop over callbacks (measure some pairs, judge at some
levels, a clock), so it is tested on simulated pairs and a simulated clock.

Simulated with the real rule (``python bench/looks.py``: pair log-ratio SD 10%, minimum
effect 3%, 3 first pairs and up to 45 more, looks at 3, 6, 12, 24 and 48 pairs): A/A false
alarms (a regression or an improvement at any look) 1.0% of 2000 normal sequences and 0.4%
of 2000 Student-t3 ones, within alpha 0.01; a 10% slowdown a regression in 100% of 1000
(median 24 pairs; the fixed 3 + 12 pairs it replaces: 72%), 5% in 72% (fixed: 16%); a 40%
slowdown stopped at 12 pairs. At SD 20% (300 each): 10% in 72% (fixed: 16%).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from scipy import special

from perfgate.stats.decide import ALPHA
from perfgate.stats.paired import pairs_for_power, pairs_to_decide

RHO = 2.0
"""Exponent of the power-family spending function ``alpha * t ** RHO``."""
GROWTH = 2.0
"""Each interim look comes at GROWTH times the pairs of the one before, or later, and the
last look is planned at GROWTH times the last interim one or more."""
ROOM = 1.5
"""An interim look is taken only where the plan leaves room for ROOM times its pairs, so
the interim looks spend at most ``alpha / ROOM ** RHO`` (44%) whatever the plan does later;
less than GROWTH, so that a plan a little short of doubling (pairs slower than planned)
does not skip the look that would stop a large change."""
MAX_PAIRS = 100
"""Pairs one benchmark gets at most, whatever the budget."""

DECIDED = "decided"
BUDGET = "budget"
PLANNED = "planned"
CAP = "cap"


def spending(n: int, planned: int, alpha: float = ALPHA) -> float:
    """Alpha the looks up to ``n`` of ``planned`` pairs may have spent in all."""
    if planned <= 0:
        return alpha
    return float(alpha * min(1.0, n / planned) ** RHO)


def can_decide(n: int, level: float) -> bool:
    """Whether a look at ``n`` pairs and ``level`` can call anything on a noisy metric: the
    pair-order test's smallest one-sided p, 1 / 2^n, is below the level."""
    return level > 0.0 and n >= pairs_to_decide(level, one_sided=True)


def next_look(n: int, planned: int) -> int:
    """Pairs at the next look after one at ``n`` with ``planned`` in all: GROWTH times
    ``n`` (at least one more), or ``planned`` when the plan leaves no room for an interim
    look there (ROOM times its pairs)."""
    target = max(n + 1, math.ceil(n * GROWTH))
    if target * ROOM > planned:
        return max(planned, n)
    return target


@dataclass(frozen=True)
class Budget:
    """What the looks may spend: ``seconds`` of measuring in all, or ``pairs`` more pairs
    for each benchmark (one of the two)."""

    seconds: float | None = None
    pairs: int | None = None


@dataclass(frozen=True)
class Look:
    """One look at a benchmark: its pairs, its level, and whether it could decide (so spent
    its level)."""

    pairs: int
    level: float
    spent: bool


@dataclass(frozen=True)
class Stop:
    """How one benchmark's measuring ended.

    ``why``: ``decided`` (a look decided it), ``budget`` (no further pair fitted in the
    time left), ``planned`` (it reached the extra pairs a budget in pairs grants), ``cap``
    (MAX_PAIRS). ``pairs``: pairs in all; ``extra``: those added by the looks; ``seconds``:
    what its extra pairs took; ``level``: its last look's; ``spent``: alpha its looks spent.
    """

    benchmark: str
    why: str
    pairs: int
    extra: int
    seconds: float
    looks: tuple[Look, ...]
    level: float
    spent: float

    def text(self) -> str:
        """What stopped it, in words."""
        k = len(self.looks)
        at = f"look {k}, {self.pairs} pairs ({self.extra} added)"
        if self.why == DECIDED:
            return f"decided at {at}, level {self.level:.2g}"
        if self.why == BUDGET:
            return f"budget spent at {at}: no further pair fitted"
        if self.why == PLANNED:
            return f"the pairs the budget grants were measured: {at}"
        return f"the cap of {MAX_PAIRS} pairs was reached at {at}"


@dataclass
class _State:
    pairs: int
    first: int
    seconds_per_pair: float
    seconds: float = 0.0
    spent: float = 0.0
    level: float = ALPHA
    looks: list[Look] = field(default_factory=list)
    planned: int = 0


MeasureFn = Callable[[str, int, float], None]
"""Measure ``k`` more pairs of a benchmark (to be judged next at the level given)."""
JudgeFn = Callable[[Mapping[str, float]], Collection[str]]
"""Judge benchmarks at these levels (each with all its pairs so far); the decided ones."""


def measure_until_decided(
    pairs: Mapping[str, int],
    *,
    seconds_per_pair: Mapping[str, float],
    budget: Budget,
    measure: MeasureFn,
    judge: JudgeFn,
    clock: Callable[[], float],
    alpha: float = ALPHA,
    max_pairs: int = MAX_PAIRS,
) -> tuple[Stop, ...]:
    """Look, stop what is decided, measure more of the rest, until none is left open.

    Args:
        pairs: the open benchmarks and the pairs each has; the first look is at those.
        seconds_per_pair: what one pair of each took so far (both sides); replaced, once
            pairs are added, by what the added ones took on average (by ``clock``): the
            pairs that fit in the time left are counted at that rate.
        budget: what the looks may spend, measured by ``clock`` from this call.
        measure: measures ``k`` more pairs of one benchmark.
        judge: judges benchmarks at the levels given; returns the decided ones.
        clock: seconds (monotonic); injected so tests can simulate the time pairs take.

    Returns:
        One :class:`Stop` per benchmark, in the order of ``pairs``.
    """
    start = clock()
    states = {
        b: _State(pairs=n, first=n, seconds_per_pair=max(seconds_per_pair.get(b, 0.0), 0.0))
        for b, n in pairs.items()
    }
    open_ = list(pairs)
    stops: dict[str, Stop] = {}

    def left() -> float:
        return math.inf if budget.seconds is None else budget.seconds - (clock() - start)

    def affordable(b: str, k: int) -> int:
        """Of ``k`` more pairs of ``b``, those that fit in what is left."""
        s = states[b]
        k = min(k, max_pairs - s.pairs)
        if budget.pairs is not None:
            k = min(k, s.first + budget.pairs - s.pairs)
        if budget.seconds is not None and s.seconds_per_pair > 0:
            k = min(k, math.floor(left() / s.seconds_per_pair))
        return max(k, 0)

    def plan() -> None:
        """Each open benchmark's ``N``: what the budget buys it with the others open."""
        per_round = sum(states[b].seconds_per_pair for b in open_)
        for b in open_:
            s = states[b]
            if budget.pairs is not None:
                n = s.first + budget.pairs
            elif budget.seconds is None or per_round <= 0:
                n = max_pairs
            else:
                n = s.pairs + max(math.floor(left() / per_round), 0)
            s.planned = max(min(n, max_pairs), s.pairs)
            if affordable(b, 1) == 0:
                s.planned = s.pairs  # nothing more fits: this look is the last

    while open_:
        plan()
        levels = {}
        for b in open_:
            s = states[b]
            last = s.planned <= s.pairs
            if not last and s.pairs * ROOM > s.planned:
                continue  # too near the end for an interim look: measure on to the last
            allowed = alpha if last else spending(s.pairs, s.planned, alpha)
            if allowed > s.spent:  # a plan grown past what was spent leaves nothing now
                levels[b] = s.level = allowed - s.spent
        decided = set(judge(levels)) if levels else set()
        for b in list(open_):
            s = states[b]
            if b not in levels:
                continue  # no look at these pairs: measure on
            spends = can_decide(s.pairs, levels[b])
            s.looks.append(Look(s.pairs, levels[b], spends))
            if spends:
                s.spent += levels[b]
            why = ""
            if b in decided:
                why = DECIDED
            elif s.planned <= s.pairs:
                if s.pairs >= max_pairs:
                    why = CAP
                elif budget.pairs is not None and s.pairs >= s.first + budget.pairs:
                    why = PLANNED
                else:
                    why = BUDGET
            if why:
                stops[b] = Stop(
                    benchmark=b,
                    why=why,
                    pairs=s.pairs,
                    extra=s.pairs - s.first,
                    seconds=s.seconds,
                    looks=tuple(s.looks),
                    level=levels[b],
                    spent=s.spent,
                )
                open_.remove(b)
        if not open_:
            break
        plan()
        for b in open_:
            s = states[b]
            k = affordable(b, next_look(s.pairs, s.planned) - s.pairs)
            if k < 1:
                continue  # the next look is its last, at the pairs it has
            if budget.seconds is not None and k >= 8 and k * s.seconds_per_pair > left() / 2:
                # a long step (8 pairs or more) that would take over half the time left goes
                # in halves, each sized at the rate the pairs before it showed: a rate that
                # was too low overruns the budget by a fraction of one half, not of the step
                k = math.ceil(k / 2)
            began = clock()
            measure(b, k, s.level)
            took = max(clock() - began, 0.0)
            s.pairs += k
            s.seconds += took
            # what its added pairs took, on average: the first pairs' rate carries the
            # job's start (a worktree, the first imports), so it only stands in until then
            s.seconds_per_pair = s.seconds / (s.pairs - s.first)
    return tuple(stops[b] for b in pairs)


def pairs_to_settle(
    pairs: int,
    *,
    ci_low_pct: float | None,
    ci_high_pct: float | None,
    target_pct: float,
    alpha: float = ALPHA,
) -> int | None:
    """Pairs in all that would likely settle a paired comparison of ``pairs`` pairs whose 95%
    interval is [``ci_low_pct``, ``ci_high_pct``]: the spread of one log-ratio that interval
    implies (the t model, pairs - 1 degrees of freedom), and the pairs that detect a change
    of ``target_pct`` (the change seen or the minimum effect, the larger) with 80% power at
    ``alpha`` (:func:`perfgate.stats.paired.pairs_for_power`), never fewer than the
    pair-order test needs. ``None`` without an interval, or past
    :data:`perfgate.stats.paired.MAX_PAIRS`."""
    if pairs < 2 or ci_low_pct is None or ci_high_pct is None or target_pct <= 0:
        return None
    half = (math.log1p(ci_high_pct / 100.0) - math.log1p(ci_low_pct / 100.0)) / 2.0
    sd = half / float(special.stdtrit(pairs - 1, 0.975)) * math.sqrt(pairs)
    need = pairs_for_power(sd, math.log1p(target_pct / 100.0), start=pairs + 1, alpha=alpha)
    return None if need is None else max(need, pairs_to_decide(alpha))


def spent_text(stops: Sequence[Stop]) -> str:
    """Pairs spent per benchmark and why each stopped, one clause each."""
    return "; ".join(f"{s.benchmark}: {s.text()}" for s in stops)
