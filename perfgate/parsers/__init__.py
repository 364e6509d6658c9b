"""Profiler output -> :class:`~perfgate.models.ProfileSummary`; pure, no torch import.

One dispatcher, used by ``run``, ``ingest``, torchrun and ``advise``: :func:`detect_format`
says what a path holds and :func:`read_profile` reads it into one summary per rank.

- ``ascend``: an Ascend PyTorch Profiler output, a ``*_ascend_pt`` directory (text or db
  export), its ``ASCEND_PROFILER_OUTPUT``, or a parent holding one per rank
  (:mod:`perfgate.parsers.ascend`);
- ``torch_trace``: a torch.profiler Chrome trace (``*.json`` / ``*.json.gz``), or a
  ``tensorboard_trace_handler`` directory holding one ``*.pt.trace.json[.gz]`` per worker
  (:mod:`perfgate.parsers.torch_trace`).
"""

from __future__ import annotations

from pathlib import Path

from perfgate.errors import ParseError, UsageError
from perfgate.models import Profiled
from perfgate.parsers.ascend import is_ascend_profile, parse_ascend
from perfgate.parsers.torch_trace import parse_torch_trace

__all__ = [
    "FORMAT_ASCEND",
    "FORMAT_TORCH",
    "detect_format",
    "parse_torch_trace",
    "read_profile",
    "trace_files",
]

FORMAT_ASCEND = "ascend"
FORMAT_TORCH = "torch_trace"

_TRACE_SUFFIXES = (".json", ".json.gz")


def trace_files(directory: Path) -> list[Path]:
    """The ``*.pt.trace.json[.gz]`` files directly in ``directory``, sorted by name."""
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and p.name.endswith(_TRACE_SUFFIXES) and ".pt.trace" in p.name
    )


def detect_format(path: Path) -> str:
    """``ascend`` or ``torch_trace``, from what ``path`` holds.

    Raises:
        UsageError: the path does not exist.
        ParseError: it holds neither format.
    """
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if path.is_dir():
        if is_ascend_profile(path):
            return FORMAT_ASCEND
        if trace_files(path):
            return FORMAT_TORCH
        raise ParseError(
            f"{path}: not a profile perfgate can read: no ASCEND_PROFILER_OUTPUT directory "
            "(torch_npu) and no *.pt.trace.json[.gz] files (torch.profiler)"
        )
    if path.name == "trace_view.json":
        raise ParseError(
            f"{path}: an Ascend trace_view.json alone is not a profile; pass its *_ascend_pt "
            "directory"
        )
    if path.name.endswith(_TRACE_SUFFIXES):
        return FORMAT_TORCH
    raise ParseError(
        f"{path}: not a profile perfgate can read (expected a *_ascend_pt directory, a "
        "torch.profiler *.json[.gz] trace, or a directory of them)"
    )


def read_profile(path: Path) -> Profiled:
    """Parse the profile at ``path`` into one summary per rank (pure apart from reading).

    The result's ``cluster`` is None: comparing the ranks is the advisor's
    (:func:`perfgate.advisor.cluster.cluster_view`).

    Raises:
        UsageError: the path does not exist.
        ParseError: it holds neither format, or its profile cannot be read.
    """
    path = Path(path)
    fmt = detect_format(path)
    if fmt == FORMAT_ASCEND:
        return Profiled(fmt, path, parse_ascend(path))
    files = trace_files(path) if path.is_dir() else [path]
    return Profiled(fmt, path, tuple(parse_torch_trace(f) for f in files))
