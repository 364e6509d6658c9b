"""History analysis bench: change-point detection on simulated run histories.

Four detectors, on the same series (``history_sim.make_dataset(BENCH_SEED)``: 100 series per
run-to-run CoV of 1%, 3% and 5%, 200-300 runs each, with steps, spikes, heavy tails, drifts
and variance changes as described in ``bench/history_sim.py``):

* perfgate: ``perfgate.stats.changepoints.detect_change_points`` with its defaults (chosen
  on ``TUNING_SEED``, never on the seed reported here);
* Apache Otava (PyPI ``apache-otava``): ``otava.analysis.compute_change_points`` with its
  defaults, the ones its CLI uses (window 50, p 0.001, magnitude 0);
* a fixed-percentage threshold: run i is flagged when it differs from the median of the 10
  runs before it by more than 10%; after a flag, the next 10 runs are the new baseline, so
  nothing is flagged before i + 10 (a step is flagged once, not ten times);
* "no change points": predicts nothing, ever.

Scores: see ``history_sim`` (pooled precision/recall/F1 with a 5-run margin; TCPD-style
mean per-series F1), and false alarms per 100 change-free series (no step, no drift) for each
detector. Then what perfgate's history analysis (change points, then the long-horizon drift
comparison of ``perfgate.stats.drift``) reports on a +35% ramp over 100 runs and on +8% over
160 runs, each shown for the bench seed and counted over 20 seeds. Then the runtime of
perfgate and Otava on one 1,000-run series (one untimed warm-up call each, then the median
of 3 timed calls).

Run alone from the repository root (about 15 s on a 2-core machine)::

    python bench/detection_history.py [--seed N] [--per-cov N]

``bench/detection.py`` calls :func:`run`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import history_sim as hs  # noqa: E402

from perfgate.models import Drift  # noqa: E402
from perfgate.stats.changepoints import detect_change_points  # noqa: E402
from perfgate.stats.drift import compare_horizon  # noqa: E402

Detector = Callable[[Sequence[float]], list[int]]

THRESHOLD_PCT = 10.0
THRESHOLD_WINDOW = 10
RUNTIME_LENGTH = 1000
RUNTIME_CHANGES = 6
TARGET_F1 = 0.80
TARGET_FALSE_ALARMS = 10.0
"""Most false alarms per 100 change-free series (no step, no drift) allowed."""
SHOWCASE_SEEDS = 20
"""Seeds of the ramp and creep showcases (from the bench seed on)."""


def perfgate_detector(values: Sequence[float]) -> list[int]:
    return [p.index for p in detect_change_points(values)]


def perfgate_findings(values: Sequence[float]) -> tuple[list[int], Drift | None]:
    """What ``history analyze`` finds in one series: change points, then the drift beyond
    them (the series has no timestamps here, so the horizon is in runs)."""
    steps = perfgate_detector(values)
    return steps, compare_horizon(values, steps=steps)


def _drift_words(d: Drift) -> str:
    return (
        f"drift {d.change_pct:+.1f}% (runs {d.baseline_first}-{d.baseline_last} -> "
        f"{d.recent_first}-{d.recent_last}, moved over runs {d.start}-{d.end}, "
        f"confidence {d.confidence:.4f})"
    )


def showcase(
    out: Callable[[str], None], label: str, seed: int, make: Callable[[int], Sequence[float]]
) -> float:
    """Print what perfgate finds on ``make(seed)`` and how often, over SHOWCASE_SEEDS seeds,
    the series gives exactly one finding and that a drift. Returns that share."""
    steps, drift = perfgate_findings(make(seed))
    words = _drift_words(drift) if drift else "no drift"
    out(f"  {label}, seed {seed}: {len(steps)} change point(s) {steps}; {words}")
    one = reported = 0
    for s in range(seed, seed + SHOWCASE_SEEDS):
        steps, drift = perfgate_findings(make(s))
        one += not steps and drift is not None
        reported += bool(steps) or drift is not None
    out(
        f"    seeds {seed}..{seed + SHOWCASE_SEEDS - 1}: exactly one finding, a drift, in "
        f"{one} of {SHOWCASE_SEEDS}; reported at all (drift or change points) in {reported}"
    )
    return one / SHOWCASE_SEEDS


def threshold_detector(values: Sequence[float]) -> list[int]:
    """Flag i when |x_i / median(x_{i-10..i-1}) - 1| > 10%; then skip to i + 10."""
    out: list[int] = []
    i = THRESHOLD_WINDOW
    while i < len(values):
        base = statistics.median(values[i - THRESHOLD_WINDOW : i])
        if base != 0 and abs(values[i] / base - 1.0) * 100.0 > THRESHOLD_PCT:
            out.append(i)
            i += THRESHOLD_WINDOW
        else:
            i += 1
    return out


def no_change_detector(values: Sequence[float]) -> list[int]:
    return []


def otava_detector() -> Detector | None:
    """Otava's default detector, or None when apache-otava cannot be imported."""
    try:
        from otava.analysis import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
            compute_change_points,
        )
    except ImportError:
        return None

    def detect(values: Sequence[float]) -> list[int]:
        points, _weak = compute_change_points(list(values))
        return [int(p.index) for p in points]

    return detect


def _timed(detector: Detector, values: Sequence[float]) -> float:
    detector(values)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        detector(values)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _features_line(data: Sequence[hs.SimSeries]) -> str:
    def count(feature: str) -> int:
        return sum(feature in s.features for s in data)

    changes = sum(len(s.changes) for s in data)
    no_change = sum(not s.changes for s in data)
    return (
        f"{len(data)} series, {changes} true change points; {no_change} series without one; "
        f"with drift {count('drift')}, variance change {count('variance')}, "
        f"heavy tails {count('heavy_tails')}, spikes {count('spikes')}"
    )


def run(out: Callable[[str], None], *, seed: int = hs.BENCH_SEED, per_cov: int = 100) -> None:
    """Print the history-analysis table (overall and per CoV) and the runtimes."""
    started = time.perf_counter()
    data = hs.make_dataset(seed, per_cov=per_cov)
    detectors: list[tuple[str, Detector]] = [("perfgate", perfgate_detector)]
    otava = otava_detector()
    if otava is not None:
        detectors.append(("Otava (defaults)", otava))
    detectors.append((f"threshold {THRESHOLD_PCT:g}%", threshold_detector))
    detectors.append(("no change points", no_change_detector))

    out("History analysis: change-point detection on simulated run histories")
    out(
        f"  seed {seed} (perfgate's defaults were tuned on seed {hs.TUNING_SEED}); "
        f"{per_cov} series per CoV, 200-300 runs each"
    )
    out(f"  {_features_line(data)}")
    out(
        f"  a detection within {hs.MARGIN} runs of a true change counts (each matched once); "
        "P, R, F1 pooled over series (no prediction: P = 1);"
    )
    out(
        "  F1 TCPD = mean per-series F1 with index 0 added to both sets (TCPD convention: "
        "no change and no prediction scores 1)"
    )
    if otava is None:
        out("  Apache Otava: NOT AVAILABLE (pip install apache-otava failed or not done); no row")

    predictions = {name: [det(s.values) for s in data] for name, det in detectors}
    out("")
    out(
        f"  {'CoV':<5} {'detector':<18} {'TP':>5} {'FP':>5} {'FN':>5} {'P':>6} {'R':>6} "
        f"{'F1':>6} {'F1 TCPD':>8}"
    )
    result: dict[str, float] = {}
    for cov in (*hs.COVS, None):
        idx = [i for i, s in enumerate(data) if cov is None or s.cov == cov]
        label = "all" if cov is None else f"{cov:.0%}"
        for name, _ in detectors:
            sc = hs.score([data[i].changes for i in idx], [predictions[name][i] for i in idx])
            out(
                f"  {label:<5} {name:<18} {sc.tp:>5} {sc.fp:>5} {sc.fn:>5} "
                f"{sc.precision:>6.3f} {sc.recall:>6.3f} {sc.f1:>6.3f} {sc.tcpd_f1:>8.3f}"
            )
            if cov is None:
                result[f"f1 {name}"] = sc.f1
        out("")

    plain = [i for i, s in enumerate(data) if not s.changes and "drift" not in s.features]
    drifting = [i for i, s in enumerate(data) if not s.changes and "drift" in s.features]
    out(
        f"  False alarms per 100 change-free series ({len(plain)} series with no step and no "
        f"drift; {len(drifting)} more with a drift only, where a change point is not a true one):"
    )
    out(f"    {'detector':<18}{'change-free':>12}{'drift only':>12}")
    for name, _ in detectors:
        fa = sum(len(predictions[name][i]) for i in plain)
        fd = sum(len(predictions[name][i]) for i in drifting)
        per100 = 100.0 * fa / len(plain) if plain else 0.0
        result[f"fa {name}"] = per100
        drift_cell = f"{100.0 * fd / len(drifting):>12.1f}" if drifting else f"{'-':>12}"
        out(f"    {name:<18}{per100:>12.1f}{drift_cell}")
    drift_found = [compare_horizon(data[i].values, steps=predictions["perfgate"][i]) for i in plain]
    out(
        "    perfgate's drift findings (long-horizon comparison) on the change-free series: "
        f"{100.0 * sum(d is not None for d in drift_found) / max(len(plain), 1):.1f} per 100"
    )
    out("")

    out("  False alarms per series on series with no true change (by what else they contain):")
    kinds: list[tuple[str, Callable[[hs.SimSeries], bool]]] = [
        ("plain", lambda s: "drift" not in s.features and "variance" not in s.features),
        ("drift", lambda s: "drift" in s.features),
        ("variance", lambda s: "variance" in s.features),
    ]
    head = "".join(f"{k:>10}" for k, _ in kinds)
    out(f"    {'detector':<18}{head}")
    for name, _ in detectors:
        cells = []
        for _, keep in kinds:
            idx = [i for i, s in enumerate(data) if not s.changes and keep(s)]
            fa = sum(len(predictions[name][i]) for i in idx)
            cells.append(f"{fa / len(idx):>10.2f}" if idx else f"{'-':>10}")
        out(f"    {name:<18}{''.join(cells)}")
    out("")

    out("  Ramps and creeps (no step anywhere; what history analyze reports):")
    ramp_share = showcase(
        out,
        "+35% over 100 runs, CoV 3%",
        seed,
        lambda s: hs.creeping(np.random.default_rng(s), 100, 0.35, 0.03),
    )
    showcase(
        out,
        "+35% over runs 50-150 of 200, CoV 1%",
        seed,
        lambda s: hs.creeping(np.random.default_rng(s), 100, 0.35, 0.01, flat=50),
    )
    creep_share = showcase(
        out,
        "+8% over 160 runs, CoV 3%",
        seed,
        lambda s: hs.creeping(np.random.default_rng(s), 160, 0.08, 0.03),
    )
    result["ramp one finding"] = ramp_share
    result["creep reported"] = creep_share
    out("")

    series = hs.simulate_series(
        np.random.default_rng(seed + 1), RUNTIME_LENGTH, 0.03, n_changes=RUNTIME_CHANGES
    )
    pg_time = _timed(perfgate_detector, series.values)
    result["runtime perfgate"] = pg_time
    line = (
        f"  Runtime on one {RUNTIME_LENGTH:,}-run series ({RUNTIME_CHANGES} steps, CoV 3%, "
        f"spikes; median of 3): perfgate {pg_time:.3f} s"
    )
    if otava is not None:
        ot_time = _timed(otava, series.values)
        result["runtime Otava"] = ot_time
        line += f", Otava {ot_time:.3f} s"
    out(line)

    if otava is not None:
        f1 = result["f1 perfgate"]
        met = (
            f1 > result["f1 Otava (defaults)"]
            and f1 > result["f1 no change points"]
            and result["runtime perfgate"] <= result["runtime Otava"]
        )
        out(
            "  Target (perfgate F1 above Otava's and the no-change predictor's, runtime at most "
            f"Otava's): {'met' if met else 'NOT met'}"
        )
    f1, fa = result["f1 perfgate"], result["fa perfgate"]
    out(
        f"  Target (perfgate F1 >= {TARGET_F1:.2f} with <= {TARGET_FALSE_ALARMS:g} false alarms "
        f"per 100 change-free series): F1 {f1:.3f}, {fa:.1f} per 100: "
        f"{'met' if f1 >= TARGET_F1 and fa <= TARGET_FALSE_ALARMS else 'NOT met'}"
    )
    out(f"  (history bench took {time.perf_counter() - started:.1f} s)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=hs.BENCH_SEED)
    parser.add_argument("--per-cov", type=int, default=100)
    args = parser.parse_args(argv)
    run(print, seed=args.seed, per_cov=args.per_cov)
    return 0


if __name__ == "__main__":
    sys.exit(main())
