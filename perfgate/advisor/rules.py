"""perfgate's own advisor: one small rule per performance problem, over a ProfileSummary.

Every rule is a pure function that reads what the profile has (step breakdown, ops and op
types, memory, communication, the cluster view of a multi-rank job) and returns
:class:`~perfgate.models.Finding` values with ``source="perfgate"``. A rule whose inputs the
profile lacks (no breakdown, no hardware counters, one rank) returns nothing: it never
guesses. Thresholds live in :class:`Thresholds`, each with its reason; a suite overrides them
in its ``[advisor]`` table. :func:`advise` runs every rule; :func:`merge_findings` merges them
with msprof-analyze's findings and marks those the baseline already had.

``impact_ms`` is an upper estimate of the step time the suggestion could save, per step:
the time the problem occupies that the fix could remove. ``None`` where a rule cannot tell
(memory, straggler links, low unit utilisation).

No I/O, no torch.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from perfgate.advisor.cluster import LOCAL_LINK, cluster_view, pair_utilisation
from perfgate.models import (
    ClusterView,
    Finding,
    OpStat,
    ProfileSummary,
    RankPair,
    Severity,
    Thresholds,
)

__all__ = ["RULES", "SOURCE", "Thresholds", "advise", "merge_findings", "rank_pair_findings"]

SOURCE = "perfgate"

_MIB = 1024 * 1024

_SYNC_OPS: tuple[tuple[str, ...], ...] = (
    # One family per line: nested names of one host synchronisation count once (the most calls).
    ("aten::item", "aten::_local_scalar_dense"),
    ("aten::tolist",),
    ("aten::nonzero",),
    ("cudaStreamSynchronize",),
    ("cudaDeviceSynchronize",),
    ("cudaEventSynchronize",),
    ("aclrtSynchronizeStream",),
    ("aclrtSynchronizeDevice",),
)
_DTOH_MARKERS = ("DtoH", "Device -> Pageable", "Device -> Pinned")
_FORMAT_CONVERSIONS = frozenset(
    {"TransData", "Cast", "TransposeD", "Transpose", "TransDataRNN", "ConfusionTransposeD"}
)
_COMM_CORES = frozenset({"HCCL", "COMMUNICATION"})
_COMM_NAME = re.compile(r"^(hcom_|hccl|c10d::)|nccl|gloo", re.IGNORECASE)
_CUBE_CORES = frozenset({"AI_CORE", "MIX_AIC"})
_VECTOR_CORES = frozenset({"AI_VECTOR_CORE", "MIX_AIV"})
_AICPU = "AI_CPU"


# What each rule suggests, by rule id ("rule:cause" where the advice depends on the cause).
_ADVICE: dict[str, str] = {
    "comm_not_overlapped": "Overlap gradient all-reduce with the backward pass: with DDP, tune "
    "bucket_cap_mb (fewer, larger buckets start earlier) and avoid find_unused_parameters; with "
    "FSDP or ZeRO turn on backward prefetch / overlap_comm; check HCCL_BUFFSIZE or NCCL_BUFFSIZE "
    "and that the collectives use the fast links (HCCS / NVLink).",
    "host_sync": "Keep values on the device inside the step: accumulate losses and metrics as "
    "tensors and call .item() / .cpu() / .tolist() once every N steps; avoid data-dependent shapes "
    "(nonzero, boolean indexing). Per-parameter .item() calls from Adam/AdamW step counters go "
    "away with fused=True.",
    "host_bound:data_loading": "Load data off the critical path: DataLoader(num_workers>0, "
    "pin_memory=True, persistent_workers=True, prefetch_factor>=2), and move decoding/augmentation "
    "to the workers or the device.",
    "host_bound:host_sync": "Remove the synchronisation points from the step (.item(), .cpu(), "
    ".tolist(), stream synchronise): keep values on the device and read them every N steps.",
    "host_bound:python_overhead": "Cut host overhead: torch.compile (or torch_npu graph mode / "
    "CUDA graphs) to run the step as a graph, larger batches per step, and no Python work between "
    "ops.",
    "tiny_ops": "Fuse the small ops: torch.compile (mode='reduce-overhead' adds CUDA graphs), "
    "torch_npu graph mode or fused optimizers (foreach/fused=True); replace Python loops over "
    "tensor elements with batched tensor ops.",
    "aicpu_ops": "Move these ops to AI Core: use dtypes and shapes AI Core supports (e.g. int32 "
    "instead of int64, float16/bfloat16), avoid dynamic shapes, and check the CANN op support list "
    "for an AI Core variant or a fused replacement.",
    "format_conversion": "Avoid repeated layout and dtype conversions: keep weights in the format "
    "the op wants (torch_npu.npu_format_cast once, outside the step), keep channel/hidden sizes "
    "multiples of 16, and one dtype through the model (autocast instead of scattered "
    ".half()/.float()).",
    "low_unit_utilization:memory": "The op waits on memory moves, not compute: fuse it with its "
    "neighbours so data is moved once, move less data (lower precision, fewer copies), and check "
    "the input format avoids extra reads (ND vs NZ).",
    "low_unit_utilization:tiling": "Check tiling and shapes: align dimensions to 16 (float16) / 32 "
    "(int8), use batch and hidden sizes the kernel tiles evenly, prefer the NZ format for matmul "
    "weights, and avoid tiny per-call sizes that leave cores idle.",
    "memory_near_capacity": "Make room: activation checkpointing, a smaller micro-batch with "
    "gradient accumulation, mixed precision, ZeRO/FSDP sharding of optimizer state; set "
    "PYTORCH_CUDA_ALLOC_CONF / PYTORCH_NPU_ALLOC_CONF expandable_segments:True against "
    "fragmentation.",
    "memory_growth": "Look for tensors kept across steps: losses or outputs appended to a list "
    "without .detach()/.item(), caches keyed by step, hooks that store activations; compare "
    "torch.cuda/npu.memory_snapshot() between steps.",
    "slow_rank": "Balance the ranks: same data per rank (sequence length / padding), no "
    "rank-0-only work inside the step (logging, checkpointing, evaluation), same device health and "
    "frequency (npu-smi / nvidia-smi), and CPU cores bound per rank.",
    "slow_link": "Check the link's topology and health (hccn_tool / nvidia-smi topo -m), that "
    "ranks of one node talk over HCCS/NVLink rather than PCIe, and that no other job shares it.",
    "low_pair_utilisation": "Send fewer, larger messages (bigger gradient buckets, fused "
    "collectives), check that the pair talks over the expected link (hccn_tool, npu-smi info -t "
    "topo) and that no other job shares it; a pair far below its peers on the same link points at "
    "a degraded link.",
    "pair_wait": "A transfer waits for its peer to reach the collective: look for the rank that "
    "arrives late (slow_rank, uneven data per rank, rank-only work before the collective, "
    "host-side stalls) rather than at the link.",
    "profiler_overhead": "Lighten the profiler when absolute times matter: with_stack=False, "
    "record_shapes=False, profile_memory=False (torch_npu: profiler_level Level0, aic_metrics "
    "off).",
}

# --------------------------------------------------------------------------- helpers


def _where(profile: ProfileSummary, what: str) -> str:
    return what if profile.rank is None else f"rank {profile.rank} / {what}"


def _ms(value: float) -> str:
    return f"{value:.3g} ms" if abs(value) < 100 else f"{value:.0f} ms"


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def _mib(value: float) -> str:
    return f"{value / _MIB:.1f} MiB"


def _on_device(profile: ProfileSummary) -> bool:
    """Whether the profile saw an accelerator (CUDA kernels or NPU tasks)."""
    return any(o.device != "cpu" for o in profile.ops)


def _is_comm(op: OpStat) -> bool:
    return op.core.upper() in _COMM_CORES or _COMM_NAME.search(op.name) is not None


def _step(profile: ProfileSummary) -> float | None:
    b = profile.breakdown
    return b.step_ms if b is not None and b.step_ms > 0 else None


def _found(
    rule: str,
    severity: Severity,
    where: str,
    message: str,
    evidence: Mapping[str, float | str],
    impact_ms: float | None = None,
    advice: str | None = None,
) -> Finding:
    """A finding of ``rule`` with its advice (:data:`_ADVICE`) unless ``advice`` is given."""
    advice = _ADVICE[rule] if advice is None else advice
    return Finding(rule, severity, where, message, advice, evidence, impact_ms=impact_ms)


# --------------------------------------------------------------------------- rules


def comm_not_overlapped(profile: ProfileSummary, t: Thresholds) -> list[Finding]:
    """Communication the compute does not hide, as a share of the step."""
    b, step = profile.breakdown, _step(profile)
    if b is None or step is None or (exposed := b.communication_not_overlapped_ms) is None:
        return []
    share = exposed / step
    if share < t.comm_share_warning:
        return []
    overlapped, compute = b.communication_overlapped_ms or 0.0, b.compute_ms or 0.0
    evidence = {
        "step_ms": step,
        "communication_not_overlapped_ms": exposed,
        "communication_overlapped_ms": overlapped,
        "compute_ms": compute,
        "share": share,
    }
    message = f"communication not overlapped with compute takes {_pct(share)} of the step "
    message += f"({_ms(exposed)} of {_ms(step)})"
    advice = _ADVICE["comm_not_overlapped"]
    if (comm := profile.communication) is not None:
        evidence.update(transit_ms=comm.transit_ms, wait_ms=comm.wait_ms)
        if comm.wait_ratio is not None:
            evidence["wait_ratio"] = comm.wait_ratio
        message += f"; in collectives: transit {_ms(comm.transit_ms)}, wait {_ms(comm.wait_ms)}"
        if comm.wait_ratio is not None and comm.wait_ratio >= 0.5:
            advice += (
                " Most collective time here is waiting for other ranks: find the slow rank "
                "first (run perfgate advise on the whole job directory)."
            )
    severity = Severity.CRITICAL if share >= t.comm_share_critical else Severity.WARNING
    where, impact = _where(profile, "communication"), min(exposed, max(0.0, compute - overlapped))
    return [_found("comm_not_overlapped", severity, where, message, evidence, impact, advice)]


def _sync_calls(profile: ProfileSummary) -> dict[str, float]:
    """Host synchronisations per step, by op name (one entry per family)."""
    by_name = {o.name: o.calls_per_step for o in profile.ops if o.device == "cpu"}
    out: dict[str, float] = {}
    for family in _SYNC_OPS:
        present = [(by_name[n], n) for n in family if n in by_name]
        if present:
            calls, name = max(present)
            out[name] = calls
    for o in profile.ops:
        if o.device != "cpu" and any(m in o.name for m in _DTOH_MARKERS):
            out[o.name] = out.get(o.name, 0.0) + o.calls_per_step
    return out


def host_sync(profile: ProfileSummary, t: Thresholds) -> list[Finding]:
    """Host synchronisation inside the step: ``.item()``, ``.tolist()``, device-to-host copies,
    stream synchronise."""
    calls = _sync_calls(profile)
    total = sum(calls.values())
    if not calls or total < t.sync_calls_per_step:
        return []
    listed = ", ".join(f"{name} {n:g}x" for name, n in sorted(calls.items(), key=lambda x: -x[1]))
    device = _on_device(profile)
    message = f"host synchronisation inside the step: {listed} per step"
    if not device:
        message += " (no device on this trace: each would stall an accelerator's queue)"
    evidence: dict[str, float | str] = {f"calls_per_step:{k}": v for k, v in calls.items()}
    evidence["calls_per_step"] = total
    severity = Severity.WARNING if device else Severity.INFO
    return [
        _found("host_sync", severity, _where(profile, "host synchronisation"), message, evidence)
    ]


def host_bound(profile: ProfileSummary, t: Thresholds) -> list[Finding]:
    """Low device utilisation: a large share of the step with nothing running, and why."""
    b, step = profile.breakdown, _step(profile)
    if b is None or step is None or b.free_ms is None:
        return []
    idle = b.free_ms / step
    if idle < t.idle_share_warning:
        return []
    device = _on_device(profile)
    evidence: dict[str, float | str] = {"step_ms": step, "free_ms": b.free_ms, "idle_share": idle}
    loading, syncs, top = b.data_loading_ms, _sync_calls(profile), profile.op_calls_per_step
    synced = sum(syncs.values())
    # on a CPU-only trace the syncs are the cause only when they are a share of the ops
    sync_is_cause = (
        bool(syncs)
        and synced >= t.sync_calls_per_step
        and (device or (top is not None and top > 0 and synced / top >= t.cpu_sync_cause_share))
    )
    if loading is not None and loading / step >= t.data_loading_share:
        cause = f"data loading ({_ms(loading)} per step)"
        evidence.update(data_loading_ms=loading, cause="data_loading")
    elif sync_is_cause:
        cause = f"host synchronisation inside the step ({', '.join(sorted(syncs))})"
        evidence.update(cause="host_sync", sync_calls_per_step=synced)
    else:
        cause = "Python and dispatch overhead between ops"
        evidence["cause"] = "python_overhead"
        if syncs:
            evidence["sync_calls_per_step"] = synced
        if top:
            gap_us = b.free_ms * 1000.0 / top
            kind = "device ops" if device else "top-level ops"
            cause += f" ({top:g} {kind} per step, {gap_us:.0f} µs idle per op)"
            evidence.update(op_calls_per_step=top, idle_us_per_op=gap_us)
    severity = Severity.CRITICAL if idle >= t.idle_share_critical and device else Severity.WARNING
    message = (
        f"{'device' if device else 'CPU'} idle {_pct(idle)} of the step ({_ms(b.free_ms)} of "
        f"{_ms(step)}): host-bound; likely cause: {cause}"
    )
    advice = _ADVICE[f"host_bound:{evidence['cause']}"]
    where = _where(profile, "free")
    return [_found("host_bound", severity, where, message, evidence, b.free_ms, advice)]


def _weighted_median_us(ops: Sequence[OpStat]) -> float | None:
    """Median duration of one call (µs), over every call of ``ops``."""
    pairs = sorted(
        (o.self_time_ms_per_step * 1000.0 / o.calls_per_step, o.calls_per_step)
        for o in ops
        if o.calls_per_step > 0
    )
    if not pairs:
        return None
    seen = np.cumsum([weight for _, weight in pairs])  # the first call at or past half
    return pairs[int(np.searchsorted(seen, seen[-1] / 2))][0]


def tiny_ops(profile: ProfileSummary, t: Thresholds) -> list[Finding]:
    """Many short ops per step: launch and dispatch overhead instead of work."""
    device = _on_device(profile)
    # the ops that ran on the accelerator when there are any, else the CPU ops
    ops = [o for o in profile.ops if (o.device != "cpu") == device and not _is_comm(o)]
    if device:
        count = profile.kernel_launches_per_step or sum(o.calls_per_step for o in ops)
    else:
        count = profile.op_calls_per_step or 0.0
    median = _weighted_median_us(ops)
    if count <= t.tiny_op_calls_per_step or median is None or median >= t.tiny_op_median_us:
        return []
    impact = count * t.launch_overhead_us / 1000.0
    if profile.breakdown is not None and profile.breakdown.free_ms is not None:
        impact = min(impact, profile.breakdown.free_ms)
    kind = "kernel launches" if device else "top-level ops"
    message = (
        f"{count:g} {kind} per step with a median of {median:.1f} µs per call: "
        "launch and dispatch overhead dominates"
    )
    evidence = {"calls_per_step": count, "median_call_us": median}
    return [_found("tiny_ops", Severity.WARNING, _where(profile, "ops"), message, evidence, impact)]


def aicpu_and_conversions(profile: ProfileSummary, t: Thresholds) -> list[Finding]:
    """AI CPU operators and format conversions (TransData, Cast, ...) on an NPU."""
    # op types with their core when the profile has them, else the kernels; comm left out
    table = profile.op_types if any(o.core for o in profile.op_types) else profile.ops
    table = tuple(o for o in table if o.core and not _is_comm(o))
    total = sum(o.total_time_ms_per_step for o in table)
    if total <= 0:
        return []
    out: list[Finding] = []
    warn = Severity.WARNING
    aicpu = sorted(
        (o for o in table if o.core.upper() == _AICPU), key=lambda o: -o.total_time_ms_per_step
    )
    aicpu_ms = sum(o.total_time_ms_per_step for o in aicpu)
    if aicpu and aicpu_ms / total >= t.aicpu_share:
        top = ", ".join(f"{o.op_type or o.name} {_ms(o.total_time_ms_per_step)}" for o in aicpu[:3])
        message = (
            f"AI CPU operators take {_pct(aicpu_ms / total)} of NPU op time "
            f"({_ms(aicpu_ms)} per step): {top}"
        )
        evidence = {"aicpu_ms": aicpu_ms, "op_ms": total, "share": aicpu_ms / total}
        where = _where(profile, "core AI_CPU")
        out.append(_found("aicpu_ops", warn, where, message, evidence, aicpu_ms))
    by_type: dict[str, float] = defaultdict(float)
    calls: dict[str, float] = defaultdict(float)
    for o in table:
        if (kind := o.op_type or o.name) in _FORMAT_CONVERSIONS:
            by_type[kind] += o.total_time_ms_per_step
            calls[kind] += o.calls_per_step
    for kind, ms in sorted(by_type.items(), key=lambda x: -x[1]):
        share = ms / total
        if share < t.format_conversion_share:
            continue
        message = f"{kind} takes {_pct(share)} of NPU op time ({_ms(ms)} per step, "
        message += f"{calls[kind]:g} calls)"
        evidence = {"time_ms": ms, "op_ms": total, "share": share, "calls": calls[kind]}
        where = _where(profile, f"op type {kind}")
        out.append(_found("format_conversion", warn, where, message, evidence, ms))
    return out


def _unit_ratio(op: OpStat) -> tuple[str, float] | None:
    m = op.metrics
    core = op.core.upper()
    if core in _CUBE_CORES:
        if "aic_mac_ratio" in m:
            return "cube (aic_mac_ratio)", m["aic_mac_ratio"]
        if "cube_utilization(%)" in m:
            return "cube (cube_utilization)", m["cube_utilization(%)"] / 100.0
    if core in _VECTOR_CORES and "aiv_vec_ratio" in m:
        return "vector (aiv_vec_ratio)", m["aiv_vec_ratio"]
    return None


def low_unit_utilization(profile: ProfileSummary, t: Thresholds) -> list[Finding]:
    """A dominant NPU op whose Cube or Vector unit is mostly idle."""
    ops = [o for o in profile.ops if o.core and o.metrics and not _is_comm(o)]
    compute = [o for o in profile.ops if o.device != "cpu" and not _is_comm(o)]
    total = sum(o.self_time_ms_per_step for o in compute)
    if not ops or total <= 0:
        return []
    out: list[Finding] = []
    for op in sorted(ops, key=lambda o: -o.self_time_ms_per_step)[:3]:
        share = op.self_time_ms_per_step / total
        unit = _unit_ratio(op)
        if share < t.dominant_op_share or unit is None or unit[1] >= t.low_unit_utilization:
            continue
        name, ratio = unit
        pipes = {
            k: v for k, v in op.metrics.items() if k.endswith(("mte2_ratio", "mte3_ratio")) and v
        }
        bound_pipe = max(pipes, key=lambda k: pipes[k], default=None)
        evidence = {"share": share, "time_ms": op.self_time_ms_per_step, "unit_ratio": ratio}
        if bound_pipe is not None and pipes[bound_pipe] >= t.memory_bound_pipe_ratio:
            evidence[bound_pipe] = pipes[bound_pipe]
            why = f"memory-bound: {bound_pipe} {_pct(pipes[bound_pipe])}"
            advice = _ADVICE["low_unit_utilization:memory"]
        else:
            why = "neither compute nor memory pipes are busy"
            advice = _ADVICE["low_unit_utilization:tiling"]
        message = (
            f"{op.op_type or op.name} takes {_pct(share)} of device op time but its "
            f"{name} is busy {_pct(ratio)} of it ({why})"
        )
        where = _where(profile, f"op {op.name}")
        out.append(
            _found("low_unit_utilization", Severity.WARNING, where, message, evidence, None, advice)
        )
    return out


def _leak(series: Sequence[float], t: Thresholds) -> bool:
    """Steady growth with no levelling off: most steps rise and the second half still grows
    at least half as fast as the first (a warm-up cache rises, then stays)."""
    if len(series) < max(2, t.leak_min_steps):
        return False
    diffs = [b - a for a, b in zip(series, series[1:], strict=False)]
    if series[-1] - series[0] < t.leak_min_growth_bytes:
        return False
    rising = sum(1 for d in diffs if d > 0) / len(diffs)
    half = len(diffs) // 2
    early, late = sum(diffs[:half]), sum(diffs[-half:])
    return rising >= t.leak_rising_share and late > 0 and late >= 0.5 * early


def memory(
    profile: ProfileSummary, t: Thresholds, device_memory_bytes: int | None = None
) -> list[Finding]:
    """Peak memory near the device's capacity; memory that keeps growing across steps."""
    out: list[Finding] = []
    warn, where = Severity.WARNING, _where(profile, "memory")
    peaks = [p for p in (profile.peak_reserved_bytes, profile.peak_memory_bytes) if p is not None]
    if device_memory_bytes and peaks:
        peak = max(peaks)
        share = peak / device_memory_bytes
        if share >= t.memory_capacity_warning:
            severity = Severity.CRITICAL if share >= t.memory_capacity_critical else warn
            message = (
                f"peak memory {_mib(peak)} is {_pct(share)} of the device's "
                f"{_mib(device_memory_bytes)}: out-of-memory risk"
            )
            evidence: dict[str, float] = {"peak_bytes": peak, "capacity_bytes": device_memory_bytes}
            out.append(_found("memory_near_capacity", severity, where, message, evidence))
    series = profile.memory_per_step_bytes
    if _leak(series, t):
        growth = series[-1] - series[0]
        per_step = growth / (len(series) - 1)
        message = (
            f"memory grows every step ({_mib(series[0])} -> {_mib(series[-1])} over "
            f"{len(series)} steps, {_mib(per_step)} per step) without levelling off: "
            "likely a leak"
        )
        evidence = {"first_bytes": series[0], "last_bytes": series[-1]}
        evidence.update(growth_bytes_per_step=per_step, steps=float(len(series)))
        out.append(_found("memory_growth", warn, where, message, evidence))
    elif len(series) < t.leak_min_steps and profile.memory_growth_bytes is not None and peaks:
        growth = float(profile.memory_growth_bytes)
        if growth >= max(t.leak_min_growth_bytes, t.window_growth_share * max(peaks)):
            message = (
                f"allocated memory grew {_mib(growth)} over the profiled window; "
                "too few steps to tell a leak from warm-up"
            )
            advice = (
                f"Profile at least {t.leak_min_steps} steps after warm-up; a leak keeps "
                "growing every step, a warm-up cache levels off."
            )
            evidence = {"growth_bytes": growth}
            out.append(Finding("memory_growth", Severity.INFO, where, message, advice, evidence))
    return out


def slow_ranks_and_links(view: ClusterView, t: Thresholds) -> list[Finding]:
    """A slow rank (straggler) and slow links in a multi-rank job."""
    out: list[Finding] = []
    if len(view.ranks) >= 2 and view.step_spread_pct >= t.straggler_spread_pct:
        critical = view.step_spread_pct >= t.straggler_critical_pct
        slowest_ms = max(view.step_ms)
        by_rank = list(zip(view.ranks, view.step_ms, strict=True))
        others = [ms for r, ms in by_rank if r != view.slowest_rank]
        evidence: dict[str, float | str] = {f"step_ms:rank {r}": ms for r, ms in by_rank}
        evidence["spread_pct"] = view.step_spread_pct
        level = (
            f"at or above the {t.straggler_critical_pct:g}% critical threshold"
            if critical
            else f"above the {t.straggler_spread_pct:g}% threshold, below the "
            f"{t.straggler_critical_pct:g}% critical one"
        )
        message = (
            f"rank {view.slowest_rank} is the slowest ({_ms(slowest_ms)} per step; the ranks' "
            f"step times spread {view.step_spread_pct:.1f}% across {len(view.ranks)} ranks, "
            f"{level})"
        )
        message += _wait_evidence(view, slowest_ms, others, evidence)
        severity = Severity.CRITICAL if critical else Severity.WARNING
        impact = slowest_ms - statistics.median(others) if others else None
        out.append(
            _found("slow_rank", severity, f"rank {view.slowest_rank}", message, evidence, impact)
        )
    for link in view.slow_links:
        words = link.split()
        where = " ".join(words[:3]) if len(words) >= 3 else link
        message = f"slow link: {link}"
        out.append(_found("slow_link", Severity.WARNING, where, message, {"link": link}))
    return out


_PAIRS_SHOWN = 5
"""Pairs named in one finding's message (worst first); the evidence holds the same ones."""


def _pair_name(pair: RankPair) -> str:
    return f"{pair.src}->{pair.dst}"


def _pair_list(names: Sequence[str], total: int) -> str:
    shown = ", ".join(names)
    return shown if total <= len(names) else f"{shown} (+{total - len(names)} more)"


def rank_pair_findings(pairs: Sequence[RankPair], t: Thresholds) -> list[Finding]:
    """Rank pairs that use little of their link, and pairs whose transfers start late.

    Low utilisation: bandwidth below ``pair_low_utilisation`` of the link's nominal figure
    (:func:`~perfgate.advisor.cluster.pair_utilisation`; ``LOCAL`` and links without a
    nominal figure are never judged), one finding per link type naming the worst pairs.
    Long waits: a pair (not ``LOCAL``) whose source waited more than ``pair_wait_ms`` per
    step before its transfers, one finding naming the longest. A wait belongs to the source
    rank's ops, so the pairs of one source share it; it is a symptom of a peer arriving late
    more often than of the link itself.
    """
    out: list[Finding] = []
    low: dict[str, list[tuple[float, RankPair]]] = {}
    for pair in pairs:
        share = pair_utilisation(pair, t)
        if share is not None and share < t.pair_low_utilisation:
            low.setdefault(pair.link.upper(), []).append((share, pair))
    nominal = {name.upper(): float(gb_s) for name, gb_s in t.link_nominal_gb_s}
    for link in sorted(low):
        found = sorted(low[link], key=lambda sp: (sp[0], sp[1].src, sp[1].dst))
        shown = found[:_PAIRS_SHOWN]
        evidence = {"pairs": float(len(found)), "nominal_gb_s": nominal[link]}
        evidence["threshold_share"] = t.pair_low_utilisation
        for share, pair in shown:
            evidence[f"bandwidth_gb_s:{_pair_name(pair)}"] = pair.bandwidth_gb_s
            evidence[f"utilisation:{_pair_name(pair)}"] = share
        names = [
            f"{_pair_name(p)} {p.bandwidth_gb_s:.1f} GB/s ({_pct(share)})" for share, p in shown
        ]
        message = (
            f"{len(found)} {link} rank pair(s) below {_pct(t.pair_low_utilisation)} of "
            f"the link's nominal {nominal[link]:g} GB/s: " + _pair_list(names, len(found))
        )
        where = f"{link} rank pairs"
        out.append(_found("low_pair_utilisation", Severity.WARNING, where, message, evidence))
    waiting = sorted(
        (
            p
            for p in pairs
            if p.wait_ms is not None
            and p.wait_ms > t.pair_wait_ms
            and p.link.upper() != LOCAL_LINK  # a rank to itself waits for no peer
        ),
        key=lambda p: (-(p.wait_ms or 0.0), p.src, p.dst),
    )
    if waiting:
        late = waiting[:_PAIRS_SHOWN]
        evidence = {"pairs": float(len(waiting)), "threshold_ms": t.pair_wait_ms}
        evidence.update((f"wait_ms:{_pair_name(p)}", p.wait_ms or 0.0) for p in late)
        names = [f"{_pair_name(p)} {_ms(p.wait_ms or 0.0)}" for p in late]
        message = (
            f"{len(waiting)} rank pair(s) wait more than {_ms(t.pair_wait_ms)} per step "
            "before transferring (the source rank's wait in the ops that carry them): "
            + _pair_list(names, len(waiting))
        )
        impact = max(p.wait_ms or 0.0 for p in waiting)
        out.append(_found("pair_wait", Severity.WARNING, "rank pairs", message, evidence, impact))
    return out


def _job_pairs(profile: ProfileSummary, ranks: Sequence[ProfileSummary]) -> list[RankPair]:
    """Every rank's pairs once (each rank's profile holds the pairs it is the source of)."""
    out: dict[tuple[int, int, str], RankPair] = {}
    for pair in (p for summary in ranks or (profile,) for p in summary.rank_pairs):
        out.setdefault((pair.src, pair.dst, pair.link.upper()), pair)
    return list(out.values())


def _wait_evidence(
    view: ClusterView, slowest_ms: float, others: list[float], evidence: dict[str, float | str]
) -> str:
    """What the ranks' time blocked in collectives says about the slowest rank.

    "The others wait for it" holds only when the slowest rank is the one that waits least
    and the others wait longer by at least half its lead in step time (their extra wait is
    then what its extra work costs them). Otherwise the waits are stated as seen.
    """
    waits = [(w, r) for r, w in zip(view.ranks, view.comm_wait_ms, strict=False) if w is not None]
    if len(waits) < 2:
        return ""
    for w, r in waits:
        evidence[f"comm_wait_ms:rank {r}"] = w
    least, least_rank = min(waits)
    most, most_rank = max(waits)
    lead = slowest_ms - statistics.median(others) if others else 0.0
    others_wait = [w for w, r in waits if r != view.slowest_rank]
    if (
        least_rank == view.slowest_rank
        and others_wait
        and lead > 0
        and statistics.median(others_wait) - least >= 0.5 * lead
    ):
        return (
            f"; it waits least in collectives ({_ms(least)} vs up to {_ms(most)} on the "
            "others): the others wait for it"
        )
    return (
        f"; time waiting in collectives: least {_ms(least)} (rank {least_rank}), most "
        f"{_ms(most)} (rank {most_rank}), which does not show the others waiting for "
        f"rank {view.slowest_rank}"
    )


def profile_window(
    profile: ProfileSummary, t: Thresholds, measured_step_ms: float | None = None
) -> list[Finding]:
    """Reminders about the profile itself: too few steps, or a heavy profiler."""
    out: list[Finding] = []
    info, where = Severity.INFO, _where(profile, "profile window")
    if profile.steps < t.min_profiled_steps:
        message = (
            f"the profile covers {profile.steps} step(s): one unusual step decides "
            "every number here"
        )
        advice = (
            f"Profile at least {t.min_profiled_steps} steps after warm-up "
            "(torch.profiler.schedule(wait=1, warmup=1, active=3))."
        )
        evidence = {"steps": float(profile.steps)}
        out.append(Finding("short_profile", info, where, message, advice, evidence))
    step = _step(profile)
    if measured_step_ms and step is not None and step / measured_step_ms - 1 >= t.profiler_overhead:
        message = (
            f"profiled steps take {step / measured_step_ms:.1f}x the timed step "
            f"({_ms(step)} vs {_ms(measured_step_ms)}): absolute op times are inflated "
            "by the profiler; shares and counts still hold"
        )
        evidence = {"profiled_step_ms": step, "measured_step_ms": measured_step_ms}
        out.append(_found("profiler_overhead", info, where, message, evidence))
    return out


ProfileRule = Callable[[ProfileSummary, Thresholds], list[Finding]]

RULES: tuple[ProfileRule, ...] = (
    comm_not_overlapped,
    host_bound,
    host_sync,
    tiny_ops,
    aicpu_and_conversions,
    low_unit_utilization,
)
"""The rules that need only the profile and the thresholds."""


_SEVERITY_ORDER = {severity: i for i, severity in enumerate(Severity)}  # critical first


def _ordered(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Most severe first, then largest estimated impact, then by key (stable output)."""
    return tuple(
        sorted(
            findings, key=lambda f: (_SEVERITY_ORDER[f.severity], -(f.impact_ms or 0.0), *f.key())
        )
    )


def advise(
    profile: ProfileSummary,
    *,
    thresholds: Thresholds | None = None,
    cluster: ClusterView | None = None,
    ranks: Sequence[ProfileSummary] = (),
    device_memory_bytes: int | None = None,
    measured_step_ms: float | None = None,
) -> tuple[Finding, ...]:
    """Run every rule over one profile (and the job's cluster view when there is one).

    ``profile`` is the slowest rank's for a multi-rank job, ``ranks`` every rank's (the
    cluster view is built from them when ``cluster`` is None and there are two or more);
    ``device_memory_bytes`` is the device's capacity, for the out-of-memory rule;
    ``measured_step_ms`` the step time with the profiler off, for the overhead reminder.
    Returns the findings most severe first, then by estimated impact.
    """
    t = thresholds or Thresholds()
    found = [f for rule in RULES for f in rule(profile, t)]
    found.extend(memory(profile, t, device_memory_bytes))
    if cluster is None and len(ranks) >= 2 and all(_step(r) is not None for r in ranks):
        cluster = cluster_view(ranks, t)
    if cluster is not None:
        found.extend(slow_ranks_and_links(cluster, t))
    found.extend(rank_pair_findings(_job_pairs(profile, ranks), t))
    found.extend(profile_window(profile, t, measured_step_ms))
    return _ordered(found)


# msprof-analyze categories (lower case) that perfgate's own rule of that name covers.
_SAME_PROBLEM = {"slow rank": "slow_rank"}


def merge_findings(
    own: Iterable[Finding], msprof: Iterable[Finding], baseline_findings: Iterable[Finding] = ()
) -> tuple[Finding, ...]:
    """perfgate's and msprof-analyze's findings as one list.

    Both advisors' views of one problem are kept (their keys differ by ``source``: e.g.
    msprof-analyze's "Overall Summary" next to perfgate's ``comm_not_overlapped``); a finding
    whose key was already seen is dropped (the first, or the more severe, stays). A finding
    whose key the baseline run also had is marked ``known=True``: not news in a PR.

    One problem both advisors name the same way is shown once: msprof-analyze's
    "slow rank" row beside perfgate's ``slow_rank`` (which says by how much and where the
    waiting is) is dropped.
    """
    known = {f.key() for f in baseline_findings}
    own = tuple(own)
    mine = {f.rule for f in own}
    msprof = [
        f
        for f in msprof
        if f.source == SOURCE or _SAME_PROBLEM.get(f.rule.strip().lower()) not in mine
    ]
    kept: dict[tuple[str, str, str], Finding] = {}
    for f in (*own, *msprof):
        seen = kept.get(f.key())
        if seen is None or _SEVERITY_ORDER[f.severity] < _SEVERITY_ORDER[seen.severity]:
            kept[f.key()] = f
    return _ordered(replace(f, known=f.key() in known) for f in kept.values())
