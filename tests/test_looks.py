"""``check --mode ab`` measures until decided (:mod:`perfgate.stats.looks`): the looks'
false-alarm rate, early stops and the budget, on simulated pairs (fixed seeds, no timing)
judged by the real paired rule, with a simulated clock."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pytest

from perfgate.models import Direction, MetricPolicy, Verdict
from perfgate.stats.decide import ALPHA
from perfgate.stats.looks import (
    BUDGET,
    CAP,
    DECIDED,
    GROWTH,
    PLANNED,
    ROOM,
    Budget,
    Stop,
    can_decide,
    measure_until_decided,
    next_look,
    pairs_to_settle,
    spending,
)
from perfgate.stats.paired import Pair, compare_pairs, decide_paired

POLICY = MetricPolicy(direction=Direction.LOWER_IS_BETTER, min_effect_pct=3.0)


class Simulated:
    """Benchmarks whose pair log-ratios are drawn (normal, or Student t with ``tails``
    degrees of freedom) around ``effects``, a pair of each taking ``seconds`` on a clock
    that only measuring moves; judged by the paired rule at each look's level."""

    def __init__(
        self,
        effects: Mapping[str, float],
        *,
        sd: float,
        seed: int,
        first: int = 3,
        seconds: Mapping[str, float] | None = None,
        tails: float | None = None,
    ) -> None:
        self.rng = np.random.default_rng(seed)
        self.effects = dict(effects)
        self.sd = sd
        self.tails = tails
        self.seconds = dict(seconds or {b: 10.0 for b in effects})
        self.now = 0.0
        self.logs = {b: list(self.draw(b, first)) for b in effects}
        self.verdicts: dict[str, Verdict] = {}
        self.measured: list[tuple[str, int]] = []

    def draw(self, benchmark: str, k: int) -> np.ndarray:
        if self.tails is None:
            noise = self.rng.normal(0.0, self.sd, k)
        else:  # Student t scaled to the same SD
            t = self.tails
            noise = self.rng.standard_t(t, k) * self.sd / math.sqrt(t / (t - 2.0))
        return math.log1p(self.effects[benchmark]) + noise

    def clock(self) -> float:
        return self.now

    def measure(self, benchmark: str, k: int, level: float) -> None:
        self.logs[benchmark].extend(self.draw(benchmark, k))
        self.now += k * self.seconds[benchmark]
        self.measured.append((benchmark, k))

    def judge(self, levels: Mapping[str, float]) -> set[str]:
        evidences = [
            compare_pairs(
                [Pair(1.0, math.exp(x)) for x in self.logs[b]],
                benchmark=b,
                metric="step_cpu_ms",
                unit="ms",
                direction=POLICY.direction,
                policy=POLICY,
                run_id="head",
                base_run_id="base",
                alpha=level,
            )
            for b, level in levels.items()
        ]
        decided = set()
        for c in decide_paired(evidences):
            self.verdicts[c.benchmark] = c.verdict
            if c.verdict is not Verdict.INCONCLUSIVE:
                decided.add(c.benchmark)
        return decided

    def run(self, budget: Budget) -> tuple[Stop, ...]:
        return measure_until_decided(
            {b: len(v) for b, v in self.logs.items()},
            seconds_per_pair={b: self.seconds[b] for b in self.logs},
            budget=budget,
            measure=self.measure,
            judge=self.judge,
            clock=self.clock,
        )


# -- the design's arithmetic -------------------------------------------------------------------


def test_spending_is_little_early_and_alpha_at_the_plan() -> None:
    assert spending(12, 48) == pytest.approx(ALPHA / 16)
    assert spending(24, 48) == pytest.approx(ALPHA / 4)
    assert spending(48, 48) == spending(60, 48) == ALPHA


def test_looks_double_and_the_last_keeps_most_of_alpha() -> None:
    assert [next_look(3, 48), next_look(6, 48), next_look(12, 48), next_look(24, 48)] == [
        6,
        12,
        24,
        48,
    ]
    assert next_look(20, 30) == 30  # an interim look at 40 > 30 / GROWTH: straight to the last
    # the last look keeps alpha less the interim looks' spending, at least 75% of it
    assert ALPHA - spending(math.floor(48 / GROWTH), 48) >= 0.75 * ALPHA - 1e-12


def test_a_look_the_pair_order_test_cannot_decide_at_spends_nothing() -> None:
    assert not can_decide(6, 0.001)  # 1 / 2^6 = 0.016
    assert can_decide(12, 0.001)  # 1 / 2^12 = 0.00024
    assert not can_decide(40, 0.0)


# -- false alarms over every look --------------------------------------------------------------


@pytest.mark.parametrize(("tails", "seed"), [(None, 7), (3.0, 11)])
def test_a_a_false_alarms_over_all_looks_stay_within_alpha(tails: float | None, seed: int) -> None:
    """8000 A/A sequences, 3 pairs first and up to 45 more: looks at 3, 6, 12, 24 and 48
    pairs (the ones at 12, 24 and 48 can decide). A regression or an improvement at any
    look is a false alarm; their share stays within alpha (Gaussian and Student t3 noise,
    pair SD 10%: the noise a CPU time shows beside a busy neighbour). The union bound puts
    the Gaussian share near 0.8-0.9%: 2000 sequences (about 17 +- 4 alarms against a bar
    of 20) could not tell it from alpha."""
    alarms = 0
    trials = 8000
    looks_seen = set()
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        sim = Simulated({"b": 0.0}, sd=0.10, seed=int(rng.integers(1 << 31)), tails=tails, first=3)
        (stop,) = sim.run(Budget(pairs=45))
        looks_seen.add(tuple(look.pairs for look in stop.looks))
        if sim.verdicts["b"] in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
            alarms += 1
    assert (3, 6, 12, 24, 48) in looks_seen
    assert alarms / trials <= ALPHA, alarms


# -- stopping ----------------------------------------------------------------------------------


def test_a_large_change_stops_at_the_first_look_that_can_decide() -> None:
    """A 40% slowdown at pair SD 10%: decided at 12 pairs of the 48 the budget allows, in
    every one of 50 seeded trials; the budget left is not spent on it."""
    for seed in range(50):
        sim = Simulated({"b": 0.40}, sd=0.10, seed=seed)
        (stop,) = sim.run(Budget(pairs=45))
        assert (stop.why, stop.pairs, sim.verdicts["b"]) == (DECIDED, 12, Verdict.REGRESSION)
        assert stop.spent <= ALPHA


def test_a_decided_benchmark_leaves_the_budget_to_the_undecided_one() -> None:
    """Two benchmarks share 600 s at 10 s a pair: the one with a 40% slowdown stops at 12
    pairs, and the other (a change near its noise) gets the rest: more pairs than an even
    split (30 each) would give it, and never past the budget."""
    sim = Simulated({"big": 0.40, "small": 0.03}, sd=0.10, seed=3)
    big, small = sim.run(Budget(seconds=600.0))
    assert (big.why, big.pairs) == (DECIDED, 12)
    assert small.pairs > 3 + 30
    assert sim.now <= 600.0
    assert small.why in (DECIDED, BUDGET)


@pytest.mark.parametrize("seed", range(20))
def test_it_never_spends_past_the_budget(seed: int) -> None:
    """Three benchmarks of different pair durations (7, 13 and 29 s), a 300 s budget on a
    clock only measuring moves: the pairs measured never take more than the budget, and a
    benchmark left open stopped because no further pair fitted."""
    rng = np.random.default_rng(seed)
    effects = {"a": 0.0, "b": float(rng.uniform(0.0, 0.1)), "c": 0.02}
    sim = Simulated(effects, sd=0.15, seed=seed, seconds={"a": 7.0, "b": 13.0, "c": 29.0})
    stops = sim.run(Budget(seconds=300.0))
    assert sim.now <= 300.0
    for stop in stops:
        assert stop.why in (DECIDED, BUDGET)
        if stop.why == BUDGET:
            assert 300.0 - sim.now < sim.seconds[stop.benchmark]


def test_the_last_look_keeps_most_of_alpha_when_pairs_are_slower_than_planned() -> None:
    """The first pairs said 10 s a pair, the next take 25 s: the plan shrinks as the looks
    go, but an interim look is taken only where the plan leaves room for 1.5 times its
    pairs, so the last look still has over half of alpha, and the budget holds."""
    sim = Simulated({"b": 0.0}, sd=0.2, seed=4, seconds={"b": 25.0})
    (stop,) = measure_until_decided(
        {"b": 3},
        seconds_per_pair={"b": 10.0},
        budget=Budget(seconds=600.0),
        measure=sim.measure,
        judge=sim.judge,
        clock=sim.clock,
    )
    assert (stop.why, sim.verdicts["b"]) == (BUDGET, Verdict.INCONCLUSIVE)
    assert stop.level >= (1.0 - 1.0 / ROOM**2) * ALPHA
    assert stop.spent <= ALPHA + 1e-15
    assert sim.now <= 600.0


def test_a_large_change_stops_early_when_pairs_are_faster_than_the_first_ones() -> None:
    """The first pairs took 13 s each (the job's start in them), the added ones 3.3 s: the
    plan follows the added pairs' rate, so a 49% slowdown is decided at 24 pairs of the ~54
    that 180 s buys, not at the end of the budget."""
    sim = Simulated({"b": 0.49}, sd=0.1, seed=0, seconds={"b": 3.3})
    (stop,) = measure_until_decided(
        {"b": 3},
        seconds_per_pair={"b": 13.0},
        budget=Budget(seconds=180.0),
        measure=sim.measure,
        judge=sim.judge,
        clock=sim.clock,
    )
    assert (stop.why, stop.pairs, sim.verdicts["b"]) == (DECIDED, 24, Verdict.REGRESSION)
    assert sim.now < 90.0


def test_pairs_that_slow_down_mid_step_still_end_within_the_budget() -> None:
    """Pairs take 4 s until the 12th, 5.7 s after it (a neighbour arrived): the long step
    toward the last look goes in halves sized at the rate the pairs before showed, so the
    slower pairs are seen before the budget is overrun."""

    class Slower(Simulated):
        def measure(self, benchmark: str, k: int, level: float) -> None:
            n = len(self.logs[benchmark])
            super().measure(benchmark, k, level)
            self.now += 1.7 * sum(1 for i in range(n, n + k) if i >= 12)

    sim = Slower({"b": 0.0}, sd=0.3, seed=0, seconds={"b": 4.0})
    (stop,) = sim.run(Budget(seconds=180.0))
    assert stop.why == BUDGET
    assert sim.now <= 180.0
    assert len(sim.measured) > 3  # the step to the last look went in parts


def test_a_budget_in_pairs_grants_each_benchmark_that_many_more() -> None:
    sim = Simulated({"a": 0.0, "b": 0.01}, sd=0.3, seed=1)
    stops = sim.run(Budget(pairs=9))
    assert all(s.why == PLANNED and s.pairs == 12 and s.extra == 9 for s in stops)
    assert sum(k for _, k in sim.measured) == 18
    assert "added" in stops[0].text()


def test_the_cap_stops_a_benchmark_that_is_never_decided() -> None:
    sim = Simulated({"a": 0.02}, sd=0.5, seed=2)
    (stop,) = measure_until_decided(
        {"a": 3},
        seconds_per_pair={"a": 1.0},
        budget=Budget(seconds=1e6),
        measure=sim.measure,
        judge=sim.judge,
        clock=sim.clock,
        max_pairs=20,
    )
    assert (stop.why, stop.pairs) == (CAP, 20)
    assert stop.spent <= ALPHA


def test_pairs_to_settle_come_from_the_spread_the_interval_implies() -> None:
    """24 pairs with a 95% interval of +2..+18% (one log-ratio's SD about 17%): about 42
    pairs in all detect a 10% change with 80% power at alpha; a change of the 3% minimum
    effect needs several hundred; without an interval nothing is said."""
    assert pairs_to_settle(24, ci_low_pct=2.0, ci_high_pct=18.0, target_pct=10.0) == 42
    big = pairs_to_settle(24, ci_low_pct=2.0, ci_high_pct=18.0, target_pct=3.0)
    assert big is not None and big > 400
    assert pairs_to_settle(24, ci_low_pct=None, ci_high_pct=None, target_pct=10.0) is None
    # never fewer than the pair-order test needs
    assert pairs_to_settle(3, ci_low_pct=40.0, ci_high_pct=60.0, target_pct=50.0) == 8
