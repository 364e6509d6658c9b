"""What ``ingest`` (and the other commands that read a file) refuse before reading: a path
that is neither a regular file nor a directory (a FIFO named like a trace would block the
read forever), and a trace larger than what perfgate reads whole (refused with its size and
the limit, exit 3, before a byte of it is read). One line, nothing written to the store."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from perfgate.errors import ParseError, TooLargeError
from perfgate.parsers.ascend.trace_view import breakdown_from_trace_view
from perfgate.parsers.decompress import ENV_VAR
from perfgate.parsers.results import FORMAT_METRICS, parse_results
from perfgate.parsers.torch_trace import parse_torch_trace

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")

# A hung read is the failure: the command runs in its own process with a generous limit.
LIMIT_S = 120


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "CI_", "GITLAB", "PERFGATE_"))
    }
    env.pop("CI", None)
    env.update(extra)
    return env


def perfgate(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # A process of its own, not helpers.perfgate: a hostile file that hangs the reader must
    # be killed at LIMIT_S, which only a separate process allows.
    return subprocess.run(
        [sys.executable, "-m", "perfgate", *args],
        cwd=cwd,
        env=_env(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
        check=False,
    )


def _one_line(stderr: str) -> str:
    """The one error line (progress lines may come before it)."""
    lines = [line for line in stderr.splitlines() if line.startswith("perfgate: error: ")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    return lines[0]


@pytest.mark.parametrize("name", ["w0.pt.trace.json", "trace.json.gz", "results.json"])
def test_ingest_refuses_a_fifo_named_like_a_trace(tmp_path: Path, name: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = perfgate(
        tmp_path, "ingest", str(fifo), "--benchmark", "b", "--branch", "x", "--db", db
    )
    assert result.returncode == 2, result.stderr
    line = _one_line(result.stderr)
    assert f"{fifo}: a named pipe (FIFO), not a regular file" in line, line
    assert not (tmp_path / "store.db").exists()


def test_advise_and_detect_refuse_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "w0.pt.trace.json"
    os.mkfifo(fifo)
    for args in (["advise", str(fifo)], ["detect", str(fifo)]):
        result = perfgate(tmp_path, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "a named pipe (FIFO)" in _one_line(result.stderr)


def test_ingest_refuses_a_device(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = perfgate(
        tmp_path, "ingest", "/dev/zero", "--benchmark", "b", "--branch", "x", "--db", db
    )
    assert result.returncode == 2, result.stderr
    assert "/dev/zero: a character device, not a regular file" in _one_line(result.stderr)


def test_the_parsers_refuse_a_fifo_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    readers: list[Callable[[Path], object]] = [
        parse_torch_trace,
        lambda p: parse_results(p, FORMAT_METRICS),
        breakdown_from_trace_view,
    ]
    for read in readers:
        with pytest.raises(ParseError, match=r"a named pipe \(FIFO\), not a regular file"):
            read(fifo)


def test_a_trace_over_the_limit_is_refused_with_its_size_and_the_limit(tmp_path: Path) -> None:
    """A 2 GiB trace (sparse: nothing is written, and nothing must be read) under the
    default 1024 MiB limit: exit 3 at once, not a MemoryError after gigabytes."""
    trace = tmp_path / "w0.pt.trace.json"
    with open(trace, "wb") as f:
        f.truncate(2 << 30)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = perfgate(
        tmp_path, "ingest", str(trace), "--benchmark", "b", "--branch", "x", "--db", db
    )
    assert result.returncode == 3, result.stderr
    line = _one_line(result.stderr)
    assert f"{trace}: 2048 MiB, at or over the 1024 MiB perfgate reads whole" in line, line
    assert ENV_VAR in line
    assert not (tmp_path / "store.db").exists()


def test_the_limit_on_a_plain_trace_follows_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "w0.pt.trace.json"
    trace.write_bytes(b'{"traceEvents": [' + b" " * (3 << 20) + b"]}")
    monkeypatch.setenv(ENV_VAR, "2")
    with pytest.raises(TooLargeError, match=r"w0\.pt\.trace\.json: 3 MiB, at or over the 2 MiB"):
        parse_torch_trace(trace)
    db = f"sqlite:///{tmp_path / 'store.db'}"
    result = perfgate(
        tmp_path,
        "ingest",
        str(trace),
        "--benchmark",
        "b",
        "--branch",
        "x",
        "--db",
        db,
        **{ENV_VAR: "2"},
    )
    assert result.returncode == 3, result.stderr
    assert "3 MiB, at or over the 2 MiB" in _one_line(result.stderr)
    monkeypatch.setenv(ENV_VAR, "8")
    with pytest.raises(ParseError) as caught:  # under the limit: read, then judged as a trace
        parse_torch_trace(trace)
    assert "MiB" not in str(caught.value)
