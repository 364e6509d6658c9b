"""Known answers for the tail statistics of perfgate.stats.quantiles."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from perfgate.stats.quantiles import bootstrap_quantile_diff, exceedance_test, quantile


def test_quantile_interpolates_like_numpy() -> None:
    assert quantile([1, 2, 3, 4, 5], 0.5) == 3.0
    assert quantile(list(range(101)), 0.99) == 99.0
    assert quantile([10.0, 20.0], 0.25) == 12.5
    with pytest.raises(ValueError):
        quantile([1.0], 1.0)
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_exceedance_known_answers() -> None:
    # 0 of 100 above: nothing to see
    ex = exceedance_test([1.0] * 100, 2.0, 0.99)
    assert (ex.n, ex.exceeding, ex.share, ex.p_value) == (100, 0, 0.0, 1.0)
    # 1 of 100 above the P99: exactly what chance gives; P(X >= 1) = 1 - 0.99^100
    ex = exceedance_test([1.0] * 99 + [3.0], 2.0, 0.99)
    assert ex.exceeding == 1
    assert ex.p_value == pytest.approx(1 - 0.99**100, rel=1e-12)
    # 5 of 100: P(X >= 5 | n=100, p=0.01) = 1 - sum_{k<5} C(100,k) 0.01^k 0.99^(100-k)
    ex = exceedance_test([1.0] * 95 + [3.0] * 5, 2.0, 0.99)
    assert ex.p_value == pytest.approx(0.00343232, rel=1e-5)
    assert ex.p_value == pytest.approx(float(sps.binom.sf(4, 100, 0.01)), rel=1e-12)
    # ties at the threshold do not exceed it
    assert exceedance_test([2.0] * 10, 2.0, 0.9).exceeding == 0
    with pytest.raises(ValueError):
        exceedance_test([float("nan")], 1.0, 0.99)


def test_exceedance_is_calibrated_when_nothing_changes() -> None:
    """A/A: samples from the baseline's own distribution flag at about the nominal rate."""
    rng = np.random.default_rng(3)
    flagged = 0
    trials = 400
    for _ in range(trials):
        base = rng.lognormal(0.0, 0.3, 5000)
        cur = rng.lognormal(0.0, 0.3, 300)
        if exceedance_test(cur, float(np.quantile(base, 0.99)), 0.99).p_value < 0.05:
            flagged += 1
    assert flagged / trials < 0.10


def test_bootstrap_quantile_diff_brackets_a_known_shift() -> None:
    rng = np.random.default_rng(5)
    base = rng.normal(100.0, 5.0, 2000)
    shifted = base * 1.2  # every quantile 20% higher
    change, low, high = bootstrap_quantile_diff(base, shifted, 0.9, resamples=500)
    assert change == pytest.approx(20.0, abs=1e-9)
    assert low < 20.0 < high
    same, lo, hi = bootstrap_quantile_diff(base, base, 0.5, resamples=500)
    assert same == 0.0 and lo < 0.0 < hi
