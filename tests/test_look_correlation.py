"""``run --confirm``'s look correlation comes from the comparison's own noise model (its
ratio-scale job and process estimates, perfgate.stats.compare.change_sd), not from a second
estimate on the linear scale: a step time and its throughput, which the comparison judges
with one test, get one correlation and so one confirmation level."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from statistics import median

import numpy as np
import pytest

from perfgate.models import Direction, RunPoint
from perfgate.stats import sequential
from perfgate.stats.compare import change_sd

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def point(i: int, repeats: list[float]) -> RunPoint:
    return RunPoint(
        run_id=f"r{i}",
        benchmark="b",
        metric="step_time_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        branch="main",
        commit="c",
        fingerprint_key="k",
        started_at=T0 + timedelta(minutes=i),
        centre=median(repeats),
        repeat_centres=tuple(repeats),
    )


def window(seed: int) -> tuple[RunPoint, ...]:
    """20 runs of 3 repeats with job noise 10% and heavy process noise 20% (log-normal,
    fixed seed): repeats this spread apart are where a linear-scale estimate goes astray."""
    rng = np.random.default_rng(seed)
    return tuple(
        point(i, [float(50.0 * np.exp(job + p)) for p in rng.normal(0.0, 0.2, 3)])
        for i, job in enumerate(rng.normal(0.0, 0.1, 20))
    )


def reciprocal(points: tuple[RunPoint, ...]) -> tuple[RunPoint, ...]:
    """The same runs as a throughput: 1000 / each repeat's step time."""
    return tuple(point(i, [1000.0 / x for x in p.repeat_centres]) for i, p in enumerate(points))


def test_a_time_and_its_throughput_get_one_look_correlation() -> None:
    # On the linear scale the two views of this window gave 0.84 and 0.72: a time's
    # confirmation would have been planned with another rho than its throughput's.
    time = window(0)
    rho = sequential.look_correlation(time, initial_repeats=3, extra_repeats=3)
    rho_inverse = sequential.look_correlation(reciprocal(time), initial_repeats=3, extra_repeats=3)
    assert rho is not None and rho_inverse is not None
    assert rho == pytest.approx(rho_inverse, abs=1e-9)
    assert rho == pytest.approx(0.72, abs=0.02)
    # and it is the comparison's own scaling of a run by its repeats
    assert rho == pytest.approx(change_sd(time, repeats=6) / change_sd(time, repeats=3))
    level = sequential.look_level(rho, tests=20)
    assert level == sequential.look_level(rho_inverse, tests=20)


def test_a_window_that_cannot_split_the_noise_has_no_correlation() -> None:
    singles = tuple(point(i, [50.0 + i % 3]) for i in range(20))
    assert sequential.look_correlation(singles, initial_repeats=1, extra_repeats=2) is None
    with pytest.raises(ValueError):
        sequential.look_correlation(window(1), initial_repeats=0, extra_repeats=2)
