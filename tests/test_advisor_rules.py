"""perfgate's advisor rules: real torch CPU workloads built to trigger each rule a CPU trace
can show, the Ascend fixtures for the NPU rules, and synthetic profiles for the rest.

The CPU workloads are profiled in-process with the runner's own ``torch_profile``. Their
effects are made far larger than this machine's timing noise (2-20%), and the assertions
are on structure (which rule fired, which op it names, a share above its threshold), not on
fine timings.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perfgate.advisor.cluster import cluster_view
from perfgate.advisor.rules import Thresholds, advise, merge_findings
from perfgate.models import (
    ClusterView,
    Finding,
    OpStat,
    ProfileSummary,
    Severity,
    StepBreakdown,
)
from perfgate.parsers.ascend import parse_ascend

ASCEND = Path(__file__).parent / "data" / "ascend" / "msinsight_pt_text_level1_2rank"


def rules(findings: tuple[Finding, ...]) -> dict[str, Finding]:
    return {f.rule: f for f in findings}


# --------------------------------------------------------------------------- CPU workloads


def profile_step(tmp: Path, name: str, step: Callable[[], Any], steps: int = 4) -> ProfileSummary:
    from perfgate.parsers.torch_trace import parse_torch_trace
    from perfgate.runner.backends import CpuBackend, torch_profile

    path = tmp / f"{name}.pt.trace.json"
    torch_profile(CpuBackend(), step, steps, str(path))
    return parse_torch_trace(path)


@pytest.fixture(scope="module")
def cpu_profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ProfileSummary]:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    tmp = tmp_path_factory.mktemp("advisor_rules")

    # Clean: a few large matmuls and SGD; ops cover the step, nothing kept across steps.
    weights = [torch.randn(448, 448, requires_grad=True) for _ in range(4)]
    x = torch.randn(448, 448)
    sgd = torch.optim.SGD(weights, lr=1e-4)

    def clean() -> None:
        sgd.zero_grad()
        h = x
        for w in weights:
            h = torch.mm(h, w).tanh()
        h.sum().backward()
        sgd.step()

    # .item() inside the step: a per-row metric read back to Python every step, with Python
    # work after each read (about 100 us), so the CPU sits idle most of a ~9 ms step. With
    # less (1 us) the step took 1-2 ms and one preemption of the profiled process inside an
    # op, beside busy neighbours, brought the idle share from ~50% down to 9% (the rule's
    # threshold is 15%); with this and 8 steps it stayed at 69-96% beside the CPU hog.
    small = torch.randn(64, 64, requires_grad=True)
    xs = torch.randn(64, 64)
    sgd_small = torch.optim.SGD([small], lr=1e-4)

    def item() -> None:
        sgd_small.zero_grad()
        out = torch.mm(xs, small)
        out.square().mean().backward()
        sgd_small.step()
        total = 0.0
        for row in out.detach():
            total += row.max().item()
            for _ in range(100):
                total = sum([total] * 50) / 50

    # A list that keeps a 1 MiB tensor alive per step: memory grows step after step.
    kept: list[Any] = []

    def leak() -> None:
        clean()
        kept.append(torch.randn(512, 512))

    # A step of many tiny ops: 800 elementwise ops on a 16-element tensor.
    v = torch.randn(16)

    def tiny() -> None:
        h = v
        for _ in range(800):
            h = h * 1.0001

    return {
        "clean": profile_step(tmp, "clean", clean),
        "item": profile_step(tmp, "item", item, steps=8),
        "leak": profile_step(tmp, "leak", leak, steps=6),
        "tiny": profile_step(tmp, "tiny", tiny),
    }


def test_clean_workload_raises_nothing(cpu_profiles: dict[str, ProfileSummary]) -> None:
    profile = cpu_profiles["clean"]
    assert profile.breakdown is not None
    assert advise(profile) == (), [f.message for f in advise(profile)]


def test_item_in_the_step_is_a_host_sync_and_the_cause_of_idle_time(
    cpu_profiles: dict[str, ProfileSummary],
) -> None:
    found = rules(advise(cpu_profiles["item"]))
    sync = found["host_sync"]
    assert sync.evidence["calls_per_step:aten::item"] == 64
    assert "aten::item" in sync.message
    assert sync.severity is Severity.INFO  # CPU-only trace: nothing to stall, but named
    idle = found["host_bound"]
    assert idle.evidence["cause"] == "host_sync"
    assert float(idle.evidence["idle_share"]) >= Thresholds().idle_share_warning
    assert idle.severity is Severity.WARNING  # capped on a CPU-only trace
    assert "tiny_ops" not in found and "memory_growth" not in found


def test_tensors_kept_across_steps_are_a_memory_leak(
    cpu_profiles: dict[str, ProfileSummary],
) -> None:
    profile = cpu_profiles["leak"]
    assert len(profile.memory_per_step_bytes) == 6
    leak = rules(advise(profile))["memory_growth"]
    assert leak.severity is Severity.WARNING
    assert float(leak.evidence["growth_bytes_per_step"]) >= 0.9 * 512 * 512 * 4
    assert "leak" in leak.message
    # The same workload without the list stays flat: no finding.
    assert "memory_growth" not in rules(advise(cpu_profiles["clean"]))


def test_a_step_of_tiny_ops_asks_for_fusion(cpu_profiles: dict[str, ProfileSummary]) -> None:
    found = rules(advise(cpu_profiles["tiny"]))
    tiny = found["tiny_ops"]
    assert float(tiny.evidence["calls_per_step"]) >= 800
    assert float(tiny.evidence["median_call_us"]) < Thresholds().tiny_op_median_us
    assert "torch.compile" in tiny.suggestion
    assert tiny.impact_ms is not None and tiny.impact_ms > 0


# --------------------------------------------------------------------------- Ascend fixtures


@pytest.fixture(scope="module")
def ascend_job() -> tuple[tuple[ProfileSummary, ...], ClusterView | None]:
    ranks = parse_ascend(ASCEND)
    return ranks, cluster_view(ranks)


def test_ascend_rank0_communication_not_overlapped_is_critical(
    ascend_job: tuple[tuple[ProfileSummary, ...], ClusterView | None],
) -> None:
    ranks, view = ascend_job
    comm = rules(advise(ranks[0], cluster=view))["comm_not_overlapped"]
    assert comm.severity is Severity.CRITICAL
    assert comm.location == "rank 0 / communication"
    assert float(comm.evidence["share"]) == pytest.approx(0.75, abs=0.02)
    assert "bucket_cap_mb" in comm.suggestion and "HCCL" in comm.suggestion
    # Overlap can hide at most the compute not already overlapped.
    assert comm.impact_ms == pytest.approx(8.874 - 4.029, abs=0.01)


def test_ascend_transdata_is_a_format_conversion(
    ascend_job: tuple[tuple[ProfileSummary, ...], ClusterView | None],
) -> None:
    ranks, _ = ascend_job
    conv = rules(advise(ranks[0]))["format_conversion"]
    assert conv.location == "rank 0 / op type TransData"
    assert float(conv.evidence["share"]) == pytest.approx(0.16, abs=0.01)
    assert conv.evidence["calls"] == 57


def test_ascend_cluster_names_the_slower_rank_and_slow_links(
    ascend_job: tuple[tuple[ProfileSummary, ...], ClusterView | None],
) -> None:
    ranks, view = ascend_job
    assert view is not None
    found = advise(ranks[0], cluster=view)
    (slow,) = [f for f in found if f.rule == "slow_rank"]
    assert slow.location == "rank 0"
    assert "rank 0 is the slowest" in slow.message
    assert float(slow.evidence["spread_pct"]) == pytest.approx(3.54, abs=0.01)
    assert {f.location for f in found if f.rule == "slow_link"} == {"rank 0 HCCS", "rank 1 HCCS"}
    # Built from the ranks alone when no cluster view is given.
    assert "slow_rank" in rules(advise(ranks[0], ranks=ranks))


def test_ascend_dominant_memory_bound_op_and_short_window(
    ascend_job: tuple[tuple[ProfileSummary, ...], ClusterView | None],
) -> None:
    ranks, _ = ascend_job
    found = rules(advise(ranks[0]))
    low = found["low_unit_utilization"]
    assert "ForeachAddList" in low.location
    assert float(low.evidence["aiv_mte2_ratio"]) > 0.9
    assert found["short_profile"].severity is Severity.INFO
    assert "aicpu_ops" not in found  # no AI CPU ops in this job


# --------------------------------------------------------------------------- synthetic


def summary(**kw: Any) -> ProfileSummary:
    base: dict[str, Any] = {"source": "test", "steps": 5}
    base.update(kw)
    return ProfileSummary(**base)


def test_leak_is_told_apart_from_a_warm_up_cache_that_levels_off() -> None:
    mib = 1024.0 * 1024.0
    linear = tuple(100 * mib + i * 8 * mib for i in range(6))
    levelling = (100 * mib, 150 * mib, 175 * mib, 187 * mib, 193 * mib, 196 * mib)
    step_then_flat = (100 * mib, 200 * mib, 200 * mib, 200 * mib, 200 * mib, 200 * mib)
    assert "memory_growth" in rules(advise(summary(memory_per_step_bytes=linear)))
    assert "memory_growth" not in rules(advise(summary(memory_per_step_bytes=levelling)))
    assert "memory_growth" not in rules(advise(summary(memory_per_step_bytes=step_then_flat)))


def test_memory_near_capacity_needs_the_capacity() -> None:
    profile = summary(peak_memory_bytes=60 << 30, peak_reserved_bytes=62 << 30)
    assert "memory_near_capacity" not in rules(advise(profile))
    near = rules(advise(profile, device_memory_bytes=64 << 30))["memory_near_capacity"]
    assert near.severity is Severity.CRITICAL  # 62 of 64 GiB reserved
    assert (
        rules(advise(profile, device_memory_bytes=68 << 30))["memory_near_capacity"].severity
        is Severity.WARNING
    )
    assert "memory_near_capacity" not in rules(advise(profile, device_memory_bytes=96 << 30))


def test_aicpu_ops_and_profiler_overhead() -> None:
    def op(name: str, core: str, ms: float) -> OpStat:
        return OpStat(name, "npu", 1.0, ms, ms, op_type=name, core=core)

    profile = summary(
        op_types=(op("MatMulV2", "AI_CORE", 8.0), op("NonZero", "AI_CPU", 2.0)),
        breakdown=StepBreakdown(step_ms=20.0, compute_ms=19.0, free_ms=1.0),
    )
    found = rules(advise(profile, measured_step_ms=10.0))
    assert float(found["aicpu_ops"].evidence["share"]) == pytest.approx(0.2)
    assert found["profiler_overhead"].evidence["profiled_step_ms"] == 20.0
    assert "profiler_overhead" not in rules(advise(profile, measured_step_ms=18.0))


def test_thresholds_move_the_rules() -> None:
    profile = summary(breakdown=StepBreakdown(step_ms=10.0, compute_ms=8.0, free_ms=2.0))
    assert "host_bound" in rules(advise(profile))  # 20% idle
    assert advise(profile, thresholds=Thresholds(idle_share_warning=0.25)) == ()


def test_merge_keeps_both_advisors_drops_repeats_and_marks_known() -> None:
    comm = Finding("comm_not_overlapped", Severity.CRITICAL, "rank 0 / communication", "m", "s")
    leak = Finding("memory_growth", Severity.WARNING, "memory", "m", "s")
    overall = Finding("Overall Summary", Severity.INFO, "rank 0", "m", "s", source="msprof-analyze")
    again = Finding("Overall Summary", Severity.INFO, "rank 0", "m2", "s", source="msprof-analyze")
    merged = merge_findings([comm, leak], [overall, again], baseline_findings=[comm, overall])
    assert [(f.source, f.rule) for f in merged] == [
        ("perfgate", "comm_not_overlapped"),
        ("perfgate", "memory_growth"),
        ("msprof-analyze", "Overall Summary"),
    ]
    known = {f.rule: f.known for f in merged}
    assert known == {"comm_not_overlapped": True, "memory_growth": False, "Overall Summary": True}
    assert merge_findings([leak], [], []) == (leak,)
