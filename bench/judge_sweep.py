"""The gate's verdicts off the bench's rows: A/A and the stated MDE over a grid of gate shapes.

``bench/judge_shapes.py`` measures issue 37's rows, each a nuisance on one base gate (10
benchmarks x 30 runs x 3 repeats, run CoV ~1.8%). A model tuned on those rows can still
fail on a gate of another size, a shorter or longer history, another number of repeats or
another mix of the noise components. This script judges gates drawn over that grid, with
the same generator (``judge_shapes.draw``) and through ``perfgate.judge``:

* **Grid** (Gaussian components): benchmarks 1, 2, 3, 5, 10, 30 x runs of history 5, 12,
  30, 80 x repeats 1, 3, 6 x a noise mix: ``job`` (job 2%, benchmark-run 0.5%, process
  0.8%), ``bench`` (0.4 / 2 / 0.8%), ``proc`` (0.3 / 0.4 / 3%) or ``even`` (1 / 1 / 1.6%,
  judge_shapes' base). ``--cells`` of the 288 combinations, drawn once with ``--seed``.
* **Nuisances off the bench**: judge_shapes' nuisances at other sizes, gates and
  histories (t3 tails in a gate of 3 or 20, over 12 or 80 runs; t2.5 and t5 tails; a
  +15% job mode in half the jobs; a 5% cycle of period 10; pools 30% apart in 3-job
  stretches; a runner 2x noisier for 10 runs; main +20% on every benchmark; one benchmark
  with 3-4 runs of history and a job part larger than the process part; ...).

Per cell: the share of A/A gates with any ``regression`` (target <= 1%) with its 95%
Wilson interval, and, for the grid, the share of gates in which benchmark 0's stated
``mde_pct``, injected into the same gate's current run, is called a regression (target
70-90%). A cell is flagged ``A/A!`` when its interval lies above 1%, ``MDE!`` when the
calibration interval misses 70-90%.

Each gate draws from its own generator (the cell and the gate's index), so the numbers do
not depend on ``--jobs``. ``perfgate`` comes from the environment (``PYTHONPATH`` first)::

    python bench/judge_sweep.py                 # ~3 min on 2 cores
    python bench/judge_sweep.py --gates 600 --only t3
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_shapes import Shape, _finite, _inputs, _key, _rate, draw, wilson  # noqa: E402

MIXES = {
    "job": (0.02, 0.005, 0.008),
    "bench": (0.004, 0.02, 0.008),
    "proc": (0.003, 0.004, 0.03),
    "even": (0.01, 0.01, 0.016),
}
"""Log-scale SDs of the job, benchmark-run and process components."""
BENCHMARKS = (1, 2, 3, 5, 10, 30)
RUNS = (5, 12, 30, 80)
REPEATS = (1, 3, 6)

_B = Shape()
NUISANCES = {
    "t3 benchmark tails, gate of 3": dataclasses.replace(_B, benchmarks=3, bench_df=3),
    "t3 benchmark tails, gate of 20": dataclasses.replace(_B, benchmarks=20, bench_df=3),
    "t3 benchmark tails, 12 runs": dataclasses.replace(_B, runs=12, bench_df=3),
    "t3 benchmark tails, 80 runs": dataclasses.replace(_B, runs=80, bench_df=3),
    "t3 benchmark tails, gate of 5, 1 repeat": dataclasses.replace(
        _B, benchmarks=5, repeats=1, bench_df=3
    ),
    "t2.5 benchmark tails": dataclasses.replace(_B, bench_df=2.5),
    "t5 benchmark tails": dataclasses.replace(_B, bench_df=5),
    "t3 process tails, 1 repeat": dataclasses.replace(_B, repeats=1, proc_df=3),
    "t3 job tails, gate of 3": dataclasses.replace(_B, benchmarks=3, job_df=3),
    "t3 in every component, 1 benchmark": dataclasses.replace(
        _B, benchmarks=1, job_df=3, bench_df=3, proc_df=3
    ),
    "job mode +15% in 50% of jobs": dataclasses.replace(_B, job_mode=0.5, mode_size=math.log(1.15)),
    "benchmark mode +20% in 10%": dataclasses.replace(_B, bench_mode=0.1, mode_size=math.log(1.2)),
    "process mode +30% in 5%, 1 repeat": dataclasses.replace(
        _B, repeats=1, proc_mode=0.05, mode_size=math.log(1.3)
    ),
    "main drifting 1%/run, 12 runs": dataclasses.replace(_B, runs=12, drift=0.01),
    "5% load cycle, period 10": dataclasses.replace(_B, cycle=0.05, cycle_period=10),
    "pools 30% apart, 3-job stretches": dataclasses.replace(
        _B, pools=math.log(1.3), pool_stretch=3
    ),
    "AR(1) job noise phi 0.95, 3%": dataclasses.replace(_B, job_phi=0.95, job_sd=0.03),
    "one benchmark 5x noisier, last 3 runs": dataclasses.replace(
        _B, noisier_bench=5, noisier_runs=3
    ),
    "runner 2x noisier, last 10 runs": dataclasses.replace(_B, noisier_runner=2, noisier_runs=10),
    "main +20% 1-6 runs before fork, every benchmark": dataclasses.replace(
        _B, main_shift=math.log(1.2), shift_all=True
    ),
    "main -10% 1-6 runs before fork, one benchmark": dataclasses.replace(
        _B, main_shift=math.log(0.9)
    ),
    "one run 3x slow, gate of 3": dataclasses.replace(_B, benchmarks=3, outlier=math.log(3)),
    "reverted +30% blip, 1 benchmark": dataclasses.replace(_B, benchmarks=1, blip=math.log(1.3)),
    "slow pool +30% in 10-20% of jobs": dataclasses.replace(
        _B, slow_pool=(0.1, 0.2), slow_pool_size=math.log(1.3)
    ),
    # one benchmark, a short history, the job part larger than the process part: the F test
    # that pools the repeats' degrees of freedom cannot see the job part in 2-3 of them
    "1 benchmark, 3 runs x 3 repeats, job 3% / process 2%": Shape(
        benchmarks=1, runs=3, repeats=3, job_sd=0.03, bench_sd=0.0, proc_sd=0.02
    ),
    "1 benchmark, 3 runs x 5 repeats, job 3% / process 2%": Shape(
        benchmarks=1, runs=3, repeats=5, job_sd=0.03, bench_sd=0.0, proc_sd=0.02
    ),
    "1 benchmark, 4 runs x 3 repeats, job 3% / process 2%": Shape(
        benchmarks=1, runs=4, repeats=3, job_sd=0.03, bench_sd=0.0, proc_sd=0.02
    ),
}


def grid(cells: int, seed: int) -> list[tuple[str, Shape]]:
    """``cells`` of the grid's combinations, drawn without replacement with ``seed``."""
    every = [(b, n, r, mix) for b in BENCHMARKS for n in RUNS for r in REPEATS for mix in MIXES]
    pick = np.random.default_rng(seed).choice(len(every), min(cells, len(every)), replace=False)
    out = []
    for b, n, r, mix in (every[i] for i in sorted(pick)):
        job, bench, proc = MIXES[mix]
        shape = Shape(benchmarks=b, runs=n, repeats=r, job_sd=job, bench_sd=bench, proc_sd=proc)
        out.append((f"{b} benchmarks x {n} runs x {r} repeats, {mix}", shape))
    return out


def _cell(name: str, shape: Shape, key: int, gates: int, calibrate: bool) -> tuple:
    """(false gates, calibration caught, calibration tried) over ``gates`` gates."""
    import perfgate

    false = caught = tried = 0
    for i in range(gates):
        x = draw(shape, np.random.default_rng([key, i]))[0]
        got = perfgate.judge(*_inputs(x))
        false += any(j.verdict == "regression" for j in got.values())
        mde = _finite(got["b0"].mde_pct)
        if not calibrate or math.isnan(mde):
            continue
        x[0, shape.runs, :] += math.log1p(mde / 100.0)
        tried += 1
        caught += perfgate.judge(*_inputs(x))["b0"].verdict == "regression"
    return name, false, caught, tried


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gates", type=int, default=150, help="gates per cell (default 150)")
    ap.add_argument("--cells", type=int, default=48, help="grid cells (default 48 of 288)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="cells whose name contains this")
    args = ap.parse_args(argv)

    import perfgate

    env = f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH") else ""
    print(f"`{env}python bench/judge_sweep.py {' '.join(argv or sys.argv[1:])}`".replace(" `", "`"))
    print(
        f"\nperfgate {perfgate.__version__} from {os.path.dirname(perfgate.__file__)}; "
        f"{args.gates} gates a cell, seed {args.seed}\n"
    )
    cells = [(n, s, True) for n, s in grid(args.cells, args.seed)]
    cells += [(n, s, False) for n, s in NUISANCES.items()]
    cells = [c for c in cells if args.only.lower() in c[0].lower()]
    print("| cell | A/A false gates [95% CI] | stated MDE caught [95% CI] | flag |")
    print("| --- | --- | --- | --- |")
    t0 = time.perf_counter()
    flagged = 0
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [
            pool.submit(_cell, name, shape, _key(args.seed, name), args.gates, calib)
            for name, shape, calib in cells
        ]
        for f in futures:
            name, false, caught, tried = f.result()
            flags = []
            if wilson(false, args.gates)[0] > 0.01:
                flags.append("A/A!")
            lo, hi = wilson(caught, tried)
            if tried and (hi < 0.70 or lo > 0.90):
                flags.append("MDE!")
            flagged += bool(flags)
            print(
                f"| {name} | {_rate(false, args.gates)} | {_rate(caught, tried)} "
                f"| {' '.join(flags)} |",
                flush=True,
            )
    print(f"\n{len(cells)} cells, {flagged} flagged; {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
