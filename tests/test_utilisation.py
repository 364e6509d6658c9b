"""Utilisation from profiles: ``ProfileSummary.utilisation`` and the notes for what is missing.

Every value is checked against the real files read here the plainest way (the csv module,
sqlite3, json), not through the parsers' code: Ascend text exports (Level1 with
PipeUtilization metrics, Level0 without), the db export of the same job (another session,
so only the ranges agree), a real l2_cache.csv, and a hand-made CUDA trace with occupancy
fields (tests/data/torch_cuda/README.md says why it is hand-made).
"""

from __future__ import annotations

import csv
import gzip
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from perfgate.models import ProfileSummary
from perfgate.parsers import ascend
from perfgate.parsers.ascend import parse_ascend_rank
from perfgate.parsers.torch_trace import parse_torch_trace

DATA = Path(__file__).parent / "data"
TEXT_JOB = DATA / "ascend" / "msinsight_pt_text_level1_2rank"
LEVEL0 = DATA / "ascend" / "msinsight_pt_text_level0_rank0" / "rank0_ascend_pt"
DB_JOB = DATA / "ascend" / "msinsight_pt_db_level1_2rank"
L2_CACHE = DATA / "ascend_l2" / "level1_rank0_l2_cache.csv"
CUDA_TRACE = DATA / "torch_cuda" / "occupancy.pt.trace.json"
CPU_TRACE = DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz"
OUT = "ASCEND_PROFILER_OUTPUT"
PMU_METRICS = ("aicore_util_pct", "cube_util_pct", "vector_util_pct")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        return list(csv.DictReader(handle))


def _num(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return 0.0  # N/A


def _copy_rank(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    for path in dst.rglob("*"):
        path.chmod(0o644 if path.is_file() else 0o755)
    return dst


def _notes_for(summary: ProfileSummary, metric: str) -> list[str]:
    return [n for n in summary.notes if n.startswith(metric + ":")]


# --------------------------------------------------------------------------- text export


def _text_expected(rank_dir: Path) -> dict[str, float]:
    """The definitions of perfgate.parsers.ascend.text.ascend_utilisation, by hand."""
    kernels = _rows(rank_dir / OUT / "kernel_details.csv")
    steps = _rows(rank_dir / OUT / "step_trace_time.csv")
    step_us = sum(
        float(s["Computing"]) + float(s["Communication(Not Overlapped)"]) + float(s["Free"])
        for s in steps
    )
    busy_us = sum(float(s["Computing"]) + float(s["Communication(Not Overlapped)"]) for s in steps)

    def total(column: str) -> float:
        return sum(_num(k[column]) for k in kernels)

    core_busy = sum(max(_num(k["aicore_time(us)"]), _num(k["aiv_time(us)"])) for k in kernels)
    return {
        "device_busy_pct": 100 * busy_us / step_us,
        "aicore_util_pct": 100 * core_busy / step_us,
        "cube_util_pct": 100 * total("aic_mac_time(us)") / total("aicore_time(us)"),
        "vector_util_pct": 100 * total("aiv_vec_time(us)") / total("aiv_time(us)"),
    }


@pytest.mark.parametrize("rank", ["rank0_ascend_pt", "rank1_ascend_pt"])
def test_text_level1_utilisation_matches_the_csv(rank: str) -> None:
    rank_dir = TEXT_JOB / rank
    summary = parse_ascend_rank(rank_dir)
    expected = _text_expected(rank_dir)
    assert set(summary.utilisation) == set(expected)
    for metric, value in expected.items():
        assert summary.utilisation[metric] == pytest.approx(value, rel=1e-9), metric
        assert 0 < summary.utilisation[metric] < 100
        assert _notes_for(summary, metric) == []
    # aic_mac_ratio weighted by each kernel's Cube time is the same number, up to the
    # 3 decimals the file rounds ratios to.
    kernels = _rows(rank_dir / OUT / "kernel_details.csv")
    cube_time = sum(_num(k["aicore_time(us)"]) for k in kernels)
    by_ratio = sum(_num(k["aic_mac_ratio"]) * _num(k["aicore_time(us)"]) for k in kernels)
    assert summary.utilisation["cube_util_pct"] == pytest.approx(
        100 * by_ratio / cube_time, abs=0.1
    )
    # What the trimmed fixture lacks is named, once each.
    assert _notes_for(summary, "l2_hit_pct") == ["l2_hit_pct: no l2_cache.csv (l2_cache=true)"]
    assert len(_notes_for(summary, "hbm_bandwidth_gb_s")) == 1
    assert len(_notes_for(summary, "device_memory_capacity_bytes")) == 1
    assert summary.device_memory_capacity_bytes is None
    assert ProfileSummary.from_dict(summary.to_dict()).utilisation == summary.utilisation


def test_level0_has_only_device_busy_and_says_why() -> None:
    summary = parse_ascend_rank(LEVEL0)
    steps = _rows(LEVEL0 / OUT / "step_trace_time.csv")[0]
    busy = float(steps["Computing"]) + float(steps["Communication(Not Overlapped)"])
    step = busy + float(steps["Free"])
    assert summary.utilisation == {"device_busy_pct": pytest.approx(100 * busy / step)}
    for metric in PMU_METRICS:
        assert _notes_for(summary, metric) == [
            f"{metric}: kernel_details.csv has no AI Core PMU metrics (aic_metrics=ACL_AICORE_NONE)"
        ]


def test_fast_and_csv_paths_give_the_same_utilisation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rank_dir = _copy_rank(TEXT_JOB / "rank0_ascend_pt", tmp_path)
    whole = parse_ascend_rank(rank_dir)
    monkeypatch.setattr(ascend.text, "_CHUNK_BYTES", 1500)
    monkeypatch.setattr(ascend.text, "_HEAD_ROWS", 3)
    chunked = parse_ascend_rank(rank_dir)
    monkeypatch.setattr(ascend.text._KernelScan, "_fast_chunk", lambda self, lines: False)
    by_csv = parse_ascend_rank(rank_dir)
    for summary in (chunked, by_csv):
        assert summary.utilisation.keys() == whole.utilisation.keys()
        for metric, value in whole.utilisation.items():
            assert summary.utilisation[metric] == pytest.approx(value, rel=1e-12)


# --------------------------------------------------------------------------- l2_cache.csv


def _with_l2(tmp_path: Path, rows: list[list[str]] | None = None) -> Path:
    rank_dir = _copy_rank(TEXT_JOB / "rank0_ascend_pt", tmp_path)
    target = rank_dir / OUT / "l2_cache.csv"
    if rows is None:
        shutil.copyfile(L2_CACHE, target)
    else:
        with target.open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows(rows)
    return rank_dir


def _l2_table() -> tuple[list[str], list[list[str]]]:
    with L2_CACHE.open(newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    return header, rows


def test_real_l2_cache_with_no_hit_rate_is_a_note(tmp_path: Path) -> None:
    header, rows = _l2_table()
    assert header == ["Stream Id", "Task Id", "Hit Rate", "Victim Rate", "Op Name"]
    assert {r[2] for r in rows} == {"N/A"}
    summary = parse_ascend_rank(_with_l2(tmp_path))
    assert "l2_hit_pct" not in summary.utilisation
    assert _notes_for(summary, "l2_hit_pct") == [
        "l2_hit_pct: l2_cache.csv Hit Rate is N/A in every row (l2_cache=true)"
    ]
    assert f"{OUT}/l2_cache.csv" not in summary.raw_files


def _filled(rows: list[list[str]]) -> list[list[str]]:
    """Hit Rate = 1 - Victim Rate on every other row (the rest stay N/A)."""
    out = []
    for i, row in enumerate(rows):
        hit = f"{1 - float(row[3]):.6f}" if i % 2 == 0 else "N/A"
        out.append([row[0], row[1], hit, row[3], row[4]])
    return out


def test_l2_hit_rate_weighted_by_the_kernels_of_its_op_name(tmp_path: Path) -> None:
    header, rows = _l2_table()
    filled = _filled(rows)
    summary = parse_ascend_rank(_with_l2(tmp_path, [header, *filled]))
    kernels = _rows(TEXT_JOB / "rank0_ascend_pt" / OUT / "kernel_details.csv")
    durations: dict[str, list[float]] = {}
    for k in kernels:
        durations.setdefault(k["Name"], []).append(float(k["Duration(us)"]))
    mean = {name: sum(d) / len(d) for name, d in durations.items()}
    used = [(float(r[2]), mean[r[4]]) for r in filled if r[2] != "N/A"]
    assert len(used) == (len(rows) + 1) // 2
    expected = 100 * sum(h * w for h, w in used) / sum(w for _, w in used)
    assert summary.utilisation["l2_hit_pct"] == pytest.approx(expected, rel=1e-9)
    assert _notes_for(summary, "l2_hit_pct") == []
    assert f"{OUT}/l2_cache.csv" in summary.raw_files


def test_l2_row_naming_no_kernel_makes_it_a_plain_mean(tmp_path: Path) -> None:
    header, rows = _l2_table()
    filled = [*_filled(rows), ["2", "99999", "0.5", "0.1", "not_a_kernel"]]
    summary = parse_ascend_rank(_with_l2(tmp_path, [header, *filled]))
    hits = [float(r[2]) for r in filled if r[2] != "N/A"]
    assert summary.utilisation["l2_hit_pct"] == pytest.approx(100 * sum(hits) / len(hits))
    (note,) = _notes_for(summary, "l2_hit_pct")
    assert note.startswith("l2_hit_pct: plain mean of l2_cache.csv Hit Rate: 1 of ")


def test_broken_l2_cache_is_a_note_not_an_error(tmp_path: Path) -> None:
    rank_dir = _with_l2(tmp_path)
    path = rank_dir / OUT / "l2_cache.csv"
    path.write_bytes(path.read_bytes()[:-7])  # cut inside the last row
    summary = parse_ascend_rank(rank_dir)
    assert "l2_hit_pct" not in summary.utilisation
    (note,) = _notes_for(summary, "l2_hit_pct")
    assert "truncated" in note
    assert summary.utilisation["cube_util_pct"] > 0


# --------------------------------------------------------------------------- db export


def _db_expected(rank_dir: Path) -> dict[str, float]:
    out_dir = rank_dir / OUT
    (db_path,) = out_dir.glob("ascend_pytorch_profiler*.db")
    with sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro&immutable=1", uri=True) as db:
        pmu: dict[int, dict[str, float]] = {}
        for task, name, value in db.execute(
            "SELECT p.globalTaskId, s.value, p.value FROM TASK_PMU_INFO p "
            "JOIN STRING_IDS s ON s.id = p.name "
            "JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = p.globalTaskId"
        ):
            pmu.setdefault(task, {})[name] = float(value)
        (start, end), *more = db.execute("SELECT startNs, endNs FROM STEP_TIME").fetchall()
        assert not more
        (hbm_gb_s,) = db.execute(
            "SELECT AVG(total) / 1e9 FROM (SELECT SUM(bandwidth) AS total FROM HBM "
            "WHERE timestampNs BETWEEN ? AND ? GROUP BY timestampNs)",
            (start, end),
        ).fetchone()
    with sqlite3.connect(
        f"{(out_dir / 'analysis.db').resolve().as_uri()}?mode=ro&immutable=1", uri=True
    ) as adb:
        computing, not_overlapped, free = adb.execute(
            "SELECT computing, communication_not_overlapped, free FROM StepTraceTime"
        ).fetchone()
    step_ns = (computing + not_overlapped + free) * 1000

    def total(name: str) -> float:
        return sum(p.get(name, 0.0) for p in pmu.values())

    core_busy_ns = sum(max(p["aic_total_time"], p["aiv_total_time"]) for p in pmu.values())
    return {
        "device_busy_pct": 100 * (computing + not_overlapped) * 1000 / step_ns,
        "aicore_util_pct": 100 * core_busy_ns / step_ns,
        "cube_util_pct": 100 * total("aic_mac_time") / total("aic_total_time"),
        "vector_util_pct": 100 * total("aiv_vec_time") / total("aiv_total_time"),
        "hbm_bandwidth_gb_s": hbm_gb_s,
    }


@pytest.mark.parametrize("rank", ["rank0_ascend_pt", "rank1_ascend_pt"])
def test_db_utilisation_matches_sqlite(rank: str) -> None:
    rank_dir = DB_JOB / rank
    summary = parse_ascend_rank(rank_dir)
    expected = _db_expected(rank_dir)
    assert set(summary.utilisation) == set(expected)
    for metric, value in expected.items():
        assert summary.utilisation[metric] == pytest.approx(value, rel=1e-9), metric
        assert _notes_for(summary, metric) == []
    (l2_note,) = _notes_for(summary, "l2_hit_pct")
    assert "LLC" in l2_note and "L3" in l2_note
    assert summary.device_memory_capacity_bytes is None
    assert len(_notes_for(summary, "device_memory_capacity_bytes")) == 1


def test_text_and_db_of_one_job_agree(tmp_path: Path) -> None:
    """Two collection sessions of one job: the same kernels, so the same utilisation within
    a few points (the PMU ratios within 1)."""
    for rank in ("rank0_ascend_pt", "rank1_ascend_pt"):
        text = parse_ascend_rank(TEXT_JOB / rank).utilisation
        db = parse_ascend_rank(DB_JOB / rank).utilisation
        both = set(text) & set(db)
        assert both == {"device_busy_pct", *PMU_METRICS}
        for metric in both:
            limit = 1.0 if metric in ("cube_util_pct", "vector_util_pct") else 3.0
            assert abs(text[metric] - db[metric]) < limit, (rank, metric, text[metric], db[metric])


def test_db_without_hbm_table_notes_it(tmp_path: Path) -> None:
    rank_dir = _copy_rank(DB_JOB / "rank0_ascend_pt", tmp_path)
    (db_path,) = (rank_dir / OUT).glob("ascend_pytorch_profiler*.db")
    db = sqlite3.connect(db_path)
    db.execute("DROP TABLE HBM")
    db.execute("DELETE FROM TASK_PMU_INFO")
    db.commit()
    db.close()  # the last connection folds the -wal file back in (the parser reads no -wal)
    summary = parse_ascend_rank(rank_dir)
    assert set(summary.utilisation) == {"device_busy_pct"}
    assert _notes_for(summary, "hbm_bandwidth_gb_s") == [
        "hbm_bandwidth_gb_s: no HBM table (sys_hardware_mem off?)"
    ]
    for metric in PMU_METRICS:
        assert _notes_for(summary, metric) == [
            f"{metric}: TASK_PMU_INFO has no AI Core PMU metrics "
            "(aic_metrics=ACL_AICORE_PIPE_UTILIZATION)"
        ]


# --------------------------------------------------------------------------- torch traces


def _trace() -> dict[str, Any]:
    with CUDA_TRACE.open(encoding="utf-8") as handle:
        doc: dict[str, Any] = json.load(handle)
    return doc


def test_cuda_trace_busy_occupancy_and_capacity() -> None:
    doc = _trace()
    events = doc["traceEvents"]
    windows = [
        (e["ts"], e["ts"] + e["dur"]) for e in events if e["name"].startswith("ProfilerStep#")
    ]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    # Busy: count the microseconds of the steps with a kernel running, one by one.
    busy = sum(
        1
        for lo, hi in windows
        for us in range(int(lo), int(hi))
        if any(k["ts"] <= us < k["ts"] + k["dur"] for k in kernels)
    )
    step = sum(hi - lo for lo, hi in windows)
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
    in_step = [
        k
        for k in kernels
        if "est. achieved occupancy %" in k["args"]
        and any(lo <= launch[k["args"]["correlation"]] <= hi for lo, hi in windows)
    ]
    occupancy = sum(k["args"]["est. achieved occupancy %"] * k["dur"] for k in in_step) / sum(
        k["dur"] for k in in_step
    )
    summary = parse_torch_trace(CUDA_TRACE)
    assert summary.utilisation == {
        "device_busy_pct": pytest.approx(100 * busy / step),
        "sm_occupancy_pct": pytest.approx(occupancy),
    }
    assert summary.utilisation["device_busy_pct"] == pytest.approx(50.0)
    (device,) = [d for d in doc["deviceProperties"] if d["id"] == kernels[0]["pid"]]
    assert summary.device_memory_capacity_bytes == device["totalGlobalMem"]
    assert not any(
        n.split(":")[0] in ("device_busy_pct", "sm_occupancy_pct", "device_memory_capacity_bytes")
        for n in summary.notes
    )


def test_cpu_trace_has_no_utilisation_and_no_notes_about_it() -> None:
    with gzip.open(CPU_TRACE, "rt", encoding="utf-8") as handle:
        doc = json.load(handle)
    assert doc["deviceProperties"] == []
    assert not any(e.get("cat") == "kernel" for e in doc["traceEvents"])
    summary = parse_torch_trace(CPU_TRACE)
    assert summary.utilisation == {}
    assert summary.device_memory_capacity_bytes is None
    assert not any("occupancy" in n or "device_busy_pct" in n for n in summary.notes)


def test_gpu_trace_without_kernels_says_so_once(tmp_path: Path) -> None:
    doc = _trace()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "kernel"]
    path = tmp_path / "no_kernels.pt.trace.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    summary = parse_torch_trace(path)
    assert summary.utilisation == {}
    assert summary.device_memory_capacity_bytes is None  # two GPUs, no kernel to pick one
    assert [n for n in summary.notes if "device_busy_pct" in n] == [
        "device_busy_pct, sm_occupancy_pct: no kernels in the trace"
    ]


def test_gpu_trace_without_occupancy_fields_notes_it(tmp_path: Path) -> None:
    doc = _trace()
    for event in doc["traceEvents"]:
        if event.get("cat") == "kernel":
            event["args"].pop("est. achieved occupancy %", None)
    doc["deviceProperties"] = doc["deviceProperties"][:1]
    path = tmp_path / "no_occupancy.pt.trace.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    summary = parse_torch_trace(path)
    assert set(summary.utilisation) == {"device_busy_pct"}
    assert summary.device_memory_capacity_bytes == doc["deviceProperties"][0]["totalGlobalMem"]
    assert _notes_for(summary, "sm_occupancy_pct") == [
        "sm_occupancy_pct: no kernel has args['est. achieved occupancy %']"
    ]
