"""Tests of perfgate.parsers.torch_trace: a committed real trace, hand-written traces with
known answers, a freshly recorded trace, and bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import perfgate

from perfgate.errors import ParseError, UsageError
from perfgate.models import OpStat, ProfileSummary
from perfgate.parsers import parse_torch_trace

DATA = Path(__file__).parent / "data" / "torch_trace"
MLP_TRACE = DATA / "mlp_cpu.pt.trace.json.gz"


def _op(summary: ProfileSummary, name: str, device: str = "cpu") -> OpStat:
    for op in summary.ops:
        if op.name == name and op.device == device:
            return op
    raise AssertionError(f"no op {name!r} on {device} in {[o.name for o in summary.ops]}")


def _write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _x(
    name: str,
    ts: float,
    dur: float,
    *,
    cat: str = "cpu_op",
    tid: int = 1,
    dims: list[Any] | None = None,
    **args: Any,
) -> dict[str, Any]:
    if dims is not None:
        args["Input Dims"] = dims
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _mem(ts: float, total: int, *, device_type: int = 0) -> dict[str, Any]:
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "args": {"Total Allocated": total, "Bytes": 64, "Device Type": device_type, "Device Id": 0},
    }


# ---------------------------------------------------------------- the committed real trace


@pytest.fixture(scope="module")
def mlp() -> ProfileSummary:
    return parse_torch_trace(MLP_TRACE)


def test_real_trace_steps_and_source(mlp: ProfileSummary) -> None:
    assert mlp.source == "torch_trace"
    assert mlp.steps == 3
    assert mlp.raw_files == (str(MLP_TRACE),)
    assert mlp.rank is None


def test_real_trace_has_matmul_and_optimizer_ops(mlp: ProfileSummary) -> None:
    names = {op.name for op in mlp.ops}
    assert {"aten::addmm", "aten::mm"} <= names  # forward and backward of Linear
    assert {"aten::addcdiv_", "aten::addcmul_", "aten::lerp_"} <= names  # Adam's update
    addmm = _op(mlp, "aten::addmm")
    assert addmm.calls_per_step == 2  # two Linear layers
    assert addmm.op_type == "aten"
    assert "128, 32x64, 64x128" in addmm.input_shapes
    assert _op(mlp, "AddmmBackward0").op_type == "op"
    assert all(op.device == "cpu" for op in mlp.ops)


def test_real_trace_counts_are_integral_per_step(mlp: ProfileSummary) -> None:
    for op in mlp.ops:
        assert op.calls_per_step == int(op.calls_per_step), op
    assert mlp.op_calls_per_step is not None
    assert mlp.op_calls_per_step == int(mlp.op_calls_per_step) > 10


def test_real_trace_times_are_consistent(mlp: ProfileSummary) -> None:
    for op in mlp.ops:
        assert 0 <= op.self_time_ms_per_step <= op.total_time_ms_per_step + 1e-9, op
        assert len(op.input_shapes) <= 3
    selfs = [op.self_time_ms_per_step for op in mlp.ops]
    assert selfs == sorted(selfs, reverse=True)
    b = mlp.breakdown
    assert b is not None and b.compute_ms is not None and b.free_ms is not None
    assert 0 < b.compute_ms <= b.step_ms
    assert b.free_ms == pytest.approx(b.step_ms - b.compute_ms)
    # One thread: the self times of all ops partition the top-level ops' time.
    assert sum(selfs) == pytest.approx(b.compute_ms, rel=0.02)
    assert mlp.device_busy_fraction == pytest.approx(b.compute_ms / b.step_ms)
    assert b.communication_not_overlapped_ms is None
    assert b.communication_overlapped_ms is None


def test_real_trace_memory_and_notes(mlp: ProfileSummary) -> None:
    assert mlp.peak_memory_bytes is not None and mlp.peak_memory_bytes > 0
    assert len(mlp.memory_per_step_bytes) == 3
    assert all(0 < m <= mlp.peak_memory_bytes for m in mlp.memory_per_step_bytes)
    assert mlp.kernel_launches_per_step is None
    assert any(n.startswith("kernel_launches_per_step:") for n in mlp.notes)
    assert any(n.startswith("communication_") for n in mlp.notes)
    assert all("\n" not in n for n in mlp.notes)


def test_summary_round_trips_through_dict(mlp: ProfileSummary) -> None:
    assert ProfileSummary.from_dict(json.loads(json.dumps(mlp.to_dict()))) == mlp


# --------------------------------------------------------------------------- hand-written traces


def _nested_events(with_steps: bool = True) -> list[dict[str, Any]]:
    """Two 1000 us steps; per step: linear(400) > addmm(300) > [addmm(100), copy_(50)], relu(100).

    Thread 2 runs one mul(200) in step 1 only; two ops lie outside the step windows.
    """
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        _x("outside::before", 100, 50),
        _x("<module>", 900, 2200, cat="python_function"),  # ignored: not an op
        _x("aten::mul", 1500, 200, tid=2, dims=[[8, 8], []]),
        _x("outside::after", 3500, 50),
        _mem(1050, 1000),
        _mem(1800, 3000),
        _mem(2100, 2000),
        _mem(3500, 9000),
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": 1100},
    ]
    for k, base in ((1, 1000), (2, 2000)):
        if with_steps:
            events.append(_x(f"ProfilerStep#{k}", base, 1000, cat="user_annotation"))
        events += [
            _x("aten::linear", base + 100, 400, dims=[[32, 64], [128, 64], [128]]),
            _x("aten::addmm", base + 150, 300, dims=[[128], [32, 64], [64, 128]]),
            _x("aten::addmm", base + 200, 100, dims=[[128], [32, 64], [64, 128]]),
            _x("aten::copy_", base + 350, 50, dims=[[32, 128], [32, 128], []]),
            _x("Optimizer.step#SGD.step", base + 550, 300, cat="user_annotation"),
            _x("aten::relu", base + 600, 100, dims=[[32, 128]]),
        ]
    return events


def test_nesting_gives_exact_self_total_and_calls(tmp_path: Path) -> None:
    s = parse_torch_trace(_write(tmp_path / "t.json", {"traceEvents": _nested_events()}))
    assert s.steps == 2
    expected = {
        "aten::linear": (1.0, 0.100, 0.400),
        # addmm nested in itself: the inner call counts as a call and in self time,
        # but its time is not added to total a second time.
        "aten::addmm": (2.0, 0.250, 0.300),
        "aten::copy_": (1.0, 0.050, 0.050),
        "aten::relu": (1.0, 0.100, 0.100),
        "aten::mul": (0.5, 0.100, 0.100),
    }
    assert {op.name for op in s.ops} == set(expected)
    for name, want in expected.items():
        op = _op(s, name)
        got = (op.calls_per_step, op.self_time_ms_per_step, op.total_time_ms_per_step)
        assert got == pytest.approx(want), name
    assert [op.name for op in s.ops][:2] == ["aten::addmm", "aten::linear"]
    assert _op(s, "aten::linear").input_shapes == ("32x64, 128x64, 128",)
    assert _op(s, "aten::copy_").input_shapes == ("32x128, 32x128",)
    assert _op(s, "aten::mul").input_shapes == ("8x8",)
    assert _op(s, "aten::linear").op_type == "aten"


def test_step_windows_restrict_ops_and_set_the_breakdown(tmp_path: Path) -> None:
    s = parse_torch_trace(_write(tmp_path / "t.json", {"traceEvents": _nested_events()}), steps=7)
    names = {op.name for op in s.ops}
    assert "outside::before" not in names and "outside::after" not in names
    assert any(n.startswith("steps: 7 given") for n in s.notes)
    # top level: linear and relu in each step (the annotation does not nest relu), mul once
    assert s.op_calls_per_step == pytest.approx(2.5)
    b = s.breakdown
    assert b is not None
    assert b.step_ms == pytest.approx(1.0)
    # step 1: [1100, 1700] (linear, mul, relu merged) = 600; step 2: 400 + 100 = 500
    assert b.compute_ms == pytest.approx(0.55)
    assert b.free_ms == pytest.approx(0.45)
    assert s.device_busy_fraction == pytest.approx(0.55)
    assert s.peak_memory_bytes == 9000
    # step 2 has only a lower event (2000) but starts at the 3000 left by step 1
    assert s.memory_per_step_bytes == (3000.0, 3000.0)


def test_without_step_annotations_the_steps_argument_divides(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.json", {"traceEvents": _nested_events(with_steps=False)})
    s = parse_torch_trace(path, steps=2)
    assert s.steps == 2
    assert _op(s, "aten::addmm").calls_per_step == 2.0
    assert _op(s, "outside::before").calls_per_step == 0.5  # no windows: everything counts
    assert s.memory_per_step_bytes == ()
    assert any(n.startswith("steps: no ProfilerStep") for n in s.notes)
    assert any(n.startswith("memory_per_step_bytes:") for n in s.notes)
    assert parse_torch_trace(path).steps == 1
    with pytest.raises(UsageError):
        parse_torch_trace(path, steps=0)


def test_trace_without_memory_or_shapes_says_so(tmp_path: Path) -> None:
    events = [_x("ProfilerStep#1", 0, 100, cat="user_annotation"), _x("aten::add", 10, 20)]
    s = parse_torch_trace(_write(tmp_path / "t.json", {"traceEvents": events}))
    assert s.peak_memory_bytes is None
    assert s.memory_per_step_bytes == ()
    assert _op(s, "aten::add").input_shapes == ()
    for metric in ("peak_memory_bytes", "memory_per_step_bytes", "input_shapes"):
        assert any(n.startswith(metric + ":") for n in s.notes), metric


def _gpu_events() -> list[dict[str, Any]]:
    """Two 1000 us steps with kernels linked to their launches by correlation id."""

    def launch(ts: float, corr: int) -> dict[str, Any]:
        return _x("cudaLaunchKernel", ts, 10, cat="cuda_runtime", correlation=corr)

    def kernel(name: str, ts: float, dur: float, corr: int) -> dict[str, Any]:
        ev = _x(name, ts, dur, cat="kernel", correlation=corr, stream=7)
        ev.update(pid=0, tid=7)
        return ev

    return [
        _x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        _x("ProfilerStep#2", 1000, 1000, cat="user_annotation"),
        _x("aten::mm", 100, 50),
        launch(110, 1),
        kernel("gemm", 200, 300, 1),
        _x("nccl:all_reduce", 155, 20, cat="user_annotation"),
        launch(160, 3),
        kernel("ncclDevKernel_AllReduce_Sum_f32", 400, 200, 3),  # 100 us under gemm
        _x("aten::mm", 1100, 50),
        launch(1110, 2),
        kernel("gemm", 1200, 300, 2),
        launch(1160, 4),
        kernel("ncclDevKernel_AllReduce_Sum_f32", 1600, 100, 4),  # not overlapped
        launch(1900, 5),
        kernel("elementwise", 2050, 100, 5),  # runs after step 2 but was launched in it
        launch(2500, 6),
        kernel("late", 2600, 100, 6),  # launched outside any step
        _x("cudaStreamSynchronize", 1950, 5, cat="cuda_runtime", correlation=7),
        _mem(100, 10**9, device_type=0),
        _mem(300, 5000, device_type=1),
    ]


def test_gpu_trace_kernels_launches_and_communication(tmp_path: Path) -> None:
    doc = {
        "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},
        "traceEvents": _gpu_events(),
    }
    s = parse_torch_trace(_write(tmp_path / "gpu.pt.trace.json", doc))
    assert s.rank == 3
    gemm = _op(s, "gemm", "cuda")
    assert (
        gemm.calls_per_step,
        gemm.self_time_ms_per_step,
        gemm.total_time_ms_per_step,
    ) == pytest.approx((1.0, 0.3, 0.3))
    assert gemm.op_type == "kernel"
    assert _op(s, "elementwise", "cuda").calls_per_step == 0.5
    assert _op(s, "ncclDevKernel_AllReduce_Sum_f32", "cuda").self_time_ms_per_step == pytest.approx(
        0.15
    )
    assert "late" not in {op.name for op in s.ops}
    assert s.kernel_launches_per_step == pytest.approx(2.5)
    b = s.breakdown
    assert b is not None
    assert b.compute_ms == pytest.approx(0.3)  # gemm only, clipped to the step windows
    assert b.communication_not_overlapped_ms == pytest.approx(0.1)
    assert b.communication_overlapped_ms == pytest.approx(0.05)
    assert b.free_ms == pytest.approx(0.6)
    assert s.device_busy_fraction == pytest.approx(0.3)
    assert s.peak_memory_bytes == 5000  # device memory wins over host memory
    assert not any(n.startswith("kernel_launches_per_step") for n in s.notes)


def test_cpu_communication_from_gloo(tmp_path: Path) -> None:
    events = [
        _x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        _x("aten::mm", 100, 400),
        _x("c10d::allreduce_", 500, 100),
        _x("gloo:all_reduce", 450, 300, cat="user_annotation", tid=9),
    ]
    s = parse_torch_trace(_write(tmp_path / "t.json", {"traceEvents": events}))
    b = s.breakdown
    assert b is not None
    assert b.compute_ms == pytest.approx(0.4)
    assert b.communication_overlapped_ms == pytest.approx(0.05)  # 450..500 under mm
    assert b.communication_not_overlapped_ms == pytest.approx(0.25)  # 500..750
    assert b.free_ms == pytest.approx(0.35)


def test_gzip_is_detected_by_content(tmp_path: Path) -> None:
    path = tmp_path / "t.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": _nested_events()}).encode()))
    assert parse_torch_trace(path).steps == 2


# --------------------------------------------------------------------------- a fresh real trace


def _record(tmp_path: Path, name: str, step_fn: Any) -> ProfileSummary:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.set_num_threads(1)
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
    ) as prof:
        for _ in range(3):
            step_fn()
            prof.step()
    path = tmp_path / f"{name}.pt.trace.json.gz"
    prof.export_chrome_trace(str(path))
    return parse_torch_trace(path)


def test_many_tiny_ops_make_many_more_op_calls_than_one_matmul(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    small = torch.ones(4)
    a = torch.ones(256, 256)

    def tiny_ops() -> None:
        y = small
        for _ in range(200):
            y = y + 1

    def one_matmul() -> None:
        a @ a

    tiny = _record(tmp_path, "tiny", tiny_ops)
    big = _record(tmp_path, "big", one_matmul)
    assert tiny.steps == big.steps == 2
    assert tiny.op_calls_per_step is not None and big.op_calls_per_step is not None
    assert tiny.op_calls_per_step >= 200
    assert big.op_calls_per_step <= 5
    assert _op(tiny, "aten::add").calls_per_step == 200
    assert _op(big, "aten::matmul").calls_per_step == 1
    assert "256x256, 256x256" in _op(big, "aten::matmul").input_shapes


# --------------------------------------------------------------------------- bad input


def _assert_parse_error(path: Path, fragment: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_torch_trace(path)
    message = str(info.value)
    assert str(path) in message
    assert fragment in message
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    _assert_parse_error(tmp_path / "nope.json", "no such file")


def test_truncated_gzip(tmp_path: Path) -> None:
    data = MLP_TRACE.read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    _assert_parse_error(path, "truncated gzip")


def test_truncated_json(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": _nested_events()})
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])
    _assert_parse_error(path, "truncated JSON")
    # cut inside a string: json says "Unterminated string starting at", no second "at"
    path.write_text('{"traceEvents": [{"name": "aten::mm')
    _assert_parse_error(path, "(Unterminated string starting at line 1 column 27)")


def test_not_json(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("<html>nope</html>")
    _assert_parse_error(path, "not valid JSON")


@pytest.mark.parametrize("doc", [{"events": []}, {"traceEvents": {}}, [1, 2]])
def test_no_trace_events_list(tmp_path: Path, doc: Any) -> None:
    _assert_parse_error(_write(tmp_path / "t.json", doc), "traceEvents")


def test_no_cpu_ops(tmp_path: Path) -> None:
    # what export_chrome_trace writes after a schedule has started a new, empty cycle
    doc = {
        "traceEvents": [
            {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "ts": 0, "dur": 5}
        ]
    }
    _assert_parse_error(_write(tmp_path / "t.json", doc), "no cpu_op events")


@pytest.mark.parametrize(
    ("dur", "fragment"),
    [(-1, "negative duration"), (float("nan"), "NaN"), ("5", "non-numeric"), (None, "missing")],
)
def test_bad_durations(tmp_path: Path, dur: Any, fragment: str) -> None:
    ev = _x("aten::add", 10, 0)
    if dur is None:
        del ev["dur"]
    else:
        ev["dur"] = dur
    _assert_parse_error(_write(tmp_path / "t.json", {"traceEvents": [ev]}), fragment)


def test_a_trace_without_step_markers_says_so_in_advise_and_ingest(tmp_path: Path) -> None:
    """The real trace less its ProfilerStep# spans: both commands print the note that the
    whole trace was taken as one step, instead of a silent "1 profiled step(s)"."""
    with gzip.open(DATA / "mlp_cpu.pt.trace.json.gz", "rt", encoding="utf-8") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    doc["traceEvents"] = [
        e for e in events if not str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    assert len(doc["traceEvents"]) < len(events)
    path = tmp_path / "nosteps.pt.trace.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    note = "note: steps: no ProfilerStep annotations; the whole trace is taken as 1 step(s)"
    advise = perfgate(None, "advise", str(path))
    assert advise.returncode == 0, advise.stdout + advise.stderr
    assert note in advise.stdout
    url = f"sqlite:///{tmp_path / 's.db'}"
    args = ["ingest", str(path), "--benchmark", "b", "--db", url, "--branch", "main"]
    ingest = perfgate(None, *args)
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    assert note in ingest.stdout
