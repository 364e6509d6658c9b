"""Known-answer and simulation tests of paired A/B gating (no torch, fixed seeds)."""

from __future__ import annotations

import math
import statistics
from datetime import datetime, timezone

import numpy as np
import pytest
from scipy import stats

from perfgate.models import Direction, MetricPolicy, RunPoint, Verdict
from perfgate.stats import benjamini_hochberg
from perfgate.stats.fdr import by_direction
from perfgate.stats.paired import (
    ALPHA,
    MAX_PAIRS,
    Pair,
    PairedEvidence,
    PairNoise,
    compare_pairs,
    decide_paired,
    hodges_lehmann,
    pair_noise_from_history,
    pair_noise_from_repeats,
    pair_order_p,
    pairs_for_power,
    pairs_to_decide,
)

TIME = MetricPolicy(Direction.LOWER_IS_BETTER, 3.0)


def evidence(
    pairs: list[Pair],
    *,
    metric: str = "step_time_ms",
    unit: str = "ms",
    policy: MetricPolicy = TIME,
    benchmark: str = "b",
    noise: PairNoise | None = None,
    alpha: float = ALPHA,
) -> PairedEvidence:
    return compare_pairs(
        pairs,
        benchmark=benchmark,
        metric=metric,
        unit=unit,
        direction=policy.direction,
        policy=policy,
        run_id="head-run",
        base_run_id="base-run",
        base_commit="abc1234",
        noise=noise,
        alpha=alpha,
    )


def from_log_ratios(ratios: list[float], base: float = 10.0) -> list[Pair]:
    return [Pair(base, base * math.exp(r)) for r in ratios]


def simulate_pairs(
    rng: np.random.Generator,
    n: int,
    slowdown: float,
    noise: float,
    job: float = 0.0,
    centre: float = 20.0,
) -> list[Pair]:
    """n pairs; each member has its own log-normal noise, both share a job-level factor."""
    shared = rng.uniform(1.0 - job, 1.0 + job, n)
    base = centre * shared * rng.lognormal(0.0, noise, n)
    head = centre * (1.0 + slowdown) * shared * rng.lognormal(0.0, noise, n)
    return [Pair(float(b), float(h)) for b, h in zip(base, head, strict=True)]


def test_known_answer_matches_scipy_t_test_and_sign_flip_test() -> None:
    ratios = [0.031, 0.052, 0.044, 0.060, 0.038, 0.047, -0.004, 0.055]
    ev = evidence(from_log_ratios(ratios))
    ref = stats.ttest_1samp(ratios, 0.0)
    assert ev.p_t == pytest.approx(ref.pvalue, rel=1e-9)
    flip = stats.permutation_test(
        (np.array(ratios),), np.mean, permutation_type="samples", n_resamples=np.inf
    )
    assert ev.p_order == pytest.approx(flip.pvalue, rel=1e-9)
    # one pattern of 256 is as extreme each way: the observed one and its mirror
    assert ev.p_order == pytest.approx(4 / 256)
    assert ev.p_value == max(ev.p_t, ev.p_order)
    low, high = ref.confidence_interval(0.95)
    assert ev.ci_low_pct == pytest.approx(math.expm1(low) * 100, rel=1e-9)
    assert ev.ci_high_pct == pytest.approx(math.expm1(high) * 100, rel=1e-9)
    # Hodges-Lehmann by hand: the median of the 36 Walsh averages.
    walsh = sorted((a + b) / 2 for i, a in enumerate(ratios) for b in ratios[i:])
    hl = (walsh[17] + walsh[18]) / 2
    assert ev.change_pct == pytest.approx(math.expm1(hl) * 100, rel=1e-9)
    sd = float(np.std(ratios, ddof=1))
    # the MDE at 80% power: significant and measured at least the 3% minimum effect
    se = sd / math.sqrt(8)
    crit = max(stats.t.ppf(1 - ALPHA / 2, 7) * se, math.log1p(0.03))
    mde = crit + stats.t.ppf(0.8, 7) * se
    assert ev.mde_pct == pytest.approx(math.expm1(mde) * 100, rel=1e-9)
    assert ev.n_pairs == 8 and ev.base_centre == 10.0


def test_pair_order_p_is_the_exact_sign_flip_test() -> None:
    rng = np.random.default_rng(8)
    for n in (2, 6, 12, 16):
        x = rng.normal(0.02, 0.05, n)
        for side, alternative in ((0, "two-sided"), (1, "greater"), (-1, "less")):
            ref = stats.permutation_test(
                (x,),
                np.mean,
                permutation_type="samples",
                n_resamples=np.inf,
                alternative=alternative,
            )
            assert pair_order_p(x.tolist(), side=side) == pytest.approx(ref.pvalue, rel=1e-9)
    # beyond 16 pairs: a fixed sample of sign patterns, close to the exact answer
    x = rng.normal(0.01, 0.05, 17)
    exact = stats.permutation_test(
        (x,), np.mean, permutation_type="samples", n_resamples=np.inf
    ).pvalue
    sampled = pair_order_p(x.tolist())
    assert sampled == pytest.approx(exact, abs=0.01)
    assert pair_order_p(x.tolist()) == sampled  # the sample is fixed: the same answer
    assert pair_order_p([]) == 1.0
    assert [pairs_to_decide(a) for a in (0.05, 0.01, 0.001)] == [6, 8, 11]
    assert pairs_to_decide(0.01, one_sided=True) == 7


def test_pairs_that_share_a_speed_level_by_chance_are_not_a_regression() -> None:
    """Worker processes that land in one of two speed levels 7% apart (as a runner's can):
    an A/A pair's log-ratio is 0 or +-7%, and three pairs agree on +7% one time in 64. The
    t test alone takes that for a change (the demo's A/A failure); the pair-order test
    cannot be fooled by how the noise is shaped."""
    rng = np.random.default_rng(64)

    def level(size: int) -> np.ndarray:
        return 20.0 * (1.0 + 0.07 * rng.integers(0, 2, size)) * rng.lognormal(0.0, 0.002, size)

    t_alarms, alarms = 0, 0
    for _ in range(2000):
        ev = evidence([Pair(float(b), float(h)) for b, h in zip(level(3), level(3), strict=True)])
        t_alarms += (ev.p_t or 1.0) < ALPHA and (ev.change_pct or 0.0) > 3.0
        alarms += decide_paired([ev])[0].verdict is Verdict.REGRESSION
    assert t_alarms / 2000 > 1.5 * ALPHA  # what the t test alone would have failed
    assert alarms == 0
    # With more pairs the same noise is judged at the test's own level
    alarms = 0
    for _ in range(2000):
        ev = evidence([Pair(float(b), float(h)) for b, h in zip(level(10), level(10), strict=True)])
        alarms += decide_paired([ev])[0].verdict is Verdict.REGRESSION
    assert alarms / 2000 <= ALPHA


def test_seven_pairs_cannot_decide_and_eight_can() -> None:
    # (each alone in its gate: the smallest p of 8 pairs, 2/256, leaves no room for FDR)
    (seven,) = decide_paired([evidence(from_log_ratios([0.20, 0.21, 0.19, 0.20, 0.22, 0.18, 0.2]))])
    (eight,) = decide_paired(
        [evidence(from_log_ratios([0.20, 0.21, 0.19, 0.20, 0.22, 0.18, 0.20, 0.21]))]
    )
    assert seven.verdict is Verdict.INCONCLUSIVE
    assert "no change of any size can be shown with fewer than 8 pairs" in seven.reason
    assert "about 1 more pair (8 in all)" in seven.reason
    assert seven.mde_pct is None
    assert eight.verdict is Verdict.REGRESSION


def test_hodges_lehmann_resists_one_wild_pair() -> None:
    assert hodges_lehmann([1.0, 2.0, 3.0]) == 2.0
    assert hodges_lehmann([0.10, 0.11, 0.09, 0.10, -0.60]) == pytest.approx(0.095)
    with pytest.raises(ValueError):
        hodges_lehmann([])


def test_pairs_for_power_is_the_exact_smallest_n() -> None:
    def power(n: int, sd: float, effect: float) -> float:
        crit = stats.t.ppf(1 - ALPHA / 2, n - 1)
        shift = effect * math.sqrt(n) / sd
        return float(stats.nct.sf(crit, n - 1, shift) + stats.nct.cdf(-crit, n - 1, shift))

    for sd, effect in [(0.08, 0.10), (0.02, 0.05), (0.05, 0.03)]:
        n = pairs_for_power(sd, effect)
        assert n is not None
        assert power(n, sd, effect) >= 0.8 > power(n - 1, sd, effect)
    assert pairs_for_power(0.08, 0.10) == 11
    assert pairs_for_power(1.0, 0.01) is None
    assert pairs_for_power(0.01, 0.0) is None


def test_pairs_for_power_past_scipys_nan_tails() -> None:
    # A change five times the noise: 8 pairs already detect it with power 1 - 1e-13. There
    # scipy's nctdtr(7, 14.1, -3.5) (the far tail) is nan, not a number below 1e-15 (scipy
    # issue 25470): it adds nothing to the power, and must not make the search pass n = 8.
    assert pairs_for_power(0.02, 0.10, start=8) == 8
    assert pairs_for_power(0.02, 0.10, start=8, dof=30) == 8
    assert pairs_for_power(0.01, 0.5, start=5) == 5


def test_clear_ten_percent_slowdown_with_eight_quiet_pairs_is_a_regression() -> None:
    rng = np.random.default_rng(11)
    (c,) = decide_paired([evidence(simulate_pairs(rng, 8, 0.10, 0.01))])
    assert c.verdict is Verdict.REGRESSION
    assert c.change_pct == pytest.approx(10.0, abs=2.0)
    assert c.ci_low_pct is not None and c.ci_high_pct is not None
    assert c.ci_low_pct < c.change_pct < c.ci_high_pct
    assert c.p_adjusted is not None and c.p_adjusted < ALPHA
    assert c.baseline_run_ids == ("base-run",)
    assert c.baseline_commits == ("abc1234",)
    assert c.current_run_id == "head-run"
    assert "slower than the base measured alongside it (8 pairs)" in c.reason


def test_ten_percent_with_three_noisy_pairs_is_inconclusive_with_pairs_needed() -> None:
    # Log-ratios 10% apart around +10%: spread 8% between pairs.
    ev = evidence(from_log_ratios([0.02, 0.10, 0.18]))
    (c,) = decide_paired([ev])
    assert c.verdict is Verdict.INCONCLUSIVE
    assert ev.pairs_needed == 11
    assert "about 8 more pairs (11 in all) would settle a change this size" in c.reason
    assert "no change of any size can be shown with fewer than 8 pairs" in c.reason
    # The same, simulated: the verdict is inconclusive and asks for more pairs.
    rng = np.random.default_rng(5)
    asked = 0
    for _ in range(20):
        sim = evidence(simulate_pairs(rng, 3, 0.10, 0.08 / math.sqrt(2)))
        (s,) = decide_paired([sim])
        assert s.verdict is not Verdict.IMPROVEMENT
        if s.verdict is Verdict.INCONCLUSIVE:
            assert sim.pairs_needed is not None and sim.pairs_needed > 3
            asked += 1
    assert asked >= 10


def test_a_a_pairs_are_unchanged() -> None:
    rng = np.random.default_rng(3)
    results = decide_paired(
        [evidence(simulate_pairs(rng, 10, 0.0, 0.01), benchmark=f"b{i}") for i in range(10)]
    )
    # never a regression; unchanged wherever the bound at alpha is inside the minimum effect
    assert not any(c.verdict is Verdict.REGRESSION for c in results)
    unchanged = [c for c in results if c.verdict is Verdict.UNCHANGED]
    assert len(unchanged) >= 7
    assert all("within the 3% minimum effect" in c.reason for c in unchanged)


def test_job_level_noise_cancels_in_pairs() -> None:
    """Each pair shifted by up to +-20% (both members alike): a 5% slowdown is still found."""
    rng = np.random.default_rng(17)
    found = 0
    for _ in range(50):
        pairs = simulate_pairs(rng, 10, 0.05, 0.005, job=0.20)
        (c,) = decide_paired([evidence(pairs)])
        found += c.verdict is Verdict.REGRESSION
        assert c.verdict is not Verdict.IMPROVEMENT
    assert found >= 45
    # The same pairs without pairing (base and head pooled) would be hopeless.
    base = [p.base for p in pairs]
    head = [p.head for p in pairs]
    assert stats.ttest_ind(head, base).pvalue > ALPHA


def test_simulated_false_alarm_rate_of_a_b_gates() -> None:
    """500 A/A gates of 20 metrics, 10 pairs, 2% noise per member: gates with any alarm."""
    rng = np.random.default_rng(2026)
    gates_with_alarm = 0
    raw_below_alpha = 0
    for _ in range(500):
        evs = [evidence(simulate_pairs(rng, 10, 0.0, 0.02), benchmark=f"b{m}") for m in range(20)]
        raw_below_alpha += sum(ev.p_t is not None and ev.p_t < ALPHA for ev in evs)
        if any(c.verdict is Verdict.REGRESSION for c in decide_paired(evs)):
            gates_with_alarm += 1
    assert gates_with_alarm / 500 <= 0.01
    # The raw t test holds its level: p < 0.01 in about 1% of the 10,000 metrics.
    assert raw_below_alpha / 10_000 == pytest.approx(ALPHA, abs=0.004)


def test_heavy_tailed_pairs_do_not_raise_the_raw_false_alarm_rate() -> None:
    rng = np.random.default_rng(9)
    ratios = rng.standard_t(3, size=(4000, 5)) * 0.02
    below = sum((evidence(from_log_ratios(list(r))).p_t or 1.0) < ALPHA for r in ratios.tolist())
    assert below / 4000 <= ALPHA * 1.3


def test_fdr_adjusts_across_the_gate() -> None:
    evs = [
        evidence(
            from_log_ratios([0.05, 0.06, 0.04, 0.055, 0.045, 0.052, 0.048, 0.058, 0.05, 0.051]),
            benchmark="slow",
        ),
        evidence(
            from_log_ratios([0.10, -0.02, 0.08, 0.01, 0.12, -0.05, 0.09, 0.03]), benchmark="meh"
        ),
        evidence(
            from_log_ratios([0.001, -0.002, 0.0, 0.002, -0.001, 0.0015, -0.0005, 0.0]),
            benchmark="same",
        ),
    ]
    results = decide_paired(evs)
    raw = [ev.p_value for ev in evs]
    assert all(p is not None for p in raw)
    # a family per side a change points to; "same" moved neither way far enough to matter
    sides = [(ev.change_pct or 0.0) > 0 for ev in evs]
    expected = by_direction([float(p or 0.0) for p in raw], sides)
    assert [c.p_adjusted for c in results] == pytest.approx(expected)
    if len(set(sides)) == 1:
        assert expected == pytest.approx(benjamini_hochberg([float(p or 0.0) for p in raw]))
    assert [c.benchmark for c in results] == ["slow", "meh", "same"]
    assert results[0].verdict is Verdict.REGRESSION
    assert results[2].verdict is Verdict.UNCHANGED


def test_higher_is_better_and_improvements() -> None:
    tput = MetricPolicy(Direction.HIGHER_IS_BETTER, 3.0)
    # 9 pairs: the throughput and the time change point different ways, a family each, and
    # each needs the pair-order test under alpha / 2 on its own (2 / 2^9)
    ratios = [-0.10, -0.11, -0.09, -0.10, -0.105, -0.095, -0.1, -0.102, -0.098]
    lower = evidence(
        from_log_ratios(ratios, base=500.0),
        metric="throughput_samples_per_s",
        unit="samples/s",
        policy=tput,
    )
    faster = evidence(from_log_ratios(ratios))
    worse, better = decide_paired([lower, faster])
    assert worse.verdict is Verdict.REGRESSION
    assert "lower than the base" in worse.reason
    assert better.verdict is Verdict.IMPROVEMENT
    assert "faster" in better.reason


def test_small_precise_change_is_unchanged() -> None:
    ev = evidence(from_log_ratios([0.010, 0.011, 0.009, 0.010, 0.0105, 0.0095, 0.0102, 0.0098]))
    (c,) = decide_paired([ev])
    assert ev.p_value is not None and ev.p_value < ALPHA
    assert ev.p_equivalence == pytest.approx(1 / 256)
    assert c.verdict is Verdict.UNCHANGED
    assert "at most" in c.reason and "is caught with 80% power" in c.reason


def test_small_change_too_noisy_to_see_is_inconclusive() -> None:
    """Like compare.py: 'unchanged' only when the bound at alpha is inside the minimum effect."""
    ev = evidence(from_log_ratios([0.15, -0.14, 0.02, 0.10, -0.12, 0.05, -0.06, 0.01]))
    (c,) = decide_paired([ev])
    assert c.change_pct is not None and abs(c.change_pct) < 3.0
    assert c.mde_pct is not None and c.mde_pct > 12.0
    assert c.verdict is Verdict.INCONCLUSIVE
    assert "cannot be called unchanged" in c.reason
    assert ev.pairs_needed is not None
    assert f"({ev.pairs_needed} in all) would show a change of the 3% minimum effect" in c.reason


def test_a_tight_bound_from_six_pairs_is_not_enough_for_unchanged() -> None:
    """Six pairs agreeing on no change: the t bound is inside the 3% minimum effect, but one
    sign pattern in 64 could have produced them, so the pair-order test cannot say it."""
    ev = evidence(from_log_ratios([0.001, -0.001, 0.0005, 0.0, -0.0005, 0.001]))
    (c,) = decide_paired([ev])
    assert ev.worse_bound_pct is not None and ev.worse_bound_pct < 3.0
    assert ev.p_equivalence == pytest.approx(1 / 64)
    assert c.verdict is Verdict.INCONCLUSIVE
    assert "the pair-order test cannot rule out the 3% minimum effect" in c.reason
    assert "7 pairs at least" in c.reason


def test_alpha_of_a_confirmation_look_is_honoured() -> None:
    ratios = [0.011, 0.04, 0.15, 0.09, -0.048, 0.05, 0.013, 0.059]
    ratios += [-0.046, 0.065, 0.064, 0.145, 0.069, 0.081, -0.04, 0.185]
    (loose,) = decide_paired([evidence(from_log_ratios(ratios))])
    strict_ev = compare_pairs(
        from_log_ratios(ratios),
        benchmark="b",
        metric="step_time_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        policy=TIME,
        run_id="h",
        base_run_id="b",
        alpha=1e-3,
    )
    (strict,) = decide_paired([strict_ev])
    assert loose.verdict is Verdict.REGRESSION
    assert strict.verdict is Verdict.INCONCLUSIVE
    assert strict.mde_pct is not None and loose.mde_pct is not None
    assert strict.mde_pct > loose.mde_pct


def test_identical_pairs_use_the_noise_floor() -> None:
    ev = evidence(from_log_ratios([0.02] * 4))
    assert ev.log_ratio_sd == pytest.approx(0.002 * math.sqrt(2))
    assert ev.p_t is not None and 0.0 < ev.p_t < ALPHA
    assert ev.p_order == pytest.approx(2 / 16)


def test_no_pairs_and_one_pair() -> None:
    none, one_big, one_small = decide_paired(
        [
            evidence([]),
            evidence([Pair(10.0, 12.0)]),
            evidence([Pair(10.0, 10.1)]),
        ]
    )
    assert none.verdict is Verdict.NO_BASELINE
    assert one_big.verdict is Verdict.INCONCLUSIVE
    assert "a single pair cannot show its own noise" in one_big.reason
    assert one_big.p_value is None
    assert one_small.verdict is Verdict.INCONCLUSIVE
    assert one_big.change_pct == pytest.approx(20.0)


def test_too_noisy_to_settle_says_so() -> None:
    (c,) = decide_paired([evidence(from_log_ratios([0.9, -0.8, 0.05]))])
    assert c.verdict is Verdict.INCONCLUSIVE
    assert f"more than {MAX_PAIRS} pairs would be needed" in c.reason


def test_deterministic_metric_is_compared_exactly() -> None:
    policy = MetricPolicy(Direction.LOWER_IS_BETTER, 0.5, deterministic=True)
    same = evidence([Pair(412.0, 412.0)] * 3, metric="op_calls_per_step", unit="", policy=policy)
    more = evidence([Pair(412.0, 530.0)] * 3, metric="op_calls_per_step", unit="", policy=policy)
    zero = evidence([Pair(0.0, 0.0)] * 3, metric="op_calls_per_step", unit="", policy=policy)
    a, b, z = decide_paired([same, more, zero])
    assert a.verdict is Verdict.UNCHANGED and z.verdict is Verdict.UNCHANGED
    assert b.verdict is Verdict.REGRESSION
    assert "412 in the base to 530" in b.reason
    assert b.p_value is None


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError, match="pair 1"):
        evidence([Pair(10.0, 10.0), Pair(0.0, 10.0)])
    with pytest.raises(ValueError, match="finite"):
        evidence([Pair(10.0, float("nan"))])


def test_pair_noise_from_repeats_known_answer() -> None:
    runs = [[10.0, 11.0, 12.0], [20.0, 20.5], [7.0]]
    logs = [[math.log(x) for x in r] for r in runs[:2]]
    ss = sum(sum((x - statistics.fmean(r)) ** 2 for x in r) for r in logs)
    noise = pair_noise_from_repeats(runs)
    assert noise is not None
    assert noise.dof == 3
    assert noise.log_sd == pytest.approx(math.sqrt(2 * ss / 3))
    assert pair_noise_from_repeats([[5.0], [6.0]]) is None
    points = [
        RunPoint(
            run_id=f"r{i}",
            benchmark="b",
            metric="step_time_ms",
            unit="ms",
            direction=Direction.LOWER_IS_BETTER,
            branch="main",
            commit=f"c{i}",
            fingerprint_key="k",
            started_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
            centre=statistics.median(r),
            repeat_centres=tuple(r),
        )
        for i, r in enumerate(runs)
    ]
    from_points = pair_noise_from_history(points)
    assert from_points is not None
    assert from_points.log_sd == pytest.approx(noise.log_sd)
    assert from_points.source == "3 base-branch runs"


def test_history_noise_is_used_when_larger_with_its_degrees_of_freedom() -> None:
    ratios = [0.051, 0.049, 0.050, 0.052, 0.048, 0.0505, 0.0495, 0.050]
    prior = PairNoise(log_sd=0.02, dof=60, source="30 base-branch runs")
    ev = evidence(from_log_ratios(ratios), noise=prior)
    t = statistics.fmean(ratios) / (0.02 / math.sqrt(8))
    assert ev.p_t == pytest.approx(2 * stats.t.sf(t, 60), rel=1e-9)
    assert ev.dof == 60 and ev.noise_from == "30 base-branch runs"
    (c,) = decide_paired([ev])
    assert c.verdict is Verdict.REGRESSION
    assert "pair noise from 30 base-branch runs" in c.reason
    # Without the history the pairs have their own 7 degrees of freedom.
    alone = evidence(from_log_ratios(ratios))
    assert alone.dof == 7 and alone.noise_from == "pairs"
    # Pairs noisier than the history says are judged by their own spread.
    noisy = evidence(from_log_ratios([0.02, 0.10, 0.18]), noise=prior)
    assert noisy.noise_from == "pairs" and noisy.dof == 2
    assert noisy.p_t == pytest.approx(stats.ttest_1samp([0.02, 0.10, 0.18], 0.0).pvalue)


def test_single_pair_with_history_noise_is_tested_but_cannot_decide() -> None:
    """One pair 10% slower, against a history that says pairs spread 1.5%: the t test would
    call it (p ~ 1e-9), but one pair is one coin flip of which member was the head."""
    prior = PairNoise(log_sd=0.015, dof=40)
    ev = evidence([Pair(10.0, 11.0)], noise=prior)
    (c,) = decide_paired([ev])
    assert ev.p_t == pytest.approx(2 * stats.t.sf(math.log(1.1) / 0.015, 40), rel=1e-9)
    assert ev.p_order == 1.0
    assert c.verdict is Verdict.INCONCLUSIVE
    assert "fewer than 8 pairs" in c.reason


def test_pairs_for_power_with_known_noise_needs_fewer_pairs() -> None:
    own = pairs_for_power(0.03, 0.05)
    known = pairs_for_power(0.03, 0.05, dof=60)
    assert own is not None and known is not None and known < own
    crit = stats.t.ppf(1 - ALPHA / 2, 60)
    shift = 0.05 * math.sqrt(known) / 0.03
    assert stats.nct.sf(crit, 60, shift) >= 0.8


def test_history_noise_keeps_false_alarms_down_and_finds_slowdowns() -> None:
    """Job noise +-20% per pair, 1% per process; the history's runs carry the job noise too."""
    rng = np.random.default_rng(31)

    def history_noise() -> PairNoise | None:
        job = rng.uniform(0.8, 1.2, (30, 1))
        return pair_noise_from_repeats((20.0 * job * rng.lognormal(0.0, 0.01, (30, 3))).tolist())

    alarms = 0
    for _ in range(150):
        evs = [
            evidence(simulate_pairs(rng, 8, 0.0, 0.01, job=0.2), noise=history_noise())
            for _ in range(20)
        ]
        alarms += any(c.verdict is Verdict.REGRESSION for c in decide_paired(evs))
    assert alarms / 150 <= 0.02
    # A 4% slowdown with 8 pairs: their own 7 degrees of freedom leave the t test weaker;
    # when the history's estimate is the larger one it is used, with its 60.
    found, found_alone = 0, 0
    for _ in range(100):
        pairs = simulate_pairs(rng, 8, 0.04, 0.01, job=0.2)
        ev = evidence(pairs, noise=history_noise())
        found += decide_paired([ev])[0].verdict is Verdict.REGRESSION
        found_alone += decide_paired([evidence(pairs)])[0].verdict is Verdict.REGRESSION
    assert found >= 50
    assert found >= found_alone


# -- a neighbour for a stretch of pairs -----------------------------------------------------------


def test_a_neighbour_for_a_stretch_of_pairs_does_not_drown_a_slowdown() -> None:
    """48 pairs, each member with 7% log-normal noise, 10 consecutive ones 4x as noisy (a
    neighbour process that came and went): a 10% slowdown is still a regression in nearly
    every sequence (the pairs around the neighbour weigh less; an unweighted mean and its
    t test found it in about 7 of 10), and A/A sequences stay within alpha."""
    found = alarms = 0
    trials = 300
    rng = np.random.default_rng(2026)
    for _ in range(trials):
        for slowdown in (0.10, 0.0):
            noise = np.full(48, 0.07)
            start = int(rng.integers(0, 30))
            noise[start : start + 10] *= 4.0
            base = 20.0 * np.exp(rng.normal(0.0, noise))
            head = 20.0 * (1.0 + slowdown) * np.exp(rng.normal(0.0, noise))
            pairs = [Pair(float(b), float(h)) for b, h in zip(base, head, strict=True)]
            (c,) = decide_paired([evidence(pairs)])
            if slowdown:
                found += c.verdict is Verdict.REGRESSION
            else:
                alarms += c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    assert found / trials >= 0.9, found
    assert alarms / trials <= ALPHA, alarms


@pytest.mark.parametrize("alpha", [1e-5, 1e-12])
def test_two_pairs_at_a_late_look_s_tiny_level_are_unbounded_not_a_crash(alpha: float) -> None:
    # check --mode ab with one repeat a side: its first look has 2 pairs (1 degree of
    # freedom) and the alpha-spending level of a 10-minute budget; the worse bound's t
    # quantile overflowed math.expm1 (OverflowError, exit 4)
    ev = evidence([Pair(10.0, 10.5), Pair(10.0, 9.0)], alpha=alpha)
    assert ev.worse_bound_pct == math.inf
    (verdict,) = decide_paired([ev])
    assert verdict.verdict is Verdict.INCONCLUSIVE
