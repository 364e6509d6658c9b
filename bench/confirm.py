"""``run --confirm``: false alarms and power without confirming, with the rule before issue
2.2 and with perfgate's rule (:mod:`perfgate.stats.sequential`), side by side.

A gate of 20 benchmarks of one metric each (step time), 30 runs of history x 3 repeats; the
current run has 3 repeats, and confirming adds N = 3 more in the same job (simulated by
``bench/gate_sim.py``: job SD + process SD + step noise, spikes and stalls; the extra repeats
share the current run's job factor). Every verdict comes from perfgate's real
``compare_candidates``, each rule taking the same path as ``run --confirm`` then ``gate``:

* **none**: the gate at ALPHA on the 3 repeats.
* **before 2.2**: each benchmark judged inconclusive or a regression (alone, as the old
  ``confirm_and_record`` judged it) gets extra repeats one at a time, each look at its
  O'Brien-Fleming alpha-spending increment (the original look's share handed on), stopping
  once not inconclusive; the gate then judges every run at its last look's level.
* **perfgate**: the plan of :func:`perfgate.stats.sequential.plan` from each benchmark's
  window; look 0 judged at the plan's level, a regression stands, an inconclusive
  benchmark gets the 3 repeats; the gate judges confirmed runs at the plan's level, the
  others at ALPHA.

Printed per noise model: the share of A/A gates (no change anywhere) with any false
regression, and power: the share of gates where one benchmark slowed by 5% or 10% (the
other 19 unchanged) has it flagged as a regression; plus the extra repeats run per gate.
Target: perfgate's confirming has power >= not confirming, at a gate false-alarm rate <= 1%.

Run from the repository root with the virtual environment active::

    python bench/confirm.py                 # about 10 minutes on 2 cores
    python bench/confirm.py --scale 0.1     # smaller, ~1 minute
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gate_sim  # noqa: E402
from gate_sim import NoiseModel  # noqa: E402

from perfgate.metrics import CATALOGUE  # noqa: E402
from perfgate.models import Comparison, Direction, RunPoint, Verdict  # noqa: E402
from perfgate.stats import ALPHA, Candidate, compare_candidates, sequential  # noqa: E402

GATE = 20
WINDOW = 30
REPEATS = 3
EXTRA = 3
EFFECTS = (0.0, 0.05, 0.10)
POLICY = CATALOGUE["step_time_ms"].policy
RULES = ("none", "before 2.2", "perfgate")
CHUNK = 25
"""Gates per task (one seed each)."""

_T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _point(i: int, benchmark: str, reps: Sequence[float]) -> RunPoint:
    return RunPoint(
        run_id=f"{benchmark}-{i}",
        benchmark=benchmark,
        metric="step_time_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        branch="main" if i < WINDOW else "feat",
        commit=f"{i:07x}",
        fingerprint_key="sim",
        started_at=_T0 + timedelta(hours=i),
        centre=float(statistics.median(reps)),
        repeat_centres=tuple(float(x) for x in reps),
    )


class Gate:
    """One simulated gate: per benchmark its window and its current run's 3 + EXTRA repeats."""

    def __init__(self, centres: np.ndarray) -> None:
        self.names = [f"b{j:02d}" for j in range(centres.shape[0])]
        self.windows = [
            tuple(_point(i, name, centres[j, i, :REPEATS]) for i in range(WINDOW))
            for j, name in enumerate(self.names)
        ]
        self.current = [centres[j, WINDOW, :] for j in range(len(self.names))]

    def candidate(self, j: int, repeats: int, alpha: float = ALPHA) -> Candidate:
        point = _point(WINDOW, self.names[j], self.current[j][:repeats])
        return Candidate(point, self.windows[j], POLICY, alpha=alpha)

    def judge(self, looks: Sequence[tuple[int, float]]) -> list[Verdict]:
        """The whole gate judged at once: per benchmark (repeats used, level)."""
        cands = [self.candidate(j, n, a) for j, (n, a) in enumerate(looks)]
        return [c.verdict for c in compare_candidates(cands)]


def _obf_spent(t: float, alpha: float = ALPHA) -> float:
    z = float(special.ndtri(1.0 - alpha / 2.0))
    return 2.0 * float(special.ndtr(-z / math.sqrt(min(t, 1.0))))


def _obf_look_alpha(look: int) -> float:
    """The rule before 2.2: look ``look`` (1-based) of EXTRA, look 0's share handed on."""
    total = REPEATS + EXTRA
    before = 0.0 if look == 1 else _obf_spent((REPEATS + look - 1) / total)
    return _obf_spent((REPEATS + look) / total) - before


def rule_none(gate: Gate) -> tuple[list[Verdict], int]:
    return gate.judge([(REPEATS, ALPHA)] * len(gate.names)), 0


def rule_before(gate: Gate) -> tuple[list[Verdict], int]:
    looks, extra = [], 0
    for j in range(len(gate.names)):
        (first,) = compare_candidates([gate.candidate(j, REPEATS)])
        n, alpha = REPEATS, ALPHA
        if first.verdict in (Verdict.INCONCLUSIVE, Verdict.REGRESSION):
            for look in range(1, EXTRA + 1):
                n, alpha = REPEATS + look, _obf_look_alpha(look)
                extra += 1
                (c,) = compare_candidates([gate.candidate(j, n, alpha)])
                if c.verdict is not Verdict.INCONCLUSIVE:
                    break
        looks.append((n, alpha))
    return gate.judge(looks), extra


def _tested(comparisons: Sequence[Comparison]) -> int:
    return sum(1 for c in comparisons if c.p_value is not None)


def rule_perfgate(gate: Gate) -> tuple[list[Verdict], int]:
    m = len(gate.names)
    plain = compare_candidates([gate.candidate(j, REPEATS) for j in range(m)])
    tests = _tested(plain)
    plans = [
        sequential.plan(
            [
                sequential.look_correlation(
                    gate.windows[j], initial_repeats=REPEATS, extra_repeats=EXTRA
                )
            ],
            tests=tests,
        )
        for j in range(m)
    ]
    look0 = compare_candidates(
        [gate.candidate(j, REPEATS, p.alpha if p.confirm else ALPHA) for j, p in enumerate(plans)]
    )
    looks, extra = [], 0
    for j, p in enumerate(plans):
        if p.reason or sequential.needs_confirming([look0[j]]):
            looks.append((REPEATS, ALPHA))
        else:
            looks.append((REPEATS + EXTRA, p.alpha))
            extra += EXTRA
    return gate.judge(looks), extra


RULE_FNS: dict[str, Callable[[Gate], tuple[list[Verdict], int]]] = {
    "none": rule_none,
    "before 2.2": rule_before,
    "perfgate": rule_perfgate,
}


def task(model: NoiseModel, effect: float, key: tuple[int, ...], gates: int) -> dict[str, list]:
    """``gates`` gates from seed ``gate_sim.rng_for(*key)``; per rule, per gate, (false
    regressions among the unchanged benchmarks, slowed benchmark flagged, extra repeats)."""
    rng = gate_sim.rng_for(*key)
    series = gate_sim.simulate_series(
        rng, model, GATE * gates, WINDOW + 1, REPEATS + EXTRA, gate_size=GATE
    )
    centres = series.centres
    if effect:
        centres = centres.copy()
        centres[::GATE, WINDOW, :] *= 1.0 + effect  # the first benchmark of each gate
    out: dict[str, list] = {r: [] for r in RULES}
    for g in range(gates):
        gate = Gate(centres[g * GATE : (g + 1) * GATE])
        for name, fn in RULE_FNS.items():
            verdicts, extra = fn(gate)
            first = 1 if effect else 0
            false = sum(v is Verdict.REGRESSION for v in verdicts[first:])
            hit = bool(effect) and verdicts[0] is Verdict.REGRESSION
            out[name].append((false, hit, extra))
    return out


def _pct(k: int, n: int) -> str:
    """Share with a 95% Wilson interval."""
    if n == 0:
        return "-"
    p, z = k / n, 1.96
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"{100 * p:5.1f}% [{100 * max(mid - half, 0):.1f}-{100 * (mid + half):.1f}]"


def run(out: Callable[[str], None], *, scale: float, jobs: int) -> None:
    models = (gate_sim.mixed_model(0.03), gate_sim.job_dominated_model())
    sizes = {0.0: max(int(975 * scale), CHUNK), 0.05: max(int(375 * scale), CHUNK)}
    sizes[0.10] = sizes[0.05]
    out(
        f"bench/confirm.py: {GATE} benchmarks per gate, {WINDOW} runs x {REPEATS} repeats of "
        f"history, current run {REPEATS} repeats + {EXTRA} extra in the same job; ALPHA {ALPHA}"
    )
    out(f"seeds: gate_sim.rng_for(model, effect index, chunk), BASE_SEED {gate_sim.BASE_SEED}")
    out(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs), jobs {jobs}")
    started = time.time()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {}
        for mi, model in enumerate(models):
            for ei, effect in enumerate(EFFECTS):
                chunks = -(-sizes[effect] // CHUNK)
                futures[mi, ei] = [
                    pool.submit(task, model, effect, (mi, ei, c), CHUNK) for c in range(chunks)
                ]
        results: dict[tuple[int, int], dict[str, list]] = {}
        for k, fs in futures.items():
            merged: dict[str, list] = {r: [] for r in RULES}
            for f in fs:
                for r, rows in f.result().items():
                    merged[r].extend(rows)
            results[k] = merged
    for mi, model in enumerate(models):
        out("")
        out(model.describe())
        head = f"{'rule':<12} {'A/A gates with a false alarm':>30}"
        head += "".join(f" {'power at +' + format(e, '.0%'):>24}" for e in EFFECTS[1:])
        head += f" {'extra repeats/gate (A/A)':>26}"
        out(head)
        for r in RULES:
            aa = results[mi, 0][r]
            line = f"{r:<12} {_pct(sum(f > 0 for f, _, _ in aa), len(aa)):>30}"
            for ei in range(1, len(EFFECTS)):
                rows = results[mi, ei][r]
                line += f" {_pct(sum(h for _, h, _ in rows), len(rows)):>24}"
            line += f" {statistics.mean(x for _, _, x in aa):>26.2f}"
            out(line)
        for ei in range(1, len(EFFECTS)):
            none = results[mi, ei]["none"]
            mine = results[mi, ei]["perfgate"]
            gained = sum(h and not h0 for (_, h, _), (_, h0, _) in zip(mine, none, strict=True))
            lost = sum(h0 and not h for (_, h, _), (_, h0, _) in zip(mine, none, strict=True))
            out(
                f"  +{EFFECTS[ei]:.0%}: perfgate's confirming against none on the same gates: "
                f"{gained} detections added, {lost} lost, of {len(mine)}"
            )
    out("")
    out(f"wall time {time.time() - started:.0f} s")
    out(f"command: python bench/confirm.py --scale {scale:g} --jobs {jobs}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="simulation size (quick: 0.2)")
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 16))
    args = parser.parse_args(argv)
    run(print, scale=args.scale, jobs=args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
