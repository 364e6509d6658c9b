"""Shared builders and store fixtures for the tests.

Two families of records:

- ``record`` / ``fingerprint`` / ``fill``: a history of synthetic runs (one step-time metric,
  three repeats of log-normal noise around a level, one run a minute from ``T0``) for the gate,
  history, site, export and forge tests;
- ``make_run`` / ``make_measurement`` / ``make_profile`` / ``make_fingerprint``: one fully
  populated record (two metrics, a profile, CI context) for the store's round trips.

The fixtures ``store_url``, ``store`` and ``raw`` run a test on a fresh SQLite file and, when
PERFGATE_TEST_POSTGRES_URL is set, on a fresh PostgreSQL schema.

The builders are plain functions; a test module imports them with ``from conftest import ...``
(pytest puts tests/ on ``sys.path``, as it does for fake_forge and npu_standin).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, create_engine, inspect, make_url

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
    Summary,
)
from perfgate.stats import summarize
from perfgate.store import SqlStore, open_store

UTC = timezone.utc
PG_ENV = "PERFGATE_TEST_POSTGRES_URL"

# -- a history of synthetic runs ---------------------------------------------------------------

T0 = datetime(2026, 3, 1, tzinfo=UTC)  # the start of record(0, ...)


def fingerprint(**changes: object) -> Fingerprint:
    """The environment of every synthetic run, with ``changes`` applied."""
    base: dict[str, object] = dict(
        device_kind="cpu",
        device_model="Xeon",
        device_count=1,
        cpu_model="Xeon",
        cpu_cores=2,
        os="Linux-x86_64",
        python_version="3.11",
        torch_version="2.13.0",
        timing_method="wall-sync-v1",
        params={"batch_size": 128, "threads": 1},
    )
    base.update(changes)
    return Fingerprint(**base)  # type: ignore[arg-type]


def record(
    i: int,
    step_ms: float,
    *,
    branch: str = "main",
    benchmark: str = "mlp",
    noise: float = 0.01,
    fp: Fingerprint | None = None,
    seed: int = 0,
    repeats: int = 3,
) -> RunRecord:
    """Run ``i`` of ``benchmark`` on ``branch``: ``repeats`` repeats of 30 steps around
    ``step_ms`` (log-normal noise ``noise``, fixed by ``seed`` and ``i``), started ``i``
    minutes after T0."""
    rng = np.random.default_rng(seed * 1000 + i)
    reps = [tuple(step_ms * rng.lognormal(0, noise, 30)) for _ in range(repeats)]
    step = Measurement(
        "step_time_ms", "ms", Direction.LOWER_IS_BETTER, tuple(reps), summarize(reps, steady=True)
    )
    return RunRecord(
        id=f"{benchmark}-{branch}-{i:03d}",
        project="default",
        benchmark=benchmark,
        fingerprint=fp or fingerprint(),
        git=GitContext(commit=f"{i:040x}", branch=branch),
        ci=CIContext(),
        started_at=T0 + timedelta(minutes=i),
        finished_at=T0 + timedelta(minutes=i, seconds=30),
        measurements=(step,),
        spec=BenchmarkSpec(name=benchmark, workload="mlp"),
    )


def fill(url: str, records: list[RunRecord]) -> None:
    """Save ``records`` in the store at ``url``."""
    store = open_store(url)
    try:
        for r in records:
            store.save_run(r)
    finally:
        store.close()


# -- one fully populated record -------------------------------------------------------------

RUN_T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)  # make_run's default start


def make_fingerprint(**changes: object) -> Fingerprint:
    base = Fingerprint(
        device_kind="cpu",
        device_model="Test CPU",
        device_count=1,
        cpu_model="Test CPU @ 3.0GHz",
        cpu_cores=8,
        os="Linux",
        python_version="3.11.7",
        torch_version="2.4.0",
        timing_method="perf_counter",
        params={"batch_size": 32, "dtype": "float32", "lr": 0.01, "amp": False},
        os_release="6.1.0",
        perfgate_version="0.1.0",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def make_measurement(
    metric: str,
    repeats: Sequence[Sequence[float]],
    *,
    unit: str = "ms",
    direction: Direction = Direction.LOWER_IS_BETTER,
    deterministic: bool = False,
) -> Measurement:
    flat = sorted(x for rep in repeats for x in rep)
    median = statistics.median(flat)
    summary = Summary(
        n=len(flat),
        centre=statistics.median(statistics.median(rep) for rep in repeats),
        median=median,
        mean=statistics.fmean(flat),
        mad=statistics.median(abs(x - median) for x in flat),
        p10=flat[len(flat) // 10],
        p90=flat[(len(flat) * 9) // 10],
        p99=flat[-1],
        minimum=flat[0],
        maximum=flat[-1],
        repeat_centres=tuple(statistics.median(rep) for rep in repeats),
        dropped=1 if metric == "step_time_ms" else 0,
        centre_se=0.125 if metric == "step_time_ms" else None,
    )
    return Measurement(
        metric=metric,
        unit=unit,
        direction=direction,
        repeats=tuple(tuple(float(x) for x in rep) for rep in repeats),
        summary=summary,
        deterministic=deterministic,
    )


def default_measurements(scale: float = 1.0) -> tuple[Measurement, ...]:
    return (
        make_measurement(
            "step_time_ms", [[10.0 * scale, 10.5 * scale, 9.75 * scale], [11.0 * scale, 10.25]]
        ),
        make_measurement(
            "throughput_samples_per_s",
            [[3200.0 / scale, 3150.5], [3100.25, 3300.0 / scale, 3000.0]],
            unit="samples/s",
            direction=Direction.HIGHER_IS_BETTER,
        ),
    )


def make_profile() -> ProfileSummary:
    return ProfileSummary(
        source="torch.profiler",
        steps=3,
        ops=(
            OpStat("aten::addmm", "cpu", 3.0, 1.25, 2.5, op_type="matmul", input_shapes=("32x64",)),
            OpStat("aten::relu", "cpu", 1.0, 0.125, 0.125),
        ),
        breakdown=StepBreakdown(step_ms=10.0, compute_ms=8.5, free_ms=1.5),
        peak_memory_bytes=123_456_789,
        memory_per_step_bytes=(1.0e6, 1.5e6, 1.25e6),
        device_busy_fraction=0.85,
        op_calls_per_step=42.0,
        kernel_launches_per_step=None,
        rank=0,
        raw_files=("trace.json.gz",),
        notes=("kernel_launches_per_step: CPU run has no kernels",),
    )


def make_run(
    run_id: str,
    *,
    project: str = "demo",
    benchmark: str = "mlp",
    branch: str = "main",
    started_at: datetime = RUN_T0,
    fingerprint: Fingerprint | None = None,
    measurements: tuple[Measurement, ...] | None = None,
    profile: ProfileSummary | None = None,
    excluded: bool = False,
) -> RunRecord:
    return RunRecord(
        id=run_id,
        project=project,
        benchmark=benchmark,
        fingerprint=fingerprint or make_fingerprint(),
        git=GitContext(commit=f"c0ffee{run_id}", branch=branch, base_branch="main"),
        ci=CIContext(provider="github", job_url="https://ci.example/1", trigger="push"),
        started_at=started_at,
        finished_at=started_at + timedelta(seconds=42, microseconds=123),
        measurements=default_measurements() if measurements is None else measurements,
        spec=BenchmarkSpec(name=benchmark, workload="mlp", params={"batch_size": 32}),
        profile=profile,
        excluded=excluded,
    )


# -- stores: SQLite, and PostgreSQL when PERFGATE_TEST_POSTGRES_URL is set --------------------


def _scrubbed(key: str) -> bool:
    """Whether ``key`` is left out of a command's environment (no CI context leaks in)."""
    return key.startswith(("GITHUB_", "CI_", "GITLAB")) or key in ("CI", "PERFGATE_DATABASE_URL")


def perfgate(
    cwd: Path, *args: str, db: str | None = None, spawn: bool = False
) -> subprocess.CompletedProcess[str]:
    """``perfgate ARGS`` in ``cwd``: with ``spawn``, the installed command in its own process;
    otherwise the same command group in this process (click's ``CliRunner``: no fresh
    interpreter; a run's repeats are real worker processes either way). Either way with the
    CI variables and the store URL removed from the environment (``db``: the store URL to
    set instead)."""
    if spawn:
        env = {k: v for k, v in os.environ.items() if not _scrubbed(k)}
        if db is not None:
            env["PERFGATE_DATABASE_URL"] = db
        return subprocess.run(
            [sys.executable, "-m", "perfgate", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    from click.testing import CliRunner

    from perfgate.cli import cli

    overrides: dict[str, str | None] = {k: None for k in os.environ if _scrubbed(k)}
    if db is not None:
        overrides["PERFGATE_DATABASE_URL"] = db
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        # catch_exceptions=False: a crash is the test's error, not an exit code
        result = CliRunner().invoke(
            cli, list(args), env=overrides, prog_name="perfgate", catch_exceptions=False
        )
    return subprocess.CompletedProcess(
        ["perfgate", *args], result.exit_code, result.stdout, result.stderr
    )


def _libpq_url(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to a fresh, empty database: a SQLite file, or a new PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set")
    psycopg = pytest.importorskip("psycopg")
    schema = f"perfgate_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_libpq_url(base), autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(_libpq_url(base), autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def raw(store_url: str) -> Iterator[Engine]:
    """A plain engine on the same database, for looking and tampering behind the store."""
    url = make_url(store_url)
    if url.get_backend_name() == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    engine = create_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


def count(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql(f"SELECT COUNT(*) FROM {table}").scalar_one())


def snapshot(url: str, engine: Engine) -> object:
    """Enough of a database's state to tell whether opening it changed anything."""
    if is_sqlite(url):
        return sqlite_path(url).read_bytes()
    with engine.connect() as conn:
        tables = sorted(inspect(conn).get_table_names())
        contents = {
            t: sorted(map(tuple, conn.exec_driver_sql(f'SELECT * FROM "{t}"').all()))
            for t in tables
        }
    return tables, contents
