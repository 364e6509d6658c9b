"""TensorBoard event files of stored runs, encoded with TensorBoard's own record writer.

Needs only the ``tensorboard`` package (no TensorFlow, no torch): scalars are classic
``Summary.Value(simple_value=...)`` events framed by
``tensorboard.summary.writer.record_writer.RecordWriter`` (the framing and CRCs of
``EventFileWriter``), which TensorBoard and its ``EventAccumulator`` read as scalars. This
module builds the file's bytes (:func:`event_file`, named after this host);
:mod:`perfgate.app.export` writes them atomically and then removes the event files of the
previous export. One TensorBoard *run* per (benchmark, branch), in
``LOGDIR/<benchmark>/<branch>/``; the step is the run's position, oldest first, among the
exported runs of that benchmark on that branch; the wall time is the run's start.
"""

from __future__ import annotations

import io
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path

from perfgate.errors import require

SUFFIX = ".perfgate"
"""File-name suffix of the event files perfgate writes (and replaces on the next export)."""
MAX_TAG = 120


@dataclass(frozen=True)
class Scalar:
    tag: str
    step: int
    value: float
    wall_time: float


def run_dir(logdir: Path, benchmark: str, branch: str) -> Path:
    """``LOGDIR/<benchmark>/<branch>`` with names made safe for a path (a short hash keeps
    distinct names apart)."""

    def part(name: str) -> str:
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:60] or "x"
        return safe if safe == name else f"{safe}-{sha256(name.encode()).hexdigest()[:8]}"

    return logdir / part(benchmark) / part(branch)


def tag(*parts: str) -> str:
    """A scalar tag: parts joined by ``/``, control characters dropped, at most MAX_TAG."""
    text = "/".join(re.sub(r"[\x00-\x1f\x7f/]+", " ", p).strip() or "_" for p in parts)
    return text[:MAX_TAG]


def event_file(scalars: Sequence[Scalar], *, now: float) -> tuple[str, bytes]:
    """The name (``events.out.tfevents.<time>.<host>.perfgate``) and content of one event
    file holding ``scalars``, after the ``brain.Event:2`` file-version event TensorBoard
    expects first. ``now`` is that event's wall time and the time in the name."""
    require(
        "tensorboard.summary.writer.record_writer",
        extra="export",
        feature="perfgate export tensorboard",
    )
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    writer = event_pb2.SourceMetadata(writer="perfgate")
    events = [event_pb2.Event(wall_time=now, file_version="brain.Event:2", source_metadata=writer)]
    for s in scalars:
        value = summary_pb2.Summary.Value(tag=s.tag, simple_value=s.value)
        summary = summary_pb2.Summary(value=[value])
        events.append(event_pb2.Event(wall_time=s.wall_time, step=s.step, summary=summary))
    buffer = io.BytesIO()
    records = RecordWriter(buffer)
    for event in events:
        records.write(event.SerializeToString())
    host = re.sub(r"[^A-Za-z0-9.-]+", "_", socket.gethostname()) or "host"
    return f"events.out.tfevents.{int(now):010d}.{host}{SUFFIX}", buffer.getvalue()


def is_event_file(path: Path) -> bool:
    """Whether ``path`` is an event file perfgate wrote (and replaces on the next export)."""
    return path.name.startswith("events.out.tfevents.") and path.name.endswith(SUFFIX)
