"""History analysis bench, harder: change points per *shape* of history, and on a real series.

``bench/detection_history.py`` draws every series from one recipe (steps, spikes, drifts,
variance changes). A detector tuned on it can still fail on shapes it never sees; this bench
draws one group of series per shape, each at a run-to-run CoV of 1%, 2% or 3% (log-normal, or
Student-t with 3 degrees of freedom in half the series) with 2% single-run spikes:

* ``clean``: noise only. No change point.
* ``steps``: 1-3 persistent steps of 3-20% (log-uniform), at least 20 runs apart and from
  the ends.
* ``revert``: a regression of 5-20% that is reverted after 6, 8, 10, 15 or 25 runs: two
  change points (the regression and its revert), plus a persistent step in half the series.
* ``cycle``: periodic load, a sine of amplitude 1.5-3% and period 20-40 runs. No change
  point: no commit made it.
* ``cycle+step``: the same cycle and one persistent step of 5-15%.
* ``ramp``: a linear ramp of 5-35% over 20-150 runs between two flat levels. No change point
  (a drift, reported once by the drift analysis).
* ``ramp+step``: the same ramp and one persistent step of 5-15% anywhere (inside the ramp
  or not): one change point, the step (the ramp is a drift).
* ``variance``: the spread multiplied by 2-3 (or halved) from a random run on. No change point.
* ``pool``: each run on one of 2-4 runners whose speeds differ by up to 4%, drawn at random
  per run or kept for 1-10 runs at a time (sticky). No change point.
* ``pool+step``: the same and one step of 5-15%.
* ``tails``: Student-t noise with 2 degrees of freedom and 5% spikes of 20-300%, with 0-2 steps
  of 5-15%.
* ``mixed``: a random combination of all of the above (0-2 steps, a revert, a cycle, a pool,
  a variance change, heavy tails).

Scores, as in ``history_sim``: a detection within 5 runs of a true change counts, each
matched once; per shape TP, FP, FN, F1 (pooled), and false alarms (detections matching no
true change) per 100 series. Overall: F1 pooled over every shape, and false alarms per 100
series over the shapes without a true change (clean, cycle, ramp, variance, pool).

Then hand-made rows (CoV 1%, 150 draws each): a +10% regression reverted after 6, 10 and 15
runs (found: both points reported), a 3% cycle with a 30-run period over 100 runs (series
with any change point), and a +10% ramp over 20 runs (series with any change point; and for
perfgate, series where ``perfgate detect`` reports no change point and one drift).

The real series: TigerBeetle's (from Apache Otava's tests, 365 runs), labelled by eye at the
four steps of 3% or more (15, 61, 71, 95); its slope and 1-2% wiggles after run 95 are left
unlabelled (not counted either way within 5 runs of 131, 142, 192, 212, which Otava's own
docstring marks). Talos series are not in this repository and not scored here.

Otava (PyPI ``apache-otava``, defaults) gets a row when it can be imported; it pins numpy and
scipy below this project's, so install it aside: ``pip install --no-deps --target DIR
apache-otava`` and run with ``PYTHONPATH=DIR``.

Run from the repository root (a minute or two on a 2-core machine)::

    python bench/detection_shapes.py [--seed N] [--per-shape N]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import history_sim as hs  # noqa: E402
from detection_history import (  # noqa: E402
    otava_detector,
    perfgate_detector,
    perfgate_findings,
)

SEED = 20261205
COVS = (0.01, 0.02, 0.03)
SPIKE_P = 0.02
MIN_FROM_END = 20
MIN_GAP = 20
TARGET_F1 = 0.80
TARGET_FALSE_ALARMS = 10.0
CLEAN_SHAPES = ("clean", "cycle", "ramp", "variance", "pool")
REAL = Path(__file__).resolve().parent / "data" / "tigerbeetle.json"
DRAWS = 150


@dataclass(frozen=True)
class Shaped:
    values: tuple[float, ...]
    changes: tuple[int, ...]
    ignore: tuple[int, ...] = ()
    trend: tuple[float, ...] = ()
    """The log level's steps, reverts and ramps, without cycles and pools (empty for a real
    series): what ``drift_shapes.py`` scores the drift test against."""


def _positions(rng: np.random.Generator, n: int, count: int, gap: int = MIN_GAP) -> list[int]:
    for _ in range(1000):
        pos = sorted(int(p) for p in rng.integers(MIN_FROM_END, n - MIN_FROM_END, size=count))
        if all(b - a >= gap for a, b in zip(pos, pos[1:], strict=False)):
            return pos
    return []


def _sign(rng: np.random.Generator) -> float:
    return 1.0 if rng.random() < 0.5 else -1.0


class _Series:
    """A log level, a spread and the true changes of one series being built."""

    def __init__(self, rng: np.random.Generator, n: int) -> None:
        self.rng, self.n = rng, n
        self.level = np.full(n, math.log(float(rng.uniform(5.0, 200.0))))
        self.sigma = np.full(n, float(rng.choice(COVS)))
        self.df: float | None = 3.0 if rng.random() < 0.5 else None
        self.spike_p, self.spike_max = SPIKE_P, 1.0
        self.changes: list[int] = []
        self.trend = np.zeros(n)

    def step(self, at: int, size: float) -> None:
        self.level[at:] += math.log1p(size)
        self.trend[at:] += math.log1p(size)
        self.changes.append(at)

    def steps(self, count: int, lo: float, hi: float) -> None:
        taken = self.changes
        for _ in range(100):
            pos = _positions(self.rng, self.n, count)
            if all(abs(p - q) >= MIN_GAP for p in pos for q in taken):
                break
        for p in pos:
            size = math.exp(float(self.rng.uniform(math.log(lo), math.log(hi))))
            self.step(p, _sign(self.rng) * size)

    def revert(self) -> None:
        length = int(self.rng.choice([6, 8, 10, 15, 25]))
        for _ in range(100):
            at = int(self.rng.integers(MIN_FROM_END, self.n - MIN_FROM_END - length))
            if all(
                abs(at - q) >= MIN_GAP and abs(at + length - q) >= MIN_GAP for q in self.changes
            ):
                break
        size = math.exp(float(self.rng.uniform(math.log(0.05), math.log(0.20))))
        self.level[at : at + length] += math.log1p(size)
        self.trend[at : at + length] += math.log1p(size)
        self.changes += [at, at + length]

    def cycle(self) -> None:
        amplitude = float(self.rng.uniform(0.015, 0.03))
        period = float(self.rng.uniform(20.0, 40.0))
        phase = float(self.rng.uniform(0.0, 2.0 * math.pi))
        self.level += amplitude * np.sin(2.0 * math.pi * np.arange(self.n) / period + phase)

    def ramp(self) -> None:
        length = int(self.rng.integers(20, 151))
        start = int(self.rng.integers(10, max(11, self.n - length - 10)))
        total = float(self.rng.uniform(0.05, 0.35)) * _sign(self.rng)
        ramp = math.log1p(total) * np.clip((np.arange(self.n) - start) / length, 0, 1)
        self.level += ramp
        self.trend += ramp

    def variance(self) -> None:
        start = int(self.rng.integers(MIN_FROM_END, self.n - MIN_FROM_END))
        self.sigma[start:] *= float(self.rng.uniform(2.0, 3.0)) if self.rng.random() < 0.7 else 0.5

    def pool(self) -> None:
        k = int(self.rng.integers(2, 5))
        offsets = self.rng.uniform(-0.02, 0.02, size=k)
        hold = 1 if self.rng.random() < 0.5 else int(self.rng.integers(2, 11))
        runner = np.repeat(self.rng.integers(0, k, size=self.n // hold + 1), hold)[: self.n]
        self.level += offsets[runner]

    def heavy(self) -> None:
        self.df, self.spike_p, self.spike_max = 2.0, 0.05, 3.0

    def done(self) -> Shaped:
        rng, n = self.rng, self.n
        if self.df is None:
            e = rng.standard_normal(n)
        else:
            e = rng.standard_t(self.df, size=n) / math.sqrt(3.0 if self.df > 2 else 2.0)
        x = np.exp(self.level + self.sigma * e)
        up = rng.random(n) < self.spike_p
        x[up] *= 1.0 + rng.uniform(0.2, self.spike_max, size=int(up.sum()))
        values = tuple(float(v) for v in x)
        return Shaped(values, tuple(sorted(self.changes)), trend=tuple(self.trend.tolist()))


def _build(shape: str, rng: np.random.Generator) -> Shaped:
    s = _Series(rng, int(rng.integers(150, 301)))
    if shape == "steps":
        s.steps(int(rng.integers(1, 4)), 0.03, 0.20)
    elif shape == "revert":
        s.revert()
        if rng.random() < 0.5:
            s.steps(1, 0.03, 0.20)
    elif shape == "cycle":
        s.cycle()
    elif shape == "cycle+step":
        s.cycle()
        s.steps(1, 0.05, 0.15)
    elif shape == "ramp":
        s.ramp()
    elif shape == "ramp+step":
        s.ramp()
        s.steps(1, 0.05, 0.15)
    elif shape == "variance":
        s.variance()
    elif shape == "pool":
        s.pool()
    elif shape == "pool+step":
        s.pool()
        s.steps(1, 0.05, 0.15)
    elif shape == "tails":
        s.heavy()
        s.steps(int(rng.integers(0, 3)), 0.05, 0.15)
    elif shape == "mixed":
        if rng.random() < 0.5:
            s.revert()
        s.steps(int(rng.integers(0, 3)), 0.04, 0.15)
        for feature, p in ((s.cycle, 0.3), (s.pool, 0.3), (s.variance, 0.2), (s.heavy, 0.2)):
            if rng.random() < p:
                feature()
    elif shape != "clean":
        raise ValueError(shape)
    return s.done()


SHAPES = (
    "clean",
    "steps",
    "revert",
    "cycle",
    "cycle+step",
    "ramp",
    "variance",
    "pool",
    "pool+step",
    "tails",
    "mixed",
    "ramp+step",
)


def make_shapes(seed: int, per_shape: int) -> dict[str, list[Shaped]]:
    """``per_shape`` series of every shape, from one seed (each shape its own stream)."""
    out: dict[str, list[Shaped]] = {}
    for i, shape in enumerate(SHAPES):
        rng = np.random.default_rng([seed, i])
        out[shape] = [_build(shape, rng) for _ in range(per_shape)]
    return out


def real_series() -> dict[str, Shaped]:
    data = json.loads(REAL.read_text())
    return {
        name: Shaped(tuple(d["values"]), tuple(d["changes"]), tuple(d.get("ignore", ())))
        for name, d in data.items()
        if not name.startswith("_")
    }


def _score(series: Sequence[Shaped], preds: Sequence[Sequence[int]]) -> tuple[hs.Score, float]:
    """Pooled score (predictions within MARGIN of an ``ignore`` index are dropped) and false
    alarms per 100 series."""
    kept = [
        [p for p in pred if all(abs(p - i) > hs.MARGIN for i in s.ignore)]
        for s, pred in zip(series, preds, strict=True)
    ]
    sc = hs.score([s.changes for s in series], kept)
    return sc, 100.0 * sc.fp / max(len(series), 1)


Detector = Callable[[Sequence[float]], list[int]]


def _found_both(values: Sequence[float], at: int, length: int, detector: Detector) -> bool:
    pred = detector(values)
    return all(any(abs(p - t) <= hs.MARGIN for p in pred) for t in (at, at + length))


def hand_made(out: Callable[[str], None], name: str, detector: Detector) -> dict[str, float]:
    result: dict[str, float] = {}
    cells = []
    for length in (6, 10, 15):
        hits = 0
        for d in range(DRAWS):
            rng = np.random.default_rng([SEED, 1, length, d])
            x = 100.0 * np.exp(0.01 * rng.standard_normal(100))
            x[50 : 50 + length] *= 1.10
            hits += _found_both(tuple(x), 50, length, detector)
        result[f"revert {length}"] = 100.0 * hits / DRAWS
        cells.append(f"{result[f'revert {length}']:>7.0f}%")
    with_points = 0
    for d in range(DRAWS):
        rng = np.random.default_rng([SEED, 2, d])
        t = np.arange(100)
        x = (
            100.0
            * np.exp(0.01 * rng.standard_normal(100))
            * (1.0 + 0.03 * np.sin(2 * np.pi * t / 30 + rng.uniform(0, 2 * np.pi)))
        )
        with_points += bool(detector(tuple(x)))
    result["cycle"] = 100.0 * with_points / DRAWS
    ramp_points = one_drift = 0
    for d in range(DRAWS):
        rng = np.random.default_rng([SEED, 3, d])
        g = np.clip((np.arange(100) - 40) / 20, 0.0, 1.0)
        x = 100.0 * np.exp(0.01 * rng.standard_normal(100)) * (1.0 + 0.10 * g)
        ramp_points += bool(detector(tuple(x)))
        if detector is perfgate_detector:
            steps, drift = perfgate_findings(tuple(x))
            one_drift += not steps and drift is not None
    result["ramp"] = 100.0 * ramp_points / DRAWS
    drift_cell = f"{100.0 * one_drift / DRAWS:>11.0f}%" if detector is perfgate_detector else ""
    out(f"  {name:<18}{''.join(cells)}{result['cycle']:>9.0f}%{result['ramp']:>9.0f}%{drift_cell}")
    return result


def run(out: Callable[[str], None], *, seed: int = SEED, per_shape: int = 60) -> dict[str, float]:
    started = time.perf_counter()
    data = make_shapes(seed, per_shape)
    detectors: list[tuple[str, Detector]] = [("perfgate", perfgate_detector)]
    otava = otava_detector()
    if otava is not None:
        detectors.append(("Otava (defaults)", otava))
    out(
        f"Change points per shape of history: seed {seed}, {per_shape} series per shape, "
        "150-300 runs"
    )
    if otava is None:
        out("  Apache Otava: not importable (see the module docstring); no row")
    out("")
    out(f"  {'shape':<12}{'detector':<18}{'TP':>5}{'FP':>5}{'FN':>5}{'F1':>7}{'FA/100':>8}")
    result: dict[str, float] = {}
    for name, det in detectors:
        all_series: list[Shaped] = []
        all_preds: list[list[int]] = []
        clean_series: list[Shaped] = []
        clean_preds: list[list[int]] = []
        for shape in SHAPES:
            preds = [det(s.values) for s in data[shape]]
            sc, fa = _score(data[shape], preds)
            cell = f"{sc.f1:>7.3f}" if sc.tp + sc.fn else f"{'-':>7}"
            out(f"  {shape:<12}{name:<18}{sc.tp:>5}{sc.fp:>5}{sc.fn:>5}{cell}{fa:>8.1f}")
            all_series += data[shape]
            all_preds += preds
            if shape in CLEAN_SHAPES:
                clean_series += data[shape]
                clean_preds += preds
        sc, _ = _score(all_series, all_preds)
        _, fa = _score(clean_series, clean_preds)
        result[f"f1 {name}"], result[f"fa {name}"] = sc.f1, fa
        out(
            f"  {'ALL':<12}{name:<18}{sc.tp:>5}{sc.fp:>5}{sc.fn:>5}{sc.f1:>7.3f}"
            f"{fa:>8.1f}  (FA/100 over the change-free shapes)"
        )
        for real_name, s in real_series().items():
            pred = det(s.values)
            rs, _ = _score([s], [pred])
            out(
                f"  {real_name:<12}{name:<18}{rs.tp:>5}{rs.fp:>5}{rs.fn:>5}{rs.f1:>7.3f}"
                f"{'':>8}  found {pred}"
            )
            result[f"real f1 {name}"] = rs.f1
        out("")
    out(f"  Hand-made, CoV 1%, {DRAWS} draws: +10% reverted after 6 / 10 / 15 runs (both found);")
    out(
        "  3% cycle, period 30, 100 runs (series with any point); +10% ramp over 20 runs (same;"
        " and one drift, no point)"
    )
    out(f"  {'detector':<18}{'6':>8}{'10':>8}{'15':>8}{'cycle':>10}{'ramp':>10}{'one drift':>12}")
    for name, det in detectors:
        for key, share in hand_made(out, name, det).items():
            result[f"{key} {name}"] = share
    f1, fa = result["f1 perfgate"], result["fa perfgate"]
    met = f1 >= TARGET_F1 and fa <= TARGET_FALSE_ALARMS
    out(
        f"  Target (F1 >= {TARGET_F1:.2f}, <= {TARGET_FALSE_ALARMS:g} false alarms per 100 "
        f"change-free series): F1 {f1:.3f}, {fa:.1f}: {'met' if met else 'NOT met'}"
    )
    out(f"  (took {time.perf_counter() - started:.0f} s)")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--per-shape", type=int, default=60)
    args = parser.parse_args(argv)
    run(print, seed=args.seed, per_shape=args.per_shape)
    return 0


if __name__ == "__main__":
    sys.exit(main())
