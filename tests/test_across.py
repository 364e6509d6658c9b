"""``perfgate compare --across``: two stored environments side by side (records built
directly; no torch)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import perfgate

from perfgate.app.across import compare_across
from perfgate.config import Config
from perfgate.errors import UsageError
from perfgate.models import (
    BenchmarkSpec,
    CIContext,
    Direction,
    Fingerprint,
    GitContext,
    Measurement,
    OpStat,
    ProfileSummary,
    RunRecord,
)
from perfgate.reporters.render import render_across_text
from perfgate.stats import summarize
from perfgate.store import open_store

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def fp(kind: str, model: str) -> Fingerprint:
    return Fingerprint(
        device_kind=kind,
        device_model=model,
        device_count=1,
        cpu_model="Xeon",
        cpu_cores=16,
        os="Linux-x86_64",
        python_version="3.11",
        torch_version="2.13.0",
        timing_method="wall-sync-v1",
        params={"batch_size": 128},
    )


def m(metric: str, unit: str, value: float, direction: Direction) -> Measurement:
    reps = [(value,)]
    return Measurement(metric, unit, direction, tuple(reps), summarize(reps))


def run(i: int, f: Fingerprint, step: float, ops: dict[str, float]) -> RunRecord:
    low, high = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER
    return RunRecord(
        id=f"{f.device_kind}{i:030d}",
        project="default",
        benchmark="mlp",
        fingerprint=f,
        git=GitContext(commit=f"c{i}", branch="main"),
        ci=CIContext(),
        started_at=T0 + timedelta(hours=i),
        finished_at=T0 + timedelta(hours=i, minutes=1),
        measurements=(
            m("step_time_ms", "ms", step, low),
            m("throughput_samples_per_s", "1/s", 128_000.0 / step, high),
            m("peak_memory_bytes", "bytes", 2.0**30, low),
        ),
        spec=BenchmarkSpec(name="mlp", workload="mlp"),
        profile=ProfileSummary(
            source="torch_trace",
            steps=3,
            ops=tuple(OpStat(n, f.device_kind, 1.0, t, t) for n, t in ops.items()),
        ),
    )


def test_two_devices_side_by_side(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    store = open_store(url)
    gpu, npu = fp("cuda", "NVIDIA H200"), fp("npu", "Ascend910B3")
    try:
        store.save_runs(
            [
                run(0, gpu, 12.0, {"aten::mm": 8.0, "aten::relu": 1.0}),  # older, ignored
                run(1, gpu, 10.0, {"aten::mm": 6.0, "aten::relu": 1.0}),
                run(2, npu, 15.0, {"MatMul": 9.0, "aten::relu": 2.0}),
            ]
        )
        report = compare_across(Config(database_url=url), store, "device:cuda", "device:npu")
        by_key = compare_across(Config(database_url=url), store, gpu.key()[:6], "model:ascend")
        with pytest.raises(UsageError, match="selects no stored run"):
            compare_across(Config(database_url=url), store, "device:cpu", "device:npu")
    finally:
        store.close()
    assert by_key.benchmarks == report.benchmarks
    (bench,) = report.benchmarks
    ratios = {r.metric: r for r in bench.metrics}
    assert ratios["step_time_ms"].ratio == pytest.approx(1.5)
    assert ratios["step_time_ms"].better == "a"
    assert ratios["throughput_samples_per_s"].ratio == pytest.approx(1 / 1.5)
    assert ratios["throughput_samples_per_s"].better == "a"
    assert ratios["peak_memory_bytes"].better == "same"
    assert [(o.name, o.a_ms, o.b_ms) for o in bench.top_ops_a] == [
        ("aten::mm", 6.0, None),
        ("aten::relu", 1.0, 2.0),
    ]
    assert bench.top_ops_b[0].name == "MatMul"
    assert any(d.startswith("device_kind") for d in report.differences)
    text = render_across_text(report)
    assert "step_time_ms" in text and "1.5x" in text and "a report, not a gate" in text

    cli_run = perfgate(
        None, "compare", "--db", url, "--across", "device:cuda", "device:npu", "--json"
    )
    assert cli_run.returncode == 0, cli_run.stderr
    doc = json.loads(cli_run.stdout + cli_run.stderr)  # the JSON, and nothing beside it
    assert doc["kind"] == "across" and doc["fingerprint_b_key"] == npu.key()
    assert doc["benchmarks"][0]["metrics"][0]["ratio"] == pytest.approx(1.5)
