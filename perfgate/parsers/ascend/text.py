"""Read one rank of an Ascend PyTorch Profiler (torch_npu) text export into :class:`ProfileSummary`.

The input is a ``*_ascend_pt`` rank directory (found by :mod:`perfgate.parsers.ascend.discovery`)
whose ``ASCEND_PROFILER_OUTPUT/`` holds the text export (the format reference is
``shared/fixtures/ascend/FORMATS.md`` §1). What this module reads of it, all times in µs
unless the header says otherwise:

- ``step_trace_time.csv``: one row per profiled step (per device in newer versions):
  Computing, Communication(Not Overlapped), Overlapped, Free, Bubble, Preparing. The step's
  end-to-end time is Computing + Communication(Not Overlapped) + Free (what msprof-analyze's
  "Overall Summary" calls E2E). Without this file the step times come from
  ``trace_view.json`` through :mod:`perfgate.parsers.ascend.trace_view`.
- ``kernel_details.csv``: one row per device task (kernel); grouped by (Name, Accelerator
  Core) into per-step :class:`OpStat` with duration-weighted PMU metrics.
- ``op_statistic.csv``: per op type (Level1+); without it op types are aggregated from
  kernel_details unless ``Type`` is ``N/A`` (Level0).
- ``communication.json``: per step, the ``Total Op Info`` of collective and p2p ops.
- ``memory_record.csv`` (``npu_module_mem.csv`` as a fallback for reserved memory).

CSV columns are found by header name: columns may be added, missing, reordered or renamed
between torch_npu versions (``Device_id``, ``Preparing``, ``Block Dim``/``Block Num``, the
metric columns chosen by ``aic_metrics``). A missing optional input leaves its metric
``None`` and adds a note; a broken required input (no step time from any source) raises
:class:`~perfgate.errors.ParseError`. A CSV that does not end with a line end was cut short
(torch_npu writes with :mod:`csv`) and counts as broken.

The per-task tables can be gigabytes, so pandas reads them (``read_csv``'s C parser, only
the columns used, fixed dtypes) a part at a time, in bounded memory: kernel_details.csv in
blocks of whole lines, with :mod:`csv` taking over any block pandas cannot read for sure
(see :class:`_KernelScan`), l2_cache.csv in chunks of rows. The small files
(step_trace_time.csv, op_statistic.csv, the memory files) are read row by row with
:mod:`csv`, whose row-level checks (a short row is an error naming its line) pandas cannot
make. pandas is imported by the functions that read with it, so importing the parsers (as
``perfgate gate`` does through the advisor) does not load it.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np

from perfgate.errors import ParseError
from perfgate.models import (
    CommunicationSummary,
    LinkBandwidth,
    OpStat,
    ProfileSummary,
    StepBreakdown,
)
from perfgate.parsers.ascend.discovery import load_json, relative, start_rank
from perfgate.parsers.ascend.trace_view import breakdown_from_trace_view

__all__ = ["SOURCE_TEXT", "PmuTotals", "ascend_utilisation", "parse_ascend_text_rank"]

SOURCE_TEXT = "ascend_text"

_MB = 1024 * 1024
"""torch_npu's memory "MB" is MiB: every value in the fixtures' memory_record.csv
(``935.9951171875``, ...) is an exact multiple of 1/2**20, i.e. bytes / 1024 / 1024."""

_US_PER_MS = 1000.0
_NA = "N/A"
MAX_SHAPES = 3
_HCCL = "HCCL"
_TOTAL_OP = "Total Op Info"
_TABLE_ROWS = 1 << 18
"""Rows of a per-task table other than kernel_details.csv (l2_cache.csv) read by pandas
at a time."""
_HEAD_ROWS = 1024
"""kernel_details rows read ahead to tell numeric metric columns from text columns."""
_CHUNK_BYTES = 32 << 20
"""kernel_details.csv bytes (whole lines) handed to one ``pandas.read_csv`` call."""

# kernel_details columns that are not PMU metrics (all versions seen), lower-cased.
_KERNEL_STANDARD = frozenset(
    "step id|device_id|model id|task id|stream id|name|type|op state|accelerator core|"
    "start time(us)|duration(us)|wait time(us)|block dim|mix block dim|block num|"
    "mix block num|hf32 eligible|input shapes|input data types|input formats|output shapes|"
    "output data types|output formats|context id|model name|op name|op type|task type|"
    "task start time(us)|task duration(us)|task wait time(us)".split("|")
)


# --------------------------------------------------------------------------- CSV helpers
@contextmanager
def _read_errors(label: str) -> Iterator[None]:
    """CSV, decoding and OS errors as a one-line ParseError naming ``label``."""
    try:
        yield
    except csv.Error as exc:
        raise ParseError(f"{label}: malformed CSV ({exc})") from None
    except UnicodeDecodeError:
        raise ParseError(f"{label}: not UTF-8 text") from None
    except OSError as exc:
        raise ParseError(f"{label}: cannot be read ({exc.strerror or exc})") from None


@contextmanager
def _csv_rows(path: Path, label: str) -> Iterator[tuple[list[str], Iterator[list[str]]]]:
    """Open a CSV for streaming: (header, rows). Raises ParseError naming ``label``."""
    _check_complete(path, label)
    with _read_errors(label), path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        yield _header(reader, label), reader


def _header(reader: Iterator[list[str]], label: str) -> list[str]:
    header = [h.strip() for h in next(reader, [])]
    if not any(header):
        raise ParseError(f"{label}: empty file, no CSV header")
    return header


def _check_complete(path: Path, label: str) -> None:
    """Raise ParseError unless ``path`` is a non-empty file ending with a line end."""
    with _read_errors(label), path.open("rb") as raw:
        size = raw.seek(0, os.SEEK_END)
        raw.seek(max(size - 1, 0))
        last = raw.read(1)
    if size == 0:
        raise ParseError(f"{label}: empty file, no CSV header")
    # torch_npu writes with the csv module, so every complete file ends with a line end; a
    # file without one was cut short, and its last row may hold a cut number.
    if last not in (b"\n", b"\r"):
        raise ParseError(f"{label}: truncated (the last row has no line end)")


def _col(header: Sequence[str], *names: str) -> int | None:
    """Index of the first of ``names`` in ``header`` (case-insensitive), or None."""
    lowered = [h.lower() for h in header]
    return next((lowered.index(n.lower()) for n in names if n.lower() in lowered), None)


def _short_row(label: str, line: int, got: int, want: int) -> ParseError:
    return ParseError(
        f"{label}: row {line} has {got} fields, the header has {want} (truncated or malformed)"
    )


def _rows(reader: Iterator[list[str]], label: str, width: int) -> Iterator[tuple[int, list[str]]]:
    """``reader``'s rows with their line numbers, blank ones skipped; a short row is an error."""
    for line, row in enumerate(reader, start=2):
        if len(row) >= width:
            yield line, row
        elif any(row):
            raise _short_row(label, line, len(row), width)


def _cell(text: str) -> str:
    """A text cell stripped, ``N/A`` as ''."""
    text = text.strip()
    return "" if text == _NA else text


def shape_text(cell: str) -> str:
    """An Input Shapes cell without its quotes, ``N/A`` as ''. Shared by both exports."""
    return _cell(cell.replace('"', ""))


def _float_or_nan(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return math.nan


def _float(cell: str) -> float | None:
    value = _float_or_nan(cell)
    return value if math.isfinite(value) else None


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


# --------------------------------------------------------------------------- step trace
STEP_COLUMNS = {
    # StepBreakdown field: the step_trace_time.csv header that feeds it
    "compute_ms": "Computing",
    "communication_not_overlapped_ms": "Communication(Not Overlapped)",
    "communication_overlapped_ms": "Overlapped",
    "free_ms": "Free",
    "bubble_ms": "Bubble",
    "preparing_ms": "Preparing",
}
_STEP_PARTS = ("compute_ms", "communication_not_overlapped_ms", "free_ms")
"""The fields whose sum is a step's time (msprof-analyze's E2E)."""


def _read_step_trace(
    path: Path, label: str, notes: list[str]
) -> tuple[tuple[float, ...], StepBreakdown]:
    """Each step's time (ms) and the mean breakdown; adds notes on what is missing.

    A negative duration cell is an error: it is not a measurement (a broken export or a
    hand-edited file), and summing it would print a negative step time and gate on it.
    """
    with _csv_rows(path, label) as (header, reader):
        width = len(header)
        i_step = _col(header, "Step", "Step Id")
        i_dev = _col(header, "Device_id", "Device ID", "Device Id")
        i_stage = _col(header, "Stage")
        cols = {f: _col(header, name) for f, name in STEP_COLUMNS.items()}
        e2e = all(cols[f] is not None for f in _STEP_PARTS)
        if not e2e and (i_stage is None or cols["bubble_ms"] is None):
            missing = ", ".join(STEP_COLUMNS[f] for f in _STEP_PARTS if cols[f] is None)
            raise ParseError(f"{label}: no {missing} column; cannot compute the step time")
        part_cols = cast(
            list[int], [cols[f] for f in _STEP_PARTS] if e2e else [i_stage, cols["bubble_ms"]]
        )
        what = "Computing, Communication(Not Overlapped) and Free" if e2e else "Stage and Bubble"
        # (device, step, line, {field: value}, step time in µs)
        rows: list[tuple[str, int | None, int, dict[str, float | None], float]] = []
        for line, row in enumerate(reader, start=2):
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) < width:
                raise _short_row(label, line, len(row), width)
            values = {f: None if i is None else _float(row[i]) for f, i in cols.items()}
            parts = [_float(row[i]) for i in part_cols]
            if None in parts:
                raise ParseError(f"{label}: row {line}: {what} must be numbers")
            step_us = sum(cast(list[float], parts))
            for i in (*cols.values(), i_stage):
                if i is not None and (value := _float(row[i])) is not None and value < 0:
                    raise ParseError(
                        f"{label}:{line}: {header[i].strip()} is negative ({row[i].strip()} us); "
                        "step durations cannot be below zero"
                    )
            step = _float(row[i_step]) if i_step is not None else None
            device = row[i_dev].strip() if i_dev is not None else ""
            rows.append((device, None if step is None else int(step), line, values, step_us))
    if not rows:
        raise ParseError(f"{label}: no step rows (header only)")
    devices = sorted({r[0] for r in rows}, key=lambda d: (_float(d) is None, _float(d) or 0, d))
    if len(devices) > 1:
        notes.append(
            f"steps: step_trace_time.csv has {len(devices)} devices "
            f"({', '.join(devices)}); using Device_id {devices[0]}"
        )
        rows = [r for r in rows if r[0] == devices[0]]
    rows.sort(key=lambda r: (r[1] is None, r[1] or 0, r[2]))
    for f, name in STEP_COLUMNS.items():
        if cols[f] is None:
            notes.append(f"{f}: step_trace_time.csv has no {name} column")
        elif any(r[3][f] is None for r in rows):
            notes.append(f"{f}: step_trace_time.csv {name} is not a number in every row")
    if not e2e:
        notes.append("step_times_ms: step_trace_time.csv step time taken as Stage + Bubble")
    return step_breakdown([(r[4], r[3]) for r in rows])


def step_breakdown(
    rows: Sequence[tuple[float, Mapping[str, float | None]]],
) -> tuple[tuple[float, ...], StepBreakdown]:
    """Each step's time (ms) and the mean breakdown, from one (step time, {StepBreakdown
    field: value or None}) per step in µs; a field None in some step is None. Shared by
    the text and db exports."""
    step_times = tuple(us / _US_PER_MS for us, _ in rows)
    means: dict[str, float | None] = {}
    for f in STEP_COLUMNS:
        vals = [v for _, r in rows if (v := r[f]) is not None]
        means[f] = _mean(vals) / _US_PER_MS if len(vals) == len(rows) else None
    return step_times, StepBreakdown(step_ms=_mean(step_times), **means)


# --------------------------------------------------------------------------- kernels
@dataclass
class _Kernels:
    ops: tuple[OpStat, ...] = ()
    op_types: tuple[OpStat, ...] | None = None
    """Aggregated by (Type, core) without HCCL; None when Type is N/A everywhere."""
    rows: int = 0
    launches: int | None = None
    type_na: bool = False
    """Type is N/A in every row (Level0)."""
    pmu: PmuTotals | None = None
    """The PMU metric columns summed over every kernel; None without metric columns."""
    notes: list[str] = field(default_factory=list)


def _metric_columns(header: Sequence[str], head: Sequence[Sequence[str]]) -> list[tuple[int, str]]:
    """Non-standard columns that are not plainly text in the first rows (every cell that is
    neither empty nor N/A fails to parse while none parses)."""
    out: list[tuple[int, str]] = []
    for i, name in enumerate(header):
        if not name or name.lower() in _KERNEL_STANDARD:
            continue
        filled = [c for row in head if i < len(row) and (c := row[i].strip()) not in ("", _NA)]
        if not filled or any(_float(c) is not None for c in filled):
            out.append((i, name))
    return out


class _Window(io.RawIOBase):
    """The next ``size`` bytes of a binary file and on to the end of that line, as the
    file one ``pandas.read_csv`` call reads (in pieces, so the block is never copied
    whole); :meth:`block` reads it again from its start, for :mod:`csv`."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        super().__init__()
        self.handle = handle
        self.size = size
        self.start = handle.tell()
        self.left = size
        self.ended = False

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        if self.left > 0:
            data = self.handle.read(self.left if n is None or n < 0 else min(n, self.left))
            self.left = self.left - len(data) if data else 0
            if data:
                return data
        if self.ended:
            return b""
        self.ended = True
        return self.handle.readline()

    def block(self) -> bytes:
        self.handle.seek(self.start)
        return self.handle.read(self.size) + self.handle.readline()


def _decoded(lines: Iterator[bytes]) -> Iterator[str]:
    """``lines`` as text for :mod:`csv`, without the byte order mark torch_npu may write."""
    first = next(lines, b"").removeprefix(b"\xef\xbb\xbf")
    return (line.decode("utf-8") for line in chain([first], lines))


class _KernelScan:
    """Per-(Name, Accelerator Core) totals of kernel_details.csv, read a block of whole
    lines at a time.

    A block goes to one ``pandas.read_csv`` call (the C parser, with :mod:`csv`'s quoting
    rules) that reads only the columns used, by position and with fixed dtypes: Name,
    Accelerator Core, Type and Input Shapes as categories (the parser decodes each
    distinct text of the block once and hands back small integer codes), Step Id,
    Duration(us) and the metric columns as float64, ``N/A`` (communication tasks' metric
    cells) and an empty Step Id read as missing. Rows are grouped with
    ``pandas.factorize`` on the codes, so Python only touches each distinct (Name, core)
    and (group, shape) of a block, and the per-group sums are bincounts
    (:meth:`_add`).

    A block pandas cannot read for sure goes to :mod:`csv` instead, which gives the same
    sums by the same rules (a number cell that is not one counts as missing, a blank line
    is skipped, a short row is an error naming its line): other text in a number column
    (an empty cell included), a quoted field that goes on past the block, texts that
    pandas turned into numbers or booleans (it does when every distinct text of a
    category column of the block reads as one), a row that may be short. pandas fills a
    short row's missing cells with empty text, so the header's last column is read too
    and a block where it is empty goes to csv (when that column holds numbers, the empty
    cell fails the float conversion already).
    """

    def __init__(
        self,
        path: Path,
        label: str,
        header: Sequence[str],
        metric_cols: Sequence[int],
        busy_cols: Sequence[int] = (),
    ) -> None:
        self.path = path
        self.label = label
        self.width = len(header)
        self.i_name = cast(int, _col(header, "Name", "Op Name"))
        self.i_dur = cast(int, _col(header, "Duration(us)", "Task Duration(us)"))
        self.i_core = _col(header, "Accelerator Core", "Task Type")
        self.i_type = _col(header, "Type", "OP Type")
        self.i_shape = _col(header, "Input Shapes")
        self.i_step = _col(header, "Step Id")
        self.metric_cols = list(metric_cols)
        self.numeric_cols = [self.i_dur, *metric_cols]
        self.nm = len(metric_cols)
        self.i_last = self.width - 1
        texts = {self.i_name, self.i_core, self.i_type, self.i_shape}
        if self.i_last not in self.numeric_cols and self.i_last != self.i_step:
            texts.add(self.i_last)
        self.text_cols = sorted(i for i in texts if i is not None)
        numbers = [*self.numeric_cols, *([] if self.i_step is None else [self.i_step])]
        dtypes: dict[int, Any] = dict.fromkeys(self.text_cols, "category")
        dtypes.update(dict.fromkeys(numbers, np.float64))
        na: dict[int, list[str]] = dict.fromkeys(self.numeric_cols, [_NA])
        if self.i_step is not None:
            na[self.i_step] = [""]
        self.read_args: dict[str, Any] = {
            "header": None,
            "usecols": sorted(dtypes),
            "dtype": dtypes,
            "keep_default_na": False,
            "na_values": na,
            "skip_blank_lines": False,
            # low_memory (the default) tokenizes the block in pieces that stay in the CPU's
            # cache: fewer instructions without it, but more than twice the wall time.
            "engine": "c",
            "encoding": "utf-8",
        }
        # One column read two ways (never in a real header) leaves the block to csv.
        self.fast_ok = len(dtypes) == len(self.text_cols) + len(numbers)
        self.index: dict[tuple[str, str], int] = {}
        self.types: list[str] = []
        self.shapes: list[list[str]] = []
        self.calls, self.dur = np.zeros(0), np.zeros(0)
        self.msum, self.mweight, self.mcount = (np.zeros((0, self.nm)) for _ in range(3))
        self.mtotal = np.zeros(self.nm)
        """Each metric column's plain sum over every row that has a number in it."""
        self.busy_cols = list(busy_cols)
        """Positions among the metric columns of aicore_time(us) and aiv_time(us)."""
        self.busy_us = 0.0
        """Sum over rows of the larger of those two cells: the AI Core busy time."""
        self.bad_dur = 0
        self.no_step = 0

    def _group(self, name: str, core: str, op_type: str) -> int:
        g = len(self.types)
        self.index[(name, core)] = g
        self.types.append(_cell(op_type))
        self.shapes.append([])
        return g

    def _add_shape(self, g: int, cell: str) -> None:
        shapes = self.shapes[g]
        if len(shapes) < MAX_SHAPES and (shape := shape_text(cell)) and shape not in shapes:
            shapes.append(shape)

    def slow(self, records: Iterable[tuple[int, Sequence[str]]], at: int = 0) -> None:
        """Rows already split into cells by :mod:`csv`, each with its line number counted
        from byte ``at`` of the file (1 for the line that starts there)."""
        groups: list[int] = []
        numbers: list[list[float]] = []
        for row_no, cells in records:
            if len(cells) < self.width:
                if any(cells):
                    line = self._lines_before(at) + row_no
                    raise _short_row(self.label, line, len(cells), self.width)
                continue
            name = cells[self.i_name]
            core = cells[self.i_core] if self.i_core is not None else ""
            g = self.index.get((name, core))
            if g is None:
                g = self._group(name, core, cells[self.i_type] if self.i_type is not None else "")
            groups.append(g)
            numbers.append([_float_or_nan(cells[i]) for i in self.numeric_cols])
            if self.i_step is not None and not cells[self.i_step]:
                self.no_step += 1
            if self.i_shape is not None:
                self._add_shape(g, cells[self.i_shape])
        if groups:
            gid, rows = np.unique(np.array(groups, dtype=np.intp), return_inverse=True)
            table = np.array(numbers, dtype=np.float64).reshape(len(groups), -1)
            values = np.ascontiguousarray(table[:, 1:].T) if self.nm else None
            self._add(table[:, 0].copy(), values, rows.reshape(-1), gid)

    def chunk(self, window: _Window, at: int, more: Iterator[bytes]) -> None:
        """Add a block of whole lines, the one that starts at byte ``at``. Reads on from
        ``more`` when a quoted field goes on past the block."""
        if not (self.fast_ok and self._fast_chunk(window)):
            self._slow_chunk(window, at, more)

    def _fast_chunk(self, window: _Window) -> bool:
        """Add the block with one pandas call; False (and nothing added) when pandas cannot
        read it for sure (see the class)."""
        import pandas as pd

        try:
            frame = pd.read_csv(window, **self.read_args)
        except ValueError:
            # pandas' ParserError (among others a quoted field going on past the block:
            # "EOF inside string"), a number cell that is not one, undecodable text
            return False
        if not (n := len(frame)):
            return True
        codes: dict[int, np.ndarray[Any, Any]] = {}
        texts: dict[int, list[str]] = {}
        for i in self.text_cols:
            column = frame[i].array
            if column.categories.dtype.kind not in "OU":
                return False  # read as numbers or booleans: not the cells' own text
            codes[i], texts[i] = np.asarray(column.codes), column.categories.tolist()
        if self.i_last in texts and "" in texts[self.i_last]:
            return False  # may be a short row (or a blank line)
        # Group rows by (name code, core code): Python sees each distinct pair once, in
        # the order of its first row.
        names = texts[self.i_name]
        cores = texts[self.i_core] if self.i_core is not None else [""]
        ncore = max(len(cores), 1)
        key = codes[self.i_name].astype(np.int64)
        if self.i_core is not None:
            key = key * ncore + codes[self.i_core]
        labels, pairs = pd.factorize(key)
        gid = np.empty(len(pairs), dtype=np.intp)
        first: np.ndarray[Any, Any] | None = None
        for j, pair in enumerate(pairs.tolist()):
            name_no, core_no = divmod(pair, ncore)
            name, core = names[name_no], cores[core_no]
            g = self.index.get((name, core))
            if g is None:
                op_type = ""
                if self.i_type is not None:  # the Type of the group's first row
                    if first is None:
                        first = np.empty(len(pairs), dtype=np.intp)
                        first[labels[::-1]] = np.arange(n - 1, -1, -1)
                    op_type = texts[self.i_type][codes[self.i_type][first[j]]]
                g = self._group(name, core, op_type)
            gid[j] = g
        if self.i_step is not None:
            self.no_step += int(np.count_nonzero(np.isnan(frame[self.i_step].to_numpy())))
        if self.i_shape is not None:
            self._fast_shapes(labels, gid, codes[self.i_shape], texts[self.i_shape])
        dur = frame[self.i_dur].to_numpy(np.float64, copy=True)
        metrics = [frame[i].to_numpy(np.float64) for i in self.metric_cols]
        self._add(dur, np.stack(metrics) if self.nm else None, labels, gid)
        return True

    def _fast_shapes(
        self,
        labels: np.ndarray[Any, Any],
        gid: np.ndarray[Any, Any],
        shape_codes: np.ndarray[Any, Any],
        shapes: Sequence[str],
    ) -> None:
        """The first appearances of each (group, shape) among the rows of groups with
        room for another shape."""
        import pandas as pd

        room = np.array([len(self.shapes[g]) < MAX_SHAPES for g in gid.tolist()])
        if not room.any():
            return
        rows = room[labels]
        nshape = max(len(shapes), 1)
        pair = labels[rows].astype(np.int64) * nshape + shape_codes[rows]
        for value in pd.unique(pair).tolist():
            j, shape_no = divmod(value, nshape)
            self._add_shape(int(gid[j]), shapes[shape_no])

    def _slow_chunk(self, window: _Window, at: int, more: Iterator[bytes]) -> None:
        block = window.block()
        quotes = block.count(b'"')
        lines = [block]
        while quotes % 2:
            if (extra := next(more, None)) is None:
                last = self._lines_before(at) + sum(part.count(b"\n") for part in lines)
                raise ParseError(
                    f"{self.label}: a quoted field that starts by row {last} "
                    "never closes (truncated or malformed)"
                )
            lines.append(extra)
            quotes += extra.count(b'"')
        reader = csv.reader(io.StringIO(b"".join(lines).decode("utf-8"), newline=""))
        self.slow(((reader.line_num, cells) for cells in reader), at)

    def _lines_before(self, at: int) -> int:
        """The number of lines before byte ``at`` of the file: counted only for an error
        message, so that blocks read by pandas need not count their line ends."""
        count = 0
        with self.path.open("rb") as handle:
            while at > 0 and (piece := handle.read(min(at, _CHUNK_BYTES))):
                count += piece.count(b"\n")
                at -= len(piece)
        return count

    def _grow(self, n: int) -> None:
        extra = n - len(self.calls)
        if extra > 0:
            self.calls, self.dur = (np.pad(a, (0, extra)) for a in (self.calls, self.dur))
            self.msum, self.mweight, self.mcount = (
                np.pad(a, ((0, extra), (0, 0))) for a in (self.msum, self.mweight, self.mcount)
            )

    def _add(
        self,
        dur: np.ndarray[Any, Any],
        values: np.ndarray[Any, Any] | None,
        rows: np.ndarray[Any, Any],
        gid: np.ndarray[Any, Any],
    ) -> None:
        """Add rows: their Duration(us) (``dur``) and metric cells (``values``, one row per
        metric column, NaN where missing; None without metric columns), both copies this
        changes; row ``i`` belongs to group ``gid[rows[i]]``, ``gid`` holding distinct
        groups. Sums are taken over the block's own groups, then added to the totals.

        Each metric column's duration-weighted per-group sum is one ``bincount`` over its
        (contiguous) row of ``values``. In the files seen a row reports every metric or
        none (communication tasks); then each group's weight and count are one bincount
        for all columns, else one per column each.
        """
        self._grow(len(self.types))
        nu = len(gid)
        bad = ~np.isfinite(dur)
        if bad.any():
            self.bad_dur += int(bad.sum())
            dur[bad] = 0.0
        self.calls[gid] += np.bincount(rows, minlength=nu)
        self.dur[gid] += np.bincount(rows, weights=dur, minlength=nu)
        if values is None or not self.nm:
            return
        known = np.isfinite(values)
        np.copyto(values, 0.0, where=~known)

        def per_group(weights: Iterable[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
            return np.stack([np.bincount(rows, weights=w, minlength=nu) for w in weights], axis=1)

        self.msum[gid] += per_group(values * dur)
        every = known.all(axis=0)
        if (every | ~known.any(axis=0)).all():
            self.mweight[gid] += np.bincount(rows, weights=dur * every, minlength=nu)[:, None]
            self.mcount[gid] += np.bincount(rows, weights=every, minlength=nu)[:, None]
        else:
            self.mweight[gid] += per_group(known * dur)
            self.mcount[gid] += per_group(known)
        self.mtotal += values.sum(axis=1)
        if self.busy_cols:
            # A kernel keeps the AI Core busy for its Cube or its Vector time, whichever
            # is longer (a MIX kernel runs both at once); rows with neither add 0.
            self.busy_us += float(values[self.busy_cols].max(axis=0).sum())

    def metrics(self, g: int, names: Sequence[str]) -> dict[str, float]:
        return {
            name: float(self.msum[g, j] / self.mweight[g, j])
            for j, name in enumerate(names)
            if self.mcount[g, j] and self.mweight[g, j] > 0
        }


def _read_kernels(path: Path, label: str, steps: int) -> _Kernels:
    _check_complete(path, label)
    result = _Kernels()
    notes = result.notes
    with _read_errors(label), path.open("rb") as handle:
        lines = iter(handle.readline, b"")
        # The header and the first rows through csv (they decide which columns are
        # metrics), the rest in blocks of whole lines through pandas.
        reader = csv.reader(_decoded(lines))
        header = _header(reader, label)
        width = len(header)
        head = [(reader.line_num, row) for row in islice(reader, _HEAD_ROWS)]
        i_name = _col(header, "Name", "Op Name")
        i_dur = _col(header, "Duration(us)", "Task Duration(us)")
        i_core = _col(header, "Accelerator Core", "Task Type")
        if i_name is None or i_dur is None:
            missing = "Name" if i_name is None else "Duration(us)"
            notes.append(f"ops: kernel_details.csv has no {missing} column")
            for row_no, row in chain(head, ((reader.line_num, row) for row in reader)):
                if len(row) < width and any(row):
                    raise _short_row(label, row_no, len(row), width)
                result.rows += any(row)
            if i_core is None:
                notes.append("kernel_launches_per_step: kernel_details.csv has no Accelerator Core")
            return result
        metric_cols = _metric_columns(header, [row for _, row in head])
        names = [n for _, n in metric_cols]
        lowered = [n.lower() for n in names]
        busy_cols = [lowered.index(c) for c in (AIC_TIME, AIV_TIME) if c in lowered]
        scan = _KernelScan(path, label, header, [i for i, _ in metric_cols], busy_cols)
        scan.slow(head)
        end = os.fstat(handle.fileno()).st_size
        while (at := handle.tell()) < end:
            scan.chunk(_Window(handle, _CHUNK_BYTES), at, lines)
    if scan.bad_dur:
        notes.append(
            f"ops: {scan.bad_dur} kernel_details.csv rows have a non-numeric Duration(us); "
            "counted with zero time"
        )
    total_rows = int(scan.calls.sum())
    if scan.no_step and scan.no_step < total_rows:
        notes.append(
            f"ops: {scan.no_step} kernel_details.csv rows have no Step Id (outside a step); counted"
        )
    ops: list[OpStat] = []
    by_type: dict[tuple[str, str], list[float]] = {}
    hccl = 0
    for (name, raw_core), g in scan.index.items():
        core = _cell(raw_core)
        calls, dur_us, op_type = int(scan.calls[g]), float(scan.dur[g]), scan.types[g]
        shapes, metrics = tuple(scan.shapes[g]), scan.metrics(g, names)
        ops.append(npu_op(name, op_type, core, calls, dur_us, steps, shapes, metrics))
        if core == _HCCL:
            hccl += calls
        elif op_type:
            slot = by_type.setdefault((op_type, core), [0.0, 0.0])
            slot[0] += calls
            slot[1] += dur_us
    any_type = any(o.op_type for o in ops)
    any_core = any(o.core not in ("", _HCCL) for o in ops)
    result.ops = by_time(ops)
    result.rows = total_rows
    if i_core is None:
        notes.append("kernel_launches_per_step: kernel_details.csv has no Accelerator Core column")
    else:
        result.launches = total_rows - hccl
    if not any_type and total_rows:
        result.type_na = True
        notes.append("ops.op_type: kernel_details.csv Type is N/A in every row (Level0 profile)")
    if not any_core and total_rows:
        notes.append(
            "ops.core: kernel_details.csv Accelerator Core is N/A for every computing kernel "
            "(Level0 profile)"
        )
    if not metric_cols:
        notes.append(
            "ops.metrics: kernel_details.csv has no PMU metric columns "
            "(aic_metrics off or Level0 profile)"
        )
    else:
        counts, sums, weights = (a.sum(axis=0) for a in (scan.mcount, scan.msum, scan.mweight))
        reported = [j for j in range(len(names)) if counts[j]]
        result.pmu = PmuTotals(
            sums={lowered[j]: float(scan.mtotal[j]) for j in reported},
            means={lowered[j]: float(sums[j] / weights[j]) for j in reported if weights[j] > 0},
            busy_us=scan.busy_us if any(j in reported for j in busy_cols) else None,
        )
    if scan.i_shape is None:
        notes.append(
            "ops.input_shapes: kernel_details.csv has no Input Shapes column "
            "(record_shapes=False or Level0 profile)"
        )
    if any_type:
        result.op_types = op_type_stats(by_type, steps)
    return result


def npu_op(
    name: str,
    op_type: str,
    core: str,
    calls: float,
    total: float,
    steps: int,
    shapes: tuple[str, ...] = (),
    metrics: Mapping[str, float] | None = None,
    per_ms: float = _US_PER_MS,
) -> OpStat:
    """An NPU op per step from its calls and total time over the window, in units ``per_ms``
    to the ms (µs by default)."""
    time_ms = total / per_ms / steps
    return OpStat(
        name, "npu", calls / steps, time_ms, time_ms, op_type, shapes, core, metrics or {}
    )


def by_time(ops: Iterable[OpStat]) -> tuple[OpStat, ...]:
    """``ops``, the largest total time first."""
    return tuple(sorted(ops, key=lambda o: (-o.total_time_ms_per_step, o.name, o.core)))


def op_type_stats(
    totals: Mapping[tuple[str, str], Sequence[float]], steps: int, per_ms: float = _US_PER_MS
) -> tuple[OpStat, ...]:
    """Per (op type, core): (calls, total time in units ``per_ms`` to the ms) over the
    window -> OpStats per step, the largest total first."""
    return by_time(
        npu_op(t, t, c, calls, total, steps, per_ms=per_ms)
        for (t, c), (calls, total) in totals.items()
    )


# --------------------------------------------------------------------------- utilisation
AIC_TIME = "aicore_time(us)"
AIV_TIME = "aiv_time(us)"
_MAC_TIME = "aic_mac_time(us)"
_VEC_TIME = "aiv_vec_time(us)"
_PCT = 100.0


@dataclass(frozen=True)
class PmuTotals:
    """The AI Core PMU counters of a profile's kernels, summed once over all of them.

    Keys are kernel_details.csv headers, lower-cased (the db export renames its
    TASK_PMU_INFO counters to them, times in µs). ``sums``: each column's plain sum over
    the kernels that report it; ``means``: its mean weighted by kernel duration;
    ``busy_us``: the sum over kernels of max(aicore_time, aiv_time), None when neither
    column is there.
    """

    sums: Mapping[str, float]
    means: Mapping[str, float]
    busy_us: float | None


def busy_fraction(breakdown: StepBreakdown | None, notes: list[str], why: str) -> float | None:
    """Computing / step time, or None with a note saying ``why``. Shared by both exports."""
    if breakdown is not None and breakdown.compute_ms is not None and breakdown.step_ms > 0:
        return breakdown.compute_ms / breakdown.step_ms
    notes.append(f"device_busy_fraction: {why}")
    return None


def ascend_utilisation(
    pmu: PmuTotals | None,
    breakdown: StepBreakdown | None,
    step_times_ms: Sequence[float],
    source: str,
    aic_metrics: str,
) -> tuple[dict[str, float], list[str]]:
    """The utilisation an Ascend profile's kernels and step breakdown give, in %, with a
    note for each metric that cannot be computed. Shared by the text and db exports so
    the two compute one definition:

    - ``device_busy_pct``: (Computing + Communication(Not Overlapped)) / step time, from
      the step breakdown: the share of the step in which the device ran a compute task or
      a collective (the union of its task intervals, as torch_npu's Overlap Analysis
      computes it); 100 minus Free.
    - ``aicore_util_pct``: the AI Core busy time of the profiled steps over their total
      time. A kernel's busy time is its aicore_time(us) (Cube cores) or aiv_time(us)
      (Vector cores), the larger of the two for a MIX kernel, which runs both at once;
      these are per-core execution times, so a kernel that used few of the cores counts
      as fully busy (the block dim is not weighed in). Kernels on other streams may
      overlap, so on a busy multi-stream job it can exceed 100.
    - ``cube_util_pct``: Σ aic_mac_time / Σ aicore_time over all kernels, i.e. aic_mac_ratio
      weighted by each kernel's Cube time, so kernels that did not run on the Cube (time
      0) do not dilute it. Without the time columns: aic_mac_ratio, else
      cube_utilization(%), weighted by kernel duration over the kernels that report it.
    - ``vector_util_pct``: Σ aiv_vec_time / Σ aiv_time, the same way with aiv_vec_ratio.

    ``source`` names the file or table in the notes, ``aic_metrics`` the collection setting.
    """
    out: dict[str, float] = {}
    notes: list[str] = []
    if breakdown is not None and breakdown.compute_ms is not None and breakdown.step_ms > 0:
        busy = breakdown.compute_ms + (breakdown.communication_not_overlapped_ms or 0.0)
        out["device_busy_pct"] = _PCT * busy / breakdown.step_ms
    else:
        notes.append("device_busy_pct: no step breakdown with a compute time")
    total_us = sum(step_times_ms) * _US_PER_MS
    why = f"(aic_metrics={aic_metrics or 'unknown'})"
    if pmu is None:
        metrics = ("aicore_util_pct", "cube_util_pct", "vector_util_pct")
        return out, notes + [f"{m}: {source} has no AI Core PMU metrics {why}" for m in metrics]
    if pmu.busy_us is None:
        notes.append(f"aicore_util_pct: {source} has no {AIC_TIME} or {AIV_TIME} {why}")
    elif total_us <= 0:
        notes.append("aicore_util_pct: the profiled steps have zero duration")
    else:
        out["aicore_util_pct"] = _PCT * pmu.busy_us / total_us
    for metric, (part, whole), ratios, unit in (
        ("cube_util_pct", (_MAC_TIME, AIC_TIME), ("aic_mac_ratio", "cube_utilization(%)"), "Cube"),
        ("vector_util_pct", (_VEC_TIME, AIV_TIME), ("aiv_vec_ratio",), "Vector"),
    ):
        if part in pmu.sums and whole in pmu.sums:
            if pmu.sums[whole] > 0:
                out[metric] = _PCT * pmu.sums[part] / pmu.sums[whole]
            else:
                notes.append(f"{metric}: no kernel ran on the {unit} cores ({whole} is 0)")
            continue
        ratio = next((r for r in ratios if r in pmu.means), None)
        if ratio is None:
            notes.append(f"{metric}: {source} has no {part} or {ratios[0]} {why}")
        else:
            out[metric] = pmu.means[ratio] * (1.0 if ratio.endswith("(%)") else _PCT)
    return out, notes


def _read_l2_cache(
    path: Path, label: str, mean_us: Mapping[str, float], l2_setting: str
) -> tuple[float, str]:
    """l2_hit_pct from l2_cache.csv, and a note on how it was taken ("" when weighted).

    Hit Rate is a ratio (0-1); ``N/A`` cells are skipped. Each row is weighted by the mean
    duration of kernel_details.csv's kernels of its Op Name (``mean_us``): matching by
    (Stream Id, Task Id) instead would need a second pass over kernel_details.csv, and
    task ids wrap and repeat over a long window. When some row's Op Name is not among the
    kernels, the plain mean of the rows is taken instead, and the note says so.
    """
    import pandas as pd

    with _csv_rows(path, label) as (header, _):
        i_hit, i_name = _col(header, "Hit Rate"), _col(header, "Op Name")
    if i_hit is None:
        raise ParseError(f"{label}: has no Hit Rate column")
    # The two columns as text, by position, a chunk of rows at a time; a short row's
    # missing cells read as empty text, so it adds nothing, as before.
    usecols = sorted({i_hit} | ({i_name} if i_name is not None else set()))
    at_hit, at_name = usecols.index(i_hit), None if i_name is None else usecols.index(i_name)
    plain = weighted = weight = 0.0
    rows = unmatched = 0
    try:
        with pd.read_csv(
            path,
            header=0,
            index_col=False,
            usecols=usecols,
            dtype=object,
            na_filter=False,
            encoding="utf-8-sig",
            engine="c",
            chunksize=_TABLE_ROWS,
        ) as chunks:
            for frame in chunks:
                hits = pd.to_numeric(frame.iloc[:, at_hit], errors="coerce").to_numpy(np.float64)
                known = np.isfinite(hits)
                if not known.any():
                    continue
                hits = hits[known]
                if at_name is None:  # every row named ""
                    w = np.full(len(hits), mean_us.get("", 0.0))
                else:
                    names = frame.iloc[:, at_name][known].str.strip()
                    w = names.map(mean_us).to_numpy(np.float64, na_value=0.0)
                matched = w > 0
                rows += len(hits)
                plain += float(hits.sum())
                weighted += float((hits * w)[matched].sum())
                weight += float(w[matched].sum())
                unmatched += int(np.count_nonzero(~matched))
    except UnicodeDecodeError:
        raise ParseError(f"{label}: not UTF-8 text") from None
    except (ValueError, OSError) as exc:  # pandas' ParserError is a ValueError
        # on one line: pandas' parser errors span several
        raise ParseError(f"{label}: malformed CSV ({' '.join(str(exc).split())})") from None
    if not rows:
        raise ParseError(f"{label}: Hit Rate is N/A in every row (l2_cache={l2_setting})")
    if unmatched:
        return _PCT * plain / rows, (
            f"plain mean of l2_cache.csv Hit Rate: {unmatched} of {rows} rows name no "
            "kernel of kernel_details.csv to weight them by"
        )
    return _PCT * weighted / weight, ""


def _kernel_mean_us(ops: Sequence[OpStat]) -> dict[str, float]:
    """Mean duration (µs) of the kernels of each name, over every accelerator core."""
    acc: dict[str, list[float]] = {}
    for op in ops:
        slot = acc.setdefault(op.name, [0.0, 0.0])
        slot[0] += op.total_time_ms_per_step * _US_PER_MS
        slot[1] += op.calls_per_step
    return {name: t / n for name, (t, n) in acc.items() if n > 0}


# --------------------------------------------------------------------------- op statistic
def _read_op_statistic(path: Path, label: str, steps: int) -> tuple[OpStat, ...] | str:
    """Op types from op_statistic.csv, or why they could not be read."""
    with _csv_rows(path, label) as (header, reader):
        i_type = _col(header, "OP Type", "Op Type")
        i_core = _col(header, "Core Type", "Accelerator Core", "Task Type")
        i_count = _col(header, "Count")
        i_total = _col(header, "Total Time(us)")
        wanted = {"OP Type": i_type, "Count": i_count, "Total Time(us)": i_total}
        if missing := [n for n, i in wanted.items() if i is None]:
            return f"op_statistic.csv has no {', '.join(missing)} column"
        assert i_type is not None and i_count is not None and i_total is not None
        acc: dict[tuple[str, str], list[float]] = {}
        for line, row in _rows(reader, label, len(header)):
            count, total = _float(row[i_count]), _float(row[i_total])
            if count is None or total is None:
                raise ParseError(f"{label}: row {line}: Count and Total Time(us) must be numbers")
            core = _cell(row[i_core]) if i_core is not None else ""
            slot = acc.setdefault((row[i_type].strip(), core), [0.0, 0.0])
            slot[0] += count
            slot[1] += total
    return op_type_stats(acc, steps)


# --------------------------------------------------------------------------- communication
def _drop_size_distribution(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Size Distribution holds one entry per message size; nothing here reads it.
    return {k: ({} if k == "Size Distribution" else v) for k, v in pairs}


def _num(block: Mapping[str, Any], key: str) -> float:
    value = block.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{key} is not a number")
    return float(value)


_COMM_TIMES = (
    "Elapse Time(ms)|Transit Time(ms)|Wait Time(ms)|Synchronization Time(ms)|Idle Time(ms)"
).split("|")


def _read_communication(path: Path, label: str) -> CommunicationSummary:
    """The per-step communication of communication.json."""
    doc, why = load_json(path, _drop_size_distribution)
    if why is None and (not isinstance(doc, dict) or not doc):
        why = "no steps (expected an object keyed by step)"
    if why is not None:
        raise ParseError(f"{label}: {why}")
    totals = [0.0] * len(_COMM_TIMES)
    links: dict[str, list[float]] = {}
    op_count = 0
    try:
        for step_key, step in doc.items():
            if not isinstance(step, dict):
                raise ParseError(f"{label}: step {step_key!r} is not an object")
            for kind in ("collective", "p2p"):
                ops = step.get(kind) or {}
                if not isinstance(ops, dict):
                    raise ParseError(f"{label}: {step_key}.{kind} is not an object")
                op_count += sum(1 for name in ops if name != _TOTAL_OP)
                total = ops.get(_TOTAL_OP)
                if not isinstance(total, dict):
                    continue
                times = total.get("Communication Time Info") or {}
                for j, key in enumerate(_COMM_TIMES):
                    totals[j] += _num(times, key)
                bandwidth = total.get("Communication Bandwidth Info") or {}
                for link, info in bandwidth.items():
                    if not isinstance(info, dict):
                        continue
                    slot = links.setdefault(str(link), [0.0, 0.0])
                    slot[0] += _num(info, "Transit Size(MB)")
                    slot[1] += _num(info, "Transit Time(ms)")
    except (ValueError, AttributeError) as exc:
        raise ParseError(f"{label}: unexpected content ({exc})") from None
    steps = len(doc)
    elapse, transit, wait, sync, idle = (t / steps for t in totals)
    # Bandwidth(GB/s) in communication.json is Transit Size(MB) / Transit Time(ms)
    # (MB/ms = GB/s with GB = 1000 MB): 28.647232 MB / 1.81683634 ms = 15.7676, as the
    # fixture's per-op blocks say. "Total Op Info" carries no bandwidth, so it is
    # recomputed this way; msprof-analyze's "slow link" SDMA average over the 2-rank
    # fixture, 15.578 GB/s, is the mean of the two ranks' values computed so.
    link_stats = [
        LinkBandwidth(link, size / steps, time_ms / steps, size / time_ms if time_ms > 0 else 0.0)
        for link, (size, time_ms) in links.items()
        if not (size <= 0 and time_ms <= 0)  # else the link type was not used
    ]
    per_step = (op_count / steps, elapse, transit, wait, sync, idle)
    return CommunicationSummary(
        *per_step, ratio(wait, transit), ratio(sync, transit), tuple(link_stats)
    )


def ratio(part: float, other: float) -> float | None:
    """part / (part + other), the profiler's wait and synchronization ratios; None at 0."""
    return part / (part + other) if part + other > 0 else None


# --------------------------------------------------------------------------- memory
def _bytes(mb: float) -> int:
    return int(round(mb * _MB))


def _read_memory_record(
    path: Path, label: str, notes: list[str]
) -> tuple[int | None, int | None, int | None]:
    """Peak allocated, peak reserved and growth of allocated bytes; adds notes on what is
    missing."""
    with _csv_rows(path, label) as (header, reader):
        i_comp = _col(header, "Component")
        i_ts = _col(header, "Timestamp(us)")
        i_alloc = _col(header, "Total Allocated(MB)")
        i_res = _col(header, "Total Reserved(MB)")
        i_dev = _col(header, "Device Type", "Device")
        if i_alloc is None and i_res is None:
            notes.append("peak_memory_bytes: memory_record.csv has no Total Allocated(MB) column")
            return None, None, None
        # The largest (allocated, reserved) of the PTA rows and of every row (-inf: none),
        # and the PTA rows' first and last (timestamp, allocated).
        pta, every = [-math.inf, -math.inf], [-math.inf, -math.inf]
        first: tuple[float, float] | None = None
        last: tuple[float, float] | None = None
        for _, row in _rows(reader, label, len(header)):
            device = row[i_dev].strip() if i_dev is not None else ""
            if device and not device.upper().startswith("NPU"):
                continue
            alloc, res = (_float(row[i]) if i is not None else None for i in (i_alloc, i_res))
            is_pta = i_comp is not None and row[i_comp].strip() == "PTA"
            for peaks in (pta, every) if is_pta else (every,):
                peaks[0] = peaks[0] if alloc is None else max(peaks[0], alloc)
                peaks[1] = peaks[1] if res is None else max(peaks[1], res)
            ts = _float(row[i_ts]) if is_pta and i_ts is not None else None
            if ts is not None and alloc is not None:
                if first is None or ts < first[0]:
                    first = (ts, alloc)
                if last is None or ts >= last[0]:
                    last = (ts, alloc)
    growth = None
    if pta[0] > -math.inf:
        chosen = pta
        if first is None or last is None:
            notes.append("memory_growth_bytes: memory_record.csv has no Timestamp(us)")
        else:
            growth = _bytes(last[1]) - _bytes(first[1])
    else:
        chosen = every
        notes.append(
            "peak_memory_bytes: memory_record.csv has no PTA (torch allocator) rows; "
            "peak over all components"
            if every[0] > -math.inf
            else "peak_memory_bytes: memory_record.csv has no Total Allocated values"
        )
        notes.append("memory_growth_bytes: memory_record.csv has no PTA rows")
    if chosen[1] == -math.inf:
        notes.append("peak_reserved_bytes: memory_record.csv has no Total Reserved values")
    peak, reserved = (None if mb == -math.inf else _bytes(mb) for mb in chosen)
    return peak, reserved, growth


def _read_module_mem(path: Path, label: str) -> int:
    """Peak over timestamps of the sum of every component's Total Reserved(MB), in bytes."""
    with _csv_rows(path, label) as (header, reader):
        i_ts = _col(header, "Timestamp(us)")
        i_res = _col(header, "Total Reserved(MB)")
        if i_ts is None or i_res is None:
            raise ParseError(f"{label}: has no Timestamp(us) or Total Reserved(MB) column")
        per_ts: dict[str, float] = {}
        for _, row in _rows(reader, label, len(header)):
            if (value := _float(row[i_res])) is not None:
                ts = row[i_ts].strip()
                per_ts[ts] = per_ts.get(ts, 0.0) + value
    if not per_ts:
        raise ParseError(f"{label}: has no rows")
    return _bytes(max(per_ts.values()))


# --------------------------------------------------------------------------- one rank
def parse_ascend_text_rank(rank_dir: Path, out_dir: Path) -> ProfileSummary:
    """Summarise one rank's text export per profiled step.

    ``rank_dir`` is the ``*_ascend_pt`` directory and ``out_dir`` its
    ``ASCEND_PROFILER_OUTPUT``. Raises ParseError when no step time can be read (neither
    ``step_trace_time.csv`` nor ``trace_view.json``), or a required file is broken.
    """
    collection, notes, raw = start_rank(rank_dir)
    rank = int(collection["rank"]) if "rank" in collection else None

    def used(name: str) -> None:
        raw.append(relative(out_dir / name, rank_dir))

    def read(metric: str, name: str, reader: Callable[..., Any], *args: Any) -> Any:
        """``reader(path, label, *args)`` on the optional file ``name``, then in raw_files
        unless it returned why not (a str); a ParseError becomes a note and None."""
        path = out_dir / name
        try:
            got = reader(path, str(path), *args)
        except ParseError as exc:
            notes.append(f"{metric}: {name} {str(exc).removeprefix(f'{path}: ')}")
            return None
        if not isinstance(got, str):
            used(name)
        return got

    # Steps: step_trace_time.csv, else the trace view.
    step_path = out_dir / "step_trace_time.csv"
    trace_path = out_dir / "trace_view.json"
    step_times: tuple[float, ...]
    breakdown: StepBreakdown | None
    if step_path.is_file():
        step_times, breakdown = _read_step_trace(step_path, str(step_path), notes)
        used(step_path.name)
    elif not trace_path.is_file():
        raise ParseError(f"{step_path}: absent, and no trace_view.json to take step times from")
    else:
        step_times, breakdown, trace_notes = breakdown_from_trace_view(trace_path)
        if not step_times:
            raise ParseError(f"{trace_path}: no steps found (and step_trace_time.csv is absent)")
        notes.append("steps: step_trace_time.csv absent; step times from trace_view.json")
        notes.extend(trace_notes)
        used(trace_path.name)
    steps = len(step_times)

    # Kernels and op types.
    got = None
    if (out_dir / "kernel_details.csv").is_file():
        got = read("ops", "kernel_details.csv", _read_kernels, steps)
    else:
        notes.append("ops: kernel_details.csv absent (no NPU activity collected)")
    kernels_read = got is not None
    kernels: _Kernels = got or _Kernels()
    notes.extend(kernels.notes)
    op_types: tuple[OpStat, ...] = ()
    stat_why: str | None = "op_statistic.csv absent"
    if (out_dir / "op_statistic.csv").is_file():
        got = read("op_types", "op_statistic.csv", _read_op_statistic, steps)
        stat_why = got if isinstance(got, str) else None
        op_types = got if isinstance(got, tuple) else ()
    if stat_why is not None:
        if kernels.op_types is not None:
            op_types = kernels.op_types
            notes.append(f"op_types: {stat_why}; aggregated from kernel_details.csv")
        elif kernels.type_na:
            notes.append(
                f"op_types: Level0 profile has no op types (kernel_details Type is N/A; {stat_why})"
            )
        else:
            notes.append(f"op_types: {stat_why} and no op types in kernel_details.csv")

    # Communication.
    communication: CommunicationSummary | None = None
    if (out_dir / "communication.json").is_file():
        communication = read("communication", "communication.json", _read_communication)
    else:
        notes.append("communication: communication.json absent (single-card or Level0 profile)")

    # Memory.
    peak = reserved = growth = None
    if (out_dir / "memory_record.csv").is_file():
        memory = read("peak_memory_bytes", "memory_record.csv", _read_memory_record, notes)
        peak, reserved, growth = memory or (None, None, None)
    else:
        notes.append("peak_memory_bytes: memory_record.csv absent (profile_memory=False?)")
        notes.append("memory_growth_bytes: memory_record.csv absent")
        if (out_dir / "npu_module_mem.csv").is_file():
            reserved = read("peak_reserved_bytes", "npu_module_mem.csv", _read_module_mem)
        else:
            notes.append("peak_reserved_bytes: memory_record.csv and npu_module_mem.csv absent")

    busy = busy_fraction(breakdown, notes, "no compute time or zero step time")
    # Utilisation: that of the kernel_details.csv sums, plus l2_hit_pct from l2_cache.csv.
    source = "kernel_details.csv" if kernels_read else "the profile (no kernel_details.csv)"
    aic_metrics = collection.get("aic_metrics", "")
    utilisation, util_notes = ascend_utilisation(
        kernels.pmu, breakdown, step_times, source, aic_metrics
    )
    notes.extend(util_notes)
    l2_setting = collection.get("l2_cache", "unknown")
    if (out_dir / "l2_cache.csv").is_file():
        mean_us = _kernel_mean_us(kernels.ops)
        got = read("l2_hit_pct", "l2_cache.csv", _read_l2_cache, mean_us, l2_setting)
        if got is not None:
            utilisation["l2_hit_pct"], why = got
            if why:
                notes.append(f"l2_hit_pct: {why}")
    else:
        notes.append(f"l2_hit_pct: no l2_cache.csv (l2_cache={l2_setting})")
    notes += (
        "hbm_bandwidth_gb_s: the text export has no HBM bandwidth file "
        "(trace_view.json's HBM counter track is not read)",
        "device_memory_capacity_bytes: the text export does not record it",
    )

    return ProfileSummary(
        source=SOURCE_TEXT,
        steps=steps,
        ops=kernels.ops,
        breakdown=breakdown,
        peak_memory_bytes=peak,
        device_busy_fraction=busy,
        op_calls_per_step=kernels.rows / steps if kernels_read else None,
        kernel_launches_per_step=None if kernels.launches is None else kernels.launches / steps,
        rank=rank,
        raw_files=tuple(raw),
        notes=tuple(notes),
        op_types=op_types,
        step_times_ms=step_times,
        communication=communication,
        peak_reserved_bytes=reserved,
        memory_growth_bytes=growth,
        collection=collection,
        utilisation=utilisation,
    )
