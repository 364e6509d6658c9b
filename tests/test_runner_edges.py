"""``perfgate run`` at the runner's edges, with real workers on the CPU: an entry with no
torch operator in its step, a benchmark name that is not a file name, a run that fails, a
bad decompression cap, and an explicit timeout equal to the default.

Each run is one small repeat (a worker imports torch: about 3 s).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")

from perfgate.config import parse_benchmark  # noqa: E402
from perfgate.models import BenchmarkSpec  # noqa: E402
from perfgate.parsers import read_profile  # noqa: E402
from perfgate.runner import run_benchmark, watchdog  # noqa: E402

Cli = Callable[..., subprocess.CompletedProcess[str]]
COMMIT = "a" * 40

ENTRIES = '''
import time


def pure():
    """A step of plain Python: no torch operator runs in it."""
    data = list(range(1000))
    return lambda: sum(data)


def boom():
    def step():
        raise ValueError("nope")

    return step


def slow_timed():
    """Quick warm-up steps, then timed steps of 0.6 s each."""
    calls = [0]

    def step():
        calls[0] += 1
        if calls[0] > 2:
            time.sleep(0.6)

    return step
'''


def suite(tmp_path: Path, name: str = "", entry: str = "", profiled: int = 0) -> None:
    """The entries module and, with ``name``, a suite of that one small benchmark of it."""
    (tmp_path / "edge_entries.py").write_text(ENTRIES, encoding="utf-8")
    if name:
        (tmp_path / "perfgate.toml").write_text(
            f'[[benchmarks]]\nname = "{name}"\nentry = "edge_entries:{entry}"\n'
            f"warmup = 1\nmeasured = 3\nrepeats = 1\nprofiled = {profiled}\n",
            encoding="utf-8",
        )


def run(
    cli: Cli, tmp_path: Path, *args: str, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """``perfgate run`` of the suite, recorded in ``store.db`` (not under ``.perfgate``)."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    return cli(
        *("run", "--suite", str(tmp_path / "perfgate.toml"), "--db", db),
        *("--branch", "main", "--commit", COMMIT, *args),
        env=env,
    )


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*")) if root.exists() else []


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("perfgate: error: "), stderr
    return lines[0]


# -- 1. a profiled window with no operator ---------------------------------------------------


def test_a_pure_python_step_is_recorded_without_an_op_table(cli: Cli, tmp_path: Path) -> None:
    suite(tmp_path, "pure", "pure", profiled=2)
    done = run(cli, tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    (recorded,) = json.loads(done.stdout)["runs"]
    assert recorded["benchmark"] == "pure"
    assert "step_time_ms" in recorded["measurements"]
    assert recorded["profile"] is None
    assert "no operator" in done.stderr  # the progress line says why there is no op table
    assert files_under(tmp_path / ".perfgate") == []  # no trace, no empty directory


def test_a_pure_python_step_of_a_torchrun_job_leaves_no_trace(tmp_path: Path) -> None:
    """Each rank's window ran no operator: the job is measured, no rank has a profile, and
    the traces directory (its name's file stem taken care of too) is not left behind."""
    suite(tmp_path)
    spec = BenchmarkSpec(
        name="a/pure",
        entry="edge_entries:pure",
        nproc=2,
        warmup=1,
        measured=3,
        repeats=1,
        profiled=1,
    )
    lines: list[str] = []
    traces = tmp_path / "traces" / "run1"
    outcome = run_benchmark(spec, trace_dir=traces, sys_path=[str(tmp_path)], progress=lines.append)
    (repeat,) = outcome.repeats
    assert len(repeat.ranks) == 2 and all(r.profile is None for r in repeat.ranks)
    assert len(repeat.step_ms) == 3
    assert "no operator" in lines[0]
    assert not (tmp_path / "traces").exists()


# -- 2. a benchmark name that is not a file name ----------------------------------------------


@pytest.mark.parametrize("name", ["a/b", "../x", "../../escape", "..", "x" * 300])
def test_the_trace_of_any_name_is_written_inside_the_traces_directory(
    tmp_path: Path, name: str
) -> None:
    """The suite's loader refuses such names; the runner does not rely on it (a spec built
    through the API, or one from an older loader)."""
    spec = BenchmarkSpec(name=name, workload="mlp", warmup=1, measured=2, repeats=1, profiled=1)
    traces = tmp_path / "work" / "traces"
    outcome = run_benchmark(spec, trace_dir=traces / "run1")
    assert outcome.trace_path is not None
    assert read_profile(Path(outcome.trace_path)).ranks[0].ops  # written, and readable
    written = [p for p in files_under(tmp_path / "work") if p.is_file()]
    assert written == [Path(outcome.trace_path)]
    assert written[0].parent == traces / "run1" and written[0].name.endswith(".pt.trace.json")


def test_names_that_differ_get_different_trace_files(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    paths = {
        run_benchmark(
            BenchmarkSpec(name=name, workload="mlp", warmup=1, measured=2, repeats=1, profiled=1),
            trace_dir=traces,
        ).trace_path
        for name in ("a/b", "a_b", "a:b")
    }
    assert len(paths) == 3 and all(p is not None and Path(p).is_file() for p in paths)


# -- 4. a failed run leaves no directory ------------------------------------------------------


def test_a_failing_entry_leaves_no_trace_directory(cli: Cli, tmp_path: Path) -> None:
    suite(tmp_path, "boom", "boom", profiled=3)
    done = run(cli, tmp_path)
    assert done.returncode == 3, done.stderr
    assert "the step raised ValueError: nope" in done.stderr
    assert not (tmp_path / ".perfgate").exists()


def test_a_failing_entry_keeps_the_traces_already_there(cli: Cli, tmp_path: Path) -> None:
    suite(tmp_path, "boom", "boom", profiled=3)
    old = tmp_path / ".perfgate" / "traces" / "old-run" / "mlp.pt.trace.json"
    old.parent.mkdir(parents=True)
    old.write_text("{}", encoding="utf-8")
    done = run(cli, tmp_path)
    assert done.returncode == 3, done.stderr
    assert files_under(tmp_path / ".perfgate") == [
        tmp_path / ".perfgate" / "traces",
        old.parent,
        old,
    ]


# -- 3. a bad decompression cap is refused before measuring -----------------------------------


@pytest.mark.parametrize("value", ["abc", "-1", "0"])
def test_a_bad_decompression_cap_is_refused_before_measuring(
    cli: Cli, tmp_path: Path, value: str
) -> None:
    suite(tmp_path, "pure", "pure", profiled=1)
    done = run(cli, tmp_path, env={"PERFGATE_MAX_DECOMPRESSED_MB": value})
    assert done.returncode == 2, done.stderr
    line = one_line(done.stderr)  # no progress line: nothing was measured
    assert "PERFGATE_MAX_DECOMPRESSED_MB" in line and repr(value) in line
    assert not (tmp_path / ".perfgate").exists()
    assert not (tmp_path / "store.db").exists()


# -- 5. an explicit timeout is that limit, whatever its value ---------------------------------


def test_an_explicit_timeout_equal_to_the_default_is_not_derived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the derived limit shrunk to 1 s, timed steps of 0.6 s x 3 outlive it; a timeout
    given explicitly (the default's value, 900 s) is a fixed limit, so the run finishes."""
    suite(tmp_path)
    monkeypatch.setattr(watchdog, "STALL_FLOOR_S", 1.0)
    spec = BenchmarkSpec(
        name="slow",
        entry="edge_entries:slow_timed",
        warmup=2,
        measured=3,
        profiled=0,
        repeats=1,
    )
    outcome = run_benchmark(
        spec, trace_dir=None, sys_path=[str(tmp_path)], timeout_s=watchdog.DEFAULT_TIMEOUT_S
    )
    (repeat,) = outcome.repeats
    assert min(repeat.step_ms) > 500


def test_a_suites_timeout_equal_to_the_default_is_not_derived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through a suite: "timeout = 900" is the limit it says, not "unset"."""
    suite(tmp_path)
    monkeypatch.setattr(watchdog, "STALL_FLOOR_S", 1.0)
    table = {"name": "slow", "entry": "edge_entries:slow_timed", "timeout": 900}
    counts = {"warmup": 2, "measured": 3, "profiled": 0, "repeats": 1}
    spec = parse_benchmark({**table, **counts}, {}, "perfgate.toml", "benchmarks[0]")
    assert spec.timeout_set and not watchdog.timeout_unset(spec)
    outcome = run_benchmark(spec, trace_dir=None, sys_path=[str(tmp_path)])
    (repeat,) = outcome.repeats
    assert min(repeat.step_ms) > 500
    assert watchdog.timeout_unset(replace(spec, timeout_set=False))  # no timeout key: derived
