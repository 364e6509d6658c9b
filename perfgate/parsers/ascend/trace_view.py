"""Step breakdown from an Ascend ``trace_view.json``, read as a stream.

torch_npu's profiler writes ``ASCEND_PROFILER_OUTPUT/trace_view.json`` as one bare JSON array
of Chrome trace events (not Kineto's ``{"traceEvents": [...]}``), often on a single line and up
to several GB. ``ts`` is a *string* of µs with ns digits (``"1736408883688177.930"``), ``dur``
a number of µs. The step breakdown normally comes from ``step_trace_time.csv``; this module
recomputes it from the trace when that file is missing.

What it reads, and nothing else:

- ``ProfilerStep#N`` (``ph`` ``X``, ``cat`` ``cpu_op``): the host step windows.
- The ``process_name`` metadata event whose ``args.name`` is ``Overlap Analysis``: the pid of
  the device's overlap track. Its events are named after its threads: ``Computing``,
  ``Communication``, ``Communication(Not Overlapped)`` and ``Free``.
- Events named ``hcom_receive*`` (pipeline receives; torch_npu's ``Bubble``).

The numbers follow torch_npu's ``TraceStepTimeParser`` (which writes step_trace_time.csv):
an event belongs to the step in whose window it *starts* and counts with its whole
duration; Overlapped = Communication - Communication(Not Overlapped); Bubble = the
hcom_receive time; Preparing = the step's first Computing or Communication event minus the
``ProfilerStep#`` start. ``step_ms`` is Computing + Communication(Not Overlapped) + Free, the
E2E time msprof-analyze reports (equal to torch_npu's Stage + Bubble when, as always, the
overlap track tiles the device timeline). One difference: torch_npu finds each step's device
range through the host-to-device launch flows; this module uses the host windows instead,
each step running from its ``ProfilerStep#`` start to the next one's (the last to the end of
the trace). The two agree unless device work queued in one step starts after the host has
begun the next.

How it reads: the file goes through in chunks (8 MiB by default). One regular expression
finds the few byte strings above; around each hit the enclosing ``{...}`` event is cut out
(nearest preceding ``{``, then a string-aware brace match, outward while the object is a
nested ``args``) and only that object goes to :func:`json.loads`. An event that straddles a
chunk boundary is completed from the next chunk. The other ~96 % of the file is never
decoded: on a 1 GB trace this reads ~300 MB/s (orjson.loads of the whole file: ~40 MB/s and
7 GB) in ~45 MB above the interpreter (``bench/ingest.py``). The array's first and last
bytes are checked, so a truncated file is an error, not a short sum.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import re
from array import array
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfgate.errors import ParseError
from perfgate.models import StepBreakdown
from perfgate.parsers.decompress import CappedReader, max_decompressed_mb, regular_file

__all__ = ["DEFAULT_CHUNK_SIZE", "breakdown_from_trace_view"]

DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024

_STEP_PREFIX = "ProfilerStep#"
_KINDS = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")
_KIND_INDEX = {name: i for i, name in enumerate(_KINDS)}
_RECEIVES = (object(), len(_KINDS))
"""The key of the receive events' track: one for every pid."""

# The byte strings worth looking at: each is the start of a JSON string value.
_NEEDLES = re.compile(
    rb'"(?:Computing"|Free"|Communication|Overlap Analysis"|ProfilerStep#|hcom_receive)'
)
_LONGEST_NEEDLE = len(b'"Overlap Analysis"')
# A JSON string (possibly cut off at the end of the buffer) or a brace.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}]')
# How far before a hit its event's "{" may lie (keys written before "name", an args object).
_BACK_CONTEXT = 64 * 1024
_MAX_NESTING = 8
_WHITESPACE = b" \t\r\n"
_US_PER_MS = 1000.0


def breakdown_from_trace_view(
    path: Path, *, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[tuple[float, ...], StepBreakdown | None, tuple[str, ...]]:
    """``(step_times_ms, breakdown, notes)`` of one rank's ``trace_view.json`` (plain, or
    gzip-compressed JSON), read ``chunk_size`` bytes at a time (small values are for tests).

    ``step_times_ms`` holds, for each ``ProfilerStep#`` in step order that has events on the
    Overlap Analysis track, Computing + Communication(Not Overlapped) + Free in ms.
    ``breakdown`` is the mean of the per-step values (``data_loading_ms`` is None: the track
    does not show it; ``preparing_ms`` is None without ``ProfilerStep#`` windows). Without
    an Overlap Analysis track ``breakdown`` is None and the step times are the host
    ``ProfilerStep#`` durations. ``notes`` says what was approximated or left out.

    Raises ParseError, one line naming the file: the file cannot be read, is not JSON, is not
    a bare array of events, is truncated, or an event the breakdown needs is malformed.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, not {chunk_size}")
    label = str(path)
    found = _Found()
    try:
        with _open(Path(path), label) as stream:
            for event in _scan(stream, label, chunk_size):
                found.add(event, label)
    except OSError as exc:
        raise ParseError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    except EOFError:
        raise ParseError(f"{label}: truncated gzip (compressed data ends early)") from None
    return _summarise(found)


# --------------------------------------------------------------------------- reading
def _open(path: Path, label: str) -> io.BufferedIOBase:
    regular_file(path, label)  # its one-line errors; any other OSError is the caller's
    raw = path.open("rb")
    if raw.read(2) == b"\x1f\x8b":
        raw.close()
        return CappedReader(gzip.GzipFile(path, "rb"), label, max_decompressed_mb())
    raw.seek(0)
    return raw


def _scan(stream: io.BufferedIOBase, label: str, chunk_size: int) -> Iterator[dict[str, Any]]:
    """Yield each event (a dict with ``ph``) that holds a needle, once, in file order."""
    buf = b""
    base = 0  # file offset of buf[0]
    pos = 0  # where the next needle search starts, in buf
    done_until = 0  # file offset up to which events have been cut out already
    checked = 0  # how many of the array's first two tokens ("[" and "{" or "]") are checked
    eof = False
    while not eof:
        data = stream.read(chunk_size)
        eof = not data
        buf += data
        if checked < 2:
            checked = _check_start(buf, base, eof, label)
        pending = -1  # buf index of a hit whose event is not complete yet
        for hit in _NEEDLES.finditer(buf, pos):
            at = hit.start()
            if base + at < done_until:
                continue  # inside the event cut out last
            cut = _cut_event(buf, at, eof, label, base)
            if cut is None:
                pending = at
                break
            if cut:
                done_until = base + cut[0]
                yield cut[1]
        pos = pending if pending >= 0 else max(pos, len(buf) - (_LONGEST_NEEDLE - 1))
        if keep := max(0, pos - _BACK_CONTEXT):
            buf = buf[keep:]
            base += keep
            pos -= keep
    _check_end(buf, label)


def _check_start(buf: bytes, base: int, eof: bool, label: str) -> int:
    """Check the array's opening bytes as far as ``buf`` shows them; how many are checked."""
    if base:  # the opening was checked before the buffer was trimmed
        return 2
    rest = buf.lstrip(_WHITESPACE)
    if not rest:
        if eof:
            raise ParseError(f"{label}: empty file, not JSON")
        return 0
    if rest[:1] == b"{":
        raise ParseError(
            f"{label}: a JSON object, not the bare array of events torch_npu writes"
            " (a Kineto trace? read it with the torch trace parser)"
        )
    if rest[:1] != b"[":
        raise ParseError(f"{label}: not JSON (starts with {rest[:16]!r})")
    if not (second := rest[1:].lstrip(_WHITESPACE)[:1]):
        return 1  # the end check catches a file that stops here
    if second not in (b"{", b"]"):
        raise ParseError(f"{label}: a JSON array, but not of events (objects)")
    return 2


def _check_end(buf: bytes, label: str) -> None:
    tail = buf.rstrip(_WHITESPACE)
    if not tail.endswith(b"]"):
        raise ParseError(f"{label}: truncated (the event array is not closed)")
    before = tail[:-1].rstrip(_WHITESPACE)[-1:]
    if before not in (b"}", b"["):
        raise ParseError(f"{label}: truncated or malformed (the array does not end with an event)")


def _cut_event(
    buf: bytes, at: int, eof: bool, label: str, base: int
) -> tuple[int, dict[str, Any]] | tuple[()] | None:
    """The event object around the hit at ``buf[at]``: (its end, the event); () when there
    is none; None when the buffer ends inside it (more must be read)."""
    floor = max(0, at - _BACK_CONTEXT)
    start = at
    for _ in range(_MAX_NESTING):
        start = _object_start_before(buf, floor, start)
        if start < 0:
            return ()
        end, obj = _object_at(buf, start)
        if end < 0:
            if eof:
                raise ParseError(f"{label}: truncated (the event near byte {base + at} is cut off)")
            return None
        if end > at and obj is not None and "ph" in obj:
            return end, obj
        # a nested object (the args of a metadata event) or a false start: look further out
    return ()


def _object_start_before(buf: bytes, floor: int, limit: int) -> int:
    """The last "{" before ``limit`` that can open a JSON value (after "[", "," or ":")."""
    start = buf.rfind(b"{", floor, limit)
    while start >= 0:
        i = start - 1
        while i >= floor and buf[i] in _WHITESPACE:
            i -= 1
        if i < floor or buf[i] in b"[,:":
            return start
        start = buf.rfind(b"{", floor, start)
    return -1


def _object_at(buf: bytes, start: int) -> tuple[int, dict[str, Any] | None]:
    """(end, object) of the JSON object starting at ``buf[start]``; end -1 if it is not
    closed within ``buf``; object None if the bytes there are not a JSON object."""
    close = buf.find(b"}", start)
    if close < 0:
        return -1, None
    # Fast path: a flat object (an overlap event) ends at its first "}". Bytes from a "{"
    # that decode are an object (a dict).
    with suppress(ValueError):
        return close + 1, json.loads(buf[start : close + 1])
    depth = 0
    for token in _TOKENS.finditer(buf, start):
        char = buf[token.start()]
        if char == 0x7B:  # {
            depth += 1
        elif char == 0x7D:  # }
            depth -= 1
            if depth == 0:
                end = token.end()
                try:
                    return end, json.loads(buf[start:end])
                except ValueError:
                    return end, None
    return -1, None


# --------------------------------------------------------------------------- collecting
@dataclass
class _Found:
    """What the scan kept: step windows, overlap-track events per (pid, kind), receives."""

    overlap_pids: list[Any] = field(default_factory=list)
    steps: dict[int, tuple[int, int]] = field(default_factory=dict)
    duplicate_steps: int = 0
    # (pid, kind index) -> (start ns, duration µs); the receives of every pid under _RECEIVES
    tracks: dict[tuple[Any, int], tuple[array[int], array[float]]] = field(default_factory=dict)

    def add(self, event: dict[str, Any], label: str) -> None:
        name = event.get("name")
        ph = event.get("ph")
        if ph == "M":
            args = event.get("args")
            if (
                name == "process_name"
                and isinstance(args, dict)
                and args.get("name") == "Overlap Analysis"
                and event.get("pid") not in self.overlap_pids
            ):
                self.overlap_pids.append(event.get("pid"))
            return
        if ph != "X" or not isinstance(name, str):
            return
        kind = _KIND_INDEX.get(name)
        if kind is not None or name.startswith("hcom_receive"):
            key = _RECEIVES if kind is None else (_hashable(event.get("pid")), kind)
            track = self.tracks.get(key)
            if track is None:
                track = self.tracks[key] = (array("q"), array("d"))
            track[0].append(_ts_ns(event, label))
            track[1].append(_dur_us(event, label))
        elif name.startswith(_STEP_PREFIX):
            number = name[len(_STEP_PREFIX) :]
            if not number.isdigit():
                return
            start = _ts_ns(event, label)
            end = start + round(_dur_us(event, label) * 1000)
            step = int(number)
            if step in self.steps:
                self.duplicate_steps += 1
                old = self.steps[step]
                start, end = min(start, old[0]), max(end, old[1])
            self.steps[step] = (start, end)


def _hashable(value: Any) -> Any:
    return value if isinstance(value, int | str | float) or value is None else repr(value)


def _ts_ns(event: dict[str, Any], label: str) -> int:
    """``ts`` as integer ns: exact for torch_npu's strings (a float of epoch µs is not)."""
    ts = event.get("ts")
    try:
        if isinstance(ts, str):
            whole, _, frac = ts.strip().partition(".")
            if whole.lstrip("-").isdigit() and (not frac or frac.isdigit()):
                value = int(whole) * 1000
                ns = int((frac + "000")[:3]) if frac else 0
                return value - ns if whole.startswith("-") else value + ns
            return round(float(ts) * 1000)
        if isinstance(ts, int | float) and not isinstance(ts, bool):
            return round(ts * 1000)
    except (ValueError, OverflowError):
        pass
    raise ParseError(f"{label}: event {event.get('name')!r} has a bad 'ts' ({ts!r})")


def _dur_us(event: dict[str, Any], label: str) -> float:
    dur = event.get("dur", 0.0)
    value = -1.0
    if isinstance(dur, str | int | float) and not isinstance(dur, bool):
        with suppress(ValueError):
            value = float(dur)
    if 0.0 <= value < math.inf:
        return value
    raise ParseError(f"{label}: event {event.get('name')!r} has a bad 'dur' ({dur!r})")


# --------------------------------------------------------------------------- summarising
def _summarise(found: _Found) -> tuple[tuple[float, ...], StepBreakdown | None, tuple[str, ...]]:
    notes: list[str] = []
    numbers = sorted(found.steps)
    if found.duplicate_steps:
        notes.append(
            f"steps: {found.duplicate_steps} ProfilerStep# events repeat a step number;"
            " each step spans all of its events"
        )
    if not found.overlap_pids:
        notes.append(
            "breakdown: trace_view.json has no Overlap Analysis process (device track);"
            " step times are the host ProfilerStep# durations"
        )
        host = tuple((found.steps[n][1] - found.steps[n][0]) / 1e6 for n in numbers)
        if not host:
            notes.append("steps: no ProfilerStep# events either")
        return host, None, tuple(notes)
    pid = found.overlap_pids[0]
    if len(found.overlap_pids) > 1:
        notes.append(
            f"breakdown: {len(found.overlap_pids)} Overlap Analysis processes (devices);"
            f" only pid {pid} is read"
        )

    if numbers:
        starts = np.array([found.steps[n][0] for n in numbers], dtype=np.int64)
    else:
        notes.append(
            "steps: no ProfilerStep# events in trace_view.json; the whole trace is one step"
        )
        notes.append("preparing_ms: needs ProfilerStep# windows")
        starts = np.array([np.iinfo(np.int64).min], dtype=np.int64)
    n_windows = len(starts)

    sums = np.zeros((len(_KINDS) + 1, n_windows))  # the kinds, then the receives
    counts = np.zeros(n_windows, dtype=np.int64)
    first_task = np.full(n_windows, np.iinfo(np.int64).max, dtype=np.int64)
    before = 0
    for kind, key in enumerate([*((_hashable(pid), k) for k in range(len(_KINDS))), _RECEIVES]):
        track = found.tracks.get(key)
        if track is None:
            continue
        ts = np.frombuffer(track[0], dtype=np.int64) if track[0] else np.zeros(0, np.int64)
        dur = np.frombuffer(track[1], dtype=np.float64) if track[1] else np.zeros(0)
        window = np.searchsorted(starts, ts, side="right") - 1
        inside = window >= 0
        window, ts, dur = window[inside], ts[inside], dur[inside]
        sums[kind] += np.bincount(window, weights=dur, minlength=n_windows)
        if key is _RECEIVES:
            break
        before += int(np.count_nonzero(~inside))
        counts += np.bincount(window, minlength=n_windows)
        if kind < 2:  # Computing or Communication
            np.minimum.at(first_task, window, ts)
    if before:
        notes.append(
            f"steps: {before} Overlap Analysis events start before the first ProfilerStep#"
            " and are not counted (as in torch_npu)"
        )

    kept = np.flatnonzero(counts > 0)
    if numbers and len(kept) < n_windows:
        empty = [numbers[i] for i in range(n_windows) if counts[i] == 0]
        shown = ", ".join(f"#{n}" for n in empty[:5]) + (" ..." if len(empty) > 5 else "")
        notes.append(
            f"steps: {len(empty)} ProfilerStep# without Overlap Analysis events left out ({shown})"
        )
    if not len(kept):
        notes.append("breakdown: the Overlap Analysis process has no events in any step")
        return (), None, tuple(notes)

    computing, comm, not_overlapped, free, bubble = sums[:, kept]
    step_us = computing + not_overlapped + free
    preparing_ms: float | None = None
    if numbers:
        has_task = first_task[kept] != np.iinfo(np.int64).max
        if has_task.all():
            preparing_ms = float(np.mean(first_task[kept] - starts[kept])) / 1e6
        else:
            notes.append("preparing_ms: a step has no Computing or Communication event")
    step, compute, cno, overlapped, free_ms, bubble_ms = (
        float(np.mean(us)) / _US_PER_MS
        for us in (step_us, computing, not_overlapped, comm - not_overlapped, free, bubble)
    )
    breakdown = StepBreakdown(
        step, compute, cno, overlapped, free_ms, None, bubble_ms, preparing_ms
    )
    return tuple(float(v) / _US_PER_MS for v in step_us), breakdown, tuple(notes)
