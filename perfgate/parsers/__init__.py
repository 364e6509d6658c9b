"""Profiler output -> :class:`~perfgate.models.ProfileSummary`, and other harnesses' result
files; pure, no torch import.

One dispatcher, used by ``run``, ``ingest``, torchrun and ``advise``: :func:`detect_format`
says what a path holds and :func:`read_profile` reads a profile into one summary per rank.
Profiles: ``ascend`` (a ``*_ascend_pt`` directory, its ``ASCEND_PROFILER_OUTPUT``, or a
parent of one per rank; :mod:`perfgate.parsers.ascend`) and ``torch_trace`` (a Chrome trace,
or a ``tensorboard_trace_handler`` directory of them; :mod:`perfgate.parsers.torch_trace`).
Results, read only by ``ingest``: ``ais_bench`` (:mod:`perfgate.parsers.ais_bench`) and
``pytest_benchmark``, ``pyperf``, ``asv``, ``metrics_file`` (:mod:`perfgate.parsers.results`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfgate.lazy import lazy_exports

_MODULES = dict(  # module: the names it exports here
    dispatch="FORMAT_AIS_BENCH FORMAT_ASCEND FORMAT_TORCH detect_format read_profile trace_files",
    results="FORMAT_ASV FORMAT_METRICS FORMAT_PYPERF FORMAT_PYTEST_BENCHMARK RESULT_FORMATS",
    ais_bench="AisBenchSummary parse_ais_bench",
    torch_trace="parse_torch_trace",
)
_NAMES = {name: f"perfgate.parsers.{m}" for m, names in _MODULES.items() for name in names.split()}

__all__ = [
    "FORMAT_AIS_BENCH",
    "FORMAT_ASCEND",
    "FORMAT_ASV",
    "FORMAT_METRICS",
    "FORMAT_PYPERF",
    "FORMAT_PYTEST_BENCHMARK",
    "FORMAT_TORCH",
    "RESULT_FORMATS",
    "AisBenchSummary",
    "detect_format",
    "parse_ais_bench",
    "parse_torch_trace",
    "read_profile",
    "trace_files",
]

if TYPE_CHECKING:
    from perfgate.parsers.ais_bench import AisBenchSummary, parse_ais_bench
    from perfgate.parsers.dispatch import (
        FORMAT_AIS_BENCH,
        FORMAT_ASCEND,
        FORMAT_TORCH,
        detect_format,
        read_profile,
        trace_files,
    )
    from perfgate.parsers.results import (
        FORMAT_ASV,
        FORMAT_METRICS,
        FORMAT_PYPERF,
        FORMAT_PYTEST_BENCHMARK,
        RESULT_FORMATS,
    )
    from perfgate.parsers.torch_trace import parse_torch_trace


# Imported on first use: ``perfgate detect`` reads a series file (parsers.series) and
# needs none of the profile readers (pandas, the Ascend exports).
__getattr__ = lazy_exports(__name__, _NAMES, globals())
