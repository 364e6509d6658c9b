"""A plain series file (``perfgate detect``): CSV ``index,value``, one row per run."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from perfgate.errors import ParseError
from perfgate.parsers.decompress import regular_file


def read_series_csv(path: str | Path) -> tuple[list[int], list[float]]:
    """The indexes and values of a series file: CSV with header ``index,value``, one row per
    run, oldest first.

    ``index`` must be an integer, strictly increasing (``perfgate detect`` names runs by it);
    ``value`` a finite number. Blank lines are skipped. Raises ParseError naming the file
    and line.
    """
    p = Path(path)
    regular_file(p, str(p))  # a FIFO or device would block the read
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ParseError(f"{p}: cannot be read ({exc.__class__.__name__})") from None
    indexes: list[int] = []
    values: list[float] = []
    previous: int | None = None
    header_seen = False
    for line_no, row in enumerate(csv.reader(text.splitlines()), start=1):
        cells = [cell.strip() for cell in row]
        if not any(cells):
            continue
        if not header_seen:
            if [c.lower() for c in cells] != ["index", "value"]:
                raise ParseError(
                    f"{p}:{line_no}: header must be 'index,value', got {','.join(cells)!r}"
                )
            header_seen = True
            continue
        if len(cells) != 2:
            raise ParseError(f"{p}:{line_no}: expected 2 fields (index,value), got {len(cells)}")
        raw_index, raw_value = cells
        try:
            index = int(raw_index)
        except ValueError:
            raise ParseError(f"{p}:{line_no}: index {raw_index!r} is not an integer") from None
        try:
            value = float(raw_value)
        except ValueError:
            raise ParseError(f"{p}:{line_no}: value {raw_value!r} is not a number") from None
        if not math.isfinite(value):
            raise ParseError(f"{p}:{line_no}: value {raw_value!r} is not finite")
        if previous is not None and index <= previous:
            raise ParseError(
                f"{p}:{line_no}: index {index} is not greater than the previous index {previous}"
            )
        previous = index
        indexes.append(index)
        values.append(value)
    if not header_seen:
        raise ParseError(f"{p}:1: header must be 'index,value', but the file is empty")
    if not values:
        raise ParseError(f"{p}: no runs after the header (the series is empty)")
    return indexes, values
