"""What users read is right: implausible input is refused or named, printed numbers are the
gated ones, and the advisor does not report checks that found nothing.

Real inputs where they exist: the torch_npu profiles in tests/data/ascend (PROVENANCE.md
there), the torch.profiler trace in tests/data/torch_trace, msprof-analyze 26.2.0's
``--agent`` rows as it printed them for the 2-rank fixture. The implausible step spans
are small hand-written traces shaped like torch.profiler's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import perfgate as run_perfgate

from perfgate.advisor import msprof
from perfgate.advisor.cluster import cluster_view
from perfgate.advisor.rules import Thresholds, merge_findings, slow_ranks_and_links
from perfgate.errors import ParseError
from perfgate.models import ClusterView, Finding, Severity
from perfgate.parsers.ascend import parse_ascend
from perfgate.parsers.torch_trace import parse_torch_trace
from perfgate.reporters.render import render_findings_lines

DATA = Path(__file__).parent / "data"
LEVEL1 = DATA / "ascend" / "msinsight_pt_text_level1_2rank"
RANK0 = LEVEL1 / "rank0_ascend_pt"
TORCH_TRACE = DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz"


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _x(name: str, ts: float, dur: float, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _trace_span(ts: float, dur: float) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "Trace",
        "name": "PyTorch Profiler (0)",
        "pid": "Spans",
        "tid": "PyTorch Profiler",
        "ts": ts,
        "dur": dur,
    }


def _ops(base: float) -> list[dict[str, Any]]:
    return [_x("aten::linear", base + 10, 400), _x("aten::relu", base + 500, 100)]


def perfgate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_perfgate(cwd, *args, db=f"sqlite:///{cwd / 'store.db'}")


# --------------------------------------------------------------------------- torch trace


def test_a_step_longer_than_the_trace_is_ignored_and_the_trace_read_without_markers(
    tmp_path: Path,
) -> None:
    # 0.36 s of profiler trace, and a ProfilerStep span of 13.3 s starting before it.
    ops = _ops(1000) + _ops(200_000)
    bogus = _write(
        tmp_path / "bogus.json",
        [_trace_span(0, 360_000), _x("ProfilerStep#7", -13_000_000, 13_300_000, "user_annotation")]
        + ops,
    )
    plain = _write(tmp_path / "plain.json", [_trace_span(0, 360_000), *ops])
    s, p = parse_torch_trace(bogus), parse_torch_trace(plain)
    (note,) = [n for n in s.notes if "implausible" in n]
    assert "'ProfilerStep#7' (traceEvents[1])" in note
    assert "13300 ms" in note and "360 ms" in note and "Trace span" in note
    assert "no step markers" in note
    # Everything else is what the same trace without the marker gives.
    assert s.step_times_ms == p.step_times_ms == ()
    assert s.steps == p.steps == 1
    assert s.breakdown == p.breakdown
    assert s.ops == p.ops
    assert [n for n in s.notes if n != note] == list(p.notes)


def test_only_the_implausible_step_is_dropped_when_others_are_sound(tmp_path: Path) -> None:
    events = [
        _trace_span(0, 3000),
        _x("ProfilerStep#1", 0, 1000, "user_annotation"),
        _x("ProfilerStep#2", 1000, 1000, "user_annotation"),
        _x("ProfilerStep#3", 2000, 0, "user_annotation"),  # zero length: not a step
        _x("ProfilerStep#4", 2000, 50_000, "user_annotation"),  # longer than the trace
        *_ops(0),
        *_ops(1000),
    ]
    s = parse_torch_trace(_write(tmp_path / "t.json", events))
    assert s.steps == 2
    assert s.step_times_ms == (1.0, 1.0)
    (note,) = [n for n in s.notes if "implausible" in n]
    assert "the other 2 step(s) are used" in note
    assert "'ProfilerStep#3' (traceEvents[3]) lasts 0 ms, not a positive duration" in note
    assert "'ProfilerStep#4' (traceEvents[4]) lasts 50 ms" in note


def test_without_a_trace_span_only_a_gross_overrun_is_implausible(tmp_path: Path) -> None:
    # Hand-made traces leave idle time in a step that no event covers: 5x is a step.
    idle = parse_torch_trace(
        _write(tmp_path / "idle.json", [_x("ProfilerStep#1", 0, 3000, "user_annotation"), *_ops(0)])
    )
    assert idle.step_times_ms == (3.0,)
    assert not any("implausible" in n for n in idle.notes)
    gross = parse_torch_trace(
        _write(tmp_path / "gross.json", [_x("ProfilerStep#1", 0, 1e7, "user_annotation"), *_ops(0)])
    )
    assert gross.step_times_ms == ()
    assert any("implausible" in n and "10x the extent" in n for n in gross.notes)


def test_the_real_trace_keeps_its_steps() -> None:
    s = parse_torch_trace(TORCH_TRACE)
    assert len(s.step_times_ms) == s.steps == 3
    assert not any("implausible" in n for n in s.notes)


@pytest.mark.parametrize(
    ("dur", "fragment"),
    [(-5, "negative duration (-5"), (float("inf"), "NaN/infinite 'dur'")],
)
def test_bad_event_durations_name_the_file_and_event_index(
    tmp_path: Path, dur: float, fragment: str
) -> None:
    events = [_trace_span(0, 5000), *_ops(0), _x("aten::mm", 700, dur)]
    path = _write(tmp_path / "bad.pt.trace.json", events)
    with pytest.raises(ParseError) as err:
        parse_torch_trace(path)
    text = str(err.value)
    assert text.startswith(str(path)) and "traceEvents[3] 'aten::mm'" in text
    assert fragment in text and "\n" not in text


def test_ingest_of_a_trace_with_a_negative_duration_exits_2(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.pt.trace.json", [*_ops(0), _x("aten::mm", 700, -1)])
    done = perfgate("ingest", str(path), "--benchmark", "b", "--branch", "main", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "traceEvents[2]" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "store.db").exists()


# --------------------------------------------------------------------------- ascend step trace


def _rank_with_step_row(tmp_path: Path, row: str) -> Path:
    rank = tmp_path / "rank0_ascend_pt"
    shutil.copytree(RANK0, rank)
    csv_path = rank / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    header = csv_path.read_text(encoding="utf-8").splitlines()[0]
    csv_path.write_text(f"{header}\n{row}\n", encoding="utf-8")
    return rank


def test_negative_step_trace_durations_are_refused_with_file_and_line(tmp_path: Path) -> None:
    rank = _rank_with_step_row(tmp_path, "50,-10,-5,0,0,-3,-20,0,0,0")
    with pytest.raises(ParseError) as err:
        parse_ascend(rank)
    text = str(err.value)
    assert "step_trace_time.csv:2: Computing is negative (-10 us)" in text
    # The CLI: one line, exit 2, no run recorded.
    done = perfgate(
        "ingest", str(rank), "--benchmark", "b", "--branch", "main", "--no-advisor", cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert "step_trace_time.csv:2:" in done.stderr and "Traceback" not in done.stderr


def test_the_real_step_trace_still_reads() -> None:
    (rank,) = parse_ascend(RANK0)
    assert rank.step_times_ms == pytest.approx((136.581009,))


# --------------------------------------------------------------------------- printed step


def test_ingest_prints_the_gated_step_not_the_warm_up_mean(tmp_path: Path) -> None:
    # A slow first step (warm-up) and four steady ones: mean 120 ms, median 100 ms.
    events: list[dict[str, Any]] = [_trace_span(0, 600_000)]
    base = 0.0
    for k, ms in enumerate((200, 100, 100, 100, 100), start=1):
        events.append(_x(f"ProfilerStep#{k}", base, ms * 1000, "user_annotation"))
        events += _ops(base)
        base += ms * 1000
    path = _write(tmp_path / "warm.pt.trace.json", events)
    args = ("ingest", str(path), "--benchmark", "b", "--branch", "main")
    text = perfgate(*args, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    rows = {
        parts[0].strip(): parts[1]
        for line in text.stdout.splitlines()
        if len(parts := line.rsplit(None, 1)) == 2
    }
    assert rows["step (median of 5 profiled steps)"] == "100.000"
    assert rows["mean step"] == "120.000"
    done = perfgate(*args, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    centre = doc["measurements"]["step_time_ms"]["centre"]
    assert doc["step_time"] == {"ms": centre, "summary": "median of 5 profiled steps"}
    assert centre == pytest.approx(100.0)
    assert doc["step"]["step_ms"] == pytest.approx(120.0)  # the breakdown's mean, as before


# --------------------------------------------------------------------------- advisor

# Rows msprof-analyze 26.2.0 printed with --agent for tests/data/ascend/...level1_2rank.
_HEADERS = [
    "category",
    "description",
    "suggestion",
    "problem count",
    "total_time(us)",
    "time ratio",
    "income(us)",
    "income ratio",
]


def _agent(*rows: list[Any]) -> str:
    doc = {
        "status": "success",
        "code": 0,
        "message": {"problems": {"headers": _HEADERS, "data": list(rows)}},
    }
    return json.dumps(doc)


def test_checks_that_found_nothing_are_not_findings() -> None:
    text = _agent(
        ["slow rank", "There is no slow rank issues", "", "", "", "", "", ""],
        ["AICPU Issues", "No AICPU ops", "", 0, "", "", "", ""],
        ["RANK 0 operator dynamic shape issues", "Found all operators are dynamic shape",
         "1. Please place the following code ...", "1", "", "", "", ""],
        ["Byte Alignment Analysis", "Found the data size of 2 communication operators is not "
         "aligned", "1. Please adjust data size", "", "", "", "", ""],
    )  # fmt: skip
    found = msprof.findings_from_agent_output(text)
    assert [f.rule for f in found] == [
        "RANK 0 operator dynamic shape issues",
        "Byte Alignment Analysis",
    ]


def test_slow_rank_on_the_real_job_states_the_spread_and_no_unsupported_wait_claim() -> None:
    view = cluster_view(parse_ascend(LEVEL1))
    assert view is not None
    (slow,) = [f for f in slow_ranks_and_links(view, Thresholds()) if f.rule == "slow_rank"]
    # rank 0 is slower but waits *more* in collectives (5.94 vs 0.19 ms): nobody waits for it.
    assert "3.5%" in slow.message and "below the 20% critical" in slow.message
    assert "the others wait for it" not in slow.message
    assert "does not show the others waiting for rank 0" in slow.message
    assert slow.severity is Severity.WARNING


def test_slow_rank_says_the_others_wait_when_their_wait_shows_it() -> None:
    view = ClusterView(
        ranks=(0, 1, 2),
        step_ms=(130.0, 100.0, 101.0),
        slowest_rank=0,
        step_spread_pct=30.0,
        comm_wait_ms=(1.0, 29.0, 28.0),
    )
    (slow,) = [f for f in slow_ranks_and_links(view, Thresholds()) if f.rule == "slow_rank"]
    assert slow.message.endswith("the others wait for it")
    assert "at or above the 20% critical threshold" in slow.message
    assert slow.severity is Severity.CRITICAL


def test_msprof_slow_rank_is_merged_into_perfgates() -> None:
    view = ClusterView(ranks=(0, 1), step_ms=(110.0, 100.0), slowest_rank=0, step_spread_pct=10)
    own = [f for f in slow_ranks_and_links(view, Thresholds()) if f.rule == "slow_rank"]
    theirs = msprof.findings_from_agent_output(
        _agent(
            ["slow rank", "Found 1 slow rank: rank 0", "1. check rank 0", "1", "", "", "", ""],
            ["Affinity API Issues", "found 1 apis to be replaced", "1. swap", "", "", "", "", ""],
        )
    )
    merged = merge_findings(own, theirs)
    assert [(f.source, f.rule) for f in merged] == [
        ("perfgate", "slow_rank"),
        ("msprof-analyze", "Affinity API Issues"),
    ]


def test_long_suggestions_are_cut_with_an_ellipsis() -> None:
    long = Finding(
        rule="r", severity=Severity.INFO, location="", message="m", suggestion="word " * 100
    )
    (line,) = [ln for ln in render_findings_lines([long]) if "suggestion:" in ln]
    shown = line.split("suggestion: ", 1)[1]
    assert len(shown) == 300 and shown.endswith("…")
    short = Finding(rule="r", severity=Severity.INFO, location="", message="m", suggestion="ok")
    assert render_findings_lines([short])[-1].endswith("suggestion: ok")
