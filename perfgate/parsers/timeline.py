"""One profiled step op by op: the data behind MindStudio Insight's timeline view.

A :class:`~perfgate.models.Timeline` holds one step of a Chrome trace as lanes (one per
device stream and per host thread) of spans in µs from the step's start. Two sources:

- Ascend ``trace_view.json`` (:func:`ascend_timeline`; ``shared/fixtures/ascend/FORMATS.md``
  §1.6): a bare JSON array, ``ts`` strings of µs, processes named by ``process_name``
  metadata events. Lanes: the ``Ascend Hardware`` task streams, the ``HCCL`` threads
  (collectives and their transfer tasks), and the host threads of ``Python`` and ``CANN``.
- torch.profiler traces (:func:`torch_timeline`): kernels, memcpys and memsets on device
  lanes (``pid`` the device, ``tid`` the stream), cpu ops, annotations and runtime calls on
  host lanes.

Left out: ``python_function`` frames (one per Python call, they would crowd out the ops),
``Overlap Analysis`` (derived from the others), counter tracks and flow arrows.

The step is the last ``ProfilerStep#N`` span with a positive duration (the last is whole in
both profilers' traces). A host span belongs to it when it starts inside that span; a device
span when it starts after that span's start (device work runs behind the host, so it goes
where it starts, as torch_npu's step split does). ``duration_us`` is the step span's, or the
end of the last span when device work runs past it. Kinds: a device task is ``compute``,
``communication`` (HCCL lanes, Notify/Write Value tasks, NCCL kernels), ``memcpy`` or
``other``; a host span is ``host``, or ``communication`` when it names a collective.

At most :data:`MAX_SPANS` spans are kept, the shortest dropped first and counted in
``dropped_spans``. ``trace_view.json`` is decoded one event at a time, so memory grows with
the events kept, not with the file. Pure otherwise: no torch.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from perfgate.models import SpanKind, Timeline, TimelineLane, TimelineSpan

__all__ = ["MAX_SPANS", "ascend_timeline", "torch_timeline"]

MAX_SPANS = 20000
"""The most spans one stored timeline keeps (the shortest beyond it are dropped)."""

_STEP_PREFIX = "ProfilerStep#"
_CHUNK = 4 * 1024 * 1024
_MAX_EVENT_CHARS = 64 * 1024 * 1024
"""An event that does not decode within this many characters means a broken file."""
_SEPARATORS = re.compile(r"[\s,]*")

_SortKey = tuple[Any, ...]


@dataclass(frozen=True)
class _LaneOf:
    """Where a kept event goes: its lane (sort key, name, device?) and its kind."""

    key: _SortKey
    name: str
    device: bool
    kind: SpanKind


@dataclass
class _Events:
    """The events a timeline needs from one trace, in one pass."""

    processes: dict[Any, str] = field(default_factory=dict)
    threads: dict[tuple[Any, Any], str] = field(default_factory=dict)
    steps: list[tuple[float, float, str]] = field(default_factory=list)
    spans: list[tuple[Any, Any, float, float, str, str, str]] = field(default_factory=list)
    """(pid, tid, ts, dur, name, cat, task type) of each complete event."""

    def add(self, ev: Any) -> None:
        if not isinstance(ev, Mapping):
            return
        ph = ev.get("ph")
        if ph == "M":
            args = ev.get("args")
            name = args.get("name") if isinstance(args, Mapping) else None
            if not isinstance(name, str):
                return
            if ev.get("name") == "process_name":
                self.processes[ev.get("pid")] = name
            elif ev.get("name") == "thread_name":
                self.threads[(ev.get("pid"), ev.get("tid"))] = name
            return
        if ph != "X":
            return
        ts, dur = _number(ev.get("ts")), _number(ev.get("dur"))
        if ts is None or dur is None or dur < 0:
            return
        name = str(ev.get("name"))
        cat = ev.get("cat")
        cat = cat if isinstance(cat, str) else ""
        if name.startswith(_STEP_PREFIX):
            if dur > 0 and cat.lower() in ("user_annotation", "cpu_op", "operator", ""):
                self.steps.append((ts, dur, name))
            return
        args = ev.get("args")
        task = args.get("Task Type") if isinstance(args, Mapping) else None
        task = task if isinstance(task, str) else ""
        self.spans.append((ev.get("pid"), ev.get("tid"), ts, dur, name, cat, task))


def _number(value: Any) -> float | None:
    if type(value) is float:  # the common cases first: ``dur``, then ``ts`` strings
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        x = float(value)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _order(value: Any) -> tuple[int, float, str]:
    """Sort numbers numerically, before names."""
    x = _number(value)
    return (0, x, "") if x is not None else (1, 0.0, str(value))


def _is_comm_name(name: str) -> bool:
    low = name.lower()
    return low.startswith(("c10d::", "hcom_", "hccl")) or "nccl" in low or "gloo" in low


_LaneRule = Callable[[_Events, Any, Any, str, str, str], _LaneOf | None]


def _build(events: _Events, lane_of: _LaneRule) -> Timeline | None:
    if not events.steps:
        return None
    start, dur, step_name = max(events.steps)
    host_end = start + dur
    kept: list[tuple[float, float, str, _LaneOf]] = []
    memo: dict[tuple[Any, Any, str, str, str], _LaneOf | None] = {}  # names repeat per step
    for pid, tid, ts, span_dur, name, cat, task in events.spans:
        if ts < start:
            continue
        if (key := (pid, tid, name, cat, task)) not in memo:
            memo[key] = lane_of(events, *key)
        where = memo[key]
        # The last step: its device work runs to the end of the trace.
        if where is None or (not where.device and ts >= host_end):
            continue
        kept.append((ts - start, span_dur, name, where))
    if dropped := max(0, len(kept) - MAX_SPANS):
        kept = sorted(kept, key=lambda s: (-s[1], s[0]))[:MAX_SPANS]
    by_lane: dict[tuple[_SortKey, str, bool], list[TimelineSpan]] = {}
    for rel, span_dur, name, where in kept:
        span = TimelineSpan(rel, span_dur, name, where.kind)
        by_lane.setdefault((where.key, where.name, where.device), []).append(span)
    out_lanes = tuple(
        TimelineLane(
            name, device, tuple(sorted(spans, key=lambda s: (s.start_us, -s.dur_us, s.name)))
        )
        for (_, name, device), spans in sorted(by_lane.items(), key=lambda kv: kv[0][0])
    )
    last_end = max((s.start_us + s.dur_us for lane in out_lanes for s in lane.spans), default=0.0)
    return Timeline(step_name, max(dur, last_end), out_lanes, dropped)


# --------------------------------------------------------------------------- Ascend
_HOST_PROCESSES = {"Python": 0, "CANN": 1}
_HOST_CATS = frozenset({"cpu_op", "enqueue", "dequeue", ""})
_COMPUTE_TASKS = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "DSA")
_COMM_TASKS = ("NOTIFY", "WRITE VALUE", "WRITE_VALUE")
_MEMCPY_TASKS = ("SDMA", "PCIE_DMA", "MEMCPY")


def _ascend_task_kind(name: str, task: str) -> SpanKind:
    what = (task or name).upper()
    if what.startswith(_COMPUTE_TASKS) or what.startswith("KERNEL_"):
        return SpanKind.COMPUTE
    if what.startswith(_COMM_TASKS) or _is_comm_name(name):
        return SpanKind.COMMUNICATION
    if what.startswith(_MEMCPY_TASKS) or name.upper().startswith("MEMCPY"):
        return SpanKind.MEMCPY
    return SpanKind.OTHER


def _ascend_lane(
    events: _Events, pid: Any, tid: Any, name: str, cat: str, task: str
) -> _LaneOf | None:
    process = events.processes.get(pid)
    thread = events.threads.get((pid, tid)) or f"Thread {tid}"
    if process == "Ascend Hardware":
        return _LaneOf((0, 0, _order(tid)), thread, True, _ascend_task_kind(name, task))
    if process == "HCCL":
        return _LaneOf((0, 1, _order(tid)), f"HCCL {thread}", True, SpanKind.COMMUNICATION)
    if process in _HOST_PROCESSES and cat in _HOST_CATS:
        kind = SpanKind.COMMUNICATION if _is_comm_name(name) else SpanKind.HOST
        order = _HOST_PROCESSES[process]
        return _LaneOf((1, order, _order(tid)), f"{process} {thread}", False, kind)
    return None


def _iter_array(handle: TextIO, label: str) -> Iterator[Any]:
    """The elements of a JSON array, decoded one at a time.

    Raises:
        ValueError: not an array, truncated, or broken (the message says which).
    """
    decoder = json.JSONDecoder()
    buf = handle.read(_CHUNK)
    eof = not buf
    pos = len(buf) - len(buf.lstrip("\ufeff \t\r\n"))
    if buf[pos : pos + 1] != "[":
        raise ValueError(f"{label}: not a JSON array of trace events")
    pos += 1
    while True:
        pos = _SEPARATORS.match(buf, pos).end()  # type: ignore[union-attr]
        if pos < len(buf) and buf[pos] == "]":
            return
        if pos < len(buf):
            try:
                obj, pos = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                if eof or len(buf) - pos > _MAX_EVENT_CHARS:
                    raise ValueError(
                        f"{label}: not valid JSON ({exc.msg}, line {exc.lineno})"
                    ) from None
            else:
                yield obj
                continue
        elif eof:
            raise ValueError(f"{label}: truncated (the event array is not closed)")
        more = handle.read(_CHUNK)
        eof = not more
        buf, pos = buf[pos:] + more, 0


MAX_TRACE_MB = 256.0
"""The largest ``trace_view.json`` read for a timeline (it is an extra: the step times and
breakdown come from elsewhere)."""


def ascend_timeline(path: Path) -> tuple[Timeline | None, tuple[str, ...]]:
    """The last profiled step of an Ascend ``trace_view.json``, and notes on what is missing.

    A file that cannot be read or holds no ``ProfilerStep#`` is a note, not an error: the
    timeline is an extra the rest of the profile does not depend on.
    """
    path = Path(path)
    events = _Events()
    try:
        size_mb = path.stat().st_size / 1e6
        if size_mb > MAX_TRACE_MB:
            # About 13 MB/s and every event held: a multi-GB trace would cost minutes and GBs
            # for one page's picture.
            return None, (
                f"timeline: {path.name} is {size_mb:.0f} MB, over the {MAX_TRACE_MB:.0f} MB "
                "read for a timeline; none drawn",
            )
        with path.open(encoding="utf-8", errors="strict") as handle:
            for ev in _iter_array(handle, path.name):
                events.add(ev)
    except OSError as exc:
        return None, (f"timeline: {path.name} cannot be read ({exc.strerror or exc})",)
    except UnicodeDecodeError:
        return None, (f"timeline: {path.name} is not UTF-8 text",)
    except (ValueError, RecursionError) as exc:
        return None, (f"timeline: {exc}",)
    timeline = _build(events, _ascend_lane)
    if timeline is None:
        return None, (f"timeline: no {_STEP_PREFIX}N span in {path.name}",)
    if not timeline.dropped_spans:
        return timeline, ()
    return timeline, (
        f"timeline: {timeline.dropped_spans} shortest span(s) of {timeline.step} left out "
        f"(at most {MAX_SPANS} kept)",
    )


# --------------------------------------------------------------------------- torch.profiler
_TORCH_DEVICE: Mapping[str, SpanKind] = {
    "kernel": SpanKind.COMPUTE,
    "gpu_memcpy": SpanKind.MEMCPY,
    "memcpy": SpanKind.MEMCPY,
    "gpu_memset": SpanKind.OTHER,
    "memset": SpanKind.OTHER,
}
_TORCH_HOST = frozenset(
    {"cpu_op", "operator", "user_annotation", "cuda_runtime", "cuda_driver", "runtime"}
)


def _torch_lane(
    events: _Events, pid: Any, tid: Any, name: str, cat: str, task: str
) -> _LaneOf | None:
    low = cat.lower()
    kind = _TORCH_DEVICE.get(low)
    if kind is not None:
        if kind is SpanKind.COMPUTE and _is_comm_name(name):
            kind = SpanKind.COMMUNICATION
        process = events.processes.get(pid) or f"device {pid}"
        thread = events.threads.get((pid, tid)) or f"stream {tid}"
        return _LaneOf((0, _order(pid), _order(tid)), f"{process} {thread}", True, kind)
    if low in _TORCH_HOST:
        thread = events.threads.get((pid, tid)) or f"thread {tid}"
        kind = SpanKind.COMMUNICATION if _is_comm_name(name) else SpanKind.HOST
        return _LaneOf((1, _order(pid), _order(tid)), thread, False, kind)
    return None


def torch_timeline(events: Sequence[Mapping[str, Any]] | Iterable[Any]) -> Timeline | None:
    """The last profiled step of a torch.profiler trace's ``traceEvents``, or None when the
    trace has no ``ProfilerStep#`` span (a trace without steps has no step to show)."""
    collected = _Events()
    for ev in events:
        collected.add(ev)
    return _build(collected, _torch_lane)
