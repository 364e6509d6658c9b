"""The timeline of one profiled step: from the real Ascend trace_view.json, from torch
profiler traces (the committed one and one recorded here with real torch on CPU), bounded,
and broken input as a note."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from perfgate.models import SpanKind, Timeline
from perfgate.parsers.ascend import parse_ascend_rank
from perfgate.parsers.timeline import MAX_SPANS, ascend_timeline, torch_timeline

DATA = Path(__file__).parent / "data"
RANK0 = DATA / "ascend" / "msinsight_pt_text_level1_2rank" / "rank0_ascend_pt"  # PROVENANCE.md
TRACE = RANK0 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"


def _lanes(timeline: Timeline) -> dict[str, tuple[bool, list[SpanKind]]]:
    return {lane.name: (lane.device, [s.kind for s in lane.spans]) for lane in timeline.lanes}


def _assert_well_formed(timeline: Timeline) -> None:
    for lane in timeline.lanes:
        starts = [s.start_us for s in lane.spans]
        assert starts == sorted(starts), lane.name
        assert all(s.start_us >= 0 and s.dur_us >= 0 for s in lane.spans)
        assert all(s.start_us + s.dur_us <= timeline.duration_us + 1e-6 for s in lane.spans)


def test_the_real_trace_view_gives_streams_hccl_and_host_lanes_inside_the_step() -> None:
    summary = parse_ascend_rank(RANK0)
    timeline = summary.timeline
    assert timeline is not None and timeline.step == "ProfilerStep#50"
    assert timeline.dropped_spans == 0
    _assert_well_formed(timeline)
    lanes = _lanes(timeline)
    # Plain reading of the file: the step span, and the device tasks that start in it.
    events = json.loads(TRACE.read_text())
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    (step,) = [e for e in events if e.get("name") == "ProfilerStep#50"]
    t0 = float(step["ts"])
    assert timeline.duration_us >= step["dur"]
    hardware = [
        e for e in events
        if e.get("ph") == "X" and names[e["pid"]] == "Ascend Hardware" and float(e["ts"]) >= t0
    ]  # fmt: skip
    streams = {name: v for name, v in lanes.items() if name.startswith("Stream ")}
    assert sorted(streams) == ["Stream 0", "Stream 2", "Stream 3", "Stream 4"]
    assert all(device for device, _ in streams.values())
    assert sum(len(kinds) for _, kinds in streams.values()) == len(hardware)
    ai_core = sum(1 for e in hardware if e["args"].get("Task Type") in ("AI_CORE", "MIX_AIV"))
    assert streams["Stream 2"][1].count(SpanKind.COMPUTE) == ai_core == 185
    assert SpanKind.MEMCPY in streams["Stream 2"][1]  # MEMCPY_ASYNC / PCIe DMA tasks
    assert streams["Stream 4"][1].count(SpanKind.COMMUNICATION) == 224  # Notify Wait, Write Value
    hccl = {name: v for name, v in lanes.items() if name.startswith("HCCL ")}
    assert "HCCL Group 0 Communication" in hccl
    assert {f"HCCL Plane {i}" for i in range(8)} <= hccl.keys()
    assert all(dev and set(kinds) == {SpanKind.COMMUNICATION} for dev, kinds in hccl.values())
    group = next(lane for lane in timeline.lanes if lane.name == "HCCL Group 0 Communication")
    assert [s.name for s in group.spans] == [f"hcom_allReduce__586_{i}_1" for i in range(4)]
    host = {name: v for name, v in lanes.items() if not v[0]}
    assert any(name.startswith("Python Thread") for name in host)
    assert any(name.startswith("CANN Thread") for name in host)
    assert all(set(kinds) <= {SpanKind.HOST, SpanKind.COMMUNICATION} for _, kinds in host.values())
    # Device lanes first, then the host threads.
    devices = [lane.device for lane in timeline.lanes]
    assert devices == sorted(devices, reverse=True)


def _synthetic_trace_view(path: Path, device_ops: int, seed: int = 0) -> None:
    """A trace_view.json in torch_npu's shape: one ProfilerStep#1 cpu_op and ``device_ops``
    AI Core tasks on one stream, durations from a fixed seed."""
    rng = random.Random(seed)
    hw, py = 900, 100
    events: list[dict[str, object]] = [
        {"ph": "M", "name": "process_name", "pid": py, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": hw, "tid": 0,
         "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "thread_name", "pid": hw, "tid": 2, "args": {"name": "Stream 2"}},
        {"ph": "X", "name": "ProfilerStep#1", "pid": py, "tid": 1, "cat": "cpu_op",
         "ts": "1000.000", "dur": float(device_ops * 10)},
    ]  # fmt: skip
    for i in range(device_ops):
        events.append(
            {
                "ph": "X",
                "name": f"MatMul_{i}",
                "pid": hw,
                "tid": 2,
                "ts": f"{1000 + 10 * i:.3f}",
                "dur": round(rng.uniform(0.5, 9.5), 3),
                "args": {"Task Type": "AI_CORE", "Task Id": i},
            }
        )
    path.write_text(json.dumps(events))


def test_a_long_step_keeps_the_longest_spans_and_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "trace_view.json"
    _synthetic_trace_view(path, MAX_SPANS + 5000)
    timeline, notes = ascend_timeline(path)
    assert timeline is not None
    (lane,) = timeline.lanes
    assert lane.name == "Stream 2" and lane.device
    assert len(lane.spans) == MAX_SPANS and timeline.dropped_spans == 5000
    kept = {s.name for s in lane.spans}
    events = json.loads(path.read_text())
    dropped = [
        e["dur"] for e in events if e.get("name", "").startswith("MatMul") and e["name"] not in kept
    ]
    assert len(dropped) == 5000
    assert max(dropped) <= min(s.dur_us for s in lane.spans)
    assert notes == (
        f"timeline: 5000 shortest span(s) of ProfilerStep#1 left out (at most {MAX_SPANS} kept)",
    )
    _assert_well_formed(timeline)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('[{"ph": "X", "name": "a", "ts": "1", "dur": 1}', "truncated"),
        ('[{"ph": "X", "name": "a", "ts": "1", "dur": 1}, {"ph": }]', "not valid JSON"),
        ('{"traceEvents": []}', "not a JSON array"),
    ],
)
def test_a_broken_trace_view_is_a_note(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "trace_view.json"
    path.write_text(text)
    timeline, notes = ascend_timeline(path)
    assert timeline is None
    assert len(notes) == 1 and notes[0].startswith("timeline: trace_view.json") and why in notes[0]


def test_a_trace_without_steps_has_no_timeline(tmp_path: Path) -> None:
    path = tmp_path / "trace_view.json"
    path.write_text('[{"ph": "X", "name": "aten::add", "pid": 1, "tid": 1, "ts": "5", "dur": 2}]')
    assert ascend_timeline(path) == (None, ("timeline: no ProfilerStep#N span in trace_view.json",))
    assert (
        torch_timeline([{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 1}])
        is None
    )


def test_the_committed_torch_cpu_trace_gives_one_host_lane_for_its_last_step() -> None:
    doc = json.loads(
        gzip.decompress((DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz").read_bytes())
    )
    events = doc["traceEvents"]
    timeline = torch_timeline(events)
    assert timeline is not None and timeline.step == "ProfilerStep#3"
    (step,) = [e for e in events if e.get("name") == "ProfilerStep#3"]
    assert timeline.duration_us == pytest.approx(step["dur"])
    (lane,) = timeline.lanes
    assert not lane.device and lane.name.startswith("thread ")
    inside = [
        e for e in events
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
        and not e["name"].startswith("ProfilerStep#")
        and step["ts"] <= e["ts"] < step["ts"] + step["dur"]
    ]  # fmt: skip
    assert len(lane.spans) == len(inside)
    assert {s.kind for s in lane.spans} == {SpanKind.HOST}
    _assert_well_formed(timeline)


def test_a_trace_recorded_with_real_torch_on_cpu_gives_host_lanes(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule
    ) as prof:
        for _ in range(5):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            prof.step()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    steps = sorted(e["ts"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    timeline = torch_timeline(events)
    assert timeline is not None
    last = next(e for e in events if e.get("name") == timeline.step)
    assert last["ts"] == steps[-1] and len(steps) == 3
    assert timeline.lanes and all(not lane.device for lane in timeline.lanes)
    names = {s.name for lane in timeline.lanes for s in lane.spans}
    assert {"aten::linear", "aten::relu"} <= names
    assert {s.kind for lane in timeline.lanes for s in lane.spans} == {SpanKind.HOST}
    _assert_well_formed(timeline)


def _x(cat: str, name: str, pid: int, ts: float, dur: float, tid: int = 1) -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def test_torch_device_lanes_and_kinds() -> None:
    events = [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        _x("user_annotation", "ProfilerStep#4", 1, 100, 50),
        _x("cpu_op", "aten::mm", 1, 110, 5),
        _x("cpu_op", "c10d::allreduce_", 1, 120, 5),
        _x("cpu_op", "after the step", 1, 160, 5),
        _x("kernel", "sgemm", 0, 140, 20, tid=7),
        _x("kernel", "ncclKernel_AllReduce", 0, 162, 8, tid=7),
        _x("gpu_memcpy", "Memcpy HtoD", 0, 101, 2, tid=7),
        _x("gpu_memcpy", "before the step", 0, 90, 2, tid=7),
    ]  # fmt: skip
    timeline = torch_timeline(events)
    assert timeline is not None and timeline.duration_us == pytest.approx(70.0)
    device, host = timeline.lanes
    assert device.name == "GPU 0 stream 7" and device.device
    assert [(s.name, s.start_us, s.kind) for s in device.spans] == [
        ("Memcpy HtoD", 1.0, SpanKind.MEMCPY),
        ("sgemm", 40.0, SpanKind.COMPUTE),
        ("ncclKernel_AllReduce", 62.0, SpanKind.COMMUNICATION),
    ]
    assert host.name == "thread 1" and not host.device
    assert [(s.name, s.kind) for s in host.spans] == [
        ("aten::mm", SpanKind.HOST),
        ("c10d::allreduce_", SpanKind.COMMUNICATION),
    ]
    assert Timeline.from_dict(timeline.to_dict()) == timeline
