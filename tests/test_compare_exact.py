"""The gate's fast paths compute the very numbers of the plain numpy code they replace, bit
for bit, so that no verdict, interval or p-value moves in its last digit: each run's repeat
variance in plain Python (numpy's per-call cost on three values was a third of a gate's
statistics), and the repeats of a whole window scaled in one call."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import numpy as np
import pytest

from perfgate.models import Direction, RunPoint
from perfgate.stats.compare import _scaled, _scaled_repeats, _var


def _samples(seed: int) -> list[list[float]]:
    rng = random.Random(seed)
    out = []
    for _ in range(3000):
        n = rng.randint(2, 12)
        scale = 10 ** rng.uniform(-6, 9)
        spread = rng.choice([1e-9, 1e-4, 0.01, 0.2, 3.0])
        values = [scale * (1.0 + spread * rng.gauss(0, 1)) for _ in range(n)]
        if rng.random() < 0.5:
            values = [float(v) for v in np.log(np.abs(np.asarray(values)) + 1e-300)]
        out.append(values)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_repeat_variance_is_numpys_bit_for_bit(seed: int) -> None:
    for values in _samples(seed):
        expected = float(np.var(np.asarray(values, dtype=float), ddof=1))
        assert _var(values) == expected or (np.isnan(expected) and np.isnan(_var(values)))


def _point(i: int, repeats: tuple[float, ...]) -> RunPoint:
    return RunPoint(
        run_id=f"r{i}",
        benchmark="b",
        metric="step_time_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        branch="main",
        commit=f"{i:040x}",
        fingerprint_key="k",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        centre=float(np.median(repeats)) if repeats else 1.0,
        repeat_centres=repeats,
        deterministic=False,
    )


@pytest.mark.parametrize("log", [True, False])
def test_window_scaled_in_one_call_equals_one_call_per_run(log: bool) -> None:
    rng = random.Random(5)
    points = [
        _point(i, tuple(10 ** rng.uniform(-3, 4) for _ in range(rng.choice([0, 1, 3, 5, 10]))))
        for i in range(200)
    ]
    got = _scaled_repeats(points, log, 7.25)
    for p, values in zip(points, got, strict=True):
        one = _scaled(np.asarray(p.repeat_centres, dtype=float), log, 7.25).tolist()
        assert values == one
