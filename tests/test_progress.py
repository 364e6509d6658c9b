"""Progress lines in a CI log: without a terminal (and with CI set), ``run``, ``check`` and a
large ``ingest`` print one line per finished repeat or pair on stderr (benchmark, repeat, its
value, the time since the start, what is left); ``--quiet`` turns them off. stdout is the
report either way."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import perfgate

from perfgate.cli import cli
from perfgate.cli.progress import ProgressLines, elapsed_text
from perfgate.runner import RepeatResult, repeat_progress, repeat_value
from perfgate.workloads import BUILTIN

DATA = Path(__file__).parent / "data"


def repeat(step: tuple[float, ...], cpu: tuple[float, ...] = ()) -> RepeatResult:
    return RepeatResult(
        step_ms=step,
        batch_size=1,
        params={},
        peak_memory_bytes=0,
        env={},
        trace_path=None,
        cpu_ms=cpu,
    )


def test_a_line_carries_the_time_since_the_start() -> None:
    now = [100.0]
    lines: list[str] = []
    progress = ProgressLines(clock=lambda: now[0], echo=lines.append)
    now[0] = 165.4
    progress("mlp: repeat 1/3: step 12 ms; 2 left")
    assert lines == ["perfgate: [01:05] mlp: repeat 1/3: step 12 ms; 2 left"]
    assert elapsed_text(3723.9) == "1:02:03"


def test_a_repeat_is_its_median_step_and_cpu_time_and_what_is_left() -> None:
    value = repeat_value(repeat((10.0, 30.0, 12.0, 11.0), cpu=(9.0, 9.5, 10.0)))
    assert value == "step 11.5 ms, cpu 9.5 ms"
    assert repeat_progress("mlp", "repeat", 2, 5, value) == (
        "mlp: repeat 2/5: step 11.5 ms, cpu 9.5 ms; 3 left"
    )
    assert repeat_progress("mlp", "pair", 5, 5, "x").endswith("pair 5/5: x; done")


def test_run_without_a_terminal_prints_a_line_per_repeat_and_quiet_none(tmp_path: Path) -> None:
    """The real command in a fresh process, stderr a pipe and CI=true, as in a CI job."""
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFGATE_")}
    env["CI"] = "true"
    base = [sys.executable, "-m", "perfgate", "run", "--workload", "mlp", "--repeats", "2"]
    base += ["--warmup", "1", "--measured", "3", "--profiled", "0", "--branch", "main"]
    base += ["--commit", "0" * 40, "--db", f"sqlite:///{tmp_path / 's.db'}"]
    for quiet in (False, True):
        proc = subprocess.run(
            [*base, *(["--quiet"] if quiet else [])],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        lines = [x for x in proc.stderr.splitlines() if x.startswith("perfgate: [")]
        if quiet:
            assert lines == [], proc.stderr
            continue
        pattern = r"perfgate: \[\d\d:\d\d\] mlp: repeat {}/2: step [\d.]+ ms, cpu [\d.]+ ms; {}"
        assert re.fullmatch(pattern.format(1, "1 left"), lines[0]), lines
        assert re.fullmatch(pattern.format(2, "done"), lines[1]), lines
        assert len(lines) == 2
        assert "perfgate: [" not in proc.stdout  # the report's stdout is untouched


def test_a_large_profile_is_read_with_progress_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import perfgate.app.ingest as ingest

    monkeypatch.setattr(ingest, "LONG_INGEST_BYTES", 1)  # every profile is large
    trace = DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz"
    args = ["ingest", str(trace), "--benchmark", "b", "--branch", "main"]
    args += ["--db", f"sqlite:///{tmp_path / 's.db'}"]
    result = perfgate(None, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [x for x in result.stderr.splitlines() if x.startswith("perfgate: [")]
    assert len(lines) == 2, result.stderr
    assert re.fullmatch(
        rf"perfgate: \[00:\d\d\] reading {re.escape(str(trace))} \([\d.]+ MB\)", lines[0]
    )
    assert lines[1].endswith(f"read {trace}: torch_trace, 1 rank(s), 3 step(s)"), lines
    quiet = perfgate(None, *args, "--quiet")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "perfgate: [" not in quiet.stderr


def test_a_small_ingest_prints_no_progress(tmp_path: Path) -> None:
    trace = DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz"
    args = ["ingest", str(trace), "--benchmark", "b", "--branch", "main"]
    result = perfgate(None, *args, "--db", f"sqlite:///{tmp_path / 's.db'}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "perfgate: [" not in result.stderr


@pytest.mark.parametrize("command", ["run", "check"])
def test_workload_help_lists_every_built_in_workload(command: str) -> None:
    result = perfgate(None, command, "--help")
    assert result.returncode == 0, result.stdout + result.stderr
    (option,) = [p for p in cli.commands[command].params if p.name == "workloads"]
    text = str(getattr(option, "help", ""))
    output = result.stdout + result.stderr
    assert "".join(text.split()) in "".join(output.split())  # wrapped anywhere, even at a '-'
    for name in BUILTIN:
        assert re.search(rf"\b{name}\b", text), (name, text)
    assert "--quiet" in output
