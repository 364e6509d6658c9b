"""The last faults of issue 42 (cases 8 to 13): what a hostile or unlucky CI job does to
perfgate, and what perfgate must do then.

- 8: a name with a newline and ``::error::`` in it prints no workflow command in a GitHub
  Actions job; perfgate's own annotations still do;
- 9: a command that fails (a full disk, an empty suite) leaves no store file it created;
- 10: a read-only store, or a trace directory that cannot be written, stops ``run`` and
  ``check`` before they measure: exit 3, one line;
- 11: ``check --against`` a branch without runs stops before it measures, and its list of
  branches shows no internal ``<branch>:base`` name;
- 12: a check stopped by Ctrl-C while it re-measures says which runs it recorded;
- 13: a step that hangs after the warm-up is stopped by a limit derived from the warm-up's
  step time, which the error names.

Real SQLite files, ``python -m perfgate`` in subprocesses, a small torch kernel on the CPU
in real worker processes. A full disk is a file-size limit (``RLIMIT_FSIZE``) on the
subprocess; a read-only directory is ``chmod`` for a normal user and ``chattr +i`` for root
(whom permissions do not stop); where neither works the test says why and skips. Nothing
asserts on elapsed time: waits are generous bounds only.
"""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import fill, perfgate, record, seed_main

SAFETY_S = 600  # a bound on waiting for a subprocess, never an assertion on speed

BENCH = """
import os
import signal
import time
from pathlib import Path

import torch

HERE = Path(__file__).parent


def build(device="cpu", size=64, hang_at=0, hang_s=120.0):
    (HERE / "built").touch()  # a test that must not measure checks this is missing
    counter = os.environ.get("PERFGATE_TEST_COUNTER")
    if counter:  # the Nth worker of a check stops its perfgate, as Ctrl-C would
        n = len(Path(counter).read_text()) + 1 if Path(counter).exists() else 1
        Path(counter).write_text("x" * n)
        if n == int(os.environ["PERFGATE_TEST_STOP_AT"]):
            os.kill(os.getppid(), signal.SIGINT)
            time.sleep(120)
    a = torch.randn(size, size)
    calls = [0]

    def step():
        calls[0] += 1
        if calls[0] == hang_at:  # a hung step: far longer than any derived limit
            time.sleep(hang_s)
        x = a
        for _ in range(4):
            x = torch.tanh(x @ a)
        return x.sum()

    return {"step": step, "batch_size": 1}
"""

SUITE = """
[defaults]
repeats = {repeats}
warmup = 3
measured = 10
profiled = 0

[[benchmarks]]
name = "kernel"
entry = "bench_hostile:build"
"""


def project(root: Path, repeats: int = 1) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "bench_hostile.py").write_text(textwrap.dedent(BENCH))
    (root / "perfgate.toml").write_text(textwrap.dedent(SUITE.format(repeats=repeats)))
    return root


def spawn(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m perfgate ARGS`` in ``cwd`` without the CI variables of the job running
    the tests, with ``env`` added. A process of its own, not helpers.perfgate: these tests
    signal it, limit it (``preexec``) and read a real process's exit code."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "CI_", "GITLAB"))
        and k not in ("CI", "PERFGATE_DATABASE_URL")
    }
    return subprocess.run(
        [sys.executable, "-m", "perfgate", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=SAFETY_S,
        preexec_fn=preexec,
        check=False,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def runs_in(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute("SELECT id, branch FROM runs").fetchall())


def seeded(path: Path, *branches: str) -> Path:
    """A store at ``path`` with a few synthetic runs of ``kernel`` on each of ``branches``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [
        record(i * 10 + j, 10.0, branch=b, benchmark="kernel")
        for i, b in enumerate(branches)
        for j in range(3)
    ]
    fill(f"sqlite:///{path}", records)
    return path


# -- 8: workflow commands -----------------------------------------------------------------


def test_neutralize_leaves_no_workflow_command_in_any_line() -> None:
    from perfgate.reporters.annotations import neutralize

    text = "feat\n  ::error::pwned\r\nok ##[warning]x\n::"
    out = neutralize(text)
    for line in out.splitlines():
        assert not line.lstrip().startswith("::") and "##[" not in line, out
    assert out == "feat\n  %3A%3Aerror::pwned\r\nok ##%5Bwarning]x\n%3A%3A"
    assert neutralize("::x", at_line_start=False) == "::x"  # the rest of a line


def test_a_branch_name_cannot_write_a_workflow_command_in_github_mode(tmp_path: Path) -> None:
    """A branch named ``feat\\n::error::pwned`` in a GitHub Actions job: the gate's report
    prints the name, and no line of its output is a workflow command but perfgate's own
    annotation of the regression."""
    branch = "feat\n::error::pwned ##[warning]x"
    db = tmp_path / "store.db"
    fill(f"sqlite:///{db}", [record(i, 10.0) for i in range(6)] + [record(9, 20.0, branch=branch)])
    done = spawn(
        tmp_path, "gate", "--db", f"sqlite:///{db}", "--branch", branch, "--against", "main",
        env={"GITHUB_ACTIONS": "true"},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    commands = [
        line.lstrip()
        for line in (done.stdout + done.stderr).splitlines()
        if line.lstrip().startswith("::") or "##[" in line
    ]
    assert len(commands) == 1, done.stdout
    assert commands[0].startswith("::error title=perfgate%3A mlp step_time_ms regression::")
    assert "%3A%3Aerror::pwned" in done.stdout  # the name is shown, defused


# -- 9: no store file left by a failed command --------------------------------------------


def _full_disk() -> None:
    """In the child: no file may grow (a full disk); SQLite then sees EFBIG, not a signal."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def test_a_first_ingest_on_a_full_disk_leaves_no_store_file(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("name,value,unit,direction\ntokens_per_s,100,1/s,higher\n")
    done = spawn(
        tmp_path, "ingest", str(metrics), "--benchmark", "b", "--branch", "main",
        preexec=_full_disk,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "cannot open store" in one_line(done)
    assert not (tmp_path / ".perfgate").exists(), list((tmp_path / ".perfgate").iterdir())


@pytest.mark.parametrize("command", ["run", "check"])
def test_an_empty_suite_leaves_no_store_file(tmp_path: Path, command: str) -> None:
    (tmp_path / "perfgate.toml").write_text("[defaults]\nrepeats = 1\n")
    done = spawn(tmp_path, command, "--branch", "feat", "--against", "main")
    assert done.returncode == 2, done.stderr
    assert "nothing to run" in one_line(done)
    assert not (tmp_path / ".perfgate").exists(), list((tmp_path / ".perfgate").iterdir())


def test_a_failed_command_keeps_a_store_it_did_not_create(tmp_path: Path) -> None:
    db = seeded(tmp_path / ".perfgate" / "perfgate.db", "main")
    before = runs_in(db)
    (tmp_path / "perfgate.toml").write_text("[defaults]\nrepeats = 1\n")
    done = spawn(tmp_path, "run", "--branch", "feat")
    assert done.returncode == 2, done.stderr
    assert runs_in(db) == before


# -- 10: a store or trace directory that cannot be written ---------------------------------


@contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """``directory`` read-only for perfgate: ``chmod`` for a normal user; for root, whom
    permissions do not stop, the immutable attribute (``chattr +i``)."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        undo = ["chmod", "755", str(directory)]
    else:
        try:
            done = subprocess.run(
                ["chattr", "+i", str(directory)], capture_output=True, text=True, check=False
            )
        except FileNotFoundError:
            pytest.skip("running as root without chattr: cannot make a directory read-only")
        if done.returncode != 0:
            pytest.skip(f"running as root and chattr +i failed here: {done.stderr.strip()}")
        undo = ["chattr", "-i", str(directory)]
    try:
        try:
            (directory / "probe").touch()
        except OSError:
            pass
        else:
            pytest.skip(f"{directory} is still writable after {undo[0]}")
        yield
    finally:
        subprocess.run(undo, check=False)


@pytest.mark.parametrize("command", ["run", "check"])
def test_a_read_only_store_stops_before_measuring(tmp_path: Path, command: str) -> None:
    """A store in a read-only directory, the traces elsewhere: exit 3 in one line that says
    the store is read-only, and no step run (the entry was never built)."""
    root = project(tmp_path / "repo")
    db = seeded(tmp_path / "ro" / "perfgate.db", "main")
    with read_only(db.parent):
        done = spawn(
            root, command, "--db", f"sqlite:///{db}", "--branch", "feat", "--against", "main",
            "--trace-dir", str(tmp_path / "traces"),
        )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "read-only" in one_line(done) and str(db) in done.stderr
    assert not (root / "built").exists()


def test_a_read_only_trace_directory_stops_before_measuring(tmp_path: Path) -> None:
    """The default layout (store and traces under ``.perfgate``) in a read-only directory:
    once exit 4 ("Read-only file system: '.perfgate/traces'") after the store was opened;
    now exit 3 before measuring, and the store file it would have created is not left."""
    root = project(tmp_path / "repo")
    readonly = tmp_path / "ro"
    readonly.mkdir()
    with read_only(readonly):
        done = spawn(
            root, "run", "--branch", "feat", "--profiled", "2",
            "--trace-dir", str(readonly / "traces"),
        )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "cannot write profiler traces" in one_line(done)
    assert not (root / "built").exists()
    assert not (root / ".perfgate").exists()


# -- 11: a base branch without runs ------------------------------------------------------


def test_check_against_a_branch_without_runs_stops_before_measuring(tmp_path: Path) -> None:
    root = project(tmp_path)
    db = seeded(root / ".perfgate" / "perfgate.db", "main", "feat:base")
    before = runs_in(db)
    done = spawn(root, "check", "--branch", "feat", "--against", "nosuch")
    assert done.returncode == 2, done.stderr
    line = one_line(done)
    assert "no runs on base branch 'nosuch'" in line
    assert "branches with runs: main" in line and "feat:base" not in line
    assert not (root / "built").exists()
    assert runs_in(db) == before


# -- 12: Ctrl-C while check re-measures ----------------------------------------------------


@pytest.mark.slow
def test_ctrl_c_while_check_re_measures_says_what_was_recorded(tmp_path: Path) -> None:
    """Main's runs agree while their repeats scatter (as in test_check): the first look is
    inconclusive and ``check`` re-measures; the first worker of the re-measuring sends its
    perfgate SIGINT. The first pass's run is in the store, and the
    error line names it instead of saying nothing was recorded."""

    root = project(tmp_path, repeats=3)
    # repeats that scatter by half: no change a busy machine makes to the feat run's step
    # (its CPU time moves by tens of percent under a neighbour) is decided at the first look
    seed_main(root, jobs=(1.0, 1.01, 0.99, 1.0, 1.005), repeats=(0.5, 1.0, 1.5))
    counter = tmp_path / "workers"
    done = spawn(
        root, "check", "--branch", "feat", "--against", "main", "--budget", "2",
        env={"PERFGATE_TEST_COUNTER": str(counter), "PERFGATE_TEST_STOP_AT": "4"},
    )  # fmt: skip
    assert counter.read_text() == "xxxx", done.stderr  # three first-pass repeats, then one
    assert done.returncode == 3, done.stderr
    feat = [
        run_id for run_id, branch in runs_in(root / ".perfgate" / "perfgate.db") if branch == "feat"
    ]
    assert len(feat) == 1
    line = done.stderr.strip().splitlines()[-1]
    assert "stopped by SIGINT" in line and "nothing recorded" not in line, done.stderr
    assert f"recorded before the stop: 1 run, {feat[0][:12]} (kernel on feat)" in line


# -- 13: a hung step -----------------------------------------------------------------------


@pytest.mark.slow
def test_a_step_hung_after_the_warm_up_is_stopped_by_the_derived_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fifth step (the second timed one) sleeps 120 s. With the default timeout (900 s)
    the limit after the warm-up is derived from its step time, at least the floor (5 s
    here, 60 s by default): the repeat is stopped well before the sleep ends, exit 3, and
    the line says the limit and how it was derived."""
    import perfgate.runner.watchdog as watchdog

    monkeypatch.setattr(watchdog, "STALL_FLOOR_S", 5.0)
    root = project(tmp_path)
    done = perfgate(root, "run", "--branch", "main", "--param", "hang_at=5")
    assert done.returncode == 3, done.stdout
    line = one_line(done)
    assert "benchmark kernel, repeat 1/1: the 10 timed steps took over" in line, line
    assert "the default limit derived from the warm-up" in line and "at least 5 s" in line
    assert "--timeout SECONDS" in line
    assert not (root / ".perfgate" / "perfgate.db").exists()  # nothing recorded, no store


@pytest.mark.slow
def test_an_explicit_timeout_is_the_only_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--timeout`` set: nothing is derived; a short hang under it is waited out."""
    import perfgate.runner.watchdog as watchdog

    monkeypatch.setattr(watchdog, "STALL_FLOOR_S", 0.5)
    root = project(tmp_path)
    done = perfgate(
        root, "run", "--branch", "main", "--param", "hang_at=5", "--param", "hang_s=3",
        "--timeout", "300",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
