"""What a path holds and reading a profile from it: the dispatcher :mod:`perfgate.parsers`
exports (its docstring lists the formats)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from perfgate.errors import ParseError, UsageError
from perfgate.models import Profiled, ProfileSummary
from perfgate.parsers.ais_bench import is_ais_bench_summary
from perfgate.parsers.ascend import find_rank_dirs, is_ascend_profile, parse_ascend_rank
from perfgate.parsers.decompress import regular_file
from perfgate.parsers.results import RESULT_FORMATS, first_three, sniff_results
from perfgate.parsers.torch_trace import parse_torch_trace

FORMAT_ASCEND = "ascend"
FORMAT_TORCH = "torch_trace"
FORMAT_AIS_BENCH = "ais_bench"

ACCEPTED = (
    "a *_ascend_pt directory, a torch.profiler *.json[.gz] trace, a directory of them, an "
    "ais_bench *_summary.json, a pytest-benchmark, pyperf or asv results JSON, or a metrics "
    "file (JSON with a metrics list, or CSV with name and value columns)"
)
"""What ``ingest`` accepts, for the message on a path that is none of them."""

_TRACE_SUFFIXES = (".json", ".json.gz")


def trace_files(directory: Path) -> list[Path]:
    """The ``*.pt.trace.json[.gz]`` files directly in ``directory``, sorted by name."""
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and p.name.endswith(_TRACE_SUFFIXES) and ".pt.trace" in p.name
    )


def detect_format(path: Path) -> str:
    """``ascend``, ``torch_trace``, ``ais_bench`` or a result format, from what ``path``
    holds.

    A ``*.json[.gz]`` or ``*.csv`` file is first looked at for another harness's results by
    its first bytes (:func:`~perfgate.parsers.results.sniff_results`: keys no profile and no
    ais_bench summary has); then a ``*.json`` is an ais_bench summary by its name
    (``*_summary.json``) or its first bytes
    (:func:`~perfgate.parsers.ais_bench.is_ais_bench_summary`), a torch trace otherwise.

    Raises:
        UsageError: the path does not exist.
        ParseError: it holds neither format, or is neither a regular file nor a directory
            (a FIFO, socket or device).
    """
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if path.is_dir():
        if is_ascend_profile(path):
            return FORMAT_ASCEND
        if trace_files(path):
            return FORMAT_TORCH
        if summaries := sorted(p.name for p in path.glob("*_summary.json") if p.is_file()):
            raise ParseError(
                f"{path}: a directory, not a profile; pass one of its ais_bench summaries "
                f"({first_three(summaries)})"
            )
        raise ParseError(
            f"{path}: not a profile perfgate can read: no ASCEND_PROFILER_OUTPUT directory "
            "(torch_npu) and no *.pt.trace.json[.gz] files (torch.profiler)"
        )
    regular_file(path, str(path))  # a FIFO or device would block the first read
    if path.name == "trace_view.json":
        raise ParseError(
            f"{path}: an Ascend trace_view.json alone is not a profile; pass its *_ascend_pt "
            "directory"
        )
    if (result_format := sniff_results(path)) is not None:
        return result_format
    if is_ais_bench_summary(path):
        return FORMAT_AIS_BENCH
    if path.name.endswith(_TRACE_SUFFIXES) and not _seen_whole_without_trace(path):
        return FORMAT_TORCH
    raise ParseError(f"{path}: not a file perfgate can read (expected {ACCEPTED})")


_SMALL = 1 << 16


def _seen_whole_without_trace(path: Path) -> bool:
    """Whether ``path`` is a small plain (not gzip) JSON file, read whole here, that has no
    ``traceEvents``: none of the formats, rather than a trace to report as a broken one."""
    if ".pt.trace" in path.name or not path.name.endswith(".json"):
        return False
    try:
        if path.stat().st_size > _SMALL:
            return False
        head = path.read_bytes()
    except OSError:
        return False
    return not head.startswith(b"\x1f\x8b") and b'"traceEvents"' not in head


def read_profile(path: Path) -> Profiled:
    """Parse the profile at ``path`` into one summary per rank (pure apart from reading).

    The result's ``cluster`` is None: comparing the ranks is the advisor's
    (:func:`perfgate.advisor.cluster.cluster_view`).

    Raises:
        UsageError: the path does not exist.
        ParseError: it holds no profile (an ais_bench summary and the other result files
            are read by ``ingest``), or its profile cannot be read.
    """
    path = Path(path)
    fmt = detect_format(path)
    if fmt == FORMAT_AIS_BENCH:
        raise ParseError(
            f"{path}: an ais_bench summary holds latencies, not a profile; record it with "
            "perfgate ingest"
        )
    if fmt in RESULT_FORMATS:
        raise ParseError(
            f"{path}: a {fmt.replace('_', '-')} file holds benchmark results, not a profile; "
            "record it with perfgate ingest"
        )
    if fmt == FORMAT_ASCEND:
        dirs = find_rank_dirs(path)
        return Profiled(fmt, path, _one_per_rank(path, dirs, [parse_ascend_rank(d) for d in dirs]))
    files = trace_files(path) if path.is_dir() else [path]
    return Profiled(fmt, path, _one_per_rank(path, files, [parse_torch_trace(f) for f in files]))


def _one_per_rank(
    path: Path, sources: Sequence[Path], ranks: Sequence[ProfileSummary]
) -> tuple[ProfileSummary, ...]:
    """``ranks`` (read from ``sources``) when they are one job's ranks: a single profile, or
    each naming its own rank. Several traces without a rank are one process's (a
    profiler schedule's cycles, or runs written into one directory), and two of one rank
    are two sessions of it: read as ranks, their step times would be taken per step across
    them and their spread called a slow rank.

    Raises:
        ParseError: a profile among several names no rank, or two name the same one.
    """
    if len(ranks) < 2:
        return tuple(ranks)
    names = [str(s.relative_to(path)) if s.is_relative_to(path) else str(s) for s in sources]
    if unnamed := [n for n, r in zip(names, ranks, strict=True) if r.rank is None]:
        raise ParseError(
            f"{path}: {len(ranks)} profiles, and {', '.join(unnamed[:3])}"
            f"{' ...' if len(unnamed) > 3 else ''} name{'s' if len(unnamed) == 1 else ''} "
            "no rank (distributedInfo): traces "
            "of one process (a schedule's cycles, or runs into one directory) are not "
            "ranks; give the one to read"
        )
    seen: dict[int, str] = {}
    for name, r in zip(names, ranks, strict=True):
        assert r.rank is not None
        if r.rank in seen:
            raise ParseError(
                f"{path}: {seen[r.rank]} and {name} are both rank {r.rank}: two sessions "
                "of one rank; keep one profile per rank"
            )
        seen[r.rank] = name
    return tuple(ranks)
