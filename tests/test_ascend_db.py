"""Tests of perfgate.parsers.ascend.db on the real 2-rank db-format fixture.

Expected numbers come from the fixture databases themselves through independent SQL, and
from the text export of the same job (``msinsight_pt_text_level1_2rank``). The text and
db fixtures are two collection sessions of one job, so only structure and memory agree
exactly; the timing tolerances below are justified from the measured differences.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from perfgate.errors import ParseError
from perfgate.models import OpStat, ProfileSummary
from perfgate.parsers.ascend.db import SOURCE_DB, parse_ascend_db_rank

DATA = Path(__file__).parent / "data" / "ascend"
DB_JOB = DATA / "msinsight_pt_db_level1_2rank"
TEXT_JOB = DATA / "msinsight_pt_text_level1_2rank"
OUT = "ASCEND_PROFILER_OUTPUT"
RANKS = (0, 1)
MIB = 1024 * 1024


def _rank_dir(job: Path, rank: int) -> Path:
    return job / f"rank{rank}_ascend_pt"


def _profiler_db(rank: int, root: Path = DB_JOB) -> Path:
    return _rank_dir(root, rank) / OUT / f"ascend_pytorch_profiler_{rank}.db"


def _analysis_db(rank: int, root: Path = DB_JOB) -> Path:
    return _rank_dir(root, rank) / OUT / "analysis.db"


def _query(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    # immutable=1 as in the parser: the rank 0 db is in WAL mode and a plain read-only
    # open would leave -wal/-shm files in tests/data.
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        return conn.execute(sql, params).fetchall()


def _one(path: Path, sql: str, params: tuple[Any, ...] = ()) -> Any:
    rows = _query(path, sql, params)
    assert len(rows) == 1 and len(rows[0]) == 1, rows
    return rows[0][0]


@pytest.fixture(scope="module")
def summaries() -> dict[int, ProfileSummary]:
    return {rank: parse_ascend_db_rank(_rank_dir(DB_JOB, rank)) for rank in RANKS}


def _by_key(ops: tuple[OpStat, ...]) -> dict[tuple[str, str], OpStat]:
    out = {(o.name, o.core): o for o in ops}
    assert len(out) == len(ops), "duplicate (name, core)"
    return out


def _copy_rank(tmp_path: Path, rank: int, *, analysis: bool = True) -> Path:
    target = _rank_dir(tmp_path / "job", rank)
    shutil.copytree(_rank_dir(DB_JOB, rank), target, copy_function=shutil.copyfile)
    if not analysis:
        (target / OUT / "analysis.db").unlink()
    return target


# --- identity -----------------------------------------------------------------------------


@pytest.mark.parametrize("rank", RANKS)
def test_identity_and_collection(summaries: dict[int, ProfileSummary], rank: int) -> None:
    s = summaries[rank]
    assert s.source == SOURCE_DB == "ascend_db"
    assert s.rank == rank
    assert s.raw_files == (
        f"profiler_info_{rank}.json",
        f"{OUT}/ascend_pytorch_profiler_{rank}.db",
        f"{OUT}/analysis.db",
    )
    info = json.loads((_rank_dir(DB_JOB, rank) / f"profiler_info_{rank}.json").read_text())
    experimental = info["config"]["experimental_config"]
    assert s.collection["profiler_level"] == experimental["_profiler_level"] == "Level1"
    assert s.collection["aic_metrics"] == experimental["_aic_metrics"]
    assert s.collection["export_type"] == "db"
    assert s.collection["rank"] == str(rank)
    db = _profiler_db(rank)
    assert s.collection["device"] == _one(db, "SELECT name FROM NPU_INFO") == "Ascend910B"
    schema = _one(db, "SELECT value FROM META_DATA WHERE name = 'SCHEMA_VERSION'")
    assert s.collection["db_schema_version"] == schema == "1.0.0"
    assert "breakdown: from analysis.db StepTraceTime" in s.notes


# --- against the databases (independent SQL) ----------------------------------------------


@pytest.mark.parametrize("rank", RANKS)
def test_steps_and_breakdown_are_step_trace_time(
    summaries: dict[int, ProfileSummary], rank: int
) -> None:
    s = summaries[rank]
    rows = _query(
        _analysis_db(rank),
        "SELECT computing, communication_not_overlapped, overlapped, free, bubble, preparing "
        "FROM StepTraceTime",
    )
    assert s.steps == len(rows) == 1
    computing, not_overlapped, overlapped, free, bubble, preparing = rows[0]
    # StepTraceTime is in µs (the docs say ms): 8903.431 µs of compute in a ~132 ms step.
    assert s.step_times_ms == pytest.approx([(computing + not_overlapped + free) / 1000])
    b = s.breakdown
    assert b is not None
    assert b.step_ms == pytest.approx((computing + not_overlapped + free) / 1000)
    assert b.compute_ms == pytest.approx(computing / 1000)
    assert b.communication_not_overlapped_ms == pytest.approx(not_overlapped / 1000)
    assert b.communication_overlapped_ms == pytest.approx(overlapped / 1000)
    assert b.free_ms == pytest.approx(free / 1000)
    assert b.bubble_ms == pytest.approx(bubble / 1000)
    assert b.preparing_ms == pytest.approx(preparing / 1000)
    assert b.data_loading_ms is None
    assert s.device_busy_fraction == pytest.approx(computing / (computing + not_overlapped + free))


_COMPUTE_TASKS = (
    "FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId "
    "JOIN STRING_IDS n ON n.id = c.name JOIN STRING_IDS o ON o.id = c.opType "
    "JOIN STRING_IDS k ON k.id = c.taskType"
)


@pytest.mark.parametrize("rank", RANKS)
def test_ops_are_compute_tasks_and_communication_ops(
    summaries: dict[int, ProfileSummary], rank: int
) -> None:
    s = summaries[rank]
    db = _profiler_db(rank)
    tasks, task_ns = _query(db, f"SELECT COUNT(*), SUM(t.endNs - t.startNs) {_COMPUTE_TASKS}")[0]
    comms, comm_ns = _query(db, "SELECT COUNT(*), SUM(endNs - startNs) FROM COMMUNICATION_OP")[0]
    assert (tasks, comms) == (187, 4)
    assert s.kernel_launches_per_step == tasks / s.steps
    assert s.op_calls_per_step == (tasks + comms) / s.steps
    assert sum(o.calls_per_step for o in s.ops) == pytest.approx(tasks + comms)
    assert sum(o.total_time_ms_per_step for o in s.ops) == pytest.approx((task_ns + comm_ns) / 1e6)
    assert all(
        o.device == "npu" and o.self_time_ms_per_step == o.total_time_ms_per_step for o in s.ops
    )
    times = [o.self_time_ms_per_step for o in s.ops]
    assert times == sorted(times, reverse=True)

    # Cores are COMPUTE_TASK_INFO.taskType (the Accelerator Core), HCCL for collectives.
    cores = {k for (k,) in _query(db, f"SELECT DISTINCT k.value {_COMPUTE_TASKS}")}
    assert cores == {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIV", "DSA_SQE"}
    assert {o.core for o in s.ops} == cores | {"HCCL"}

    ops = _by_key(s.ops)
    for name, start, end, op_type in _query(
        db,
        "SELECT n.value, c.startNs, c.endNs, o.value FROM COMMUNICATION_OP c "
        "JOIN STRING_IDS n ON n.id = c.opName JOIN STRING_IDS o ON o.id = c.opType",
    ):
        op = ops[(name, "HCCL")]
        assert op.op_type == op_type == "hcom_allReduce_"
        assert op.total_time_ms_per_step == pytest.approx((end - start) / 1e6)
        assert op.input_shapes == () and dict(op.metrics) == {}

    calls, total_ns, first_shape = _query(
        db,
        "SELECT COUNT(*), SUM(t.endNs - t.startNs), "
        "(SELECT s.value FROM TASK t2 JOIN COMPUTE_TASK_INFO c2 ON c2.globalTaskId = "
        "t2.globalTaskId JOIN STRING_IDS n2 ON n2.id = c2.name JOIN STRING_IDS s "
        "ON s.id = c2.inputShapes WHERE n2.value = 'Conv2D1' ORDER BY t2.startNs LIMIT 1) "
        f"{_COMPUTE_TASKS} WHERE n.value = 'Conv2D1'",
    )[0]
    conv = ops[("Conv2D1", "AI_CORE")]
    assert conv.op_type == "Conv2D"
    assert conv.calls_per_step == calls == 1
    assert conv.total_time_ms_per_step == pytest.approx(total_ns / 1e6)
    assert conv.input_shapes == (first_shape.replace('"', ""),)


@pytest.mark.parametrize("rank", RANKS)
def test_op_types_aggregate_by_type_and_core(
    summaries: dict[int, ProfileSummary], rank: int
) -> None:
    s = summaries[rank]
    rows = _query(
        _profiler_db(rank),
        f"SELECT o.value, k.value, COUNT(*), SUM(t.endNs - t.startNs) {_COMPUTE_TASKS} "
        "GROUP BY o.value, k.value",
    )
    types = _by_key(s.op_types)
    assert set(types) == {(t, k) for t, k, _, _ in rows}
    for op_type, core, count, total_ns in rows:
        stat = types[(op_type, core)]
        assert stat.op_type == op_type and stat.device == "npu"
        assert stat.calls_per_step == count / s.steps
        assert stat.total_time_ms_per_step == pytest.approx(total_ns / 1e6 / s.steps)
    # ReduceSum runs as MIX_AIV and KERNEL_AICORE hardware tasks; one type, one core.
    assert types[("ReduceSum", "MIX_AIV")].calls_per_step == 10
    assert not any(o.core == "HCCL" for o in s.op_types)


@pytest.mark.parametrize("rank", RANKS)
def test_pmu_metrics_are_duration_weighted(summaries: dict[int, ProfileSummary], rank: int) -> None:
    db = _profiler_db(rank)
    ops = _by_key(summaries[rank].ops)
    pmu = (
        f"{_COMPUTE_TASKS} JOIN TASK_PMU_INFO p ON p.globalTaskId = t.globalTaskId "
        "JOIN STRING_IDS m ON m.id = p.name WHERE n.value = ? AND m.value = ?"
    )
    conv = ops[("Conv2D1", "AI_CORE")].metrics
    assert conv["aic_mac_ratio"] == pytest.approx(
        _one(db, f"SELECT p.value {pmu}", ("Conv2D1", "aic_mac_ratio"))
    )
    # PMU times are ns in the db and µs in kernel_details.csv, whose names are used.
    mac_ns = _one(db, f"SELECT p.value {pmu}", ("Conv2D1", "aic_mac_time"))
    assert conv["aic_mac_time(us)"] == pytest.approx(mac_ns / 1000)
    total_ns = _one(db, f"SELECT p.value {pmu}", ("Conv2D1", "aic_total_time"))
    assert conv["aicore_time(us)"] == pytest.approx(total_ns / 1000)

    # The op with the most calls: a duration-weighted mean, not a plain one.
    busiest = max((o for o in ops.values() if o.metrics), key=lambda o: o.calls_per_step)
    assert busiest.calls_per_step > 1
    weighted = _one(
        db,
        "SELECT SUM(p.value * (t.endNs - t.startNs)) * 1.0 / SUM(t.endNs - t.startNs) "
        f"{pmu} AND k.value = ?",
        (busiest.name, "aiv_vec_ratio", busiest.core),
    )
    assert busiest.metrics["aiv_vec_ratio"] == pytest.approx(weighted)

    # DSA_SQE tasks have no PMU rows (N/A in kernel_details.csv): no metrics.
    assert all(not o.metrics for o in ops.values() if o.core == "DSA_SQE")


@pytest.mark.parametrize("rank", RANKS)
def test_memory_is_pta_records_in_bytes(summaries: dict[int, ProfileSummary], rank: int) -> None:
    s = summaries[rank]
    db = _profiler_db(rank)
    pta = "FROM MEMORY_RECORD r JOIN STRING_IDS s ON s.id = r.component WHERE s.value = 'PTA'"
    peak, reserved = _query(db, f"SELECT MAX(totalAllocated), MAX(totalReserved) {pta}")[0]
    series = [a for (a,) in _query(db, f"SELECT totalAllocated {pta} ORDER BY timestamp, r.rowid")]
    assert s.peak_memory_bytes == peak == 1245688832
    assert s.peak_reserved_bytes == reserved
    assert s.memory_growth_bytes == series[-1] - series[0]


@pytest.mark.parametrize("rank", RANKS)
def test_communication_sums_the_op_rows(summaries: dict[int, ProfileSummary], rank: int) -> None:
    c = summaries[rank].communication
    assert c is not None
    adb = _analysis_db(rank)
    # The fixture has no "Total Op Info" rows: the op rows are summed.
    assert (
        _one(adb, "SELECT COUNT(*) FROM CommAnalyzerTime WHERE hccl_op_name = 'Total Op Info'") == 0
    )
    count, elapse, transit, wait, sync, idle = _query(
        adb,
        "SELECT COUNT(*), SUM(elapse_time), SUM(transit_time), SUM(wait_time), "
        "SUM(synchronization_time), SUM(idle_time) FROM CommAnalyzerTime",
    )[0]
    assert c.ops_per_step == count == 4
    assert (c.elapse_ms, c.transit_ms, c.wait_ms, c.synchronization_ms, c.idle_ms) == pytest.approx(
        (elapse, transit, wait, sync, idle)
    )
    assert c.wait_ratio == pytest.approx(wait / (wait + transit))
    assert c.synchronization_ratio == pytest.approx(sync / (sync + transit))
    # CommAnalyzerBandwidth repeats each op's totals on one row per packet size.
    links = {
        link: (size, time)
        for link, size, time in _query(
            adb,
            "SELECT transport_type, SUM(transit_size), SUM(transit_time) FROM (SELECT DISTINCT "
            "hccl_op_name, transport_type, transit_size, transit_time FROM CommAnalyzerBandwidth) "
            "GROUP BY transport_type",
        )
    }
    assert {x.link for x in c.links} == set(links) == {"HCCS", "SDMA"}
    for x in c.links:
        size, time = links[x.link]
        assert (x.transit_size_mb, x.transit_time_ms) == pytest.approx((size, time))
        assert x.bandwidth_gb_s == pytest.approx(size / time)


# --- the same job exported as text ---------------------------------------------------------


def _csv(rank: int, name: str) -> list[dict[str, str]]:
    path = _rank_dir(TEXT_JOB, rank) / OUT / name
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _close(db_value: float | None, text_value: float | None, rel: float) -> bool:
    assert db_value is not None and text_value is not None
    return abs(db_value - text_value) <= rel * abs(text_value)


# Measured db-vs-text differences (db / text - 1), rank 0 | rank 1:
#   compute +0.33% | +0.42%, overlapped +0.19% | +0.45%, op-type total time +0.33% | +0.42%
#   step -3.2% | -2.0%, comm not overlapped -3.8% | -1.9%, free -1.9% | -3.1%,
#   comm elapse -3.7% | -1.8%, transit +8.2% | +4.2%, idle -2.0% | -5.8%,
#   link transit time +4.6% | +4.4%; preparing (host launch latency) +0.9% | -14.3%;
#   wait/sync differ by up to 20x: they measure which rank reached each allreduce first.
# Device compute is the same kernels on the same shapes: 2%. Communication and idle time
# depend on the other rank's timing in each session: 10%. Preparing: 25%.
_COMPUTE_REL = 0.02
_COMM_REL = 0.10
_PREPARING_REL = 0.25


@pytest.mark.parametrize("rank", RANKS)
def test_same_job_as_text_breakdown(summaries: dict[int, ProfileSummary], rank: int) -> None:
    b = summaries[rank].breakdown
    assert b is not None
    (row,) = _csv(rank, "step_trace_time.csv")
    text = {k: float(v) / 1000 for k, v in row.items() if k != "Step"}
    step = text["Computing"] + text["Communication(Not Overlapped)"] + text["Free"]
    assert summaries[rank].steps == 1
    assert _close(b.compute_ms, text["Computing"], _COMPUTE_REL)
    assert _close(b.communication_overlapped_ms, text["Overlapped"], _COMPUTE_REL)
    assert _close(b.step_ms, step, _COMM_REL)
    assert _close(
        b.communication_not_overlapped_ms, text["Communication(Not Overlapped)"], _COMM_REL
    )
    assert _close(b.free_ms, text["Free"], _COMM_REL)
    assert _close(b.preparing_ms, text["Preparing"], _PREPARING_REL)
    assert b.bubble_ms == text["Bubble"] == 0


@pytest.mark.parametrize("rank", RANKS)
def test_same_job_as_text_kernels(summaries: dict[int, ProfileSummary], rank: int) -> None:
    s = summaries[rank]
    rows = _csv(rank, "kernel_details.csv")
    # 187 compute rows + 4 HCCL rows, one per task, in both exports.
    assert s.op_calls_per_step == len(rows) == 191
    cores = Counter(r["Accelerator Core"] for r in rows)
    assert cores == Counter(
        {"AI_VECTOR_CORE": 149, "AI_CORE": 23, "MIX_AIV": 13, "HCCL": 4, "DSA_SQE": 2}
    )
    db_cores: Counter[str] = Counter()
    for op in s.ops:
        db_cores[op.core] += int(op.calls_per_step)
    assert db_cores == cores
    assert s.kernel_launches_per_step == len(rows) - cores["HCCL"]

    # Compute kernels: the same names, cores, op types, counts and input shapes. The HCCL
    # op names carry a per-session id (hcom_allReduce__586_0_1 vs __210_0_1).
    text_ops: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in rows:
        if r["Accelerator Core"] != "HCCL":
            text_ops.setdefault((r["Name"], r["Accelerator Core"]), []).append(r)
    db_ops = {k: o for k, o in _by_key(s.ops).items() if k[1] != "HCCL"}
    assert set(db_ops) == set(text_ops)
    for key, group in text_ops.items():
        op = db_ops[key]
        assert op.calls_per_step == len(group)
        assert {r["Type"] for r in group} == {op.op_type}
        shapes: list[str] = []
        for r in group:
            shape = r["Input Shapes"].replace('"', "")
            if shape not in ("", "N/A") and shape not in shapes:
                shapes.append(shape)
        assert op.input_shapes == tuple(shapes[:3])
    hccl = [o for o in s.ops if o.core == "HCCL"]
    assert sorted(o.op_type for o in hccl) == sorted(
        r["Type"] for r in rows if r["Accelerator Core"] == "HCCL"
    )

    # PMU ratios of the kernels that matter (>= 0.1 ms): the db keeps full precision, the
    # CSV three decimals; the measured largest gap over both ranks is 0.026 (aic_mte2_ratio).
    for key, group in text_ops.items():
        op = db_ops[key]
        if op.total_time_ms_per_step < 0.1:
            continue
        durations = [float(r["Duration(us)"]) for r in group]
        for name in ("aic_mac_ratio", "aic_mte2_ratio", "aiv_vec_ratio", "aiv_mte2_ratio"):
            text_mean = sum(
                float(r[name]) * d for r, d in zip(group, durations, strict=True)
            ) / sum(durations)
            assert op.metrics[name] == pytest.approx(text_mean, abs=0.05), (key, name)
    # The db has no cube_utilization(%) counter (it is computed by the CSV export).
    assert "cube_utilization(%)" not in db_ops[("Conv2D1", "AI_CORE")].metrics


@pytest.mark.parametrize("rank", RANKS)
def test_same_job_as_text_op_statistic(summaries: dict[int, ProfileSummary], rank: int) -> None:
    s = summaries[rank]
    rows = _csv(rank, "op_statistic.csv")
    text = {(r["OP Type"], r["Core Type"]): r for r in rows}
    types = _by_key(s.op_types)
    assert set(types) == set(text)
    for key, row in text.items():
        assert types[key].calls_per_step == int(row["Count"]), key
    text_total = sum(float(r["Total Time(us)"]) for r in rows) / 1000
    db_total = sum(o.total_time_ms_per_step for o in s.op_types)
    assert _close(db_total, text_total, _COMPUTE_REL)
    # Per type, the short ones jitter most (NLLLossGrad 8.4 vs 11.4 µs); types over 0.1 ms
    # differ by at most 7.2% (ReluGrad) on either rank.
    for key, row in text.items():
        total = float(row["Total Time(us)"]) / 1000
        if total >= 0.1:
            assert _close(types[key].total_time_ms_per_step, total, _COMM_REL), key


@pytest.mark.parametrize("rank", RANKS)
def test_same_job_as_text_memory(summaries: dict[int, ProfileSummary], rank: int) -> None:
    s = summaries[rank]
    pta = [r for r in _csv(rank, "memory_record.csv") if r["Component"] == "PTA"]
    pta.sort(key=lambda r: float(r["Timestamp(us)"].strip()))
    allocated = [round(float(r["Total Allocated(MB)"]) * MIB) for r in pta]
    reserved = [round(float(r["Total Reserved(MB)"]) * MIB) for r in pta]
    # The allocator replays identically: same bytes (the CSV's "MB" is MiB).
    assert s.peak_memory_bytes == max(allocated)
    assert s.peak_reserved_bytes == max(reserved)
    assert s.memory_growth_bytes == allocated[-1] - allocated[0]


@pytest.mark.parametrize("rank", RANKS)
def test_same_job_as_text_communication(summaries: dict[int, ProfileSummary], rank: int) -> None:
    c = summaries[rank].communication
    assert c is not None
    path = _rank_dir(TEXT_JOB, rank) / OUT / "communication.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    (step,) = doc.values()
    collective = step["collective"]
    total = collective["Total Op Info"]
    times = total["Communication Time Info"]
    assert c.ops_per_step == len(collective) - 1 == 4
    assert _close(c.elapse_ms, times["Elapse Time(ms)"], _COMM_REL)
    assert _close(c.transit_ms, times["Transit Time(ms)"], _COMM_REL)
    assert _close(c.idle_ms, times["Idle Time(ms)"], _COMM_REL)
    links = {x.link: x for x in c.links}
    used = {
        k: v for k, v in total["Communication Bandwidth Info"].items() if v["Transit Size(MB)"] > 0
    }
    assert set(links) == set(used)
    for name, info in used.items():
        # The same tensors are reduced: the same megabytes.
        assert links[name].transit_size_mb == pytest.approx(info["Transit Size(MB)"])
        assert _close(links[name].transit_time_ms, info["Transit Time(ms)"], _COMM_REL)
    # Wait and synchronisation depend on which rank reached each allreduce first: no
    # tolerance holds across sessions (rank 1: 0.19 ms in text, 3.84 ms in db).
    assert c.wait_ratio is not None and 0 <= c.wait_ratio <= 1


# --- without analysis.db, and schema variants ---------------------------------------------


@pytest.mark.parametrize("rank", RANKS)
def test_breakdown_recomputed_without_analysis_db(
    summaries: dict[int, ProfileSummary], tmp_path: Path, rank: int
) -> None:
    s = parse_ascend_db_rank(_copy_rank(tmp_path, rank, analysis=False))
    full = summaries[rank]
    assert s.breakdown is not None and full.breakdown is not None
    # The task intervals reproduce StepTraceTime exactly (to the ns).
    assert s.breakdown.to_dict() == pytest.approx(full.breakdown.to_dict(), abs=1e-9)
    assert s.step_times_ms == pytest.approx(full.step_times_ms, abs=1e-9)
    assert s.steps == _one(_profiler_db(rank), "SELECT COUNT(*) FROM STEP_TIME") == 1
    assert s.ops == full.ops and s.op_types == full.op_types
    assert s.communication is None
    assert any(n.startswith("breakdown: recomputed from TASK") for n in s.notes)
    assert any(n.startswith("communication: no analysis.db") for n in s.notes)
    assert f"{OUT}/analysis.db" not in s.raw_files


def test_step_trace_time_with_device_id_column(tmp_path: Path) -> None:
    rank_dir = _copy_rank(tmp_path, 1)
    with closing(sqlite3.connect(rank_dir / OUT / "analysis.db")) as conn:
        conn.execute("ALTER TABLE StepTraceTime ADD COLUMN deviceId INTEGER")
        conn.execute("ALTER TABLE StepTraceTime ADD COLUMN extra TEXT")
        conn.execute("UPDATE StepTraceTime SET deviceId = 1")
        conn.execute(
            "INSERT INTO StepTraceTime (deviceId, step, computing, communication_not_overlapped,"
            " overlapped, communication, free, stage, bubble, preparing)"
            " VALUES (5, '50', 1, 1, 0, 1, 1, 3, 0, 0)"
        )
        conn.commit()
    s = parse_ascend_db_rank(rank_dir)
    assert s.steps == 1
    assert s.breakdown is not None
    assert s.breakdown.compute_ms == pytest.approx(8.915634)


def test_missing_optional_tables_become_notes(tmp_path: Path) -> None:
    rank_dir = _copy_rank(tmp_path, 1)
    with closing(sqlite3.connect(rank_dir / OUT / "ascend_pytorch_profiler_1.db")) as conn:
        for table in ("TASK_PMU_INFO", "MEMORY_RECORD", "NPU_INFO", "COMMUNICATION_OP"):
            conn.execute(f"DROP TABLE {table}")
        conn.commit()
    s = parse_ascend_db_rank(rank_dir)
    assert s.ops and all(not o.metrics for o in s.ops)
    assert not any(o.core == "HCCL" for o in s.ops)
    assert s.peak_memory_bytes is None and s.peak_reserved_bytes is None
    assert s.memory_growth_bytes is None
    assert "device" not in s.collection
    for prefix in ("op metrics: no TASK_PMU_INFO", "peak_memory_bytes: no MEMORY_RECORD"):
        assert any(n.startswith(prefix) for n in s.notes), (prefix, s.notes)


def test_step_time_only_database(tmp_path: Path) -> None:
    out = tmp_path / "rank0_ascend_pt" / OUT
    out.mkdir(parents=True)
    with closing(sqlite3.connect(out / "ascend_pytorch_profiler_0.db")) as conn:
        conn.execute("CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER)")
        conn.execute("INSERT INTO STEP_TIME VALUES (1, 0, 1000000)")
        conn.commit()
    s = parse_ascend_db_rank(out.parent)
    assert s.steps == 1 and s.ops == () and s.breakdown is None
    assert s.rank == 0  # from the file name
    assert any(n.startswith("ops: no TASK table") for n in s.notes)


# --- bad input ----------------------------------------------------------------------------


def _bad_db(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "rank0_ascend_pt" / OUT / "ascend_pytorch_profiler_0.db"
    path.parent.mkdir(parents=True)
    if kind == "text":
        path.write_text("Step,Computing\n50,8873.756\n")
    elif kind == "zero_bytes":
        path.write_bytes(b"")
    elif kind == "no_tables":
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA user_version = 7")
    else:
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE dogs (id INTEGER, name TEXT)")
            conn.execute("INSERT INTO dogs VALUES (1, 'Cleo')")
            conn.commit()
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("text", "file is not a database"),
        ("zero_bytes", "not an Ascend profiler database (no TASK/STEP_TIME tables)"),
        ("no_tables", "not an Ascend profiler database (no TASK/STEP_TIME tables)"),
        ("unrelated", "not an Ascend profiler database (no TASK/STEP_TIME tables)"),
    ],
)
def test_bad_database_is_a_one_line_parse_error(tmp_path: Path, kind: str, message: str) -> None:
    path = _bad_db(tmp_path, kind)
    with pytest.raises(ParseError) as info:
        parse_ascend_db_rank(path.parent.parent)
    text = str(info.value)
    assert text == f"{path}: {message}"
    assert "\n" not in text


def test_no_profiler_db_is_a_parse_error(tmp_path: Path) -> None:
    (tmp_path / "rank0_ascend_pt" / OUT).mkdir(parents=True)
    with pytest.raises(
        ParseError, match=r"ASCEND_PROFILER_OUTPUT: no ascend_pytorch_profiler\*\.db"
    ):
        parse_ascend_db_rank(tmp_path / "rank0_ascend_pt")


def test_broken_analysis_db_is_a_note(tmp_path: Path) -> None:
    rank_dir = _copy_rank(tmp_path, 0)
    (rank_dir / OUT / "analysis.db").write_text("not sqlite")
    s = parse_ascend_db_rank(rank_dir)
    assert s.communication is None
    assert "communication: analysis.db file is not a database" in s.notes
    assert s.breakdown is not None and s.breakdown.compute_ms == pytest.approx(8.903431)


# --- the fixtures are read, never written ---------------------------------------------------


def _tree(root: Path) -> Iterator[tuple[str, str]]:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            yield path.relative_to(root).as_posix(), hashlib.sha256(path.read_bytes()).hexdigest()


def test_parsing_leaves_the_fixture_untouched() -> None:
    before = list(_tree(DB_JOB))
    for rank in RANKS:
        parse_ascend_db_rank(_rank_dir(DB_JOB, rank))
    # The rank 0 db is in WAL mode: a plain mode=ro open would add -wal and -shm files.
    assert list(_tree(DB_JOB)) == before
    assert not any(name.endswith(("-wal", "-shm", "-journal")) for name, _ in before)


def test_text_parser_hands_db_exports_over() -> None:
    from perfgate.parsers.ascend import parse_ascend_rank

    s = parse_ascend_rank(_rank_dir(DB_JOB, 0))
    assert s.source == SOURCE_DB and s.rank == 0


def test_unflushed_wal_is_a_note(tmp_path: Path) -> None:
    rank_dir = _copy_rank(tmp_path, 0)
    (rank_dir / OUT / "ascend_pytorch_profiler_0.db-wal").write_bytes(b"\0" * 32)
    s = parse_ascend_db_rank(rank_dir)
    assert s.kernel_launches_per_step == 187
    assert any("ascend_pytorch_profiler_0.db-wal is not empty" in n for n in s.notes)
