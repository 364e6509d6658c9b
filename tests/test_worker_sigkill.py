"""SIGKILL of perfgate (which no handler sees): the benchmark worker dies with it, and the
next perfgate that measures removes the temporary directory it left and stops what still
runs from it (issue 3.5).

The hanging benchmark's first step starts a child carrying a unique token on its command
line and sleeps for an hour. Each test runs the real ``python -m perfgate run`` in a
subprocess with its own TMPDIR. No assertion on elapsed time: the waits are safety bounds.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")

SAFETY_S = 240.0  # a bound on waiting for a subprocess, never an assertion on speed


def _suite(tmp_path: Path, token: str) -> None:
    (tmp_path / "bench_entries.py").write_text(
        textwrap.dedent(
            f"""
            import subprocess, sys, time

            def hangs(device="cpu"):
                def step():
                    subprocess.Popen(
                        [sys.executable, "-c", "import time; time.sleep(3600)", {token!r}]
                    )
                    with open({str(tmp_path / "ready")!r}, "w") as fh:
                        fh.write("ready")
                    time.sleep(3600)
                return {{"step": step, "batch_size": 1}}

            def quick(device="cpu"):
                return {{"step": lambda: None, "batch_size": 1}}
            """
        ),
        encoding="utf-8",
    )
    (tmp_path / "perfgate.toml").write_text(
        textwrap.dedent(
            """
            [[benchmarks]]
            name = "hangs"
            entry = "bench_entries:hangs"
            repeats = 1
            warmup = 0
            measured = 2
            profiled = 0

            [[benchmarks]]
            name = "quick"
            entry = "bench_entries:quick"
            repeats = 1
            warmup = 0
            measured = 2
            profiled = 0
            """
        ),
        encoding="utf-8",
    )


def _env(tmpdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI", "GITLAB"))}
    env.pop("PERFGATE_DATABASE_URL", None)
    env["TMPDIR"] = str(tmpdir)
    return env


def _perfgate_run(tmp_path: Path, tmpdir: Path, benchmark: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "perfgate",
        "run",
        "--suite",
        str(tmp_path / "perfgate.toml"),
        "--benchmark",
        benchmark,
        "--db",
        f"sqlite:///{tmp_path / 'store.db'}",
        "--branch",
        "main",
    ]


def _pids_with(marker: str) -> list[int]:
    """Live processes (not zombies) whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, UnicodeDecodeError, IndexError):
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SAFETY_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting: {what}")
        time.sleep(0.2)


@pytest.mark.parametrize("whole_group", [False, True], ids=["process", "process-group"])
def test_sigkill_of_perfgate_takes_its_worker_and_the_next_run_cleans_up(
    tmp_path: Path, whole_group: bool
) -> None:
    token = f"perfgate-sigkill-{uuid.uuid4().hex}"
    _suite(tmp_path, token)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = subprocess.Popen(
        _perfgate_run(tmp_path, tmpdir, "hangs"),
        cwd=tmp_path,
        env=_env(tmpdir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_until(lambda: (tmp_path / "ready").exists() or proc.poll() is not None, "the step")
        assert proc.poll() is None, "perfgate exited before the step hung"
        assert _pids_with(str(tmpdir)), "no worker found"  # its request file is under TMPDIR
    finally:
        if whole_group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        proc.wait()

    try:
        # the worker dies with perfgate; its temporary directory is left (nothing could run)
        _wait_until(lambda: not _pids_with(str(tmpdir)), "the worker to die with perfgate")
        left = list(tmpdir.glob("perfgate-*"))
        assert [p.name.split("-")[1] for p in left] == [str(proc.pid)], left
        assert _pids_with(token), "the step's child is still running (the next run stops it)"

        # the next perfgate that measures removes it and stops what the step had started
        again = subprocess.run(
            _perfgate_run(tmp_path, tmpdir, "quick"),
            cwd=tmp_path,
            env=_env(tmpdir),
            capture_output=True,
            text=True,
            timeout=SAFETY_S,
            check=False,
        )
        assert again.returncode == 0, again.stderr
        assert list(tmpdir.glob("perfgate-*")) == []
        _wait_until(lambda: not _pids_with(token), "the step's child to be stopped")
    finally:  # whatever happened, leave nothing of this test running
        for pid in _pids_with(str(tmpdir)) + _pids_with(token):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_directory_whose_lock_is_held_is_kept(tmp_path: Path) -> None:
    from perfgate.runner.lifecycle import clean_stale_work_dirs

    pid = _dead_pid()
    stale = tmp_path / f"perfgate-{pid}-abc"
    stale.mkdir()
    (stale / "request.json").write_text("{}", encoding="utf-8")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))  # unlocked and an hour old
    young = tmp_path / f"perfgate-{pid}-young"  # unlocked, just made: its owner may lock it
    young.mkdir()
    held = tmp_path / f"perfgate-{pid}-held"
    held.mkdir()
    fd = os.open(held / ".owner", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        mine = tmp_path / f"perfgate-{os.getpid()}-mine"  # a live pid: kept
        mine.mkdir()
        other = tmp_path / "perfgate-notapid"  # not perfgate's name: kept
        other.mkdir()
        assert clean_stale_work_dirs(tmp_path) == [stale]
        assert not stale.exists() and held.exists() and mine.exists() and other.exists()
        assert young.exists()
    finally:
        os.close(fd)
    assert clean_stale_work_dirs(tmp_path) == [held]
