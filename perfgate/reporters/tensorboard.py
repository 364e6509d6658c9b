"""TensorBoard event files of stored runs, written with TensorBoard's own writer.

Needs only the ``tensorboard`` package (no TensorFlow, no torch): scalars are classic
``Summary.Value(simple_value=...)`` events written by
``tensorboard.summary.writer.event_file_writer.EventFileWriter``, which TensorBoard and its
``EventAccumulator`` read as scalars. One TensorBoard *run* per (benchmark, branch), in
``LOGDIR/<benchmark>/<branch>/``; the step is the run's position, oldest first, among the
exported runs of that benchmark on that branch; the wall time is the run's start.
"""

from __future__ import annotations

import re
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


def write_events(directory: Path, scalars: Sequence[Scalar]) -> Path:
    """Write ``scalars`` as one event file in ``directory`` (perfgate's earlier event files
    there are removed first, so re-exporting does not duplicate points); returns its path."""
    require(
        "tensorboard.summary.writer.event_file_writer",
        extra="export",
        feature="perfgate export tensorboard",
    )
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob(f"events.out.tfevents.*{SUFFIX}"):
        old.unlink()
    writer = EventFileWriter(str(directory), filename_suffix=SUFFIX)
    try:
        for s in scalars:
            summary = summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=s.tag, simple_value=s.value)]
            )
            writer.add_event(event_pb2.Event(wall_time=s.wall_time, step=s.step, summary=summary))
    finally:
        writer.close()
    return max(directory.glob(f"events.out.tfevents.*{SUFFIX}"), key=lambda p: p.stat().st_mtime)
