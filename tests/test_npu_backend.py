"""The NPU backend's contract, up to the device calls, through the CPU stand-in."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from npu_standin import PROFILE, StandIn

from perfgate.app.ingest import build_ingest_record
from perfgate.app.record import _profile, with_advisor_findings
from perfgate.models import CIContext, GitContext
from perfgate.parsers import read_profile
from perfgate.runner.npu import NpuBackend, cann_version, profiler_settings

torch = pytest.importorskip("torch")


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    fake = StandIn()
    monkeypatch.setitem(sys.modules, "torch_npu", fake.torch_npu)
    monkeypatch.setattr(torch, "npu", fake.npu, raising=False)
    return fake


def test_timing_calls_synchronize_and_reads_the_allocator_peak(standin: StandIn) -> None:
    backend = NpuBackend(env={})
    backend.reset_peak_memory()
    backend.synchronize()
    assert backend.peak_memory_bytes() == 123 << 20
    assert [c[0] for c in standin.calls] == ["reset_peak_memory_stats", "synchronize"]


def test_describe_names_the_device_versions_and_profiler_settings(
    standin: StandIn, tmp_path: Path
) -> None:
    (tmp_path / "ascend_toolkit_install.info").write_text("package_name=x\nversion=8.0.RC3\n")
    env = {"ASCEND_TOOLKIT_HOME": str(tmp_path), "PERFGATE_NPU_PROFILER_LEVEL": "Level0"}
    info = NpuBackend(env=env).describe()
    assert info["device_model"] == "Ascend910B (stand-in)"
    assert info["torch_npu_version"] == "2.1.0.post-standin"
    assert info["cann_version"] == "8.0.RC3"
    assert (info["profiler_level"], info["aic_metrics"]) == ("Level0", "PipeUtilization")


def test_profiled_window_runs_real_steps_and_is_parsed_as_an_ascend_profile(
    standin: StandIn, tmp_path: Path
) -> None:
    if not PROFILE.is_dir():
        pytest.skip("Ascend fixture not present")
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 8)
    losses: list[float] = []

    def step() -> None:
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))

    backend = NpuBackend(env={"PERFGATE_NPU_AIC_METRICS": "AiCoreNone"})
    written = backend.profile(step, 2, str(tmp_path / "bench.pt.trace.json"))

    assert len(losses) == 3  # one warm-up step under the profiler, then two active ones
    assert losses[-1] < losses[0]
    names = [c[0] for c in standin.calls]
    assert names.count("synchronize") == 3
    config = dict(standin.calls)["experimental_config"]
    assert config == {
        "profiler_level": "Level1",
        "aic_metrics": "ACL_AICORE_NONE",
        "export_type": "text",
    }
    profile_kw = dict(standin.calls)["profile"]
    assert profile_kw["activities"] == ["CPU", "NPU"]
    assert profile_kw["record_shapes"] and profile_kw["profile_memory"]
    assert dict(standin.calls)["schedule"] == {"wait": 0, "warmup": 1, "active": 2, "repeat": 1}

    summary = _profile(written)
    assert summary is not None and summary.source == "ascend_text"
    assert summary.breakdown is not None
    assert round(summary.breakdown.compute_ms or 0, 3) == 8.874

    # As for an ingested profile, msprof-analyze's findings join the run (run for real).
    record = build_ingest_record(
        read_profile(Path(written)),
        benchmark="npu-mlp",
        project="p",
        git=GitContext(branch="main"),
        ci=CIContext(),
    )
    warnings: list[str] = []
    advised = with_advisor_findings(record, written, warnings.append)
    assert warnings == []
    assert "Overall Summary" in {f.rule for f in advised.findings}
    assert len(advised.findings) >= 3
    assert {f.location for f in advised.findings} == {"npu-mlp"}


def test_unknown_profiler_level_is_a_clear_error(standin: StandIn, tmp_path: Path) -> None:
    backend = NpuBackend(env={"PERFGATE_NPU_PROFILER_LEVEL": "Level9"})
    with pytest.raises(RuntimeError, match="Level9"):
        backend.profile(lambda: None, 1, str(tmp_path / "b.pt.trace.json"))


def test_missing_torch_npu_or_device_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    with pytest.raises(RuntimeError, match="torch_npu is not installed"):
        NpuBackend(env={})
    fake = StandIn(available=False)
    monkeypatch.setitem(sys.modules, "torch_npu", fake.torch_npu)
    monkeypatch.setattr(torch, "npu", fake.npu, raising=False)
    with pytest.raises(RuntimeError, match="is_available"):
        NpuBackend(env={})


def test_settings_and_cann_version_defaults() -> None:
    assert profiler_settings({}) == ("Level1", "PipeUtilization")
    assert cann_version({}) == ""
