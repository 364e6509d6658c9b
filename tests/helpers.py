"""Plain builders and helpers shared by the tests (no fixtures: those are in conftest.py).

Two families of records:

- ``record`` / ``fingerprint`` / ``fill``: a history of synthetic runs (one step-time metric,
  three repeats of log-normal noise around a level, one run a minute from ``T0``) for the gate,
  history, site, export and forge tests;
- ``make_run`` / ``make_measurement`` / ``make_profile`` / ``make_fingerprint``: one fully
  populated record (two metrics, a profile, CI context) for the store's round trips.

``perfgate(cwd, *args)`` is the one way a test runs the command line (see its docstring; the
``cli`` fixture of conftest.py binds it to a temporary directory). ``is_sqlite``,
``sqlite_path``, ``count`` and ``snapshot`` look at a store's database behind its back.
``ci_env`` / ``github_env`` / ``gitlab_env`` / ``marked`` are a CI job's environment against
the loopback forge (tests/fake_forge.py) and its marked comments; ``creeping_runs``,
``spread_copy`` and ``seed_main`` are histories shared by more than one test module (a test
module never imports another).

A test module imports them with ``from helpers import ...``: pytest's default ``rootdir``
import mode puts tests/ on ``sys.path`` (it holds a conftest.py and no ``__init__.py``), as it
does for fake_forge and npu_standin.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from sqlalchemy import Engine, inspect

from perfgate.app.measure import measurement
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
from perfgate.store import open_store

if TYPE_CHECKING:
    from fake_forge import FakeForge

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


# -- the command line ---------------------------------------------------------------------


def _scrubbed(key: str) -> bool:
    """Whether ``key`` is left out of a command's environment (no CI context leaks in)."""
    return key.startswith(("GITHUB_", "CI_", "GITLAB")) or key in ("CI", "PERFGATE_DATABASE_URL")


Done = subprocess.CompletedProcess[str]  # what perfgate() returns: returncode, stdout, stderr


def perfgate(
    cwd: Path | None,
    *args: str,
    db: str | None = None,
    env: Mapping[str, str | None] | None = None,
    input: str | None = None,
    spawn: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``perfgate ARGS`` in ``cwd`` (None: the current directory): the one way a test runs
    the command line. Returns its exit code, stdout and stderr as a ``CompletedProcess``.

    By default the command group runs in this process (click's ``CliRunner``: no fresh
    interpreter; a run's repeats are real worker processes either way), and an uncaught
    exception is the test's error, not an exit code. With ``spawn``, the installed command
    runs in its own process: for a test that needs one (signals, a real process's exit code
    or streams, an interpreter without this one's imports). Either way the CI variables and
    the store URL are removed from the environment, then ``db`` (the store URL) and ``env``
    (a value of None removes the variable) are set. ``input`` is the command's stdin."""
    changes: dict[str, str | None] = {k: None for k in os.environ if _scrubbed(k)}
    if db is not None:
        changes["PERFGATE_DATABASE_URL"] = db
    changes.update(env or {})
    if spawn:
        environ = {k: v for k, v in os.environ.items() if k not in changes}
        environ.update({k: v for k, v in changes.items() if v is not None})
        return subprocess.run(
            [sys.executable, "-m", "perfgate", *args],
            cwd=cwd,
            env=environ,
            input=input,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    from click.testing import CliRunner

    from perfgate.cli import cli

    with pytest.MonkeyPatch.context() as mp:
        if cwd is not None:
            mp.chdir(cwd)
        result = CliRunner().invoke(
            cli, list(args), input=input, env=changes, prog_name="perfgate", catch_exceptions=False
        )
    return subprocess.CompletedProcess(
        ["perfgate", *args], result.exit_code, result.stdout, result.stderr
    )


# -- looking behind a store ------------------------------------------------------------------


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


# -- a forge's CI job (tests/fake_forge.py) ------------------------------------------------

TOKEN = "good-token-123"
HEAD = "c0ffee" + "0" * 34


def ci_env(**values: str) -> dict[str, str | None]:
    """The environment of a CI job: the runner's own CI variables removed, then ``values``."""
    env: dict[str, str | None] = {
        k: None
        for k in os.environ
        if k.startswith(("GITHUB_", "GITLAB_", "CI_", "RUNNER_")) or k in ("CI", "GITLAB_CI")
    }
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[k] = None
    env.update(
        PERFGATE_HTTP_BACKOFF_S="0.01",
        PERFGATE_HTTP_TIMEOUT_S="0.25",
        PERFGATE_HTTP_BUDGET_S="0.8",
    )
    env.update(values)
    return env


def github_env(forge: FakeForge, tmp_path: Path, **extra: str) -> dict[str, str | None]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "head": {"sha": HEAD}}}))
    values = dict(
        GITHUB_ACTIONS="true",
        GITHUB_API_URL=forge.url,
        GITHUB_REPOSITORY="o/r",
        GITHUB_EVENT_PATH=str(event),
        GITHUB_SHA="merge" + "0" * 35,
        GITHUB_TOKEN=TOKEN,
        GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
        GITHUB_SERVER_URL="https://github.com",
        GITHUB_RUN_ID="99",
    )
    values.update(extra)
    return ci_env(**values)


def gitlab_env(forge: FakeForge, **extra: str) -> dict[str, str | None]:
    values = dict(
        GITLAB_CI="true",
        CI_API_V4_URL=forge.gitlab_url,
        CI_PROJECT_ID="grp/proj",
        CI_MERGE_REQUEST_IID="3",
        CI_COMMIT_SHA=HEAD,
        GITLAB_TOKEN=TOKEN,
        CI_JOB_URL="https://gitlab.example/grp/proj/-/jobs/5",
    )
    values.update(extra)
    return ci_env(**values)


def marked(bodies: list[dict[str, object]]) -> list[dict[str, object]]:
    return [c for c in bodies if str(c["body"]).startswith("<!-- perfgate:report ")]


# -- histories -------------------------------------------------------------------------------


def creeping_runs(start: int, end: int) -> list[RunRecord]:
    """Runs start..end-1 on main: +8% over runs 0..159 (flat after), 2% run-to-run noise,
    one run an hour."""
    z = np.random.default_rng(29).standard_normal(200)
    out = []
    for i in range(start, end):
        level = 20.0 * (1.0 + 0.08 * min(i, 159) / 159) * float(np.exp(0.02 * z[i]))
        r = record(i, level, noise=0.01, seed=29)
        hour = T0 + timedelta(hours=i)
        out.append(replace(r, started_at=hour, finished_at=hour))
    return out


def spread_copy(run: RunRecord, *, job: float, repeats: tuple[float, ...], i: int) -> RunRecord:
    """A copy of a real run as another main run, an hour earlier per ``i``: each repeat of
    its times moved to the run's median level (its steps' own scatter kept), then scaled by
    ``job`` and by its factor in ``repeats``: a spread fixed by the test, not the machine."""
    scaled = []
    for m in run.measurements:
        if m.metric in ("step_cpu_ms", "step_time_ms"):
            level = statistics.median(x for rep in m.repeats for x in rep)
            groups = [
                [x * level / statistics.median(rep) * job * r for x in rep]
                for rep, r in zip(m.repeats, repeats, strict=True)
            ]
            m = measurement(m.metric, groups)
        elif m.metric in ("peak_memory_bytes", "peak_memory_pct_of_capacity"):
            # no spread: only the times are noisy
            peak = max(x for rep in m.repeats for x in rep)
            m = measurement(m.metric, [[peak]] * len(m.repeats))
        elif m.metric == "throughput_samples_per_s":
            continue  # the wall time's echo, shown only: left out of these copies
        scaled.append(m)
    return replace(
        run,
        id=uuid.uuid4().hex,
        measurements=tuple(scaled),
        started_at=run.started_at - timedelta(hours=i),
        finished_at=run.finished_at - timedelta(hours=i),
    )


def seed_main(root: Path, jobs: tuple[float, ...], repeats: tuple[float, ...]) -> None:
    """Main's history: one real run, replaced by copies with the given spread."""
    done = perfgate(root, "run", "--branch", "main", "--json", spawn=True)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["runs"][0]["id"]
    store = open_store(f"sqlite:///{root / '.perfgate' / 'perfgate.db'}")
    try:
        real = store.get_run(run_id)
        copies = [spread_copy(real, job=j, repeats=repeats, i=i + 1) for i, j in enumerate(jobs)]
        store.save_runs(copies, supersedes=[run_id])
    finally:
        store.close()
