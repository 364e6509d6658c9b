"""Official figures to hold a run beside: ``--reference FILE``.

A team that ingests ais_bench or its own profiles often has a vendor's number to compare
with (Ascend ModelZoo's throughput for a model on a 910B, say). The reference file holds
those numbers per benchmark and metric; :func:`compare_to_reference` sets a run beside them.
It is a report, not a verdict: budgets held against the reference are the gate's.

The file is JSON, in one of three shapes:

- one entry: ``{"benchmark": "resnet50_bs1", "source": "Ascend ModelZoo, 910B, CANN 8.0",
  "metrics": {"throughput_samples_per_s": 1450.0, "latency_p99_ms": 1.2}}``; without
  ``benchmark`` the entry holds for every benchmark;
- a list of such entries;
- a mapping benchmark -> metrics: ``{"resnet50_bs1": {"latency_p99_ms": 1.2}, "*": {...}}``
  (any top-level object without a ``metrics`` key).

``source`` (free text, where the numbers come from) is allowed and not read; any other key in
an entry is refused, as is a metric the catalogue (:mod:`perfgate.metrics`) does not know, so
that a misspelt name fails here rather than compare with nothing. Values are finite numbers in
the catalogue's unit (ms, 1/s, bytes, %). The same benchmark may appear in several entries; the
same metric of one benchmark may not.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfgate.errors import ParseError, UsageError
from perfgate.metrics import lookup
from perfgate.models import ReferenceRow, RunRecord

ANY_BENCHMARK = "*"
"""The key of the figures an entry gives for every benchmark (an entry without ``benchmark``)."""

_ENTRY_KEYS = frozenset({"benchmark", "source", "metrics"})


def read_reference(path: Path) -> dict[str, dict[str, float]]:
    """The official figures in the reference file at ``path``: benchmark name -> metric ->
    value, figures for every benchmark under :data:`ANY_BENCHMARK` (``"*"``).

    Raises:
        UsageError: the file cannot be read.
        ParseError: it is not JSON, or a key or value is wrong (one line naming the file and
            the key).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise UsageError(f"{path}: cannot read the reference file ({why})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"{path}: the reference file is not JSON ({exc.msg} at line {exc.lineno} "
            f"column {exc.colno})"
        ) from None
    except RecursionError:
        raise ParseError(f"{path}: the reference file is nested too deeply") from None
    out: dict[str, dict[str, float]] = {}
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            _entry(item, f"[{i}]", path, out)
    elif isinstance(doc, dict) and "metrics" in doc:
        _entry(doc, "", path, out)
    elif isinstance(doc, dict):
        for name, metrics in doc.items():
            _metrics(metrics, str(name), str(name), path, out)
    else:
        raise ParseError(
            f"{path}: a reference file is an object or a list of entries, not {_kind(doc)}"
        )
    if not any(out.values()):
        raise ParseError(f"{path}: the reference file gives no figure")
    return out


def compare_to_reference(
    record: RunRecord, reference: Mapping[str, Mapping[str, float]]
) -> tuple[ReferenceRow, ...]:
    """``record``'s metrics beside the official figures for its benchmark (those for every
    benchmark, ``"*"``, unless the benchmark's own name the metric), in the reference's
    order; a metric the run did not measure has ``value`` None (pure)."""
    figures = {**reference.get(ANY_BENCHMARK, {}), **reference.get(record.benchmark, {})}
    rows = []
    for metric, official in figures.items():
        m = record.measurement(metric)
        known = m if m is not None else lookup(metric)
        if known is None:
            continue  # neither measured nor in the catalogue: no direction to judge it by
        value = None if m is None else m.summary.centre
        rows.append(ReferenceRow(metric, known.unit, known.direction, float(official), value))
    return tuple(rows)


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else "an object"
    )


def _entry(item: Any, where: str, path: Path, out: dict[str, dict[str, float]]) -> None:
    at, prefix = where or "the entry", f"{where}." if where else ""
    if not isinstance(item, dict):
        raise ParseError(f"{path}: {at}: an entry is an object, not {_kind(item)}")
    unknown = sorted(set(item) - _ENTRY_KEYS)
    if unknown:
        raise ParseError(
            f"{path}: {prefix}{unknown[0]}: not a key of a reference "
            "entry (benchmark, source, metrics)"
        )
    if "metrics" not in item:
        raise ParseError(f"{path}: {at}: no metrics")
    benchmark = item.get("benchmark", ANY_BENCHMARK)
    if not isinstance(benchmark, str) or not benchmark.strip():
        raise ParseError(f"{path}: {prefix}benchmark: not a name")
    if "source" in item and not isinstance(item["source"], str):
        raise ParseError(f"{path}: {prefix}source: not text")
    _metrics(item["metrics"], benchmark, f"{prefix}metrics", path, out)


def _metrics(
    raw: Any, benchmark: str, where: str, path: Path, out: dict[str, dict[str, float]]
) -> None:
    if not isinstance(raw, dict):
        raise ParseError(f"{path}: {where}: metric -> value, not {_kind(raw)}")
    figures = out.setdefault(benchmark, {})
    for metric, value in raw.items():
        key = f"{where}.{metric}"
        if lookup(str(metric)) is None:
            raise ParseError(
                f"{path}: {key}: not a metric perfgate records (see perfgate/metrics.py)"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            shown = repr(value)[:40] if isinstance(value, str) else _kind(value)
            raise ParseError(f"{path}: {key}: {shown} is not a number")
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an integer of hundreds of digits
            finite = False
        if not finite:
            raise ParseError(f"{path}: {key}: {str(value)[:40]} is not a finite number")
        if metric in figures:
            raise ParseError(f"{path}: {key}: {benchmark} {metric} is given twice")
        figures[str(metric)] = float(value)
