"""`perfgate report --html` at a team's size: rendering time and output size.

A temp SQLite store is filled (``SqlStore.save_runs`` in batches) with 100 benchmarks x
1,000 runs: 900 on ``main`` (each benchmark with a level shift somewhere, so there are
change points) and 100 PR runs over 20 branches, each run with the 4 metrics a real run
has (step time and throughput from 3 repeats, peak memory, op calls). The latest run of each
benchmark carries a real profile (the torch trace fixture; every tenth benchmark the
2-rank Ascend fixture). Then ``perfgate.app.site.build_site`` (what ``perfgate report --html``
runs: the store reads, change points, the gate's comparison, rendering, writing) is timed,
with its parts, and the site's size is summed. Targets: < 10 s and < 20 MB.

Run from the repository root with the virtual environment active::

    python bench/report.py [--benchmarks 100] [--runs 1000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from perfgate.app.site import build_site, default_jobs, gather_site, write_site
from perfgate.config import Config
from perfgate.models import (
    BenchmarkSpec,
    CIContext,
    Direction,
    Fingerprint,
    GitContext,
    Measurement,
    RunRecord,
    Summary,
)
from perfgate.parsers.ascend import parse_ascend
from perfgate.parsers.torch_trace import parse_torch_trace
from perfgate.store import open_store

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
FP = Fingerprint(
    device_kind="npu",
    device_model="Ascend910B3",
    device_count=8,
    cpu_model="Kunpeng 920",
    cpu_cores=192,
    os="Linux-aarch64",
    python_version="3.11",
    torch_version="2.5.1",
    timing_method="wall-sync-v1",
    params={"batch_size": 64},
)


def _measurement(metric: str, unit: str, direction: Direction, reps: list[float]) -> Measurement:
    centre = sorted(reps)[len(reps) // 2]
    summary = Summary(
        n=30 * len(reps),
        centre=centre,
        median=centre,
        mean=sum(reps) / len(reps),
        mad=abs(reps[0] - centre),
        p10=min(reps),
        p90=max(reps),
        p99=max(reps),
        minimum=min(reps),
        maximum=max(reps),
        repeat_centres=tuple(reps),
    )
    return Measurement(metric, unit, direction, tuple((x,) for x in reps), summary)


def make_runs(n_bench: int, n_runs: int, rng: random.Random) -> list[list[RunRecord]]:
    torch_profile = parse_torch_trace(ROOT / "tests/data/torch_trace/mlp_cpu.pt.trace.json.gz")
    ranks = parse_ascend(ROOT / "tests/data/ascend/msinsight_pt_text_level1_2rank")
    n_pr = n_runs // 10
    n_main = n_runs - n_pr
    out = []
    for b in range(n_bench):
        name = f"model-{b:03d}"
        base = rng.uniform(5, 200)
        shift_at = rng.randrange(n_main // 5, n_main - 50)
        shift = rng.choice((0.85, 1.1, 1.2))
        runs = []
        for i in range(n_runs):
            pr = i % 10 == 9
            level = base * (shift if i * n_main // n_runs >= shift_at else 1.0)
            if pr:
                level *= rng.choice((1.0, 1.0, 1.05))
            reps = [level * rng.lognormvariate(0, 0.01) for _ in range(3)]
            branch = f"feature/pr-{b}-{i % 20}" if pr else "main"
            ms = (
                _measurement("step_time_ms", "ms", Direction.LOWER_IS_BETTER, reps),
                _measurement(
                    "throughput_samples_per_s",
                    "1/s",
                    Direction.HIGHER_IS_BETTER,
                    [64000.0 / x for x in reps],
                ),
                _measurement("peak_memory_bytes", "bytes", Direction.LOWER_IS_BETTER, [8e9] * 3),
                replace(
                    _measurement("op_calls_per_step", "count", Direction.LOWER_IS_BETTER, [412.0]),
                    deterministic=True,
                ),
            )
            started = T0 + timedelta(hours=i)
            runs.append(
                RunRecord(
                    id=f"{name}-{i:05d}-{rng.getrandbits(32):08x}",
                    project="default",
                    benchmark=name,
                    fingerprint=FP,
                    git=GitContext(commit=f"{rng.getrandbits(160):040x}", branch=branch),
                    ci=CIContext(),
                    started_at=started,
                    finished_at=started + timedelta(minutes=5),
                    measurements=ms,
                    spec=BenchmarkSpec(name=name, workload="mlp"),
                )
            )
        last_main = max(i for i, r in enumerate(runs) if r.git.branch == "main")
        if b % 10 == 0:
            runs[last_main] = replace(runs[last_main], profile=ranks[0], rank_profiles=ranks)
        else:
            runs[last_main] = replace(runs[last_main], profile=torch_profile)
        out.append(runs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", type=int, default=100)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--keep", type=Path, help="Write the site here and keep it.")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="perfgate-bench-report-"))
    try:
        url = f"sqlite:///{tmp / 'store.db'}"
        t = time.perf_counter()
        per_bench = make_runs(args.benchmarks, args.runs, random.Random(7))
        made = time.perf_counter() - t
        store = open_store(url)
        t = time.perf_counter()
        for runs in per_bench:
            for start in range(0, len(runs), 500):
                store.save_runs(runs[start : start + 500])
        filled = time.perf_counter() - t
        total_runs = sum(len(r) for r in per_bench)
        print(
            f"store: {args.benchmarks} benchmarks x {args.runs} runs = {total_runs:,} runs "
            f"x 4 metrics (made in {made:.1f} s, saved in {filled:.1f} s, "
            f"{(tmp / 'store.db').stat().st_size / 1e6:.0f} MB)"
        )
        out = args.keep or tmp / "site"
        if out.exists():
            shutil.rmtree(out)
        # one process: where the time goes
        t0 = time.perf_counter()
        site = gather_site(Config(), store, limit=args.runs)
        t1 = time.perf_counter()
        written = write_site(out, site)
        t2 = time.perf_counter()
        pages = written.files - 1
        biggest = max((p.stat().st_size for p in out.rglob("*.html")), default=0)
        changes = sum(len(m.changes) for b in site.benchmarks for m in b.metrics)
        del site
        # what `perfgate report --html` does by default: one worker process per CPU (<= 8)
        jobs = default_jobs()
        t3 = time.perf_counter()
        written = build_site(Config(), store, out, limit=args.runs, jobs=jobs, url=url)
        t4 = time.perf_counter()
        store.close()
        total = t4 - t3
        size_mb = written.bytes / 1e6
        print(f"change points: {changes}; pages: {pages}; largest page {biggest / 1e6:.2f} MB")
        print(f"1 process: gather (store reads, compare, change points) {t1 - t0:6.2f} s")
        print(f"1 process: render + write                               {t2 - t1:6.2f} s")
        print(f"1 process: total                                        {t2 - t0:6.2f} s")
        print(
            f"report --html ({jobs} worker processes):                  {total:6.2f} s   "
            f"target < 10 s   {'ok' if total < 10 else 'MISSED'}"
        )
        print(
            f"output size:                                          {size_mb:6.1f} MB  "
            f"target < 20 MB  {'ok' if size_mb < 20 else 'MISSED'}  (plotly.min.js "
            f"{(out / 'plotly.min.js').stat().st_size / 1e6:.1f} MB of it)"
        )
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(
            f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
            f"load {load:.2f}; python {sys.version.split()[0]}"
        )
        print(f"command: python bench/report.py --benchmarks {args.benchmarks} --runs {args.runs}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
