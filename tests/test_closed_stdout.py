"""A closed stdout (``perfgate gate | head``) does not change the exit code: the verdict's
code comes back, with no "internal error" and no BrokenPipeError on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import fill, record


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "CI_", "GITLAB", "PERFGATE_"))
    }
    env.pop("CI", None)
    return env


def _with_closed_stdout(cwd: Path, *args: str) -> tuple[int, str]:
    """``perfgate ARGS`` whose stdout is a pipe nobody reads: its read end is closed before
    perfgate writes a byte (``| head -0``), so the first write meets EPIPE. A process of
    its own, not helpers.perfgate: only a real file descriptor can be a closed pipe."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "perfgate", *args],
            cwd=cwd,
            env=_env(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


@pytest.mark.parametrize(("feat_ms", "verdict"), [(15.0, 1), (10.0, 0)])
def test_gate_into_a_closed_pipe_keeps_the_verdicts_exit_code(
    tmp_path: Path, feat_ms: float, verdict: int
) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    fill(
        db,
        [record(i, 10.0) for i in range(6)]
        + [record(i, feat_ms, branch="feat") for i in range(6, 9)],
    )
    code, stderr = _with_closed_stdout(
        tmp_path, "gate", "--db", db, "--branch", "feat", "--against", "main"
    )
    assert code == verdict, stderr
    assert "BrokenPipe" not in stderr and "internal error" not in stderr, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr


def test_history_into_a_closed_pipe_exits_0(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    fill(db, [record(i, 10.0) for i in range(3)])
    code, stderr = _with_closed_stdout(tmp_path, "history", "--db", db)
    assert code == 0, stderr
    assert "BrokenPipe" not in stderr and "Traceback" not in stderr, stderr
