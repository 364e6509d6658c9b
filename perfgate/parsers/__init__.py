"""Profiler output -> :class:`~perfgate.models.ProfileSummary`, and other harnesses' result
files; pure, no torch import.

One dispatcher, used by ``run``, ``ingest``, torchrun and ``advise``: :func:`detect_format`
says what a path holds and :func:`read_profile` reads a profile into one summary per rank.

- ``ascend``: an Ascend PyTorch Profiler output, a ``*_ascend_pt`` directory (text or db
  export), its ``ASCEND_PROFILER_OUTPUT``, or a parent holding one per rank
  (:mod:`perfgate.parsers.ascend`);
- ``torch_trace``: a torch.profiler Chrome trace (``*.json`` / ``*.json.gz``), or a
  ``tensorboard_trace_handler`` directory holding one ``*.pt.trace.json[.gz]`` per worker
  (:mod:`perfgate.parsers.torch_trace`);
- ``ais_bench``: the ``*_summary.json`` that ais_bench (``ait`` / ``msit benchmark``) writes
  with ``--output``: inference latencies and throughput, not a profile, so only ``ingest``
  reads it (:func:`~perfgate.parsers.ais_bench.parse_ais_bench`);
- ``pytest_benchmark``, ``pyperf``, ``asv``, ``metrics_file``: other harnesses' result files
  (``pytest --benchmark-json``, ``pyperf -o``, asv's ``results/<machine>/<commit>-<env>.json``)
  and perfgate's plain metrics file (JSON or CSV), told apart by their first bytes
  (:mod:`perfgate.parsers.results`); also results, read only by ``ingest``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfgate.lazy import lazy_exports

_NAMES = {
    "FORMAT_AIS_BENCH": "perfgate.parsers.dispatch",
    "FORMAT_ASCEND": "perfgate.parsers.dispatch",
    "FORMAT_TORCH": "perfgate.parsers.dispatch",
    "detect_format": "perfgate.parsers.dispatch",
    "read_profile": "perfgate.parsers.dispatch",
    "trace_files": "perfgate.parsers.dispatch",
    "FORMAT_ASV": "perfgate.parsers.results",
    "FORMAT_METRICS": "perfgate.parsers.results",
    "FORMAT_PYPERF": "perfgate.parsers.results",
    "FORMAT_PYTEST_BENCHMARK": "perfgate.parsers.results",
    "RESULT_FORMATS": "perfgate.parsers.results",
    "AisBenchSummary": "perfgate.parsers.ais_bench",
    "parse_ais_bench": "perfgate.parsers.ais_bench",
    "parse_torch_trace": "perfgate.parsers.torch_trace",
}

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
