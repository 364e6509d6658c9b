"""Tests of perfgate.parsers.ascend (and the cluster view over its ranks): the real 2-rank
Level1 and Level0 torch_npu text exports (tests/data/ascend, see PROVENANCE.md), header
variants written into tmp_path, and bad input.

Expected numbers are computed from the fixture files themselves with ``csv``/``json``, except
the contract numbers of rank 0's breakdown (msprof-analyze's "Overall Summary" says the same).
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perfgate.advisor.cluster import cluster_view
from perfgate.config import config_from_mapping
from perfgate.errors import ConfigError, ParseError
from perfgate.models import DEFAULT_SLOW_LINK_GB_S, ProfileSummary, StepBreakdown, Thresholds
from perfgate.parsers import ascend
from perfgate.parsers.ascend import (
    SOURCE_TEXT,
    find_rank_dirs,
    is_ascend_profile,
    parse_ascend,
    parse_ascend_rank,
    read_collection,
)

DATA = Path(__file__).parent / "data" / "ascend"
LEVEL1 = DATA / "msinsight_pt_text_level1_2rank"
RANK0 = LEVEL1 / "rank0_ascend_pt"
RANK1 = LEVEL1 / "rank1_ascend_pt"
LEVEL0 = DATA / "msinsight_pt_text_level0_rank0" / "rank0_ascend_pt"

_UTILISATION = (
    "device_busy_pct:",
    "aicore_util_pct:",
    "cube_util_pct:",
    "vector_util_pct:",
    "l2_hit_pct:",
    "hbm_bandwidth_gb_s:",
    "device_memory_capacity_bytes:",
)


def _own(notes: tuple[str, ...]) -> tuple[str, ...]:
    """The notes of the step/op parsing, without the utilisation ones (test_utilisation.py
    checks those)."""
    return tuple(n for n in notes if not n.startswith(_UTILISATION))


OUT = "ASCEND_PROFILER_OUTPUT"
TRACE_VIEW = RANK0 / OUT / "trace_view.json"


# --------------------------------------------------------------------------- helpers


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _copy_rank(src: Path, tmp_path: Path, name: str | None = None) -> Path:
    dst = tmp_path / (name or src.name)
    shutil.copytree(src, dst)
    for path in dst.rglob("*"):
        path.chmod(0o644 if path.is_file() else 0o755)
    return dst


def _rewrite_csv(
    path: Path, change: Callable[[list[str], list[list[str]]], list[list[str]]]
) -> None:
    """Rewrite a CSV with ``change(header, rows) -> [header, *rows]``, the way torch_npu
    writes it (csv module, CRLF line ends)."""
    with path.open(newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    table = change(header, rows)
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(table)


def _float(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _op_key(summary: ProfileSummary) -> dict[tuple[str, str], Any]:
    return {(o.name, o.core): o for o in summary.ops}


def _same_profile(a: ProfileSummary, b: ProfileSummary, *, breakdown: bool = True) -> None:
    assert a.steps == b.steps
    assert a.step_times_ms == pytest.approx(b.step_times_ms)
    if breakdown:
        assert a.breakdown == b.breakdown
    assert a.op_calls_per_step == b.op_calls_per_step
    assert a.kernel_launches_per_step == b.kernel_launches_per_step
    ops_a, ops_b = _op_key(a), _op_key(b)
    assert ops_a.keys() == ops_b.keys()
    for key, op in ops_a.items():
        other = ops_b[key]
        assert op.calls_per_step == other.calls_per_step
        assert op.total_time_ms_per_step == pytest.approx(other.total_time_ms_per_step)
        assert op.op_type == other.op_type
        assert op.input_shapes == other.input_shapes
        assert op.metrics.keys() == other.metrics.keys()
        for name, value in op.metrics.items():
            assert value == pytest.approx(other.metrics[name], rel=1e-9, abs=1e-12)
    assert [(o.name, o.core, o.calls_per_step) for o in a.op_types] == [
        (o.name, o.core, o.calls_per_step) for o in b.op_types
    ]


@pytest.fixture(scope="module")
def rank0() -> ProfileSummary:
    return parse_ascend_rank(RANK0)


@pytest.fixture(scope="module")
def level0() -> ProfileSummary:
    return parse_ascend_rank(LEVEL0)


# --------------------------------------------------------------------------- discovery


def test_find_rank_dirs_sorted_by_rank() -> None:
    assert find_rank_dirs(LEVEL1) == (RANK0, RANK1)
    assert find_rank_dirs(RANK1) == (RANK1,)
    assert find_rank_dirs(RANK0 / OUT) == (RANK0,)


def test_rank_dirs_sort_numerically(tmp_path: Path) -> None:
    for rank in (10, 2):
        rank_dir = tmp_path / f"host_{rank}_ascend_pt"
        (rank_dir / OUT).mkdir(parents=True)
        (rank_dir / f"profiler_info_{rank}.json").write_text("{}")
    names = [p.name for p in find_rank_dirs(tmp_path)]
    assert names == ["host_2_ascend_pt", "host_10_ascend_pt"]


def test_is_ascend_profile(tmp_path: Path) -> None:
    assert is_ascend_profile(LEVEL1)
    assert is_ascend_profile(RANK0)
    assert is_ascend_profile(RANK0 / OUT)
    assert not is_ascend_profile(tmp_path)
    assert not is_ascend_profile(RANK0 / "profiler_info_0.json")
    assert not is_ascend_profile(tmp_path / "missing")


def test_no_output_dir_is_an_error_naming_the_path(tmp_path: Path) -> None:
    (tmp_path / "something_ascend_pt").mkdir()
    with pytest.raises(ParseError, match=str(tmp_path)) as info:
        find_rank_dirs(tmp_path)
    assert "no ASCEND_PROFILER_OUTPUT directory" in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(ParseError, match="no ASCEND_PROFILER_OUTPUT"):
        parse_ascend_rank(tmp_path / "something_ascend_pt")
    with pytest.raises(ParseError, match="no such directory"):
        find_rank_dirs(tmp_path / "missing")


# --------------------------------------------------------------------------- collection


def test_read_collection_from_profiler_info() -> None:
    info = json.loads((RANK0 / "profiler_info_0.json").read_text())
    experimental = info["config"]["experimental_config"]
    common = info["config"]["common_config"]
    collection, notes = read_collection(RANK0)
    assert notes == ()
    assert collection["profiler_level"] == experimental["_profiler_level"] == "Level1"
    assert collection["aic_metrics"] == experimental["_aic_metrics"]
    assert collection["export_type"] == "text"
    assert collection["l2_cache"] == "true"
    assert collection["record_shapes"] == str(common["record_shapes"]).lower()
    assert collection["activities"] == "CPU,NPU"
    assert collection["rank"] == str(info["rank_id"]) == "0"
    assert "torch_npu_version" not in collection  # not written by this torch_npu version


def test_read_collection_notes_a_broken_file(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK1, tmp_path)
    info = rank_dir / "profiler_info_1.json"
    info.write_text(info.read_text()[:200])
    collection, notes = read_collection(rank_dir)
    assert collection == {"rank": "1"}  # from the file name
    assert len(notes) == 1
    assert notes[0].startswith("collection: profiler_info_1.json truncated JSON (")


# --------------------------------------------------------------------------- one rank


def test_rank0_breakdown_contract(rank0: ProfileSummary) -> None:
    assert rank0.source == SOURCE_TEXT
    assert rank0.rank == 0
    assert rank0.steps == 1
    b = rank0.breakdown
    assert b is not None
    assert round(b.compute_ms or 0, 3) == 8.874
    assert round(b.communication_not_overlapped_ms or 0, 3) == 101.963
    assert round(b.free_ms or 0, 3) == 25.744
    assert round(b.step_ms, 3) == 136.581
    assert rank0.device_busy_fraction == pytest.approx(b.compute_ms / b.step_ms)  # type: ignore[operator]


def test_step_times_and_breakdown_follow_the_csv(rank0: ProfileSummary) -> None:
    rows = _rows(RANK0 / OUT / "step_trace_time.csv")
    assert rank0.steps == len(rows)
    expected = [
        (float(r["Computing"]) + float(r["Communication(Not Overlapped)"]) + float(r["Free"]))
        / 1000
        for r in sorted(rows, key=lambda r: int(r["Step"]))
    ]
    assert rank0.step_times_ms == pytest.approx(expected)
    b = rank0.breakdown
    assert b is not None
    mean = {k: sum(float(r[k]) for r in rows) / len(rows) / 1000 for k in rows[0] if k != "Step"}
    assert b.communication_overlapped_ms == pytest.approx(mean["Overlapped"])
    assert b.bubble_ms == pytest.approx(mean["Bubble"])
    assert b.preparing_ms == pytest.approx(mean["Preparing"])
    assert b.data_loading_ms is None


def test_ops_match_kernel_details(rank0: ProfileSummary) -> None:
    rows = _rows(RANK0 / OUT / "kernel_details.csv")
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for r in rows:
        slot = totals[(r["Name"], r["Accelerator Core"])]
        slot[0] += 1
        slot[1] += float(r["Duration(us)"])
    ops = _op_key(rank0)
    assert ops.keys() == totals.keys()
    for key, (calls, dur_us) in totals.items():
        assert ops[key].calls_per_step == calls / rank0.steps
        assert ops[key].total_time_ms_per_step == pytest.approx(dur_us / 1000 / rank0.steps)
        assert ops[key].self_time_ms_per_step == ops[key].total_time_ms_per_step
        assert ops[key].device == "npu"
    times = [o.total_time_ms_per_step for o in rank0.ops]
    assert times == sorted(times, reverse=True)
    assert rank0.op_calls_per_step == len(rows) / rank0.steps
    computing = [r for r in rows if r["Accelerator Core"] != "HCCL"]
    assert rank0.kernel_launches_per_step == len(computing) / rank0.steps
    assert rank0.raw_files == (
        "profiler_info_0.json",
        "profiler_metadata.json",
        f"{OUT}/step_trace_time.csv",
        f"{OUT}/kernel_details.csv",
        f"{OUT}/op_statistic.csv",
        f"{OUT}/communication.json",
        f"{OUT}/memory_record.csv",
    )
    assert _own(rank0.notes) == ()


def test_op_type_core_shapes_and_metrics(rank0: ProfileSummary) -> None:
    rows = [r for r in _rows(RANK0 / OUT / "kernel_details.csv") if r["Name"] == "Conv2D1"]
    conv = _op_key(rank0)[("Conv2D1", "AI_CORE")]
    assert conv.op_type == rows[0]["Type"] == "Conv2D"
    assert conv.core == "AI_CORE"
    assert conv.input_shapes == (rows[0]["Input Shapes"].strip('"'),)
    assert '"' not in conv.input_shapes[0]
    header = list(rows[0])
    metric_names = header[header.index("aicore_time(us)") :]
    assert set(conv.metrics) == set(metric_names)
    total = sum(float(r["Duration(us)"]) for r in rows)
    for name in metric_names:
        expected = sum(float(r[name]) * float(r["Duration(us)"]) for r in rows) / total
        assert conv.metrics[name] == pytest.approx(expected)
    hccl = [o for o in rank0.ops if o.core == "HCCL"]
    assert hccl and all(o.metrics == {} and o.op_type == "hcom_allReduce_" for o in hccl)


def test_weighted_metrics_over_several_calls(rank0: ProfileSummary) -> None:
    rows = _rows(RANK0 / OUT / "kernel_details.csv")
    by_key: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        by_key[(r["Name"], r["Accelerator Core"])].append(r)
    key, group = max(by_key.items(), key=lambda kv: len(kv[1]))
    assert len(group) > 1
    op = _op_key(rank0)[key]
    weights = [float(r["Duration(us)"]) for r in group]
    expected = sum(float(r["aiv_vec_ratio"]) * w for r, w in zip(group, weights, strict=True))
    assert op.metrics["aiv_vec_ratio"] == pytest.approx(expected / sum(weights))
    shapes = list(dict.fromkeys(r["Input Shapes"].replace('"', "") for r in group))[:3]
    assert op.input_shapes == tuple(s for s in shapes if s and s != "N/A")


def test_op_types_equal_op_statistic(rank0: ProfileSummary) -> None:
    rows = _rows(RANK0 / OUT / "op_statistic.csv")
    assert len(rank0.op_types) == len(rows)
    by_name = {(o.name, o.core): o for o in rank0.op_types}
    for r in rows:
        op = by_name[(r["OP Type"], r["Core Type"])]
        assert op.op_type == r["OP Type"]
        assert op.calls_per_step == float(r["Count"]) / rank0.steps
        assert op.total_time_ms_per_step == pytest.approx(float(r["Total Time(us)"]) / 1000)
    total = sum(o.total_time_ms_per_step for o in rank0.op_types)
    assert total == pytest.approx(sum(float(r["Total Time(us)"]) for r in rows) / 1000)


def test_op_types_from_kernel_details_without_op_statistic(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    (rank_dir / OUT / "op_statistic.csv").unlink()
    summary = parse_ascend_rank(rank_dir)
    assert "op_types: op_statistic.csv absent; aggregated from kernel_details.csv" in summary.notes
    # op_statistic.csv lists computing ops only; the aggregate leaves HCCL out the same way.
    expected = {
        (r["OP Type"], r["Core Type"]): (float(r["Count"]), float(r["Total Time(us)"]))
        for r in _rows(RANK0 / OUT / "op_statistic.csv")
    }
    got = {(o.name, o.core): o for o in summary.op_types}
    assert got.keys() == expected.keys()
    for key, (count, total_us) in expected.items():
        assert got[key].calls_per_step == count
        # op_statistic sums unrounded durations; kernel_details rounds each to 1 ns.
        assert got[key].total_time_ms_per_step == pytest.approx(total_us / 1000, abs=1e-5)


def test_communication_equals_total_op_info(rank0: ProfileSummary) -> None:
    doc = json.loads((RANK0 / OUT / "communication.json").read_text())
    comm = rank0.communication
    assert comm is not None
    steps = list(doc)
    totals = [
        doc[s][kind]["Total Op Info"]
        for s in steps
        for kind in ("collective", "p2p")
        if "Total Op Info" in doc[s][kind]
    ]
    time_info = [t["Communication Time Info"] for t in totals]

    def mean(key: str) -> float:
        return float(sum(t[key] for t in time_info)) / len(steps)

    assert comm.elapse_ms == pytest.approx(mean("Elapse Time(ms)"))
    assert comm.transit_ms == pytest.approx(mean("Transit Time(ms)"))
    assert comm.wait_ms == pytest.approx(mean("Wait Time(ms)"))
    assert comm.synchronization_ms == pytest.approx(mean("Synchronization Time(ms)"))
    assert comm.idle_ms == pytest.approx(mean("Idle Time(ms)"))
    # The profiler's own ratios, to the 4 decimals it writes.
    assert comm.wait_ratio == pytest.approx(time_info[0]["Wait Time Ratio"], abs=5e-5)
    assert comm.synchronization_ratio == pytest.approx(
        time_info[0]["Synchronization Time Ratio"], abs=5e-5
    )
    ops = sum(len([k for k in doc[s][kind] if k != "Total Op Info"]) for s in steps
              for kind in ("collective", "p2p"))  # fmt: skip
    assert comm.ops_per_step == ops / len(steps)
    bandwidth = totals[0]["Communication Bandwidth Info"]
    used = {k for k, v in bandwidth.items() if v["Transit Size(MB)"] or v["Transit Time(ms)"]}
    assert {link.link for link in comm.links} == used == {"HCCS", "SDMA"}
    for link in comm.links:
        info = bandwidth[link.link]
        assert link.transit_size_mb == pytest.approx(info["Transit Size(MB)"])
        assert link.transit_time_ms == pytest.approx(info["Transit Time(ms)"])
        assert link.bandwidth_gb_s == pytest.approx(link.transit_size_mb / link.transit_time_ms)


def test_bandwidth_formula_reproduces_the_files_own() -> None:
    """Bandwidth(GB/s) in communication.json is Transit Size(MB) / Transit Time(ms)."""
    checked = 0
    for rank_dir in (RANK0, RANK1):
        doc = json.loads((rank_dir / OUT / "communication.json").read_text())
        for step in doc.values():
            for name, op in step["collective"].items():
                if name == "Total Op Info":
                    continue
                for info in op["Communication Bandwidth Info"].values():
                    if info["Transit Time(ms)"]:
                        ratio = info["Transit Size(MB)"] / info["Transit Time(ms)"]
                        assert ratio == pytest.approx(info["Bandwidth(GB/s)"], abs=5e-5)
                        checked += 1
    assert checked >= 8


def test_memory_from_memory_record(rank0: ProfileSummary) -> None:
    rows = [r for r in _rows(RANK0 / OUT / "memory_record.csv") if r["Component"] == "PTA"]
    allocated = [float(r["Total Allocated(MB)"]) for r in rows]
    # torch_npu's MB is MiB: every value is a whole number of bytes at 2**20 bytes per MB.
    assert all((mb * 2**20).is_integer() for mb in allocated)
    assert rank0.peak_memory_bytes == round(max(allocated) * 2**20)
    reserved = max(float(r["Total Reserved(MB)"]) for r in rows)
    assert rank0.peak_reserved_bytes == round(reserved * 2**20)
    by_time = sorted(rows, key=lambda r: float(r["Timestamp(us)"]))
    growth = float(by_time[-1]["Total Allocated(MB)"]) - float(by_time[0]["Total Allocated(MB)"])
    assert rank0.memory_growth_bytes == round(growth * 2**20)


def test_reserved_memory_from_npu_module_mem(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    (rank_dir / OUT / "memory_record.csv").unlink()
    summary = parse_ascend_rank(rank_dir)
    per_ts: dict[str, float] = defaultdict(float)
    for r in _rows(RANK0 / OUT / "npu_module_mem.csv"):
        per_ts[r["Timestamp(us)"].strip()] += float(r["Total Reserved(MB)"])
    assert summary.peak_reserved_bytes == round(max(per_ts.values()) * 2**20)
    assert summary.peak_memory_bytes is None
    assert summary.memory_growth_bytes is None
    assert any(n.startswith("peak_memory_bytes: memory_record.csv absent") for n in summary.notes)
    assert f"{OUT}/npu_module_mem.csv" in summary.raw_files


def test_level0_gives_what_it_has_and_notes_what_it_lacks(level0: ProfileSummary) -> None:
    rows = _rows(LEVEL0 / OUT / "kernel_details.csv")
    steps = _rows(LEVEL0 / OUT / "step_trace_time.csv")
    assert level0.steps == len(steps) == 1
    assert level0.breakdown is not None
    assert level0.breakdown.compute_ms == pytest.approx(float(steps[0]["Computing"]) / 1000)
    assert level0.op_calls_per_step == len(rows)
    assert len(level0.ops) == len({(r["Name"], r["Accelerator Core"]) for r in rows})
    assert all(o.op_type == "" and o.metrics == {} for o in level0.ops)
    assert {o.core for o in level0.ops} == {"", "HCCL"}
    assert level0.op_types == ()
    assert level0.communication is None
    assert level0.peak_memory_bytes is not None
    assert level0.collection["profiler_level"] == "Level0"
    assert set(_own(level0.notes)) == {
        "ops.op_type: kernel_details.csv Type is N/A in every row (Level0 profile)",
        "ops.core: kernel_details.csv Accelerator Core is N/A for every computing kernel "
        "(Level0 profile)",
        "ops.metrics: kernel_details.csv has no PMU metric columns "
        "(aic_metrics off or Level0 profile)",
        "ops.input_shapes: kernel_details.csv has no Input Shapes column "
        "(record_shapes=False or Level0 profile)",
        "op_types: Level0 profile has no op types "
        "(kernel_details Type is N/A; op_statistic.csv absent)",
        "communication: communication.json absent (single-card or Level0 profile)",
    }


# --------------------------------------------------------------------------- header variants


def _rename(old: str, new: str) -> Callable[[list[str], list[list[str]]], list[list[str]]]:
    def change(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        return [[new if h == old else h for h in header], *rows]

    return change


def _add_column(
    name: str, value: str, at: int = 0
) -> Callable[[list[str], list[list[str]]], list[list[str]]]:
    def change(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        return [header[:at] + [name] + header[at:], *(r[:at] + [value] + r[at:] for r in rows)]

    return change


def _drop_column(name: str) -> Callable[[list[str], list[list[str]]], list[list[str]]]:
    def change(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        i = header.index(name)
        return [header[:i] + header[i + 1 :], *(r[:i] + r[i + 1 :] for r in rows)]

    return change


def _reverse(header: list[str], rows: list[list[str]]) -> list[list[str]]:
    return [header[::-1], *(r[::-1] for r in rows)]


VARIANTS: dict[str, dict[str, Callable[[list[str], list[list[str]]], list[list[str]]]]] = {
    "block_num": {
        "kernel_details.csv": lambda h, r: _rename("Mix Block Dim", "Mix Block Num")(
            *_split(_rename("Block Dim", "Block Num")(h, r))
        )
    },
    "device_id": {
        "kernel_details.csv": _add_column("Device_id", "0", at=1),
        "step_trace_time.csv": _add_column("Device_id", "0"),
    },
    "reordered": {"kernel_details.csv": _reverse, "step_trace_time.csv": _reverse},
    "extra_column": {
        "kernel_details.csv": _add_column("Comment", "made by hand", at=30),
        "step_trace_time.csv": _add_column("Note", "x", at=3),
    },
    "quoted_name_first": {
        # A quote before the columns the fast path splits off sends rows to the csv path.
        "kernel_details.csv": _add_column("Label", '"a, b"', at=0),
    },
}


def _split(table: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    return table[0], table[1:]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_header_variants_parse_to_the_same_numbers(
    variant: str, tmp_path: Path, rank0: ProfileSummary
) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    for name, change in VARIANTS[variant].items():
        _rewrite_csv(rank_dir / OUT / name, change)
    summary = parse_ascend_rank(rank_dir)
    _same_profile(summary, rank0)
    assert _own(summary.notes) == ()


def test_preparing_column_absent(tmp_path: Path, rank0: ProfileSummary) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    _rewrite_csv(rank_dir / OUT / "step_trace_time.csv", _drop_column("Preparing"))
    summary = parse_ascend_rank(rank_dir)
    _same_profile(summary, rank0, breakdown=False)
    assert summary.breakdown is not None and rank0.breakdown is not None
    assert summary.breakdown.preparing_ms is None
    assert summary.breakdown.step_ms == rank0.breakdown.step_ms
    assert summary.breakdown.compute_ms == rank0.breakdown.compute_ms
    assert _own(summary.notes) == ("preparing_ms: step_trace_time.csv has no Preparing column",)


def test_several_devices_in_step_trace_use_the_first(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)

    def two_devices(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        other = [["1", *r[:1], str(float(r[1]) * 2), *r[2:]] for r in rows]
        return [["Device_id", *header], *other, *(["0", *r] for r in rows)]

    _rewrite_csv(rank_dir / OUT / "step_trace_time.csv", two_devices)
    summary = parse_ascend_rank(rank_dir)
    assert summary.breakdown is not None
    assert round(summary.breakdown.compute_ms or 0, 3) == 8.874
    assert "steps: step_trace_time.csv has 2 devices (0, 1); using Device_id 0" in summary.notes


def test_empty_step_id_and_several_steps(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)

    def three_steps(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        row = rows[0]
        later = ["52", *(str(float(c) * 2) for c in row[1:])]
        return [header, later, row, ["", *row[1:]]]

    _rewrite_csv(rank_dir / OUT / "step_trace_time.csv", three_steps)
    _rewrite_csv(
        rank_dir / OUT / "kernel_details.csv",
        lambda h, r: [h, *([""] + row[1:] if i == 0 else row for i, row in enumerate(r))],
    )
    summary = parse_ascend_rank(rank_dir)
    assert summary.steps == 3
    first = 136.581009
    assert summary.step_times_ms == pytest.approx([first, 2 * first, first])
    rows = _rows(RANK0 / OUT / "kernel_details.csv")
    assert summary.op_calls_per_step == pytest.approx(len(rows) / 3)
    assert (
        "ops: 1 kernel_details.csv rows have no Step Id (outside a step); counted" in summary.notes
    )


# --------------------------------------------------------------------------- the kernel reader


def test_small_chunks_and_fields_spanning_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rank0: ProfileSummary
) -> None:
    """Chunk boundaries, a quoted name holding a comma and a line break, and N/A metrics
    all give the same sums as the plain csv reading in the test."""
    rank_dir = _copy_rank(RANK0, tmp_path)

    def odd_name(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        i = header.index("Name")
        for row in rows[50:53]:
            row[i] = "odd,\nname"
        return [header, *rows]

    _rewrite_csv(rank_dir / OUT / "kernel_details.csv", odd_name)
    monkeypatch.setattr(ascend.text, "_CHUNK_BYTES", 1500)
    monkeypatch.setattr(ascend.text, "_HEAD_ROWS", 3)
    summary = parse_ascend_rank(rank_dir)
    rows = _rows(rank_dir / OUT / "kernel_details.csv")
    groups: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        groups[(r["Name"], r["Accelerator Core"])].append(r)
    ops = _op_key(summary)
    assert ops.keys() == groups.keys()
    metric_names = list(rows[0])[list(rows[0]).index("aicore_time(us)") :]
    for key, group in groups.items():
        op = ops[key]
        assert op.calls_per_step == len(group)
        durations = [float(r["Duration(us)"]) for r in group]
        assert op.total_time_ms_per_step == pytest.approx(sum(durations) / 1000)
        for name in metric_names:
            pairs = [(v, d) for r, d in zip(group, durations, strict=True)
                     if (v := _float(r[name])) is not None]  # fmt: skip
            if not pairs or sum(d for _, d in pairs) == 0:
                assert name not in op.metrics
            else:
                expected = sum(v * d for v, d in pairs) / sum(d for _, d in pairs)
                assert op.metrics[name] == pytest.approx(expected)
    assert summary.kernel_launches_per_step == rank0.kernel_launches_per_step


def test_kernel_details_without_duration(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    _rewrite_csv(rank_dir / OUT / "kernel_details.csv", _drop_column("Duration(us)"))
    summary = parse_ascend_rank(rank_dir)
    assert summary.ops == ()
    assert "ops: kernel_details.csv has no Duration(us) column" in summary.notes
    assert summary.op_calls_per_step == len(_rows(RANK0 / OUT / "kernel_details.csv"))
    assert summary.breakdown is not None  # the rest of the profile still parses


def test_truncated_kernel_details_is_a_note(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    path = rank_dir / OUT / "kernel_details.csv"
    path.write_bytes(path.read_bytes()[:30000])
    summary = parse_ascend_rank(rank_dir)
    assert summary.ops == ()
    assert "ops: kernel_details.csv truncated (the last row has no line end)" in summary.notes
    assert summary.op_calls_per_step is None
    assert summary.kernel_launches_per_step is None


def _fast_and_csv(
    rank_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[ProfileSummary, ProfileSummary, int]:
    """``rank_dir`` read in small chunks the usual way and with the csv path only, and how
    many chunks the usual way handed to the csv path."""
    monkeypatch.setattr(ascend.text, "_CHUNK_BYTES", 1500)
    monkeypatch.setattr(ascend.text, "_HEAD_ROWS", 3)
    fallbacks: list[int] = []
    csv_chunk = ascend.text._KernelScan._slow_chunk

    def counted(self: Any, lines: list[str], row_no: int, more: Any) -> int:
        fallbacks.append(row_no)
        return csv_chunk(self, lines, row_no, more)

    monkeypatch.setattr(ascend.text._KernelScan, "_slow_chunk", counted)
    fast = parse_ascend_rank(rank_dir)
    used = len(fallbacks)
    monkeypatch.setattr(ascend.text._KernelScan, "_fast_chunk", lambda self, lines: False)
    by_csv = parse_ascend_rank(rank_dir)
    assert len(fallbacks) > used  # the second reading did go through csv
    return fast, by_csv, used


def test_fast_path_reads_the_fixture_like_csv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rank0: ProfileSummary
) -> None:
    """Every chunk of the real file (HCCL rows ending in N/A metric cells included) goes
    through the loadtxt path, with the csv path's result."""
    fast, by_csv, fallbacks = _fast_and_csv(_copy_rank(RANK0, tmp_path), monkeypatch)
    assert fallbacks == 0
    _same_profile(fast, by_csv)
    _same_profile(fast, rank0)
    assert fast.notes == by_csv.notes == rank0.notes


def _on_rows(
    change: Callable[[list[str], list[str]], None],
) -> Callable[[list[str], list[list[str]]], list[list[str]]]:
    def apply(header: list[str], rows: list[list[str]]) -> list[list[str]]:
        for row in rows:
            change(header, row)
        return [header, *rows]

    return apply


def _cell(header: list[str], row: list[str], name: str, value: str) -> None:
    row[header.index(name)] = value


def _hccl(row: list[str]) -> bool:
    return row[-1] == "N/A"


KERNEL_TEXT_VARIANTS: dict[str, Callable[[list[str], list[list[str]]], list[list[str]]]] = {
    # Quotes, commas and doubled quotes in the text columns the fast path reads.
    "quoted_text": _on_rows(
        lambda h, r: _cell(h, r, "Name", f'{r[h.index("Name")]}, "v2"') if "Relu" in r[4] else None
    ),
    # In a row ending with N/A metrics, a quote before the text columns: pandas reads it.
    "quote_before_text_in_na_row": lambda h, r: [
        ["Label", *h],
        *([("x, y" if _hccl(row) else "x"), *row] for row in r),
    ],
    # ",N/A" inside the quoted Input Shapes of a row ending with N/A stays text.
    "na_inside_shape": _on_rows(
        lambda h, r: _cell(h, r, "Input Shapes", "8,N/A;N/A") if _hccl(r) else None
    ),
    # N/A text columns in rows ending with N/A are not numbers.
    "na_text_in_na_row": _on_rows(
        lambda h, r: (_cell(h, r, "Type", "N/A"), _cell(h, r, "Step Id", "")) if _hccl(r) else None
    ),
    # An N/A metric in a row that does not end with N/A: pandas reads it.
    "na_metric_mid_row": _on_rows(
        lambda h, r: _cell(h, r, "aic_mac_ratio", "N/A") if "Conv2D" in r[4] else None
    ),
    "non_numeric_duration": _on_rows(
        lambda h, r: _cell(h, r, "Duration(us)", "n/a") if "Relu" in r[4] else None
    ),
}


@pytest.mark.parametrize("variant", sorted(KERNEL_TEXT_VARIANTS))
def test_fast_path_matches_csv_on_odd_text(
    variant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    _rewrite_csv(rank_dir / OUT / "kernel_details.csv", KERNEL_TEXT_VARIANTS[variant])
    fast, by_csv, fallbacks = _fast_and_csv(rank_dir, monkeypatch)
    _same_profile(fast, by_csv)
    assert fast.notes == by_csv.notes
    ops = _op_key(fast)
    if variant == "quoted_text":
        assert fallbacks == 0
        assert any(name.endswith(', "v2"') for name, _ in ops)
    elif variant == "na_inside_shape":
        assert fallbacks == 0
        assert {o.input_shapes for o in fast.ops if o.core == "HCCL"} == {("8,N/A;N/A",)}
    elif variant == "na_text_in_na_row":
        assert fallbacks == 0
        assert {o.op_type for o in fast.ops if o.core == "HCCL"} == {""}
        assert any("rows have no Step Id" in note for note in fast.notes)
    elif variant in ("na_metric_mid_row", "quote_before_text_in_na_row"):
        assert fallbacks == 0  # pandas reads N/A in any metric cell, and quotes before the text
    else:
        assert fallbacks > 0
    if variant == "non_numeric_duration":
        assert any("non-numeric Duration(us)" in note for note in fast.notes)


def test_blank_line_in_kernel_details(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rank0: ProfileSummary
) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    path = rank_dir / OUT / "kernel_details.csv"
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([*lines[:40], b"\r", *lines[40:]]))
    fast, by_csv, fallbacks = _fast_and_csv(rank_dir, monkeypatch)
    assert fallbacks == 1
    _same_profile(fast, by_csv)
    _same_profile(fast, rank0)


# --------------------------------------------------------------------------- bad input


def test_truncated_step_trace_is_an_error_naming_the_file(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    path = rank_dir / OUT / "step_trace_time.csv"
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(ParseError) as info:
        parse_ascend_rank(rank_dir)
    message = str(info.value)
    assert message.startswith(str(path))
    assert "truncated" in message and "\n" not in message


def test_step_trace_cut_at_a_line_end_is_an_error(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    path = rank_dir / OUT / "step_trace_time.csv"
    text = path.read_bytes()
    path.write_bytes(text[: text.index(b",", text.index(b"\n")) + 1] + b"8873.7\r\n")
    with pytest.raises(ParseError, match=r"step_trace_time.csv: row 2 has 2 fields"):
        parse_ascend_rank(rank_dir)


def test_step_time_from_stage_and_bubble_without_free(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    _rewrite_csv(rank_dir / OUT / "step_trace_time.csv", _drop_column("Free"))
    summary = parse_ascend_rank(rank_dir)
    row = _rows(RANK0 / OUT / "step_trace_time.csv")[0]
    assert summary.step_times_ms == pytest.approx(
        [(float(row["Stage"]) + float(row["Bubble"])) / 1000]
    )
    assert summary.breakdown is not None and summary.breakdown.free_ms is None
    assert set(_own(summary.notes)) == {
        "free_ms: step_trace_time.csv has no Free column",
        "step_times_ms: step_trace_time.csv step time taken as Stage + Bubble",
    }


def test_header_only_step_trace_is_an_error(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    path = rank_dir / OUT / "step_trace_time.csv"
    path.write_bytes(path.read_bytes().splitlines(keepends=True)[0])
    with pytest.raises(ParseError, match=r"step_trace_time.csv: no step rows"):
        parse_ascend_rank(rank_dir)


def test_step_trace_without_step_columns_is_an_error(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    path = rank_dir / OUT / "step_trace_time.csv"
    _rewrite_csv(path, _drop_column("Free"))
    _rewrite_csv(path, _drop_column("Stage"))
    with pytest.raises(ParseError, match=r"step_trace_time.csv: no Free column"):
        parse_ascend_rank(rank_dir)


def test_truncated_communication_is_a_note(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    path = rank_dir / OUT / "communication.json"
    path.write_text(path.read_text()[:2000])
    summary = parse_ascend_rank(rank_dir)
    assert summary.communication is None
    notes = [n for n in summary.notes if n.startswith("communication:")]
    assert len(notes) == 1 and "communication.json truncated JSON" in notes[0]
    assert summary.breakdown is not None and summary.ops


def test_no_step_source_is_an_error_naming_the_file(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    path = rank_dir / OUT / "step_trace_time.csv"
    path.unlink()
    (rank_dir / OUT / "trace_view.json").unlink()  # the other source of step times
    with pytest.raises(ParseError) as info:
        parse_ascend_rank(rank_dir)
    assert str(info.value).startswith(f"{path}: absent")


# --------------------------------------------------------------------------- other sources


def test_trace_view_fallback_is_called(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    (rank_dir / OUT / "step_trace_time.csv").unlink()
    (rank_dir / OUT / "trace_view.json").write_text("[]")
    seen: list[Path] = []

    def fake(path: Path) -> tuple[tuple[float, ...], StepBreakdown | None, tuple[str, ...]]:
        seen.append(path)
        return (10.0, 12.0), StepBreakdown(step_ms=11.0, compute_ms=5.5), ("from the stub",)

    monkeypatch.setattr(ascend.text, "breakdown_from_trace_view", fake)
    summary = parse_ascend_rank(rank_dir)
    assert seen == [rank_dir / OUT / "trace_view.json"]
    assert summary.steps == 2
    assert summary.step_times_ms == (10.0, 12.0)
    assert summary.device_busy_fraction == 0.5
    assert "from the stub" in summary.notes
    assert f"{OUT}/trace_view.json" in summary.raw_files


def test_trace_view_fallback_with_the_real_reader(tmp_path: Path) -> None:
    rank_dir = _copy_rank(RANK0, tmp_path)
    (rank_dir / OUT / "step_trace_time.csv").unlink()
    shutil.copyfile(TRACE_VIEW, rank_dir / OUT / "trace_view.json")
    summary = parse_ascend_rank(rank_dir)
    assert summary.steps == 1
    assert summary.step_times_ms[0] == pytest.approx(136.581009, rel=0.01)


def test_db_export_is_handed_to_the_db_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rank_dir = tmp_path / "host_1_ascend_pt"
    (rank_dir / OUT).mkdir(parents=True)
    (rank_dir / OUT / "ascend_pytorch_profiler_0.db").write_bytes(b"")
    expected = ProfileSummary(source="ascend_db", steps=1)
    monkeypatch.setattr(
        ascend, "parse_ascend_db_rank", lambda path: expected if path == rank_dir else None
    )
    assert parse_ascend_rank(rank_dir) is expected


# --------------------------------------------------------------------------- cluster


def test_parse_ascend_two_ranks_and_cluster_view() -> None:
    ranks = parse_ascend(LEVEL1)
    assert [r.rank for r in ranks] == [0, 1]
    view = cluster_view(ranks)
    step_ms = []
    for rank_dir in (RANK0, RANK1):
        row = _rows(rank_dir / OUT / "step_trace_time.csv")[0]
        step_ms.append(
            (float(row["Computing"]) + float(row["Communication(Not Overlapped)"])
             + float(row["Free"])) / 1000
        )  # fmt: skip
    assert view.ranks == (0, 1)
    assert view.step_ms == pytest.approx(step_ms)
    assert view.slowest_rank == (0 if step_ms[0] > step_ms[1] else 1) == 0
    assert view.step_spread_pct == pytest.approx((max(step_ms) - min(step_ms)) / min(step_ms) * 100)
    waits = [r.communication.wait_ms for r in ranks if r.communication is not None]
    assert view.comm_wait_ms == tuple(waits)
    assert view.comm_wait_spread_pct == pytest.approx((max(waits) - min(waits)) / min(waits) * 100)


def test_slow_links_against_expected_bandwidth() -> None:
    ranks = parse_ascend(LEVEL1)
    view = cluster_view(ranks)
    expected = dict(DEFAULT_SLOW_LINK_GB_S)
    hccs = [
        link
        for r in ranks
        for link in (r.communication.links if r.communication else ())
        if link.link == "HCCS"
    ]
    assert all(link.bandwidth_gb_s < expected["HCCS"] for link in hccs)
    assert view.slow_links == (
        f"rank 0 HCCS {round(hccs[0].bandwidth_gb_s, 1):g} GB/s < 18 GB/s expected",
        f"rank 1 HCCS {round(hccs[1].bandwidth_gb_s, 1):g} GB/s < 18 GB/s expected",
    )
    # SDMA carries the same traffic here but is above msprof-analyze's 0.8 x 18 GB/s.
    assert expected["SDMA"] == pytest.approx(14.4)
    relaxed = cluster_view(ranks, Thresholds(slow_link_gb_s=(("hccs", 10.0), ("SDMA", 16.0))))
    assert relaxed.slow_links == ("rank 0 SDMA 15.7 GB/s < 16 GB/s expected",
                                  "rank 1 SDMA 15.5 GB/s < 16 GB/s expected")  # fmt: skip


def test_the_suites_advisor_table_sets_the_slow_link_bandwidth() -> None:
    config = config_from_mapping({"advisor": {"slow_link_gb_s": {"hccs": 10, "PCIE": 20.5}}})
    assert config.advisor.slow_link_gb_s == (
        ("SDMA", pytest.approx(14.4)),
        ("HCCS", 10.0),
        ("RDMA", 12.5),
        ("PCIE", 20.5),
    )
    assert cluster_view(parse_ascend(LEVEL1), config.advisor).slow_links == ()
    with pytest.raises(ConfigError, match=r"advisor\.slow_link_gb_s\.HCCS: expected a number"):
        config_from_mapping({"advisor": {"slow_link_gb_s": {"HCCS": "fast"}}})
    with pytest.raises(ConfigError, match="advisor.slow_link_gb_s: expected a table"):
        config_from_mapping({"advisor": {"slow_link_gb_s": 10}})


def test_cluster_view_names_the_slower_rank() -> None:
    fast = ProfileSummary(source=SOURCE_TEXT, steps=1, rank=3, breakdown=StepBreakdown(100.0))
    slow = ProfileSummary(source=SOURCE_TEXT, steps=1, rank=7, step_times_ms=(120.0, 130.0))
    view = cluster_view([fast, slow])
    assert view.slowest_rank == 7
    assert view.step_ms == (100.0, 125.0)
    assert view.step_spread_pct == pytest.approx(25.0)
    assert view.comm_wait_ms == (None, None)
    assert view.comm_wait_spread_pct is None
    assert view.slow_links == ()


def test_single_rank_dir_is_one_rank() -> None:
    ranks = parse_ascend(RANK1)
    assert len(ranks) == 1 and ranks[0].rank == 1
    assert math.isclose(ranks[0].breakdown.step_ms, 131.912616, rel_tol=1e-9)  # type: ignore[union-attr]
