"""Hung and killed workers (issue 2.6 A): a per-repeat timeout (``--timeout`` and the suite's
``timeout`` key), and SIGTERM/SIGINT reaching perfgate stop the worker's whole process group
and remove perfgate's temporary directories.

The hanging benchmark is a user entry written to ``tmp_path``: its first step starts a child
process carrying a unique token on its command line (so a leftover is found by scanning
``/proc/*/cmdline``), writes a ready file, and sleeps for an hour. Every test runs the real
``python -m perfgate run`` in a subprocess with its own TMPDIR. No test asserts on elapsed
time; the waits below are safety bounds only.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import Done

from perfgate.config import config_from_mapping
from perfgate.errors import ConfigError
from perfgate.models import BenchmarkSpec

SAFETY_S = 240.0  # a bound on waiting for a subprocess, never an assertion on speed


def _hanging_suite(tmp_path: Path, token: str, *, timeout_key: str = "") -> Path:
    ready = tmp_path / "ready"
    (tmp_path / "hang_bench.py").write_text(
        textwrap.dedent(
            f"""
            import subprocess, sys, time

            def build(device="cpu"):
                def step():
                    child = subprocess.Popen(
                        [sys.executable, "-c", "import time; time.sleep(3600)", {token!r}]
                    )
                    with open({str(ready)!r}, "w") as fh:
                        fh.write(str(child.pid))
                    time.sleep(3600)
                return {{"step": step, "batch_size": 1}}
            """
        ),
        encoding="utf-8",
    )
    suite = tmp_path / "perfgate.toml"
    suite.write_text(
        textwrap.dedent(
            f"""
            [[benchmarks]]
            name = "hangs"
            entry = "hang_bench:build"
            repeats = 1
            warmup = 0
            measured = 2
            profiled = 0
            {timeout_key}
            """
        ),
        encoding="utf-8",
    )
    return suite


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], Path, str]:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    url = f"sqlite:///{tmp_path / 'store.db'}"
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    env.pop("PERFGATE_DATABASE_URL", None)
    # A process of its own, not helpers.perfgate: the test signals it while it runs.
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfgate", "run", "--suite", str(tmp_path / "perfgate.toml")]
        + ["--db", url, "--branch", "main", *extra],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, tmpdir, url


def _leftovers(*markers: str) -> list[str]:
    """Command lines of live processes that carry any of ``markers``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        cmdline = raw.replace(b"\0", b" ").decode("utf-8", "replace")
        if any(m in cmdline for m in markers):
            found.append(cmdline)
    return found


def _no_leftovers(*markers: str) -> list[str]:
    """Wait (bounded) for killed processes to be reaped, then return what is still alive."""
    deadline = time.monotonic() + 30.0
    while (left := _leftovers(*markers)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _runs(url: str) -> int:
    path = url.removeprefix("sqlite:///")
    if not Path(path).exists():
        return 0
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("select name from sqlite_master")}
        return conn.execute("select count(*) from runs").fetchone()[0] if "runs" in tables else 0


def _wait_ready(proc: subprocess.Popen[str], ready: Path) -> None:
    deadline = time.monotonic() + SAFETY_S
    while not ready.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"perfgate exited ({proc.returncode}) before the step ran: {err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the hanging step never started")
        time.sleep(0.1)


# -- configuration ------------------------------------------------------------------------------


def test_timeout_key_is_read_and_validated() -> None:
    config = config_from_mapping(
        {"benchmarks": [{"name": "a", "workload": "mlp", "timeout": 42}]}, "perfgate.toml"
    )
    assert config.benchmarks[0].timeout_s == 42.0
    default = config_from_mapping({"benchmarks": [{"name": "a", "workload": "mlp"}]}, "x")
    assert default.benchmarks[0].timeout_s == 900.0
    for bad in (0, -1, "60", True, float("inf")):
        with pytest.raises(ConfigError, match=r"benchmarks\[0\]\.timeout|timeout"):
            config_from_mapping(
                {"benchmarks": [{"name": "a", "workload": "mlp", "timeout": bad}]}, "x"
            )


def test_stored_specs_without_a_timeout_still_load() -> None:
    spec = BenchmarkSpec(name="a", workload="mlp", timeout_s=12.5)
    assert BenchmarkSpec.from_dict(spec.to_dict()) == spec
    old = spec.to_dict()
    del old["timeout_s"]
    assert BenchmarkSpec.from_dict(old).timeout_s == 900.0


def test_bad_timeout_flag_is_a_usage_error(cli: Callable[..., Done]) -> None:
    result = cli("run", "--workload", "mlp", "--timeout", "0")
    assert result.returncode == 2
    assert "--timeout" in result.stdout + result.stderr


# -- real workers -------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_hung_repeat_times_out_with_one_line_and_nothing_recorded(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    token = f"perfgate-test-hang-{uuid.uuid4().hex}"
    _hanging_suite(tmp_path, token)
    proc, tmpdir, url = _start(tmp_path, "--timeout", "5")
    try:
        _, err = proc.communicate(timeout=SAFETY_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err
    lines = [line for line in err.splitlines() if line.startswith("perfgate: error")]
    assert len(lines) == 1, err
    assert "benchmark hangs, repeat 1/1" in lines[0]
    assert "did not finish within 5 s" in lines[0]
    assert "Traceback" not in err
    assert _runs(url) == 0
    assert _no_leftovers(token, str(tmpdir)) == []
    assert list(tmpdir.glob("perfgate-*")) == []


@pytest.mark.slow
def test_the_suite_timeout_key_bounds_a_repeat(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    token = f"perfgate-test-hang-{uuid.uuid4().hex}"
    _hanging_suite(tmp_path, token, timeout_key="timeout = 4")
    proc, tmpdir, url = _start(tmp_path)
    try:
        _, err = proc.communicate(timeout=SAFETY_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err
    assert "did not finish within 4 s" in err
    assert _runs(url) == 0
    assert _no_leftovers(token, str(tmpdir)) == []
    assert list(tmpdir.glob("perfgate-*")) == []


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_kills_the_worker_group_and_removes_temporary_dirs(
    tmp_path: Path, signum: signal.Signals
) -> None:
    pytest.importorskip("torch")
    token = f"perfgate-test-hang-{uuid.uuid4().hex}"
    _hanging_suite(tmp_path, token)
    proc, tmpdir, url = _start(tmp_path, "--timeout", "3000")
    try:
        _wait_ready(proc, tmp_path / "ready")
        assert _leftovers(token), "the step's child should be running now"
        assert list(tmpdir.glob("perfgate-*")), "the runner's temporary directory exists now"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=SAFETY_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err
    lines = [line for line in err.splitlines() if line.startswith("perfgate: error")]
    assert len(lines) == 1, err
    assert f"stopped by {signum.name}" in lines[0]
    assert "Traceback" not in err
    assert _runs(url) == 0
    assert _no_leftovers(token, str(tmpdir)) == []
    assert list(tmpdir.glob("perfgate-*")) == []
