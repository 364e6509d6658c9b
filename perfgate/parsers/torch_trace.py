"""Read a torch.profiler Chrome trace into a :class:`~perfgate.models.ProfileSummary`.

The input is what ``prof.export_chrome_trace(path)`` or ``tensorboard_trace_handler`` writes
(``*.json``, ``*.json.gz``, ``*.pt.trace.json[.gz]``): one JSON object whose ``traceEvents``
list holds Chrome trace events, times and durations in µs. What is read of it:

- ``ph == "X"`` complete events, by ``cat``: ``user_annotation`` named ``ProfilerStep#K``
  (the step windows, one per active step) and other ``record_function`` ranges
  (``enumerate(DataLoader)#...``, ``nccl:all_reduce``, ``gloo:all_reduce`` on gloo's worker
  threads); ``cpu_op`` (aten and autograd operators, nested by time on one thread,
  ``args["Input Dims"]`` with ``record_shapes=True``); ``kernel`` / ``gpu_memcpy`` /
  ``gpu_memset`` (``pid`` the device, ``tid`` the stream, ``args["correlation"]`` links to
  the launching runtime call); ``cuda_runtime`` / ``cuda_driver`` (``cudaLaunchKernel``,
  ...). torch 1.x's ``Operator``, ``Kernel``, ``Memcpy``, ``Memset`` and ``Runtime`` too.
- ``ph == "i"`` instants named ``[memory]`` (``profile_memory=True``), one per allocation or
  free: ``args["Bytes"]`` (negative for a free), ``args["Total Allocated"]`` (the
  allocator's running total after it), ``args["Device Type"]`` (0 CPU, 1 CUDA, ...). On CPU
  the total counts only memory allocated since the profiler started: a lower bound of the
  process's peak.

The profiler's ``Trace`` span only bounds how long a step can be; everything else (``M``
metadata, ``s``/``f`` flow arrows, ``python_function`` stacks) is ignored. Pure: imports
neither torch nor anything that does.
"""

from __future__ import annotations

import bisect
import functools
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfgate.errors import ParseError, UsageError
from perfgate.models import OpStat, ProfileSummary, StepBreakdown
from perfgate.parsers.decompress import read_whole
from perfgate.parsers.timeline import torch_timeline

__all__ = ["SOURCE", "parse_torch_trace"]

SOURCE = "torch_trace"

_DATALOADER_PREFIX = "enumerate(DataLoader)"
_STEP_CATS = frozenset({"user_annotation", "cpu_op", "operator", ""})
_CPU_OP_CATS = frozenset({"cpu_op", "operator"})
_DEVICE_CATS: Mapping[str, str] = {  # category -> op_type
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
}
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "runtime"})
_TIMED_CATS = _CPU_OP_CATS | _DEVICE_CATS.keys() | _RUNTIME_CATS
_COMM_MARKERS = ("nccl", "gloo", "hccl")
_OCCUPANCY = "est. achieved occupancy %"
_MAX_SHAPES = 3
_MAX_SHAPE_CHARS = 120
_US_PER_MS = 1000.0

Interval = tuple[float, float]


def parse_torch_trace(path: str | os.PathLike[str], *, steps: int | None = None) -> ProfileSummary:
    """Summarise a torch.profiler Chrome trace (plain or gzip JSON, told by its first
    bytes) per profiled step.

    ``steps`` (default 1) is used only when the trace has no ``ProfilerStep#`` annotations:
    the whole trace is then one window divided by it. Op times and counts are per step and
    cover only events that start inside a ``ProfilerStep#`` window when there are any;
    ``notes`` names each metric that could not be computed and why.

    - ops: every ``cpu_op`` name (device ``cpu``, op_type ``aten`` or ``op``): calls, total
      time (outermost occurrences only, so an op nested in itself counts once), self time
      (minus its direct child ops on the same thread), its three most frequent input shapes;
      every kernel / memcpy / memset name (device ``cuda``, self == total), counted in the
      step whose runtime call launched it. Largest self time first.
    - op_calls_per_step: cpu ops not nested in another cpu op (per thread).
    - kernel_launches_per_step: runtime events whose name contains ``LaunchKernel``; None on
      a trace without runtime events.
    - breakdown: ``step_ms`` is the mean step window. ``compute_ms`` is the time per step
      under the union of top-level cpu ops (CPU-only trace) or of kernels (GPU trace),
      communication excluded. Communication (names containing nccl, gloo or hccl,
      ``c10d::*``, ``record_param_comms``; on a GPU trace the nccl kernels) splits into the
      part under compute (overlapped) and the rest. ``free_ms`` = step - compute -
      communication not overlapped, >= 0. ``data_loading_ms``: time under
      ``enumerate(DataLoader)``.
    - step_times_ms: each window's duration, in order (empty without annotations); an
      implausible window is dropped with a note (:func:`_drop_implausible_steps`).
    - collection: rank, world size and backend (``distributedInfo``), device name and count
      (``deviceProperties``), the CUDA versions when recorded.
    - memory: the largest ``Total Allocated`` of device memory when the trace has any, else
      of host memory; per step, the largest within the window (from the level the previous
      event left).

    Raises:
        ParseError: in one line starting with the file name (an event by its index,
            ``traceEvents[i]``): missing or unreadable, not (complete) JSON or gzip, no
            ``traceEvents`` list or no ``cpu_op`` events, or a negative, NaN, infinite or
            non-numeric event time.
        UsageError: ``steps`` is given and is not a positive integer.
    """
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise UsageError(f"steps must be a positive integer, not {steps!r}")
    label = str(path)
    doc = _load_json(Path(path), label)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ParseError(f"{label}: no 'traceEvents' list; not a torch.profiler Chrome trace")
    trace = _collect(doc["traceEvents"], label)
    return replace(
        _summarise(trace, doc, label, steps), timeline=torch_timeline(doc["traceEvents"])
    )


# --------------------------------------------------------------------------- loading
def _load_json(path: Path, label: str) -> Any:
    raw = read_whole(path, label)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError(f"{label}: not JSON (not UTF-8 text)") from None
    del raw  # the text alone from here on: the file is not held twice while it is parsed
    if not text.strip():
        raise ParseError(f"{label}: empty file, not JSON")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # json's "Unterminated string starting at" ends in its own "at"
        at = f"{'' if exc.msg.endswith(' at') else 'at '}line {exc.lineno} column {exc.colno}"
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            raise ParseError(f"{label}: truncated JSON ({exc.msg} {at})") from None
        raise ParseError(f"{label}: not valid JSON ({exc.msg} {at})") from None
    except RecursionError:
        raise ParseError(f"{label}: JSON nested too deeply") from None


# --------------------------------------------------------------------------- collecting
@dataclass
class _Trace:
    """The events this module uses, in flat lists (one pass over ``traceEvents``)."""

    windows: list[tuple[float, float, str]] = field(default_factory=list)
    """(start, end, ``'ProfilerStep#K' (traceEvents[i])`` to name it in a note)."""
    # the profiler's own ``Trace`` spans and [lo, hi] of the other timed events
    trace_spans: list[Interval] = field(default_factory=list)
    lo: float = math.inf
    hi: float = -math.inf
    # cpu ops: (ts, dur, name, input dims, (pid, tid))
    cpu_ops: list[tuple[float, float, str, Any, tuple[Any, Any]]] = field(default_factory=list)
    cpu_comm: list[Interval] = field(default_factory=list)
    data_loading: list[Interval] = field(default_factory=list)
    # device activity: (ts, dur, name, op_type, correlation)
    device: list[tuple[float, float, str, str, Any]] = field(default_factory=list)
    # kernels that report an occupancy: (ts, dur, occupancy %, correlation)
    occupancy: list[tuple[float, float, float, Any]] = field(default_factory=list)
    kernel_devices: set[Any] = field(default_factory=set)
    """The ``pid`` of kernel events: the device index in Kineto traces."""
    runtime_ts: dict[Any, float] = field(default_factory=dict)
    runtime_events: int = 0
    launch_ts: list[float] = field(default_factory=list)
    # [memory] events: (ts, total_allocated, device key)
    memory: list[tuple[float, float, tuple[Any, Any]]] = field(default_factory=list)


def _collect(events: Sequence[Any], label: str) -> _Trace:
    t = _Trace()
    for index, ev in enumerate(events):
        if not isinstance(ev, dict) or not isinstance(name := ev.get("name"), str):
            continue
        ph = ev.get("ph")
        if ph == "X":
            cat = ev.get("cat")
            cat = cat.lower() if isinstance(cat, str) else ""
            step = name.startswith("ProfilerStep#") and cat in _STEP_CATS
            ts, dur = _finite(ev.get("ts")), _finite(ev.get("dur"))
            if ts is None or dur is None or dur < 0:
                # Only well-formed times count; an ignored event with bad times is still ignored.
                read = _is_comm(name) or name.startswith(_DATALOADER_PREFIX)
                if step or cat in _TIMED_CATS or (cat == "user_annotation" and read):
                    raise _bad_times(ev, ts, dur, label, index)
                continue
            if step:
                t.windows.append((ts, ts + dur, f"{_short(name)} (traceEvents[{index}])"))
                continue
            if cat == "trace":  # the profiler's own span
                t.trace_spans.append((ts, ts + dur))
            else:
                t.lo, t.hi = min(t.lo, ts), max(t.hi, ts + dur)
            args = ev.get("args")
            args = args if isinstance(args, dict) else {}
            if cat == "user_annotation":
                if _is_comm(name):
                    t.cpu_comm.append((ts, ts + dur))
                elif name.startswith(_DATALOADER_PREFIX):
                    t.data_loading.append((ts, ts + dur))
            elif cat in _CPU_OP_CATS:
                thread = (ev.get("pid"), ev.get("tid"))
                t.cpu_ops.append((ts, dur, name, args.get("Input Dims"), thread))
            elif cat in _DEVICE_CATS:
                op_type = _DEVICE_CATS[cat]
                corr = _correlation(args)
                t.device.append((ts, dur, name, op_type, corr))
                if op_type == "kernel":
                    t.kernel_devices.add(ev.get("pid"))
                    if (occ := _finite(args.get(_OCCUPANCY))) is not None:
                        t.occupancy.append((ts, dur, occ, corr))
            elif cat in _RUNTIME_CATS:
                t.runtime_events += 1
                if (corr := _correlation(args)) is not None:
                    t.runtime_ts[corr] = ts
                if "LaunchKernel" in name:
                    t.launch_ts.append(ts)
        elif ph in ("i", "I") and name == "[memory]" and isinstance(args := ev.get("args"), dict):
            if (ts := _finite(ev.get("ts"))) is None:
                continue
            t.lo, t.hi = min(t.lo, ts), max(t.hi, ts)
            if (total := _finite(args.get("Total Allocated"))) is not None:
                dev = (args.get("Device Type", 0), args.get("Device Id", -1))
                t.memory.append((ts, total, dev))
    return t


def _finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite JSON number, else None."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None  # type: ignore[no-any-return]
    return float(value) if kind is int else None


def _bad_times(
    ev: Mapping[str, Any], ts: float | None, dur: float | None, label: str, index: int
) -> ParseError:
    """The error for an event this module reads whose ``ts`` or ``dur`` is bad."""
    at = f"{label}: traceEvents[{index}] {_short(ev.get('name'))}"
    if ts is None or dur is None:
        key = "ts" if ts is None else "dur"
        return ParseError(
            f"{at} has a missing, non-numeric or NaN/infinite {key!r} ({ev.get(key)!r})"
        )
    return ParseError(f"{at} at ts {ts} has a negative duration ({dur})")


def _short(name: Any) -> str:
    text = repr(name)
    return text if len(text) <= 80 else text[:77] + "..."


def _correlation(args: Mapping[str, Any]) -> Any:
    corr = args.get("correlation")
    return corr if isinstance(corr, int | str) and not isinstance(corr, bool) else None


@functools.lru_cache(maxsize=1 << 16)
def _is_comm(name: str) -> bool:
    lowered = name.lower()
    return (
        any(marker in lowered for marker in _COMM_MARKERS)
        or lowered.startswith("c10d::")
        or name == "record_param_comms"
    )


# --------------------------------------------------------------------------- summarising
class _Windows:
    """Step windows, sorted and non-overlapping; maps a timestamp to its step index."""

    def __init__(self, windows: Iterable[tuple[Any, ...]]) -> None:
        self.spans = sorted((w[0], w[1]) for w in windows)
        self.starts = [lo for lo, _ in self.spans]

    def index(self, ts: float) -> int:
        i = bisect.bisect_right(self.starts, ts) - 1
        return i if i >= 0 and ts <= self.spans[i][1] else -1

    def covered(self, merged: list[Interval]) -> float:
        """Length of the windows covered by a merged interval list."""
        return sum(_coverage(merged, lo, hi) for lo, hi in self.spans)


@dataclass
class _OpAcc:
    op_type: str
    calls: int = 0
    total_us: float = 0.0
    self_us: float = 0.0
    shapes: Counter[str] = field(default_factory=Counter)


def _summarise(
    t: _Trace, doc: Mapping[str, Any], label: str, steps_arg: int | None
) -> ProfileSummary:
    if not t.cpu_ops:
        raise ParseError(
            f"{label}: no cpu_op events (empty profiler window? with a schedule, export the "
            "trace from on_trace_ready or use schedule(..., repeat=1))"
        )
    notes: list[str] = []
    _drop_implausible_steps(t, notes)
    annotated = bool(t.windows)
    if annotated:
        n_steps = len(t.windows)
        if steps_arg is not None and steps_arg != n_steps:
            notes.append(
                f"steps: {steps_arg} given but the trace has {n_steps} ProfilerStep "
                f"annotations; using {n_steps}"
            )
        windows = _Windows(t.windows)
    else:
        n_steps = steps_arg or 1
        timed = [(ev[0], ev[0] + ev[1]) for ev in (*t.cpu_ops, *t.device)]
        windows = _Windows([(min(lo for lo, _ in timed), max(hi for _, hi in timed))])
        notes.append(
            f"steps: no ProfilerStep annotations; the whole trace is taken as {n_steps} "
            "step(s) and step_ms is its span divided by that"
        )

    def ms(us: float) -> float:
        return us / n_steps / _US_PER_MS

    ops: dict[tuple[str, str], _OpAcc] = {}
    top_level, compute_cpu, comm_cpu = _walk_cpu_ops(t, windows, ops)
    compute_gpu, comm_gpu = _account_device(t, windows, ops)
    gpu = bool(t.device)
    compute = merge_intervals(compute_gpu if gpu else compute_cpu)
    comm = merge_intervals(comm_gpu if gpu and comm_gpu else comm_cpu + t.cpu_comm)
    data_loading = merge_intervals(t.data_loading)

    step_us = sum(hi - lo for lo, hi in windows.spans)
    compute_us, comm_us, overlap_us, loading_us = (
        windows.covered(merged)
        for merged in (compute, comm, intersect_intervals(comm, compute), data_loading)
    )
    step_ms, compute_ms = ms(step_us), ms(compute_us)
    if not comm:
        notes.append("communication_*_ms: no nccl/gloo/hccl operators or kernels in the trace")
    if not data_loading:
        notes.append("data_loading_ms: no enumerate(DataLoader) annotations in the trace")
    not_overlapped = ms(comm_us - overlap_us) if comm else None
    overlapped = ms(overlap_us) if comm else None
    free = max(0.0, step_ms - compute_ms - (not_overlapped or 0.0))
    loading = ms(loading_us) if data_loading else None
    breakdown = StepBreakdown(
        step_ms=step_ms,
        compute_ms=compute_ms,
        communication_not_overlapped_ms=not_overlapped,
        communication_overlapped_ms=overlapped,
        free_ms=free,
        data_loading_ms=loading,
    )
    device_busy = min(1.0, compute_ms / step_ms) if step_ms > 0 else None
    if device_busy is None:
        notes.append("device_busy_fraction: the steps have zero duration")
    launches: float | None = None
    if t.runtime_events:
        launches = sum(1 for ts in t.launch_ts if windows.index(ts) >= 0) / n_steps
    else:
        notes.append("kernel_launches_per_step: no CUDA runtime events (CPU-only trace)")
    peak, per_step = _memory(t, windows if annotated else None)
    if peak is None:
        notes.append("peak_memory_bytes: no [memory] events (profile_memory=False?)")
    if not per_step:
        why = "[memory] events" if peak is None else "ProfilerStep annotations to split steps by"
        notes.append(f"memory_per_step_bytes: no {why}")
    if all(op[3] is None for op in t.cpu_ops):
        notes.append("input_shapes: no 'Input Dims' in the trace (record_shapes=False?)")
    op_stats = (
        OpStat(
            name=name,
            device=device,
            calls_per_step=acc.calls / n_steps,
            self_time_ms_per_step=ms(acc.self_us),
            total_time_ms_per_step=ms(acc.total_us),
            op_type=acc.op_type,
            input_shapes=tuple(shape for shape, _ in acc.shapes.most_common(_MAX_SHAPES)),
        )
        for (name, device), acc in ops.items()
    )
    utilisation, capacity = _utilisation(t, doc, windows, compute_gpu + comm_gpu, step_us, notes)
    info = doc.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return ProfileSummary(
        source=SOURCE,
        steps=n_steps,
        ops=tuple(sorted(op_stats, key=lambda o: (-o.self_time_ms_per_step, o.name, o.device))),
        breakdown=breakdown,
        peak_memory_bytes=peak,
        memory_per_step_bytes=per_step,
        device_busy_fraction=device_busy,
        op_calls_per_step=top_level / n_steps,
        kernel_launches_per_step=launches,
        rank=rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
        raw_files=(label,),
        notes=tuple(notes),
        step_times_ms=tuple((hi - lo) / _US_PER_MS for lo, hi in windows.spans)
        if annotated
        else (),
        collection=_collection(doc),
        utilisation=utilisation,
        device_memory_capacity_bytes=capacity,
    )


def _utilisation(
    t: _Trace,
    doc: Mapping[str, Any],
    windows: _Windows,
    kernels: list[Interval],
    step_us: float,
    notes: list[str],
) -> tuple[dict[str, float], int | None]:
    """GPU utilisation of the profiled steps, and the device's memory capacity.

    - ``device_busy_pct``: the share of the step windows under the union of kernels
      (compute or communication; memcpy and memset run on the copy engines, not the SMs).
    - ``sm_occupancy_pct``: the kernels' ``est. achieved occupancy %`` (Kineto's estimate
      from the launch configuration), weighted by duration, of those launched in a step.
    - capacity: ``totalGlobalMem`` of the ``deviceProperties`` entry of the device the
      kernels ran on (their ``pid``), or of the only entry.

    A CPU-only trace (no kernels and no ``deviceProperties``) gets nothing and no note:
    there is no device to measure. A trace with a GPU but no kernel gets one note.
    """
    out: dict[str, float] = {}
    capacity = _capacity(doc, t.kernel_devices, notes)
    if not kernels:
        if capacity is not None or t.device:
            notes.append("device_busy_pct, sm_occupancy_pct: no kernels in the trace")
        return out, capacity
    if step_us > 0:
        out["device_busy_pct"] = 100.0 * windows.covered(merge_intervals(kernels)) / step_us
    else:
        notes.append("device_busy_pct: the steps have zero duration")
    weighted = weight = 0.0
    for ts, dur, occ, corr in t.occupancy:
        if windows.index(t.runtime_ts.get(corr, ts)) >= 0:  # where it was launched
            weighted += occ * dur
            weight += dur
    if weight > 0:
        out["sm_occupancy_pct"] = weighted / weight
    elif t.occupancy:
        notes.append("sm_occupancy_pct: no kernel with an occupancy ran inside a step")
    else:
        notes.append(f"sm_occupancy_pct: no kernel has args[{_OCCUPANCY!r}]")
    return out, capacity


def _capacity(doc: Mapping[str, Any], kernel_devices: set[Any], notes: list[str]) -> int | None:
    devices = doc.get("deviceProperties")
    if not isinstance(devices, list) or not devices:
        return None
    entries = [d for d in devices if isinstance(d, dict)]
    if len(entries) > 1:
        entries = [d for d in entries if d.get("id") in kernel_devices and len(kernel_devices) == 1]
    memory = _finite(entries[0].get("totalGlobalMem")) if len(entries) == 1 else None
    if memory is None or memory <= 0:
        notes.append(
            "device_memory_capacity_bytes: no totalGlobalMem in deviceProperties for the "
            "device the kernels ran on"
        )
        return None
    return int(memory)


_NO_TRACE_SPAN_SLACK = 10.0
"""A trace without the profiler's ``Trace`` span (hand-made, or stripped by a tool) may have
idle step edges no other event covers: its steps get this many times the events' extent."""


def _drop_implausible_steps(t: _Trace, notes: list[str]) -> None:
    """Drop, each with a note, the ``ProfilerStep#`` windows of zero length or longer than
    the profiler recorded (a 13 s step in a 0.4 s trace): the extent of its ``Trace``
    span(s), or :data:`_NO_TRACE_SPAN_SLACK` times the other events'. With none left, the
    trace is read as if it had no step markers."""
    if t.trace_spans:
        extent = max(hi for _, hi in t.trace_spans) - min(lo for lo, _ in t.trace_spans)
        limit, what = extent, "the profiler's Trace span"
    else:
        extent = t.hi - t.lo if t.hi >= t.lo else 0.0
        limit = extent * _NO_TRACE_SPAN_SLACK
        what = f"{_NO_TRACE_SPAN_SLACK:g}x the extent of the other events"
    kept: list[tuple[float, float, str]] = []
    dropped: list[str] = []
    for lo, hi, name in t.windows:
        dur = hi - lo
        if dur <= 0 or not math.isfinite(dur):
            dropped.append(f"{name} lasts {dur / _US_PER_MS:g} ms, not a positive duration")
        elif extent > 0 and dur > limit:
            dropped.append(
                f"{name} lasts {dur / _US_PER_MS:g} ms, longer than {what} "
                f"({extent / _US_PER_MS:g} ms)"
            )
        else:
            kept.append((lo, hi, name))
    if dropped:
        rest = (
            f"the other {len(kept)} step(s) are used"
            if kept
            else "the trace is read as if it had no step markers"
        )
        dropped_text = "; ".join(dropped)
        notes.append(f"steps: implausible ProfilerStep span(s) ignored, {rest}: {dropped_text}")
        t.windows = kept


def _collection(doc: Mapping[str, Any]) -> dict[str, str]:
    """What the trace says about how and where it was collected."""
    out: dict[str, str] = {}
    info = doc.get("distributedInfo")
    if isinstance(info, dict):
        out.update((k, str(info[k])) for k in ("backend", "rank", "world_size") if k in info)
    devices = doc.get("deviceProperties")
    if isinstance(devices, list) and devices and isinstance(devices[0], dict):
        if name := devices[0].get("name"):
            out["device"] = str(name)
        out["device_count"] = str(len(devices))
    versions = ("schemaVersion", "cuda_runtime_version", "cuda_driver_version")
    out.update((k.lower(), str(doc[k])) for k in versions if k in doc)
    return out


def _walk_cpu_ops(
    t: _Trace, windows: _Windows, ops: dict[tuple[str, str], _OpAcc]
) -> tuple[int, list[Interval], list[Interval]]:
    """Nest the cpu ops of each thread by time and account the ones inside a step.

    Returns the number of top-level ops inside steps, the intervals of top-level
    non-communication ops (compute on CPU) and of communication ops (any depth).
    """
    threads: dict[tuple[Any, Any], list[tuple[float, float, str, Any, Any]]] = {}
    for op in t.cpu_ops:
        threads.setdefault(op[4], []).append(op)
    top_level = 0
    compute: list[Interval] = []
    comm: list[Interval] = []
    shape_text: dict[str, str | None] = {}
    for thread_ops in threads.values():
        thread_ops.sort(key=lambda op: (op[0], -op[1]))
        stack: list[tuple[int, float]] = []  # (position in thread_ops, end) of open ops
        child_us = [0.0] * len(thread_ops)
        open_names: Counter[str] = Counter()
        records: list[tuple[bool, bool]] = []  # (top-level, outermost of its name)
        for i, (start, dur, name, _, _) in enumerate(thread_ops):
            while stack and stack[-1][1] <= start:
                open_names[thread_ops[stack.pop()[0]][2]] -= 1
            if stack:
                child_us[stack[-1][0]] += dur
            records.append((not stack, open_names[name] == 0))
            stack.append((i, start + dur))
            open_names[name] += 1
        for (start, dur, name, dims, _), (is_top, outermost), child in zip(
            thread_ops, records, child_us, strict=True
        ):
            if comm_op := _is_comm(name):
                comm.append((start, start + dur))
            if windows.index(start) < 0:
                continue
            acc = ops.get((name, "cpu"))
            if acc is None:
                acc = ops[name, "cpu"] = _OpAcc("aten" if name.startswith("aten::") else "op")
            acc.calls += 1
            acc.self_us += max(0.0, dur - child)
            if outermost:
                acc.total_us += dur
            if dims is not None:
                raw = repr(dims)
                if raw not in shape_text:
                    shape_text[raw] = _format_dims(dims)
                if (shape := shape_text[raw]) is not None:
                    acc.shapes[shape] += 1
            if is_top:
                top_level += 1
                if not comm_op:
                    compute.append((start, start + dur))
    return top_level, compute, comm


def _account_device(
    t: _Trace, windows: _Windows, ops: dict[tuple[str, str], _OpAcc]
) -> tuple[list[Interval], list[Interval]]:
    """Account kernels, memcpys and memsets to the step that launched them.

    Returns the intervals of compute kernels and of communication kernels (all of them,
    not only those inside steps: they are clipped to the step windows later).
    """
    compute: list[Interval] = []
    comm: list[Interval] = []
    for ts, dur, name, op_type, corr in t.device:
        if op_type == "kernel":
            (comm if _is_comm(name) else compute).append((ts, ts + dur))
        if windows.index(t.runtime_ts.get(corr, ts)) < 0:  # where it was launched
            continue
        acc = ops.get((name, "cuda"))
        if acc is None:
            acc = ops[name, "cuda"] = _OpAcc(op_type)
        acc.calls += 1
        acc.self_us += dur
        acc.total_us += dur
    return compute, comm


def _format_dims(dims: Any) -> str | None:
    """``[[32, 64], [], [128]]`` → ``"32x64, -, 128"``; None when no argument has a shape.

    ``-`` stands for an argument without dims (a number, None, a 0-dim tensor); trailing
    ones are dropped.
    """
    if not isinstance(dims, list):
        return None
    parts = [_format_dim(d) for d in dims]
    while parts and parts[-1] == "-":
        parts.pop()
    if not parts:
        return None
    text = ", ".join(parts)
    if len(text) > _MAX_SHAPE_CHARS:
        text = text[: _MAX_SHAPE_CHARS - 3] + "..."
    return text


def _format_dim(dim: Any) -> str:
    if not isinstance(dim, list) or not dim:
        return "-"
    if all(isinstance(x, int) for x in dim):
        return "x".join(str(x) for x in dim)
    return "[" + ", ".join(_format_dim(d) for d in dim) + "]"


def _memory(t: _Trace, windows: _Windows | None) -> tuple[int | None, tuple[float, ...]]:
    """Peak ``Total Allocated`` and its maximum in each step window.

    Accelerator memory is preferred when the trace has any; CPU memory otherwise. A step
    with no memory event of its own takes the level left by the last event before it.
    """
    events = [m for m in t.memory if m[2][0] != 0] or [m for m in t.memory if m[2][0] == 0]
    if not events:
        return None, ()
    peak = int(max(total for _, total, _ in events))
    if windows is None:
        return peak, ()
    events.sort(key=lambda m: m[0])
    levels: dict[tuple[Any, Any], float] = {}
    per_step: list[float] = []
    j = 0
    for lo, hi in windows.spans:
        while j < len(events) and events[j][0] < lo:
            levels[events[j][2]] = events[j][1]
            j += 1
        level = max(levels.values(), default=0.0)
        while j < len(events) and events[j][0] <= hi:
            levels[events[j][2]] = events[j][1]
            level = max(level, events[j][1])
            j += 1
        per_step.append(level)
    return peak, tuple(per_step)


# --------------------------------------------------------------------------- intervals
def merge_intervals(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted union of intervals (also of the Ascend db export's ns ones)."""
    out: list[Interval] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def intersect_intervals(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """Intersection of two merged interval lists (itself merged)."""
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _coverage(merged: list[Interval], lo: float, hi: float) -> float:
    """Length of ``[lo, hi]`` covered by a merged interval list."""
    covered = 0.0
    for k in range(max(0, bisect.bisect_right(merged, (lo, math.inf)) - 1), len(merged)):
        start, end = merged[k]
        if start >= hi:
            break
        covered += max(0.0, min(end, hi) - max(start, lo))
    return covered
