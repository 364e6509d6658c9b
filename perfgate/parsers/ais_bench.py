"""ais_bench's ``--output`` summary -> :class:`AisBenchSummary`; pure apart from reading.

ais_bench (the inference benchmark of the Ascend chain: ``python -m ais_bench``, ``ait
benchmark``, ``msit benchmark``; formerly ``ais_infer``) times an offline ``.om`` model and,
given ``--output DIR``, writes beside its timestamped output folder a ``<folder>_summary.json``
(old ``ais_infer`` releases wrote ``sumary.json`` inside the folder). What it holds, as read
in ais_bench's own ``ais_bench/infer/summary.py`` (``Summary.record`` and ``Summary.report``,
Huawei 2023, read through the code search) and in the performance sections of the Ascend
ModelZoo ``ACL_PyTorch`` READMEs that quote the file:

- ``NPU_compute_time``: ``{min, max, mean, median, <percentile>, count}`` in ms: the
  device's time per inference (one ``execute`` of the model, one batch), H2D and D2H copies
  excluded; ``H2D_latency`` and ``D2H_latency``: the same keys, ms, for the host-to-device
  input copy and the device-to-host output copy per inference.
- ``throughput``: ``1000 * batchsize / NPU_compute_time.mean``: **samples** per second of
  device compute (batch size x inferences per second; the two agree only at batch size 1);
  the figure the ModelZoo quotes as the single-card throughput.
- ``npu_compute_time_list``: every inference's compute time in ms; with ``--threads`` and
  ``--pipeline``, ``[start, end]`` intervals instead, and then ``mean`` is the merged busy
  time / count, not a plain mean. ``args`` is ais_bench's command line (``sys.argv``).

``<percentile>`` is ``P99`` in current releases and ``percentile(99%)`` in older ones, which
also lack ``count``; both spellings are read, for any percentile. When a list is empty
ais_bench writes zeros, so a section whose count is 0 (or whose figures are all 0) is taken
as absent. The file names neither ais_bench's version nor the NPU model; the app takes those
from the host it ingests on. The fixture ``tests/data/ais_bench/resnet50_bs1_summary.json``
is hand-written from the fields above, not a real output.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.errors import ParseError
from perfgate.parsers.results import kind, load_json, number

__all__ = ["AisBenchSummary", "LatencyStats", "is_ais_bench_summary", "parse_ais_bench"]

COMPUTE = "NPU_compute_time"
H2D = "H2D_latency"
D2H = "D2H_latency"
THROUGHPUT = "throughput"
COMPUTE_LIST = "npu_compute_time_list"

_STATS = ("min", "max", "mean", "median")
_PERCENTILE = re.compile(r"^(?:percentile\((\d+(?:\.\d+)?)%\)|P(\d+(?:\.\d+)?))$")
_SNIFF_BYTES = 4096
_NAMES = ("summary.json", "sumary.json")


@dataclass(frozen=True)
class LatencyStats:
    """One of ais_bench's latency sections, in ms."""

    min_ms: float
    max_ms: float
    mean_ms: float
    median_ms: float
    percentiles_ms: tuple[tuple[float, float], ...]
    """(percentile, value) pairs, by percentile: ``((99.0, 13.9),)``."""
    count: int | None
    """Inferences timed; None in releases that do not write it."""

    def percentile(self, q: float) -> float | None:
        """The ``q``-th percentile ais_bench wrote, or None."""
        return next((v for p, v in self.percentiles_ms if p == q), None)


@dataclass(frozen=True)
class AisBenchSummary:
    """What one ais_bench summary says, and what it did not say (``notes``)."""

    path: Path
    compute: LatencyStats
    h2d: LatencyStats | None
    d2h: LatencyStats | None
    throughput: float | None
    """Samples per second of device compute (see the module)."""
    compute_times_ms: tuple[float, ...]
    """Every inference's compute time, when the file lists them; () otherwise."""
    multi_threads: bool
    """The list held ``[start, end]`` intervals (``--threads`` with ``--pipeline``)."""
    args: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def batch_size(self) -> float | None:
        """The mean batch size ais_bench divided by: its throughput formula inverted."""
        if self.throughput is None or self.compute.mean_ms <= 0:
            return None
        return self.throughput * self.compute.mean_ms / 1000.0


def is_ais_bench_summary(path: Path) -> bool:
    """Whether the file at ``path`` is to be read as an ais_bench summary: by its name
    (``*_summary.json``, ``summary.json``, ais_infer's ``sumary.json``), or, for any other
    plain ``*.json`` that is not a ``*.pt.trace.json``, by its first bytes (ais_bench dumps
    ``{"filesinfo": ...`` first, or names ``NPU_compute_time`` early in a small file).

    Whether the content holds up is :func:`parse_ais_bench`'s to say, so that a summary that
    lacks a field gets an error naming the field rather than "not a file perfgate reads".
    """
    name = path.name
    if not name.endswith(".json") or ".pt.trace" in name:
        return False
    if name.endswith("_" + _NAMES[0]) or name in _NAMES:
        return True
    try:
        with path.open("rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return False
    return head.lstrip().startswith(b'{"filesinfo"') or b'"NPU_compute_time"' in head


def parse_ais_bench(path: Path) -> AisBenchSummary:
    """Read the ais_bench summary at ``path``.

    Raises:
        ParseError: it cannot be read, is not JSON, or a field is missing or not a number
            (one line naming the file and the field).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise ParseError(f"{path}: is a directory, not an ais_bench summary") from None
    except UnicodeDecodeError:
        raise ParseError(f"{path}: not JSON (not UTF-8 text)") from None
    except OSError as exc:
        raise ParseError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    doc = load_json(text, path, "empty file, not an ais_bench summary")
    if not isinstance(doc, dict):
        raise ParseError(f"{path}: an ais_bench summary is a JSON object, not {kind(doc)}")
    if "traceEvents" in doc:
        raise ParseError(
            f"{path}: a Chrome trace named like an ais_bench summary; rename it to *.pt.trace.json"
        )
    if COMPUTE not in doc:
        raise ParseError(
            f"{path}: no {COMPUTE}: not an ais_bench summary (the *_summary.json that "
            "ais_bench --output writes)"
        )
    compute = _section(doc, COMPUTE, path)
    if compute is None:
        raise ParseError(f"{path}: {COMPUTE}: count is 0, no inference was timed")
    h2d, d2h = _section(doc, H2D, path), _section(doc, D2H, path)
    notes = [f"no {key} in the summary" for key, found in ((H2D, h2d), (D2H, d2h)) if not found]
    throughput: float | None = None
    if THROUGHPUT in doc:
        throughput = _number(doc[THROUGHPUT], path, THROUGHPUT)
        if throughput <= 0:
            notes.append("throughput is 0 (ais_bench writes 0 when no inference was timed)")
            throughput = None
    else:
        notes.append("no throughput in the summary")
    times, intervals = _compute_list(doc.get(COMPUTE_LIST), path, notes)
    if times and compute.count is not None and len(times) != compute.count:
        notes.append(
            f"{COMPUTE_LIST} holds {len(times)} times, {COMPUTE}.count says {compute.count}; "
            "the list is used"
        )
    if times:
        median = statistics.median(times)
        if not math.isclose(median, compute.median_ms, rel_tol=1e-6, abs_tol=1e-9):
            notes.append(
                f"the median of {COMPUTE_LIST} ({median:.6g} ms) is not {COMPUTE}.median "
                f"({compute.median_ms:.6g} ms); the list is used"
            )
    else:
        notes.append(
            f"no per-inference {COMPUTE_LIST}: the P50 is ais_bench's median alone (one sample)"
        )
    raw = doc.get("args") or []
    args = tuple(str(a) for a in raw) if isinstance(raw, list) else (str(raw),)
    return AisBenchSummary(
        path, compute, h2d, d2h, throughput, times, intervals, args, tuple(notes)
    )


def _number(value: Any, path: Path, key: str) -> float:
    x = number(value, path, key)
    if not math.isfinite(x) or x < 0:
        raise ParseError(f"{path}: {key}: {value} is not a finite number >= 0")
    return x


def _section(doc: Mapping[str, Any], key: str, path: Path) -> LatencyStats | None:
    """One latency section, or None when it is absent or empty (count 0, all zeros)."""
    if key not in doc:
        return None
    raw = doc[key]
    if not isinstance(raw, dict):
        raise ParseError(f"{path}: {key}: {kind(raw)}, not an object of min/max/mean/...")
    if missing := [s for s in _STATS if s not in raw]:
        raise ParseError(f"{path}: {key}: no {', '.join(missing)}")
    stats = {s: _number(raw[s], path, f"{key}.{s}") for s in _STATS}
    percentiles = [
        (float(match.group(1) or match.group(2)), _number(value, path, f"{key}.{name}"))
        for name, value in raw.items()
        if (match := _PERCENTILE.match(str(name)))
    ]
    count: int | None = None
    if "count" in raw:
        c = _number(raw["count"], path, f"{key}.count")
        if c != int(c):
            raise ParseError(f"{path}: {key}.count: {raw['count']} is not a whole number")
        count = int(c)
    if count == 0 or all(v == 0 for v in stats.values()):
        return None
    low, high, mean, median = (stats[s] for s in _STATS)
    return LatencyStats(
        min_ms=low,
        max_ms=high,
        mean_ms=mean,
        median_ms=median,
        percentiles_ms=tuple(sorted(percentiles)),
        count=count,
    )


def _compute_list(raw: Any, path: Path, notes: list[str]) -> tuple[tuple[float, ...], bool]:
    """Every inference's compute time in ms from ``npu_compute_time_list`` (plain times, or
    ``[start, end]`` intervals), and whether it held intervals."""
    if raw is None or raw == []:
        return (), False
    if not isinstance(raw, list):
        raise ParseError(f"{path}: {COMPUTE_LIST}: {kind(raw)}, not a list")
    if all(isinstance(x, list) for x in raw):
        times = []
        for i, pair in enumerate(raw):
            if len(pair) != 2:
                raise ParseError(f"{path}: {COMPUTE_LIST}[{i}]: not a [start, end] pair")
            start = _number(pair[0], path, f"{COMPUTE_LIST}[{i}][0]")
            end = _number(pair[1], path, f"{COMPUTE_LIST}[{i}][1]")
            if end < start:
                raise ParseError(f"{path}: {COMPUTE_LIST}[{i}]: ends before it starts")
            times.append(end - start)
        notes.append(
            f"{COMPUTE_LIST} holds [start, end] intervals (--threads with --pipeline): "
            f"{COMPUTE}.mean is ais_bench's merged busy time per inference"
        )
        return tuple(times), True
    times = [_number(x, path, f"{COMPUTE_LIST}[{i}]") for i, x in enumerate(raw)]
    return tuple(times), False
