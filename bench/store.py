"""The team store at a team's size, on SQLite and PostgreSQL, in one run.

For each engine: a store made by perfgate's own migrations (a temp SQLite file; a dedicated
PostgreSQL schema, dropped at the end) is filled in bulk with a year of a team's runs —
50 benchmarks x 2 testbeds x (365 nightly runs on ``main`` + 2,135 PR runs over 400 PR
branches) = 250,000 runs x 4 metrics = **1,000,000 measurement rows** (SQLAlchemy Core
executemany on SQLite, ``COPY`` on PostgreSQL), then ``ANALYZE``d. Then:

1. **gate history query latency**: for random (benchmark, testbed), the store reads of a
   gate — ``SqlStore.history`` of the last ``baseline_window`` (30) runs on ``main`` — and
   the whole window a gate builds, ``perfgate.app.baseline_window`` (history, the 100-run
   change-point scan, baseline reset and alert reads, and the change-point detection
   itself); p50 / p95 over 300 calls each. Targets (history query): p95 < 100 ms on
   PostgreSQL, < 200 ms on SQLite.
2. **recording throughput**: 8 writer processes, each opening its own store, save 50 runs
   each (4 metrics, 3 repeats x 30 samples, a profile summary) into the full store;
   runs/s = 400 / wall time; every run is checked to be there exactly once.

Run from the repository root with the virtual environment active::

    PERFGATE_BENCH_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/test python bench/store.py

(``PERFGATE_TEST_POSTGRES_URL`` is used when the BENCH variable is unset; without either,
SQLite only.) About 3-4 minutes on 2 cores, mostly populating.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import distinct, func, insert, make_url, select

from perfgate import app
from perfgate.config import Config
from perfgate.models import (
    BenchmarkSpec,
    CIContext,
    Direction,
    Fingerprint,
    GitContext,
    Measurement,
    OpStat,
    ProfileSummary,
    RunRecord,
    StepBreakdown,
)
from perfgate.stats import summarize
from perfgate.store import open_store
from perfgate.store.schema import measurements, runs

BENCHMARKS = 50
TESTBEDS = 2
NIGHTLY = 365
PR_RUNS = 2135
PR_BRANCHES = 400
METRICS = (
    ("step_time_ms", "ms", "lower"),
    ("throughput_samples_per_s", "1/s", "higher"),
    ("peak_memory_bytes", "bytes", "lower"),
    ("op_calls_per_step", "count", "lower"),
)
QUERIES = 300
WRITERS = 8
RUNS_PER_WRITER = 50
T_END = datetime(2026, 6, 1, tzinfo=timezone.utc)


def fingerprint(testbed: int) -> Fingerprint:
    return Fingerprint(
        device_kind="cpu",
        device_model=f"Bench CPU {testbed}",
        device_count=1,
        cpu_model=f"Bench CPU {testbed}",
        cpu_cores=16,
        os="Linux-x86_64",
        python_version="3.11",
        torch_version="2.13.0",
        timing_method="wall-sync-v1",
        params={"batch_size": 128, "threads": 1},
    )


def _run_rows(rng: random.Random) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
    """Every run row and measurement row of the year (measurement rows as tuples)."""
    fps = [fingerprint(t) for t in range(TESTBEDS)]
    fp_docs = [json.dumps(fp.to_dict(), separators=(",", ":")) for fp in fps]
    keys = [fp.key() for fp in fps]
    spec = json.dumps(BenchmarkSpec(name="b", workload="mlp").to_dict(), separators=(",", ":"))
    ci = json.dumps(CIContext().to_dict())
    run_rows: list[dict[str, Any]] = []
    m_rows: list[tuple[Any, ...]] = []
    for b in range(BENCHMARKS):
        name = f"bench_{b:02d}"
        base = 10.0 + b
        for t in range(TESTBEDS):
            slots: list[tuple[str, float]] = [("main", NIGHTLY - i) for i in range(NIGHTLY)]
            slots += [
                (f"pr-{rng.randrange(PR_BRANCHES)}", rng.uniform(0, 365)) for _ in range(PR_RUNS)
            ]
            for branch, days_ago in slots:
                run_id = uuid.UUID(int=rng.getrandbits(128)).hex
                started = T_END - timedelta(days=days_ago, seconds=rng.randrange(3600))
                run_rows.append(
                    {
                        "id": run_id,
                        "project": "team",
                        "benchmark": name,
                        "branch": branch,
                        "commit": run_id[:40].ljust(40, "0"),
                        "base_branch": "main",
                        "pr_number": None,
                        "fingerprint_key": keys[t],
                        "fingerprint": fp_docs[t],
                        "spec": spec,
                        "ci": ci,
                        "started_at": started,
                        "finished_at": started + timedelta(seconds=60),
                        "excluded": False,
                        "perfgate_version": "0.1.0",
                        "paired_with": None,
                    }
                )
                step = base * rng.lognormvariate(0, 0.02)
                values = (step, 128000.0 / step, 3.4e8, 42.0)
                for seq, ((metric, unit, direction), v) in enumerate(
                    zip(METRICS, values, strict=True)
                ):
                    reps = [round(v * rng.lognormvariate(0, 0.01), 6) for _ in range(3)]
                    centre = statistics.median(reps)
                    m_rows.append(
                        (
                            run_id, metric, seq, unit, direction, metric == "op_calls_per_step",
                            3, centre, centre, v, 0.01 * v, min(reps), max(reps), max(reps),
                            min(reps), max(reps), json.dumps(reps), json.dumps([[r] for r in reps]),
                            0, 0.005 * v,
                        )
                    )  # fmt: skip
    return run_rows, m_rows


M_COLUMNS = (
    "run_id", "metric", "seq", "unit", "direction", "deterministic", "n", "centre", "median",
    "mean", "mad", "p10", "p90", "p99", "min", "max", "repeat_centres", "samples", "dropped",
    "centre_se",
)  # fmt: skip


def populate(url: str, run_rows: list[dict[str, Any]], m_rows: list[tuple[Any, ...]]) -> float:
    t0 = time.perf_counter()
    store = open_store(url)
    engine = store.engine
    try:
        with engine.begin() as conn:
            for i in range(0, len(run_rows), 20_000):
                conn.execute(insert(runs), run_rows[i : i + 20_000])
            if engine.dialect.name == "postgresql":
                dbapi = conn.connection.driver_connection
                assert dbapi is not None
                with dbapi.cursor() as cur:
                    cols = ", ".join(f'"{c}"' for c in M_COLUMNS)
                    with cur.copy(f"COPY measurements ({cols}) FROM STDIN") as copy:
                        for row in m_rows:
                            copy.write_row(row)
            else:
                dicts = [dict(zip(M_COLUMNS, row, strict=True)) for row in m_rows]
                for i in range(0, len(dicts), 50_000):
                    conn.execute(insert(measurements), dicts[i : i + 50_000])
        with engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()
    finally:
        store.close()
    return time.perf_counter() - t0


def latency(url: str, keys: list[str]) -> dict[str, tuple[float, float]]:
    rng = random.Random(7)
    config = Config(project="team", database_url=url)
    out: dict[str, tuple[float, float]] = {}
    with open_store(url) as store:
        picks = [
            (f"bench_{rng.randrange(BENCHMARKS):02d}", rng.choice(keys)) for _ in range(QUERIES)
        ]
        for label, call in (
            (
                "history (30 runs)",
                lambda b, k: store.history(
                    project="team", benchmark=b, branch="main", fingerprint_key=k, limit=30
                ),
            ),
            (
                "gate window (all reads + change points)",
                lambda b, k: app.baseline_window(
                    config, store, benchmark=b, fingerprint_key=k, against="main"
                ),
            ),
        ):
            times = []
            for b, k in picks[:10]:
                call(b, k)  # warm
            for b, k in picks:
                t0 = time.perf_counter()
                got = call(b, k)
                times.append((time.perf_counter() - t0) * 1000)
                assert got
            times.sort()
            out[label] = (statistics.median(times), times[int(0.95 * len(times)) - 1])
    return out


def _writer(url: str, writer: int, start: Any) -> None:
    rng = random.Random(writer)
    start.wait()
    with open_store(url) as store:
        for i in range(RUNS_PER_WRITER):
            reps = [[10.0 * rng.lognormvariate(0, 0.02) for _ in range(30)] for _ in range(3)]
            ms = [
                Measurement("step_time_ms", "ms", Direction.LOWER_IS_BETTER,
                            tuple(map(tuple, reps)), summarize(reps, steady=True)),
                Measurement("throughput_samples_per_s", "1/s", Direction.HIGHER_IS_BETTER,
                            tuple(tuple(12800 / x for x in r) for r in reps),
                            summarize([[12800 / x for x in r] for r in reps], steady=True)),
                Measurement("peak_memory_bytes", "bytes", Direction.LOWER_IS_BETTER,
                            ((3.4e8,),), summarize([[3.4e8]])),
                Measurement("op_calls_per_step", "count", Direction.LOWER_IS_BETTER,
                            ((42.0,),), summarize([[42.0]]), deterministic=True),
            ]  # fmt: skip
            profile = ProfileSummary(
                source="torch.profiler",
                steps=3,
                ops=tuple(OpStat(f"aten::op{j}", "cpu", 3.0, 1.0, 1.0) for j in range(20)),
                breakdown=StepBreakdown(step_ms=10.0, compute_ms=9.0, free_ms=1.0),
            )
            now = datetime.now(timezone.utc)
            store.save_run(
                RunRecord(
                    id=f"writer{writer}-{i:03d}-{uuid.uuid4().hex[:8]}",
                    project="team",
                    benchmark=f"bench_{rng.randrange(BENCHMARKS):02d}",
                    fingerprint=fingerprint(0),
                    git=GitContext(commit="f" * 40, branch=f"pr-{writer}"),
                    ci=CIContext(),
                    started_at=now,
                    finished_at=now,
                    measurements=tuple(ms),
                    spec=BenchmarkSpec(name="b", workload="mlp"),
                    profile=profile,
                )
            )


def throughput(url: str) -> tuple[float, int]:
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(url, w, start)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    time.sleep(0.5)
    t0 = time.perf_counter()
    start.set()
    for p in procs:
        p.join()
    wall = time.perf_counter() - t0
    if any(p.exitcode != 0 for p in procs):
        raise SystemExit("a writer failed")
    with open_store(url) as store, store.engine.connect() as conn:
        n = conn.execute(
            select(func.count(distinct(runs.c.id)), func.count()).where(
                runs.c.id.startswith("writer")
            )
        ).one()
    assert n[0] == n[1] == WRITERS * RUNS_PER_WRITER, n
    return WRITERS * RUNS_PER_WRITER / wall, int(n[0])


def main() -> int:
    pg = os.environ.get("PERFGATE_BENCH_POSTGRES_URL") or os.environ.get(
        "PERFGATE_TEST_POSTGRES_URL"
    )
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}")  # fmt: skip
    t0 = time.perf_counter()
    run_rows, m_rows = _run_rows(random.Random(1))
    print(f"generated {len(run_rows):,} runs, {len(m_rows):,} measurement rows "
          f"in {time.perf_counter() - t0:.1f}s")  # fmt: skip
    keys = [fingerprint(t).key() for t in range(TESTBEDS)]
    results: list[tuple[str, float, dict[str, tuple[float, float]], float]] = []
    targets = {"sqlite": 200.0, "postgresql": 100.0}
    engines: list[str] = ["sqlite"] + (["postgresql"] if pg else [])
    with tempfile.TemporaryDirectory(prefix="perfgate-bench-store-") as tmp:
        for engine in engines:
            schema = None
            if engine == "sqlite":
                url = f"sqlite:///{Path(tmp) / 'store.db'}"
            else:
                import psycopg

                assert pg is not None
                schema = f"perfgate_bench_{uuid.uuid4().hex[:10]}"
                admin_url = make_url(pg).set(drivername="postgresql")
                admin = admin_url.render_as_string(hide_password=False)
                with psycopg.connect(admin, autocommit=True) as c:
                    c.execute(f'CREATE SCHEMA "{schema}"')
                url = (
                    make_url(pg)
                    .update_query_dict({"options": f"-csearch_path={schema}"})
                    .render_as_string(hide_password=False)
                )
            try:
                fill = populate(url, run_rows, m_rows)
                print(f"[{engine}] populated in {fill:.1f}s")
                lat = latency(url, keys)
                for label, (p50, p95) in lat.items():
                    print(f"[{engine}] {label}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
                rate, n = throughput(url)
                print(f"[{engine}] recording: {rate:.0f} runs/s with {WRITERS} writers "
                      f"({n} runs, each stored once)")  # fmt: skip
                results.append((engine, fill, lat, rate))
            finally:
                if schema is not None:
                    import psycopg

                    with psycopg.connect(admin, autocommit=True) as c:
                        c.execute(f'DROP SCHEMA "{schema}" CASCADE')
    print()
    print("| engine | measurement rows | history p50 / p95 (ms) | gate window p50 / p95 (ms) "
          "| target (history p95) | 8 writers (runs/s) |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for engine, _, lat, rate in results:
        h, w = lat["history (30 runs)"], lat["gate window (all reads + change points)"]
        ok = "ok" if h[1] < targets[engine] else "MISSED"
        print(f"| {engine} | {len(m_rows):,} | {h[0]:.1f} / {h[1]:.1f} | {w[0]:.1f} / "
              f"{w[1]:.1f} | < {targets[engine]:.0f} ms: {ok} | {rate:.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
