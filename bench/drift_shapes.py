"""History analysis bench: the drift test (``perfgate.stats.drift``) per shape of history.

``detection_shapes.py`` scores the change points; this scores what ``history analyze`` says
beyond them, a creep between the newest runs and those a long horizon ago (change points
found first and divided out, as ``history analyze`` does; the horizon in runs, no timestamps):

* ``detection_shapes``' series (150-300 runs, CoV 1-3%, log-normal or t3 noise, 2% spikes;
  steps, reverts, cycles, ramps, variance changes, runner pools, heavy tails, mixed), 60 of
  each shape, sorted by the drift the test *should* see: the true level's change between the
  two blocks once the change points found are divided out of it (so a step the change-point
  search missed is drift, one it found is not; cycles and pools are noise, not level). Under
  ``NONE_PCT`` a drift reported is false; from ``MIN_PCT`` on, one reported the right way is
  found (the wrong way is counted apart).
* Creeps over the whole history, the shape a nightly job's first month shows: a series of
  30, 40, 60, 100 or 200 runs rising (or falling) linearly by 5%, 10%, 20% or 50%, CoV 1%
  (log-normal) or 3% (t3 tails, 2% spikes), alone, on a 3% load cycle (period 20-40 runs) or
  on a sticky runner pool (2-4 runners 4% apart, kept 1-10 runs). 40 draws per cell.
* An accelerating creep (the level grows as the square of time), a creep that stops half
  way (then flat), one that starts half way, and a linear one with a 10% step (up or down)
  half way, which the change-point search finds and the drift test divides out: 5-50%,
  100 runs, CoV 1%.

There, a drift counts when one is reported in the creep's direction (the wrong way in
brackets). Run from the repository root (about a minute)::

    python bench/drift_shapes.py [--seed N] [--per-shape N] [--draws N]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from detection_history import perfgate_findings  # noqa: E402
from detection_shapes import SHAPES, make_shapes  # noqa: E402

from perfgate.stats.drift import BLOCK_RUNS, LOCAL_RUNS, _horizon_end  # noqa: E402

SEED = 20261207
CREEP_RUNS = (30, 40, 60, 100, 200)
CREEP_SIZES = (0.05, 0.10, 0.20, 0.50)
BACKGROUNDS = ("quiet", "cycle", "pool")
NONE_PCT = 0.5
"""Below this true drift (percent), a drift reported is a false one."""
MIN_PCT = 2.0
"""From this true drift (percent) on, a drift should be found (the test's minimum is 1.5%)."""


def _noise(rng: np.random.Generator, n: int, heavy: bool) -> np.ndarray:
    if not heavy:
        return 0.01 * rng.standard_normal(n)
    e = 0.03 * rng.standard_t(3.0, size=n) / math.sqrt(3.0)
    up = rng.random(n) < 0.02
    e[up] += np.log1p(rng.uniform(0.2, 1.0, size=int(up.sum())))
    return e


def _background(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    t = np.arange(n, dtype=float)
    if kind == "cycle":
        period = float(rng.uniform(20.0, 40.0))
        return 0.03 * np.sin(2.0 * math.pi * t / period + float(rng.uniform(0, 2 * math.pi)))
    if kind == "pool":
        k = int(rng.integers(2, 5))
        offsets = rng.uniform(-0.02, 0.02, size=k)
        hold = int(rng.integers(1, 11))
        return offsets[np.repeat(rng.integers(0, k, size=n // hold + 1), hold)[:n]]
    return np.zeros(n)


def creep(
    rng: np.random.Generator,
    n: int,
    size: float,
    shape: np.ndarray,
    kind: str,
    heavy: bool,
    step: float = 0.0,
) -> tuple[tuple[float, ...], float]:
    """One series: ``shape`` (0 -> 1 over the series) scaled to ``size``, plus a step of
    ``step`` half way (either way); and the creep's sign."""
    sign = 1.0 if rng.random() < 0.5 else -1.0
    level = math.log(float(rng.uniform(5.0, 200.0))) + sign * math.log1p(size) * shape
    if step:
        level[n // 2 :] += (1.0 if rng.random() < 0.5 else -1.0) * math.log1p(step)
    x = np.exp(level + _background(rng, n, kind) + _noise(rng, n, heavy))
    return tuple(float(v) for v in x), sign


def _found(values: Sequence[float], direction: float) -> tuple[bool, bool]:
    """(a drift reported the right way, one reported the wrong way)."""
    _steps, drift = perfgate_findings(values)
    if drift is None:
        return False, False
    right = drift.change_pct * direction > 0
    return right, not right


def _true_drift_pct(trend: Sequence[float], steps: Sequence[int]) -> float:
    """The drift the test should see: the change of the true log level between its two
    blocks, with the change points found divided out as the test divides them (on the true
    level, so a missed step counts as drift and a found one does not)."""
    y = np.asarray(trend)
    n = y.size
    old_last = _horizon_end(n, None)
    old_first = old_last - BLOCK_RUNS + 1
    adjusted = y.copy()
    bounds = [0, *sorted(steps), n]
    for a, k, b in zip(bounds, bounds[1:], bounds[2:], strict=False):
        if old_first < k:
            w = max(1, min(LOCAL_RUNS, k - a, b - k))
            adjusted[k:] -= np.median(y[k : k + w]) - np.median(y[k - w : k])
    shift = np.median(adjusted[n - BLOCK_RUNS :]) - np.median(adjusted[old_first : old_last + 1])
    return math.expm1(float(shift)) * 100.0


def _cells(c: np.ndarray) -> str:
    def pct(k: int, of: int) -> str:
        return f"{100.0 * c[k] / c[of]:>7.0f}%" if c[of] else f"{'-':>8}"

    return f"{c[0]:>9}{pct(1, 0)}{c[2]:>8}{pct(3, 2)}{c[4]:>7}"


def run(
    out: Callable[[str], None], *, seed: int = SEED, per_shape: int = 60, draws: int = 40
) -> dict[str, float]:
    started = time.perf_counter()
    result: dict[str, float] = {}
    out(f"Drift per shape of history: seed {seed}")
    out("")
    out(
        f"  detection_shapes' series, {per_shape} per shape (seed {seed}), by the drift left"
        " between the two blocks once the change points found are divided out of the true"
    )
    out(
        f"  level (steps, reverts, ramps; not cycles or pools): under {NONE_PCT}% a drift"
        f" reported is false; from {MIN_PCT}% on one the right way is found"
    )
    out(f"    {'shape':<12}{'no drift':>9}{'false':>8}{'drift':>8}{'found':>8}{'wrong':>7}")
    data = make_shapes(seed, per_shape)
    totals = np.zeros(5, dtype=int)
    for shape in SHAPES:
        counts = np.zeros(5, dtype=int)  # none, false, drifted, found, wrong way
        for s in data[shape]:
            steps, drift = perfgate_findings(s.values)
            truth = _true_drift_pct(s.trend, steps)
            got = 0.0 if drift is None else drift.change_pct
            if abs(truth) < NONE_PCT:
                counts[0:2] += (1, drift is not None)
            elif abs(truth) >= MIN_PCT:
                counts[2:5] += (1, got * truth > 0, got * truth < 0)
        totals += counts
        out(f"    {shape:<12}{_cells(counts)}")
        result[f"false {shape}"] = 100.0 * counts[1] / max(counts[0], 1)
    out(f"    {'ALL':<12}{_cells(totals)}")
    result["false drifts"] = 100.0 * totals[1] / max(totals[0], 1)
    result["found drifts"] = 100.0 * totals[3] / max(totals[2], 1)
    out("")
    out(
        f"  Linear creeps over the whole series, {draws} draws a cell: reported the right way"
        " (wrong way in brackets when any)"
    )
    header = "".join(f"{f'{s:.0%}':>8}" for s in CREEP_SIZES)
    out(f"    {'runs':>5} {'noise':<6}{'background':<11}{header}")
    hit_sum = cells = 0
    for ci, n in enumerate(CREEP_RUNS):
        ramp = np.linspace(0.0, 1.0, n)
        for heavy in (False, True):
            for bi, kind in enumerate(BACKGROUNDS):
                row = []
                for si, size in enumerate(CREEP_SIZES):
                    right = wrong = 0
                    for d in range(draws):
                        rng = np.random.default_rng([seed, ci, int(heavy), bi, si, d])
                        values, direction = creep(rng, n, size, ramp, kind, heavy)
                        r, w = _found(values, direction)
                        right += r
                        wrong += w
                    share = 100.0 * right / draws
                    hit_sum += share
                    cells += 1
                    row.append(f"{share:>5.0f}%" + (f"({wrong})" if wrong else "  "))
                noise = "3% t3" if heavy else "1%"
                out(f"    {n:>5} {noise:<6}{kind:<11}{''.join(row)}")
    result["creep mean"] = hit_sum / cells
    out(f"    mean over the cells: {result['creep mean']:.0f}%")
    out("")
    out(f"  Other creeps, 100 runs, CoV 1%, {draws} draws: reported the right way")
    t = np.linspace(0.0, 1.0, 100)
    for label, shape, step in (
        ("accelerating (t^2)", t**2, 0.0),
        ("stops half way", np.clip(2.0 * t, 0.0, 1.0), 0.0),
        ("starts half way", np.clip(2.0 * t - 1.0, 0.0, 1.0), 0.0),
        ("linear, a 10% step", t, 0.10),
    ):
        row = []
        for si, size in enumerate(CREEP_SIZES):
            right = 0
            for d in range(draws):
                rng = np.random.default_rng([seed, 99, len(label), si, d])
                values, direction = creep(rng, 100, size, shape, "quiet", False, step)
                right += _found(values, direction)[0]
            share = 100.0 * right / draws
            result[f"{label} {size:.0%}"] = share
            row.append(f"{share:>7.0f}%")
        out(f"    {label:<22}{''.join(row)}   ({', '.join(f'{s:.0%}' for s in CREEP_SIZES)})")
    out(f"  (took {time.perf_counter() - started:.0f} s)")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--per-shape", type=int, default=60)
    parser.add_argument("--draws", type=int, default=40)
    args = parser.parse_args(argv)
    run(print, seed=args.seed, per_shape=args.per_shape, draws=args.draws)
    return 0


if __name__ == "__main__":
    sys.exit(main())
