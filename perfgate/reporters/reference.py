"""A run beside official figures (:func:`perfgate.app.reference.compare_to_reference`):
terminal lines and JSON; pure. A report, not a verdict: better and worse follow each metric's
direction in the catalogue, and nothing here changes an exit code."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfgate.models import ReferenceRow
from perfgate.reporters.render import _table

__all__ = ["reference_to_dict", "render_reference_lines"]


def _number(value: float) -> str:
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.3f}"


def _judgement(row: ReferenceRow) -> str:
    if row.value is None:
        return "not measured"
    if row.better is None:
        return "equal"
    return "better" if row.better else "worse"


def render_reference_lines(rows: Sequence[ReferenceRow], source: Path | str | None) -> list[str]:
    """``against reference FILE:`` then one row per metric: the run's value, the official
    one, their ratio, the change and whether the run is better or worse."""
    where = f" {source}" if source else ""
    if not rows:
        return [f"reference{where}: no figure for this benchmark"]
    table = [["metric", "unit", "run", "official", "run/official", "change", "the run is"]]
    for r in rows:
        value = "-" if r.value is None else _number(r.value)
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}x"
        change = "-" if r.change_pct is None else f"{r.change_pct:+.1f}%"
        table.append(
            [r.metric, r.unit or "-", value, _number(r.official), ratio, change, _judgement(r)]
        )
    return [f"against reference{where} (a report, not a verdict):", *_table(table)]


def reference_to_dict(rows: Sequence[ReferenceRow], source: Path | str | None) -> dict[str, Any]:
    """The JSON of the comparison: the file it came from and one object per metric."""
    return {
        "file": None if source is None else str(source),
        "rows": [{**r.to_dict(), "judgement": _judgement(r)} for r in rows],
    }
