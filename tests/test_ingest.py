"""perfgate ingest: a team's own profile becomes a recorded, gated run.

Real inputs throughout: the torch_npu profiles in tests/data/ascend (see its PROVENANCE.md),
a real torch.profiler trace, a real SQLite store, and msprof-analyze's advisor run for real
(the ``ascend`` extra, which the README's test command installs).
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import perfgate

from perfgate.advisor import msprof
from perfgate.app.advise import read_job
from perfgate.app.ingest import ingest_and_record, job_step_times
from perfgate.config import Config
from perfgate.models import CIContext, GitContext, Severity
from perfgate.store import open_store

DATA = Path(__file__).parent / "data"
ASCEND = DATA / "ascend"
LEVEL1 = ASCEND / "msinsight_pt_text_level1_2rank"
RANK0 = LEVEL1 / "rank0_ascend_pt"
TORCH_TRACE = DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz"


def invoke(*args: str) -> tuple[int, str, str]:
    done = perfgate(None, *args)
    return done.returncode, done.stdout, done.stderr


def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


def stored_runs(url: str) -> int:
    store = open_store(url)
    try:
        return len(
            {
                p.run_id
                for b in store.benchmarks(project="default")
                for p in store.history(project="default", benchmark=b, branch=None, limit=1000)
            }
        )
    finally:
        store.close()


def step_trace(rank_dir: Path) -> dict[str, float]:
    path = rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        row = next(csv.DictReader(fh))
    return {k: float(v) for k, v in row.items() if k != "Step"}


def op_statistic(rank_dir: Path) -> dict[str, float]:
    path = rank_dir / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return {r["OP Type"]: float(r["Total Time(us)"]) / 1000 for r in csv.DictReader(fh)}


def test_contract_ingest_of_one_rank_prints_the_step_op_types_and_advisor_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(DATA)  # a relative PATH, as a user would type it
    code, out, err = invoke(
        "ingest", "ascend/msinsight_pt_text_level1_2rank/rank0_ascend_pt", "--benchmark",
        "alexnet-dp", "--json", "--db", db(tmp_path), "--branch", "main",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format_version"] == 1
    assert doc["format"] == "ascend"
    step = doc["step"]
    assert round(step["computing_ms"], 3) == 8.874
    assert round(step["communication_not_overlapped_ms"], 3) == 101.963
    assert round(step["free_ms"], 3) == 25.744
    expected = step_trace(RANK0)
    assert step["step_ms"] == pytest.approx(
        (expected["Computing"] + expected["Communication(Not Overlapped)"] + expected["Free"])
        / 1000
    )
    totals = op_statistic(RANK0)
    top = doc["top_op_types"]
    assert top, "no op types"
    assert [t["total_time_ms"] for t in top] == sorted(
        (t["total_time_ms"] for t in top), reverse=True
    )
    for t in top:
        assert t["total_time_ms"] == pytest.approx(totals[t["op_type"]], rel=1e-9)
    assert top[0]["op_type"] == max(totals, key=lambda k: totals[k])
    # msprof-analyze ran for real: its report's categories are there, marked as its own.
    assert doc["advisor"]["problem"] is None
    assert doc["advisor"]["version"] == msprof.msprof_version()
    theirs = {f["rule"] for f in doc["findings"] if f["source"] == "msprof-analyze"}
    assert {"Overall Summary", "Byte Alignment Analysis"} <= theirs
    # perfgate's own rules beside them: one list, as advise and the gate show it.
    own = {f["rule"] for f in doc["findings"] if f["source"] == "perfgate"}
    assert "comm_not_overlapped" in own
    assert {f["source"] for f in doc["findings"]} == {"perfgate", "msprof-analyze"}
    assert doc["measurements"]["step_time_ms"]["n"] == 1
    assert stored_runs(db(tmp_path)) == 1


def test_findings_are_stored_with_the_run_and_shown_by_the_gate(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    url = db(tmp_path)
    for i in range(6):
        times = tmp_path / f"main{i}.txt"
        times.write_text("\n".join(f"{x:.4f}" for x in 136.0 * rng.lognormal(0, 0.01, 5)))
        code, _, err = invoke(
            "ingest", str(RANK0), "--benchmark", "alexnet-dp", "--db", url,
            "--branch", "main", "--step-times", str(times), "--no-advisor",
        )  # fmt: skip
        assert code == 0, err
    slow = tmp_path / "feat.txt"
    slow.write_text("\n".join(f"{x:.4f}" for x in 1.4 * 136.0 * rng.lognormal(0, 0.01, 5)))
    code, out, err = invoke(
        "ingest", str(RANK0), "--benchmark", "alexnet-dp", "--db", url,
        "--branch", "feat", "--step-times", str(slow),
    )  # fmt: skip
    assert code == 0, err
    assert "Byte Alignment Analysis" in out

    code, out, err = invoke("gate", "--db", url, "--branch", "feat", "--against", "main")
    assert code == 1, out + err
    assert "REGRESSION" in out
    assert "msprof-analyze: Byte Alignment Analysis @ alexnet-dp: rank 0" in out

    code, out, _ = invoke("gate", "--db", url, "--branch", "feat", "--against", "main", "--json")
    doc = json.loads(out)
    step = next(c for c in doc["comparisons"] if c["metric"] == "step_time_ms")
    assert step["verdict"] == "regression"
    assert any(f["rule"] == "Operator Dynamic Shape Issues" for f in doc["findings"])


def test_two_rank_job_gives_per_rank_summaries_and_names_the_slower_rank(tmp_path: Path) -> None:
    profiled = read_job(LEVEL1)
    assert [p.rank for p in profiled.ranks] == [0, 1]
    assert profiled.cluster is not None
    steps = {r: step_trace(LEVEL1 / f"rank{r}_ascend_pt") for r in (0, 1)}
    e2e = {
        r: (s["Computing"] + s["Communication(Not Overlapped)"] + s["Free"]) / 1000
        for r, s in steps.items()
    }
    slower = max(e2e, key=lambda r: e2e[r])
    assert profiled.cluster.slowest_rank == slower
    assert profiled.slowest.rank == slower
    assert job_step_times(profiled.ranks) == pytest.approx((max(e2e.values()),))

    code, out, err = invoke(
        "ingest", str(LEVEL1), "--benchmark", "alexnet-dp", "--db", db(tmp_path),
        "--branch", "main", "--json", "--no-advisor",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["cluster"]["slowest_rank"] == slower
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    store = open_store(db(tmp_path))
    try:
        run = store.get_run(doc["run"]["id"])
    finally:
        store.close()
    assert [p.rank for p in run.rank_profiles] == [0, 1]
    assert run.fingerprint.device_kind == "npu"
    assert run.fingerprint.device_count == 2
    assert run.fingerprint.params["profiler_level"] == "Level1"


def test_torch_trace_file_and_trace_handler_directory_give_the_same_metrics(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "tb"
    folder.mkdir()
    shutil.copy(TORCH_TRACE, folder / "host_123.1700000000000.pt.trace.json.gz")
    url = db(tmp_path)
    docs = []
    for path in (TORCH_TRACE, folder):
        code, out, err = invoke(
            "ingest", str(path), "--benchmark", "mlp-trace", "--db", url,
            "--branch", "main", "--json",
        )  # fmt: skip
        assert code == 0, err
        docs.append(json.loads(out))
    file_doc, dir_doc = docs
    assert file_doc["format"] == dir_doc["format"] == "torch_trace"
    # No msprof-analyze on a torch trace: only perfgate's own rules find something.
    assert file_doc["advisor"] is None
    assert {f["source"] for f in file_doc["findings"]} == {"perfgate"}
    assert file_doc["findings"] == dir_doc["findings"]
    assert file_doc["measurements"] == dir_doc["measurements"]
    # Several profiled steps become the run's samples.
    assert file_doc["measurements"]["step_time_ms"]["n"] == file_doc["steps"] == 3
    assert file_doc["measurements"]["op_calls_per_step"]["n"] == 1


def test_step_times_file_takes_precedence(tmp_path: Path) -> None:
    times = tmp_path / "steps.txt"
    times.write_text("# measured by the training script\n100.5\n101.5\n\n99.0\n")
    code, out, err = invoke(
        "ingest", str(TORCH_TRACE), "--benchmark", "b", "--db", db(tmp_path),
        "--branch", "main", "--json", "--step-times", str(times),
    )  # fmt: skip
    assert code == 0, err
    step = json.loads(out)["measurements"]["step_time_ms"]
    assert step["n"] == 3
    assert step["median"] == pytest.approx(100.5)
    code, out, err = invoke(
        "ingest", str(TORCH_TRACE), "--benchmark", "b", "--db", db(tmp_path),
        "--branch", "main", "--step-times", str(times),
    )  # fmt: skip
    assert code == 0, err
    # it said "median of 3 profiled steps" of the file's own timings
    assert "(median of 3 steps of steps.txt, timed apart)" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("100\nfast\n", "steps.txt:2: 'fast' is not a number of ms"),
        ("100\n-3\n", "steps.txt:2: step time -3 ms is not a positive number"),
        ("# nothing\n", "no step times"),
    ],
)
def test_bad_step_times_file_is_one_line_and_writes_nothing(
    tmp_path: Path, content: str, message: str
) -> None:
    times = tmp_path / "steps.txt"
    times.write_text(content)
    code, out, err = invoke(
        "ingest", str(TORCH_TRACE), "--benchmark", "b", "--db", db(tmp_path),
        "--branch", "main", "--step-times", str(times),
    )  # fmt: skip
    assert code == 2
    assert err.strip().count("\n") == 0 and message in err
    assert stored_runs(db(tmp_path)) == 0


def test_directory_without_profiler_output_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "x_ascend_pt"
    empty.mkdir()
    (empty / "profiler_info_0.json").write_text("{}")
    code, _, err = invoke(
        "ingest", str(empty), "--benchmark", "b", "--db", db(tmp_path), "--branch", "main"
    )
    assert code == 2
    line = err.strip()
    assert "\n" not in line and str(empty) in line and "ASCEND_PROFILER_OUTPUT" in line
    assert stored_runs(db(tmp_path)) == 0


def test_truncated_step_trace_is_refused_and_nothing_is_recorded(tmp_path: Path) -> None:
    broken = tmp_path / "rank0_ascend_pt"
    shutil.copytree(RANK0, broken)
    csv_path = broken / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    text = csv_path.read_text()
    csv_path.write_text(text[: len(text) // 2 + 40])
    code, _, err = invoke(
        "ingest", str(broken), "--benchmark", "b", "--db", db(tmp_path), "--branch", "main"
    )
    assert code == 2, err
    assert "step_trace_time.csv" in err and "\n" not in err.strip()
    assert stored_runs(db(tmp_path)) == 0


def _ingest(tmp_path: Path) -> tuple[str | None, int]:
    store = open_store(db(tmp_path))
    try:
        result = ingest_and_record(
            Config(),
            store,
            RANK0,
            benchmark="b",
            git=GitContext(commit="abc", branch="main"),
            ci=CIContext(),
            advisor_timeout_s=2.0,
        )
    finally:
        store.close()
    return result.advisor_problem, len(result.record.findings)


def test_missing_advisor_is_one_line_and_the_run_is_still_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(msprof, "_command", lambda: None)
    problem, found = _ingest(tmp_path)
    assert problem is not None and "msprof-analyze is not installed" in problem
    assert found == 0
    assert stored_runs(db(tmp_path)) == 1


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("import sys; sys.exit(3)", "exited with status 3"),
        ("import time; time.sleep(30)", "timed out after 2 s"),
        ("print('not json')", "printed no --agent JSON report"),
    ],
)
def test_failing_advisor_is_reported_and_everything_else_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, expected: str
) -> None:
    monkeypatch.setattr(msprof, "_command", lambda: [sys.executable, "-c", script])
    problem, found = _ingest(tmp_path)
    assert problem is not None and expected in problem
    assert found == 0
    assert stored_runs(db(tmp_path)) == 1


def test_agent_report_rows_become_findings_with_numeric_evidence() -> None:
    report = {
        "status": "success",
        "code": 0,
        "message": {
            "problems": {
                "headers": ["category", "description", "suggestion", "problem count",
                            "total_time(us)", "time ratio", "income(us)", "income ratio"],
                "data": [
                    ["Overall Summary", "E2E 136 ms", "", "", "", "", "", ""],
                    ["AICPU Issues", "2 AI CPU ops", "1. use AI Core", 2, "1500.5", "12.5%",
                     "300", "0.02"],
                ],
            }
        },
    }  # fmt: skip
    text = "some log line\n" + json.dumps(report) + "\n"
    found = msprof.findings_from_agent_output(text, location="rank 3")
    assert [f.rule for f in found] == ["Overall Summary", "AICPU Issues"]
    assert found[0].severity is Severity.INFO and found[1].severity is Severity.WARNING
    assert found[1].evidence == {
        "problem_count": 2.0,
        "total_time_us": 1500.5,
        "time_ratio": 0.125,
        "income_us": 300.0,
        "income_ratio": 0.02,
    }
    assert found[1].location == "rank 3"
    with pytest.raises(ValueError, match="status"):
        msprof.findings_from_agent_output(json.dumps({"status": "error", "code": 1}))
    empty = {"status": "success", "message": {"problems": {"headers": None, "data": None}}}
    assert msprof.findings_from_agent_output(json.dumps(empty)) == ()
