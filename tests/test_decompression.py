"""Gzip bombs: a small compressed profile that expands to hundreds of MiB stops with one
line when what it inflates reaches the decompressed-size cap (``PERFGATE_MAX_DECOMPRESSED_MB``),
exit 2, and the memory it took stays far below what it would have decompressed to; one
exactly the size of the cap is held once, not twice."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfgate.errors import ParseError, UsageError
from perfgate.parsers.ascend.trace_view import breakdown_from_trace_view
from perfgate.parsers.decompress import ENV_VAR, max_decompressed_mb
from perfgate.parsers.torch_trace import parse_torch_trace

BOMB_MIB = 256
CAP_MB = 16

# Runs the real CLI in a fresh interpreter and reports its exit code and peak memory. The peak
# is this process image's own high-water mark (VmHWM): ru_maxrss would carry over the peak of
# the process it was forked from (Linux keeps it across exec), here pytest's.
MEASURE = """
import sys
from perfgate.cli import cli
try:
    cli.main(sys.argv[2:], prog_name="perfgate", standalone_mode=True)
    rc = 0
except SystemExit as exc:
    rc = exc.code if isinstance(exc.code, int) else 1
with open("/proc/self/status") as status:
    peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
with open(sys.argv[1], "w") as out:
    out.write(f"{rc} {peak_kib}")
"""


def bomb(path: Path, prefix: bytes = b'{"traceEvents": [') -> Path:
    """``BOMB_MIB`` MiB (a JSON-looking start, then spaces) gzip-compressed, written in chunks."""
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(prefix)
        block = b" " * (1 << 20)
        for _ in range(BOMB_MIB):
            out.write(block)
    assert path.stat().st_size < BOMB_MIB * (1 << 20) // 100
    return path


@pytest.fixture(scope="module")
def torch_bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bomb(tmp_path_factory.mktemp("bomb") / "w0.pt.trace.json.gz")


def test_a_gzip_bomb_exits_2_in_one_line_with_bounded_memory(
    torch_bomb: Path, tmp_path: Path
) -> None:
    result_file = tmp_path / "result"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB_", "CI"))}
    env[ENV_VAR] = str(CAP_MB)
    db = f"sqlite:///{tmp_path / 's.db'}"
    args = [
        "ingest",
        str(torch_bomb),
        "--benchmark",
        "b",
        "--branch",
        "x",
        "--commit",
        "abc1234",
        "--db",
        db,
    ]
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(result_file), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    rc, peak_kib = (int(x) for x in result_file.read_text().split())
    assert rc == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(torch_bomb) in lines[0]
    assert f"decompresses to {CAP_MB} MiB or more" in lines[0]
    assert "Traceback" not in proc.stderr
    # Decompressing it all would need at least BOMB_MIB MiB; the cap keeps it near the
    # interpreter's own footprint plus CAP_MB.
    assert peak_kib < (BOMB_MIB // 2) * 1024, peak_kib
    assert not (tmp_path / "s.db").exists()  # nothing written to a store


def _measure(tmp_path: Path, cap_mb: int, *args: str) -> tuple[int, int, str]:
    """Exit code, peak memory (KiB) and stderr of ``perfgate ARGS`` in a fresh interpreter."""
    result_file = tmp_path / f"result-{len(list(tmp_path.iterdir()))}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB_", "CI"))}
    env[ENV_VAR] = str(cap_mb)
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(result_file), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    rc, peak_kib = (int(x) for x in result_file.read_text().split())
    return rc, peak_kib, proc.stderr


def test_a_bomb_the_size_of_the_cap_stops_at_the_cap_holding_it_once(tmp_path: Path) -> None:
    cap_mb = 64
    path = tmp_path / "w0.pt.trace.json.gz"
    prefix = b'{"traceEvents": ['
    with gzip.open(path, "wb", compresslevel=9) as out:  # exactly cap_mb MiB inflated
        out.write(prefix)
        out.write(b" " * ((cap_mb << 20) - len(prefix) - 2))
        out.write(b"]}")
    db = f"sqlite:///{tmp_path / 's.db'}"
    ingest = ["ingest", "--benchmark", "b", "--branch", "x", "--commit", "abc1234", "--db", db]
    # the same command on a missing file: the interpreter's and the command's own footprint
    _, base_kib, _ = _measure(tmp_path, cap_mb, *ingest, str(tmp_path / "none.json"))
    rc, peak_kib, stderr = _measure(tmp_path, cap_mb, *ingest, str(path))
    assert rc == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and f"decompresses to {cap_mb} MiB or more" in lines[0], stderr
    # the inflated bytes are held once (about cap_mb MiB), never a second copy on top
    assert peak_kib - base_kib < int(1.5 * cap_mb * 1024), (base_kib, peak_kib)
    assert not (tmp_path / "s.db").exists()


def test_torch_trace_under_the_default_cap_and_a_small_real_trace_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, "1")
    big = tmp_path / "big.json.gz"
    with gzip.open(big, "wb") as out:
        out.write(b'{"traceEvents": [' + b" " * (2 << 20) + b"]}")
    with pytest.raises(ParseError, match=r"big\.json\.gz: decompresses to 1 MiB or more"):
        parse_torch_trace(big)
    monkeypatch.setenv(ENV_VAR, "8")
    with pytest.raises(ParseError) as caught:  # under the cap: read, then judged as a trace
        parse_torch_trace(big)
    assert "decompresses" not in str(caught.value)


def test_ascend_trace_view_bomb_stops_at_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(CAP_MB))
    path = bomb(tmp_path / "trace_view.json", prefix=b"[")
    with pytest.raises(ParseError) as caught:
        breakdown_from_trace_view(path, chunk_size=1 << 20)
    assert str(caught.value) == (
        f"{path}: decompresses to {CAP_MB} MiB or more (raise {ENV_VAR} if it is a real profile)"
    )


@pytest.mark.parametrize("value", ["0", "-3", "lots", "1.5"])
def test_a_bad_cap_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError, match=ENV_VAR):
        max_decompressed_mb({ENV_VAR: value})


def test_the_default_cap() -> None:
    assert max_decompressed_mb({}) == 1024
    assert max_decompressed_mb({ENV_VAR: " 64 "}) == 64
