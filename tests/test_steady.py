"""Within-run statistics: warm-up detection and the block bootstrap's honesty."""

from __future__ import annotations

import numpy as np
import pytest

from perfgate.stats import summarize
from perfgate.stats.steady import block_bootstrap_se, steady_start


def test_warm_up_transient_is_found_and_left_out() -> None:
    rng = np.random.default_rng(3)
    warm = np.linspace(60.0, 22.0, 15)
    steady = 20.0 + rng.normal(0.0, 0.3, 85)
    start = steady_start(np.r_[warm, steady])
    assert 15 <= start <= 20
    s = summarize([np.r_[warm, steady].tolist()], steady=True)
    assert s.dropped == start
    assert s.centre == pytest.approx(20.0, abs=0.15)
    assert s.maximum < 22.0  # no warm-up step left in the statistics
    plain = summarize([np.r_[warm, steady].tolist()])
    assert plain.dropped == 0 and plain.maximum == 60.0


def test_stationary_series_is_rarely_cut() -> None:
    """A cut of stationary steps costs samples, not accuracy; it must stay rare."""
    rng = np.random.default_rng(4)
    cuts = [steady_start(20.0 + rng.normal(0.0, 0.3, 60)) for _ in range(200)]
    assert sum(c > 0 for c in cuts) / len(cuts) <= 0.15


def test_never_drops_more_than_half() -> None:
    rising = np.linspace(10.0, 30.0, 40)
    assert steady_start(rising) <= 20


def ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    e = rng.normal(0.0, 1.0, n)
    x = np.empty(n)
    x[0] = e[0] / np.sqrt(1 - phi**2)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return x


def test_block_bootstrap_covers_the_median_of_autocorrelated_steps() -> None:
    """Nominal 95% intervals (median +- 1.96 se) on AR(1) steps, phi=0.5: coverage near 95%,
    where the i.i.d. formula would fall far short."""
    rng = np.random.default_rng(11)
    covered, iid_covered, trials = 0, 0, 400
    for i in range(trials):
        x = ar1(rng, 200, 0.5)
        med = float(np.median(x))
        se = block_bootstrap_se(x, seed=i)
        covered += abs(med) <= 1.96 * se
        iid_se = 1.2533 * np.std(x, ddof=1) / np.sqrt(x.size)
        iid_covered += abs(med) <= 1.96 * iid_se
    assert 0.88 <= covered / trials <= 0.99
    assert iid_covered / trials < covered / trials


def test_summary_carries_repeat_centres_and_standard_error() -> None:
    rng = np.random.default_rng(5)
    reps = [(20.0 + rng.normal(0, 0.2, 40)).tolist() for _ in range(3)]
    s = summarize(reps, steady=True)
    assert len(s.repeat_centres) == 3
    assert s.centre == pytest.approx(float(np.median(s.repeat_centres)))
    assert s.centre_se is not None and 0 < s.centre_se < 0.2
