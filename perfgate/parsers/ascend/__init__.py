"""Ascend PyTorch Profiler (torch_npu) output -> one :class:`ProfileSummary` per rank.

The input is what ``torch_npu.profiler.tensorboard_trace_handler(dir)`` writes: one
``{worker}_{timestamp}_ascend_pt`` directory per rank (``shared/fixtures/ascend/FORMATS.md``
§1). ``discovery`` finds the ranks and how each was collected; ``text`` and ``db`` read the
two exports (``trace_view`` gives the text export its step times when it has no
``step_trace_time.csv``); ``matrix`` adds rank-to-rank traffic (``rank_pairs``) and
:mod:`perfgate.parsers.timeline` one step op by op (``timeline``, text export only).
Comparing the ranks of one job is analysis: :mod:`perfgate.advisor.cluster`. Pure, no torch.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from perfgate.errors import ParseError
from perfgate.models import ProfileSummary
from perfgate.parsers.ascend.db import SOURCE_DB, parse_ascend_db_rank
from perfgate.parsers.ascend.discovery import (
    OUTPUT_DIR,
    as_rank_dir,
    find_rank_dirs,
    is_ascend_profile,
    read_collection,
)
from perfgate.parsers.ascend.matrix import MATRIX_FILE, rank_pairs_from_db, rank_pairs_from_text
from perfgate.parsers.ascend.text import SOURCE_TEXT, parse_ascend_text_rank
from perfgate.parsers.ascend.trace_view import breakdown_from_trace_view
from perfgate.parsers.timeline import ascend_timeline

__all__ = [
    "SOURCE_DB",
    "SOURCE_TEXT",
    "breakdown_from_trace_view",
    "find_rank_dirs",
    "is_ascend_profile",
    "parse_ascend",
    "parse_ascend_db_rank",
    "parse_ascend_rank",
    "read_collection",
]

_TEXT_FILES = ("step_trace_time.csv", "kernel_details.csv", "trace_view.json")


def parse_ascend_rank(rank_dir: Path) -> ProfileSummary:
    """Summarise one rank's profile per profiled step.

    Reads the text export when ``ASCEND_PROFILER_OUTPUT`` holds its files; otherwise, when it
    holds ``ascend_pytorch_profiler*.db``, the db export. ``rank_dir`` is the ``*_ascend_pt``
    directory or its ``ASCEND_PROFILER_OUTPUT``. Either way ``rank_pairs`` comes from
    :mod:`~perfgate.parsers.ascend.matrix`; ``timeline`` from ``trace_view.json`` (text
    export only: the db export's ``TASK``/``PYTORCH_API`` tables are not read into one yet,
    so its timeline is None).

    Raises:
        ParseError: not a rank directory, or its profile cannot be read.
    """
    rank_dir = as_rank_dir(Path(rank_dir))
    out_dir = rank_dir / OUTPUT_DIR
    if not out_dir.is_dir():
        raise ParseError(
            f"{rank_dir}: no {OUTPUT_DIR} directory; not an Ascend PyTorch Profiler rank dir"
        )
    if not any((out_dir / name).is_file() for name in _TEXT_FILES) and any(
        out_dir.glob("ascend_pytorch_profiler*.db")
    ):
        summary = parse_ascend_db_rank(rank_dir)
        pairs, notes = rank_pairs_from_db(out_dir / "analysis.db")
        if not pairs and not notes:
            return summary
        return replace(summary, rank_pairs=pairs, notes=summary.notes + notes)
    summary = parse_ascend_text_rank(rank_dir, out_dir)
    pairs, notes = rank_pairs_from_text(out_dir)
    raw = summary.raw_files
    if pairs:
        raw += (f"{OUTPUT_DIR}/{MATRIX_FILE}",)
    trace = out_dir / "trace_view.json"
    timeline = None
    if trace.is_file():
        timeline, timeline_notes = ascend_timeline(trace)
        notes += timeline_notes
    return replace(
        summary, rank_pairs=pairs, timeline=timeline, notes=summary.notes + notes, raw_files=raw
    )


def parse_ascend(path: Path) -> tuple[ProfileSummary, ...]:
    """Every rank under ``path`` (a rank dir, its ``ASCEND_PROFILER_OUTPUT``, or their
    parent), sorted by rank."""
    return tuple(parse_ascend_rank(d) for d in find_rank_dirs(Path(path)))
