"""Known-answer and simulation tests of the decision procedure (no torch, fixed seeds)."""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from perfgate.models import Direction, MetricPolicy, RunPoint, Verdict
from perfgate.stats import Candidate, benjamini_hochberg, compare_candidates, summarize
from perfgate.stats.fdr import by_direction

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
TIME = MetricPolicy(Direction.LOWER_IS_BETTER, 3.0)


def point(
    i: int,
    repeats: list[float],
    *,
    metric: str = "step_time_ms",
    direction: Direction = Direction.LOWER_IS_BETTER,
    benchmark: str = "b",
) -> RunPoint:
    return RunPoint(
        run_id=f"run{i}",
        benchmark=benchmark,
        metric=metric,
        unit="ms",
        direction=direction,
        branch="main",
        commit=f"c{i:07d}",
        fingerprint_key="k",
        started_at=T0 + timedelta(minutes=i),
        centre=statistics.median(repeats),
        repeat_centres=tuple(repeats),
    )


def simulate_run(
    rng: np.random.Generator, i: int, centre: float, cov: float, r: int = 3
) -> RunPoint:
    job = rng.lognormal(0.0, cov / 2)
    return point(i, [centre * job * rng.lognormal(0.0, cov) for _ in range(r)])


def test_each_side_of_a_change_is_a_family_of_its_own() -> None:
    # one side alone is plain BH over all m tests, the other side's tests at p = 1
    assert by_direction([0.01, 0.04, 0.03, 0.005], [True] * 4) == pytest.approx(
        benjamini_hochberg([0.01, 0.04, 0.03, 0.005])
    )
    # two speedups called do not lower the bar of the slowdown: pooled BH would adjust its
    # 0.009 to 0.012 (rank 3 of 4) and call it at alpha 0.02; on its own side it is rank 1
    p, sides = [0.001, 0.002, 0.009, 0.5], [False, False, True, True]
    assert benjamini_hochberg(p)[2] == pytest.approx(0.012)
    assert by_direction(p, sides) == pytest.approx([0.004, 0.004, 0.036, 1.0])
    assert by_direction([], []) == []


def test_benjamini_hochberg_known_answer() -> None:
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert benjamini_hochberg([]) == []
    assert benjamini_hochberg([0.9, 0.8]) == pytest.approx([0.9, 0.9])


def test_summarize_centre_is_median_of_repeat_medians() -> None:
    s = summarize([[1.0, 2.0, 3.0], [10.0, 11.0, 12.0], [5.0, 5.0, 100.0]])
    assert s.centre == 5.0
    assert s.n == 9
    assert s.median == 5.0
    assert s.minimum == 1.0 and s.maximum == 100.0
    with pytest.raises(ValueError):
        summarize([[1.0, float("nan")]])
    with pytest.raises(ValueError):
        summarize([])


def test_fewer_than_three_baseline_runs_is_no_baseline() -> None:
    base = (point(0, [10.0, 10.1, 9.9]), point(1, [10.0, 10.2, 9.8]))
    (c,) = compare_candidates([Candidate(point(9, [20.0, 20.0, 20.0]), base, TIME)])
    assert c.verdict is Verdict.NO_BASELINE
    assert "only 2 comparable baseline runs" in c.reason


def test_clear_slowdown_is_a_regression_with_its_numbers() -> None:
    rng = np.random.default_rng(1)
    base = tuple(simulate_run(rng, i, 20.0, 0.02) for i in range(5))
    current = point(9, [25.1, 24.8, 25.3])
    (c,) = compare_candidates([Candidate(current, base, TIME)])
    assert c.verdict is Verdict.REGRESSION
    assert c.change_pct == pytest.approx(25.0, abs=4.0)
    assert c.ci_low_pct is not None and c.ci_high_pct is not None
    assert c.ci_low_pct < c.change_pct < c.ci_high_pct
    assert c.p_adjusted is not None and c.p_adjusted < 0.01
    assert c.mde_pct is not None and c.mde_pct < 25.0
    assert c.baseline_run_ids == tuple(f"run{i}" for i in range(5))
    assert "slower" in c.reason


def test_higher_is_better_metric_reads_direction() -> None:
    base = tuple(point(i, [100.0 + d, 100.5 + d, 99.5 + d]) for i, d in enumerate([0, 1, -1, 0.5]))
    policy = MetricPolicy(Direction.HIGHER_IS_BETTER, 3.0)
    lower = point(9, [80.0, 80.5, 79.5], direction=Direction.HIGHER_IS_BETTER)
    higher = point(10, [120.0, 120.5, 119.5], direction=Direction.HIGHER_IS_BETTER)
    worse, better = compare_candidates(
        [
            Candidate(lower, tuple(replace_dir(p) for p in base), policy),
            Candidate(higher, tuple(replace_dir(p) for p in base), policy),
        ]
    )
    assert worse.verdict is Verdict.REGRESSION
    assert better.verdict is Verdict.IMPROVEMENT


def replace_dir(p: RunPoint) -> RunPoint:
    from dataclasses import replace

    return replace(p, direction=Direction.HIGHER_IS_BETTER)


def test_small_change_is_unchanged_even_when_precise() -> None:
    base = tuple(point(i, [10.0, 10.001, 9.999]) for i in range(10))
    (c,) = compare_candidates([Candidate(point(11, [10.2, 10.2, 10.2]), base, TIME)])
    assert c.verdict is Verdict.UNCHANGED
    assert "within the 3% minimum effect" in c.reason


def test_noisy_current_run_is_inconclusive_not_a_regression() -> None:
    base = tuple(point(i, [10.0, 10.05, 9.95]) for i in range(6))
    (c,) = compare_candidates([Candidate(point(9, [10.0, 14.0, 18.0]), base, TIME)])
    assert c.verdict is Verdict.INCONCLUSIVE
    assert "noisy now" in c.reason


def test_large_but_uncertain_change_is_inconclusive_and_says_what_it_can_see() -> None:
    base = (point(0, [10.0]), point(1, [12.0]), point(2, [8.5]))
    (c,) = compare_candidates([Candidate(point(9, [11.0]), base, TIME)])
    assert c.verdict is Verdict.INCONCLUSIVE
    assert "is caught with 80% power" in c.reason


def test_deterministic_metric_is_compared_exactly() -> None:
    policy = MetricPolicy(Direction.LOWER_IS_BETTER, 0.5, deterministic=True)
    base = tuple(point(i, [412.0], metric="op_calls_per_step") for i in range(3))
    same, more = compare_candidates(
        [
            Candidate(point(9, [412.0], metric="op_calls_per_step"), base, policy),
            Candidate(point(10, [530.0], metric="op_calls_per_step"), base, policy),
        ]
    )
    assert same.verdict is Verdict.UNCHANGED
    assert more.verdict is Verdict.REGRESSION
    assert "412 to 530" in more.reason
    assert more.p_value is None


def test_simulated_a_a_gates_rarely_raise_a_false_regression() -> None:
    """300 gates of 20 metrics, 30 runs of history, CoV 3%: the share with any false alarm."""
    rng = np.random.default_rng(2026)
    gates_with_alarm = 0
    for _ in range(300):
        candidates = []
        for m in range(20):
            base = tuple(simulate_run(rng, i, 50.0, 0.03) for i in range(30))
            current = simulate_run(rng, 99, 50.0, 0.03)
            candidates.append(
                Candidate(point(99, list(current.repeat_centres), benchmark=f"b{m}"), base, TIME)
            )
        if any(c.verdict is Verdict.REGRESSION for c in compare_candidates(candidates)):
            gates_with_alarm += 1
    assert gates_with_alarm / 300 <= 0.01


def test_simulated_ten_percent_slowdowns_are_mostly_found() -> None:
    rng = np.random.default_rng(7)
    found = 0
    for _ in range(200):
        base = tuple(simulate_run(rng, i, 50.0, 0.03) for i in range(30))
        slow = simulate_run(rng, 99, 55.0, 0.03)
        (c,) = compare_candidates([Candidate(slow, base, TIME)])
        found += c.verdict is Verdict.REGRESSION
    # a test that knew the noise would find about 82% (a 2.6% SD of the change, alpha 0.01)
    assert found / 200 >= 0.7


def test_change_interval_covers_the_true_change_near_nominally() -> None:
    """Intervals on simulated histories (30 runs, CoV 3%, true change +6%), at the level the
    verdict is decided at (1 - alpha for one test: 99%): coverage close to it, neither far
    below (overconfident) nor at 100% (useless). A lone series of 30 runs shows little of
    its tails, so its body is a mixture of the normal and t's and its interval a little
    wider than a normal's (399 of 400 covered)."""
    rng = np.random.default_rng(31)
    covered, trials = 0, 400
    for _ in range(trials):
        base = tuple(simulate_run(rng, i, 50.0, 0.03) for i in range(30))
        current = simulate_run(rng, 99, 53.0, 0.03)
        (c,) = compare_candidates([Candidate(current, base, TIME)])
        assert c.ci_low_pct is not None and c.ci_high_pct is not None
        covered += c.ci_low_pct <= 6.0 <= c.ci_high_pct
    assert 0.97 <= covered / trials < 1.0


def test_a_run_as_far_out_as_a_baseline_outlier_is_not_called_a_change() -> None:
    """A 30% spike among 12 quiet runs and a current run just as slow: significant against
    the quiet runs' spread, but it looks like the spike (the rank guard: as rare as the
    spike was, 2 in 13), so it is not called a regression; far beyond it, it is."""
    values = [10.0, 10.1, 9.9, 10.05, 9.95, 13.0, 10.0, 10.02, 9.98, 10.1, 9.9, 10.0]
    base = tuple(point(i, [v, v * 1.001, v * 0.999]) for i, v in enumerate(values))
    (c,) = compare_candidates([Candidate(point(99, [13.1, 13.1, 13.1]), base, TIME)])
    assert c.verdict is Verdict.INCONCLUSIVE
    assert c.p_value == pytest.approx(2 / 13)
    (far,) = compare_candidates([Candidate(point(99, [20.0, 20.0, 20.0]), base, TIME)])
    assert far.verdict is Verdict.REGRESSION


def test_prediction_interval_p_value_known_answer() -> None:
    """Five baseline runs 9, 10, 11, 10, 10 (one repeat each) and a run at 12, judged alone:
    on the log scale, the level is the runs' mean and the change log(12) less it; the runs'
    variance (4 degrees of freedom) is the current run's noise, plus the level's (a mean of
    5: a fifth of one), so t = change / (sd * sqrt(1.2)) and p = 2 P(T_4 > t)."""
    from scipy import stats as sps

    values = [9.0, 10.0, 11.0, 10.0, 10.0]
    base = tuple(point(i, [v]) for i, v in enumerate(values))
    (c,) = compare_candidates([Candidate(point(9, [12.0]), base, TIME)])
    sd = statistics.stdev([float(np.log(v)) for v in values])
    change = float(np.log(12.0) - np.mean(np.log(values)))
    t = change / (sd * 1.2**0.5)
    assert c.p_value == pytest.approx(2 * sps.t.sf(t, 4), rel=1e-9)
    assert c.change_pct == pytest.approx(100 * np.expm1(change))
    assert c.alpha == 0.01


def test_the_detectable_effect_is_the_gates_a_lone_change_past_it_is_significant() -> None:
    """The MDE a verdict reports holds for the gate it is in: a single changed metric among
    m judged together must reach alpha/m before BH's adjustment, so a change beyond the
    reported MDE is significant after adjustment (when no other metric moved). (Beside
    other metrics it may also be *smaller* than alone: their noise lends it a prior.)"""
    rng = np.random.default_rng(11)
    alpha = Candidate(point(0, [1.0]), (), TIME).alpha
    for trial in range(40):
        base = tuple(simulate_run(rng, i, 20.0, 0.02) for i in range(8))
        size = 1.0 + rng.uniform(0.0, 0.25)
        changed = Candidate(simulate_run(rng, 99, 20.0 * size, 0.02), base, TIME)
        others = [
            Candidate(
                simulate_run(rng, 99, 20.0, 0.02),
                tuple(simulate_run(rng, i, 20.0, 0.02) for i in range(8)),
                TIME,
            )
            for _ in range(9)
        ]
        (alone,) = compare_candidates([changed])
        gate = compare_candidates([changed, *others])
        ours = gate[0]
        assert ours.mde_pct is not None and alone.mde_pct is not None
        assert ours.change_pct is not None and ours.p_adjusted is not None
        others_moved = any(c.p_value is not None and c.p_value < alpha / 10 for c in gate[1:])
        if abs(ours.change_pct) > ours.mde_pct and not others_moved:
            assert ours.p_adjusted < alpha, (trial, ours.reason)


def _awkward_sample(rng: np.random.Generator, i: int, *, most: int) -> np.ndarray:
    """Sample ``i`` of a bit-for-bit check against numpy: 1 to ``most`` values, every third
    all small integers (many ties), else t3 at a random scale; now and then an infinity."""
    n = int(rng.integers(1, most))
    if i % 3 == 0:
        x = rng.integers(-3, 4, n).astype(float)
    else:
        x = rng.standard_t(3, n) * 10.0 ** rng.uniform(-8, 8)
    if i % 41 == 0:
        x[rng.integers(0, n)] = np.inf
    if i % 43 == 0:
        x[rng.integers(0, n)] = -np.inf
    return x


def test_median_is_numpys_median_bit_for_bit() -> None:
    """The gate's medians (``stats.summary.median``) must give the very value ``np.median``
    gives: verdicts and reports are compared across versions byte for byte. Random sizes,
    scales and heavy tails; ties; odd and even counts; NaN and infinities."""
    from perfgate.stats.summary import median

    rng = np.random.default_rng(20261202)
    for i in range(5000):
        x = _awkward_sample(rng, i, most=50)
        expected = float(np.median(x))
        got = median(x if i % 2 else list(x))
        assert got == expected or (np.isnan(got) and np.isnan(expected)), (x, got, expected)
    with_nan = np.array([1.0, np.nan, 3.0])
    assert np.isnan(median(with_nan)) and np.isnan(np.median(with_nan))
    assert np.isnan(median([]))


def test_quantile_is_numpys_quantile_bit_for_bit() -> None:
    """The gate's quantiles (``stats.summary.quantile``) must give the very value
    ``np.quantile`` gives with its default method, for the same reason as the medians: random
    sizes, scales and heavy tails, ties, every quantile level from 0 to 1 (those that land on
    a value, between two and past the last index), infinities and NaN."""
    from perfgate.stats.summary import quantile

    rng = np.random.default_rng(20261204)
    levels = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0]
    for i in range(5000):
        x = _awkward_sample(rng, i, most=40)
        q = levels[i % len(levels)] if i % 2 else float(rng.uniform())
        with np.errstate(invalid="ignore"):  # inf - inf between two infinities
            expected = float(np.quantile(x, q))
        got = quantile(x if i % 4 < 2 else list(x), q)
        assert got == expected or (np.isnan(got) and np.isnan(expected)), (x, q, got, expected)
    assert np.isnan(quantile([1.0, np.nan, 3.0], 0.9))
    with pytest.raises(ValueError, match="no values"):
        quantile([], 0.5)
    with pytest.raises(ValueError, match="outside"):
        quantile([1.0], 1.5)
