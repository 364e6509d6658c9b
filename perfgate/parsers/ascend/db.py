"""Read one rank of a torch_npu ``export_type="db"`` profile into a ProfileSummary.

The input is a ``*_ascend_pt`` directory. Its ``ASCEND_PROFILER_OUTPUT/`` holds
``ascend_pytorch_profiler[_{rank}].db`` and, for multi-card jobs, ``analysis.db``: SQLite
files, opened read-only. The summary means what the text export's does
(:mod:`perfgate.parsers.ascend.text`), so text and db profiles of one job compare like for
like. Tables and columns are looked up by name (``shared/fixtures/ascend/FORMATS.md``);
extra ones are ignored and missing optional ones become ``notes``.

- ``ascend_pytorch_profiler*.db``, times in **ns** integers, most names ids into
  ``STRING_IDS(id, value)``: ``TASK`` joined with ``COMPUTE_TASK_INFO`` (one row per
  compute task, the non-HCCL rows of ``kernel_details.csv``; its ``taskType`` is the
  ``Accelerator Core``; tasks without compute info, such as event records, notify waits
  and the SDMA steps of collectives, are left out as ``kernel_details.csv`` leaves them);
  ``TASK_PMU_INFO``, the ``aic_metrics`` counters, whose ns times are renamed to the
  ``kernel_details.csv`` headers in µs (``aic_total_time`` -> ``aicore_time(us)``);
  ``COMMUNICATION_OP``, the ``HCCL`` rows; ``STEP_TIME``, step windows used only when
  ``analysis.db`` has no step rows; ``MEMORY_RECORD`` in **bytes** (``memory_record.csv``
  has the same numbers in MiB); ``RANK_DEVICE_MAP``, ``NPU_INFO``, ``META_DATA``.
- ``analysis.db``: ``StepTraceTime`` in **µs** (the torch_npu docs say ms; the real files
  hold the numbers of step_trace_time.csv); ``CommAnalyzerTime`` in ms and
  ``CommAnalyzerBandwidth`` in MB, ms and GB/s, one row per (op, transport type, packet
  size) that repeats the op's totals.

``OVERLAP_ANALYSIS`` is not read: MindStudio Insight writes it when it opens a file, not
torch_npu. Without ``analysis.db`` the step breakdown is recomputed from the task intervals
the way torch_npu computes its "Overlap Analysis" track, which gives the ``StepTraceTime``
numbers exactly on the real fixture.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.errors import ParseError
from perfgate.models import CommunicationSummary, LinkBandwidth, OpStat, ProfileSummary
from perfgate.parsers.ascend.discovery import OUTPUT_DIR, relative, start_rank
from perfgate.parsers.ascend.text import (
    AIC_TIME,
    AIV_TIME,
    MAX_SHAPES,
    STEP_COLUMNS,
    PmuTotals,
    ascend_utilisation,
    busy_fraction,
    by_time,
    npu_op,
    op_type_stats,
    ratio,
    shape_text,
    step_breakdown,
)
from perfgate.parsers.torch_trace import intersect_intervals, merge_intervals

__all__ = ["SOURCE_DB", "parse_ascend_db_rank"]

SOURCE_DB = "ascend_db"

_PROFILER_DB_PATTERN = "ascend_pytorch_profiler*.db"
_ANALYSIS_DB = "analysis.db"
_TOTAL_OP = "Total Op Info"
_NS_PER_US = 1e3
_NS_PER_MS = 1e6
_BYTES_PER_GB = 1e9
_INVALID_IDS = frozenset({-1, 4294967295})
_PMU_RENAMES: Mapping[str, str] = {"aic_total_time": AIC_TIME, "aiv_total_time": AIV_TIME}

Interval = tuple[int, int]
_Step = tuple[float, dict[str, float | None]]
"""One step: its time and its StepBreakdown fields, in µs (see ``step_breakdown``)."""


def parse_ascend_db_rank(rank_dir: Path) -> ProfileSummary:
    """Summarise one rank of a torch_npu db-format profile per profiled step (``rank_dir``
    is the ``*_ascend_pt`` directory), with the meaning of the text export's summary.

    Steps are the rows of ``analysis.db`` ``StepTraceTime`` for this rank's device, else
    the ``STEP_TIME`` windows, else 1 (the whole profile). Ops are compute tasks and
    communication ops grouped by (name, accelerator core); op_types the compute tasks by
    (op type, core), as ``op_statistic.csv`` (no HCCL rows). Communication takes the
    ``Total Op Info`` rows when present, else the sum of the op rows.

    Raises ParseError (one line, naming the file) for no ``ascend_pytorch_profiler*.db``, a
    db file that SQLite cannot read ("file is not a database"), or a profiler db without
    TASK and STEP_TIME tables.
    """
    rank_dir = Path(rank_dir)
    collection, notes, raw_files = start_rank(rank_dir)

    profiler_db = _find_profiler_db(rank_dir, collection.get("rank"), notes)
    raw_files.append(relative(profiler_db, rank_dir))
    analysis_path = profiler_db.parent / _ANALYSIS_DB
    notes.extend(n for n in map(_wal_note, (profiler_db, analysis_path)) if n is not None)
    with closing(_Database(profiler_db)) as db:
        if not (db.has("TASK") or db.has("STEP_TIME")):
            raise ParseError(
                f"{profiler_db}: not an Ascend profiler database (no TASK/STEP_TIME tables)"
            )
        text = _read_strings(db)
        rank, device_id = _rank_and_device(db, collection, profiler_db)
        collection.update(_read_db_collection(db, text, device_id))
        tasks = _read_compute_tasks(db, text, device_id, notes)
        comm_ops = _read_communication_ops(db, text, notes)
        windows = _read_step_windows(db)
        peak, reserved, growth = _read_memory(db, text, device_id, notes)
        hbm = _read_hbm(db, device_id, windows, notes)
        llc_note = _LLC_NOTE if db.has("LLC", "hitRate") else ""

    step_rows: list[_Step] = []
    comm_source: list[tuple[Any, ...]] | None = None
    bandwidth_source: list[tuple[Any, ...]] = []
    if analysis_path.is_file():
        # Optional, like the text export's optional files: unreadable -> a note.
        analysis_notes: list[str] = []
        try:
            with closing(_Database(analysis_path)) as adb:
                step_rows = _read_step_trace(adb, device_id, analysis_notes)
                comm_source = _read_comm_time(adb, analysis_notes)
                bandwidth_source = _read_comm_bandwidth(adb, analysis_notes)
        except ParseError as exc:
            reason = str(exc).removeprefix(f"{analysis_path}: ")
            notes.append(f"communication: {_ANALYSIS_DB} {reason}")
            step_rows, comm_source, bandwidth_source = [], None, []
        else:
            raw_files.append(relative(analysis_path, rank_dir))
            notes.extend(analysis_notes)
            if step_rows:
                notes.append(f"breakdown: from {_ANALYSIS_DB} StepTraceTime")
    else:
        notes.append(f"communication: no {_ANALYSIS_DB} (single-card job, or not exported)")

    if not step_rows:
        step_rows = _derive_steps(windows, tasks, comm_ops, notes)
    steps = max(len(step_rows), 1)

    communication = None
    if comm_source is not None:
        communication = _summarise_communication(comm_source, bandwidth_source, steps)
        if communication is None:
            notes.append(f"communication: no communication ops in {_ANALYSIS_DB}")

    step_times, breakdown = step_breakdown(step_rows) if step_rows else ((), None)
    calls = (len(tasks) + len(comm_ops)) / steps if tasks or comm_ops else None
    launches = len(tasks) / steps if tasks or comm_ops else None
    if calls is None:
        notes.append("op_calls_per_step: no device tasks in the profile (NPU activity off?)")
        notes.append("kernel_launches_per_step: no device tasks in the profile")
    if tasks and not any(t.shapes for t in tasks):
        notes.append("input_shapes: none recorded (record_shapes=False?)")

    busy = busy_fraction(breakdown, notes, "no step time")
    notes.append("data_loading_ms: the Ascend profiler does not report data loading")
    notes.append("memory_per_step_bytes: not computed for Ascend profiles")

    aic_metrics = collection.get("aic_metrics", "")
    utilisation, util_notes = ascend_utilisation(
        _pmu_totals(tasks), breakdown, step_times, "TASK_PMU_INFO", aic_metrics
    )
    notes.extend(util_notes)
    notes.append(f"l2_hit_pct: the db export has no per-task L2 cache data{llc_note}")
    if hbm is not None:
        utilisation["hbm_bandwidth_gb_s"] = hbm
    notes.append(
        "device_memory_capacity_bytes: the db does not record it "
        "(NPU_INFO names the chip, NPU_MEM holds usage)"
    )
    type_totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for task in tasks:
        type_totals[(task.op_type, task.core)][0] += 1
        type_totals[(task.op_type, task.core)][1] += task.duration_ns

    return ProfileSummary(
        source=SOURCE_DB,
        steps=steps,
        ops=_op_stats(tasks + comm_ops, steps),
        breakdown=breakdown,
        peak_memory_bytes=peak,
        device_busy_fraction=busy,
        op_calls_per_step=calls,
        kernel_launches_per_step=launches,
        rank=rank,
        raw_files=tuple(raw_files),
        notes=tuple(notes),
        op_types=op_type_stats(type_totals, steps, _NS_PER_MS),
        step_times_ms=step_times,
        communication=communication,
        peak_reserved_bytes=reserved,
        memory_growth_bytes=growth,
        collection=collection,
        utilisation=utilisation,
    )


# --- SQLite access ------------------------------------------------------------------------
class _Database:
    """A read-only SQLite file whose tables and columns are looked up case-insensitively.

    Opened with ``mode=ro&immutable=1``: ``mode=ro`` alone still creates ``-wal`` and
    ``-shm`` files next to a WAL-mode database (the rank 0 fixture is one), and
    ``immutable`` is safe on a finished profile, which nothing writes any more. A ``-wal``
    file that is not empty holds rows not yet copied into the database; they are not read
    (see :func:`_wal_note`).
    """

    def __init__(self, path: Path) -> None:
        self.label = str(path)
        try:
            uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
            self._conn = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as exc:
            raise ParseError(f"{self.label}: cannot open as SQLite: {exc}") from None
        self._tables: dict[str, tuple[str, dict[str, str]]] = {}
        try:
            columns = self.rows(
                "SELECT m.name, p.name FROM sqlite_master m "
                "JOIN pragma_table_info(m.name) p WHERE m.type = 'table'"
            )
        except ParseError:
            self._conn.close()
            raise
        for table, column in columns:
            entry = self._tables.setdefault(str(table).lower(), (str(table), {}))
            entry[1][str(column).lower()] = str(column)

    def close(self) -> None:
        self._conn.close()

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as exc:
            raise ParseError(f"{self.label}: {exc}") from None

    def has(self, table: str, *columns: str) -> bool:
        entry = self._tables.get(table.lower())
        return entry is not None and all(c.lower() in entry[1] for c in columns)

    def table(self, table: str) -> str:
        return _quote(self._tables[table.lower()][0])

    def column(self, table: str, column: str, alias: str = "") -> str:
        """The column as an SQL expression, or NULL when the table lacks it."""
        real = self._tables[table.lower()][1].get(column.lower())
        if real is None:
            return "NULL"
        return f"{alias}.{_quote(real)}" if alias else _quote(real)

    def device_where(self, table: str, device_id: int | None, alias: str = "") -> str:
        """``WHERE`` the table's deviceId is ``device_id``; '' without either."""
        if device_id is None or not self.has(table, "deviceId"):
            return ""
        return f"WHERE {self.column(table, 'deviceId', alias)} = {int(device_id)}"

    def select(
        self, table: str, *columns: str, where: str = "", order: str = ""
    ) -> list[tuple[Any, ...]]:
        """The columns of every row (NULL for one the table lacks), ``where`` and ``order``
        (column names, or SQL) as given."""
        exprs = ", ".join(self.column(table, c) for c in columns)
        sql = f"SELECT {exprs} FROM {self.table(table)} {where}"
        return self.rows(sql + (f" ORDER BY {order}" if order else ""))


def _wal_note(path: Path) -> str | None:
    wal = path.with_name(path.name + "-wal")
    try:
        size = wal.stat().st_size
    except OSError:
        size = 0
    note = f"{path.name}: {wal.name} is not empty ({size} bytes; profiler still writing?); "
    return note + "its rows are not read" if size else None


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _read_strings(db: _Database) -> Callable[[Any], str]:
    """STRING_IDS as a function: a reference (or a plain string) as text; NULL is ''."""
    ids: dict[int, str] = {}
    if db.has("STRING_IDS", "id", "value"):
        rows = db.select("STRING_IDS", "id", "value")
        ids = {k: "" if v is None else str(v) for k, v in rows if isinstance(k, int)}

    def text(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, int) and not isinstance(value, bool):
            return ids.get(value, str(value))
        return str(value)

    return text


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# --- files, rank and collection -----------------------------------------------------------
def _find_profiler_db(rank_dir: Path, rank: str | None, notes: list[str]) -> Path:
    output = rank_dir / OUTPUT_DIR
    candidates = sorted(p for p in output.glob(_PROFILER_DB_PATTERN) if p.is_file())
    if not candidates:
        raise ParseError(f"{output}: no {_PROFILER_DB_PATTERN} (not a db-format profile?)")
    named = [p for p in candidates if p.name == f"ascend_pytorch_profiler_{rank}.db"]
    if len(candidates) > 1 and not named:
        notes.append(
            f"profiler db: {len(candidates)} ascend_pytorch_profiler*.db files, "
            f"read {candidates[0].name}"
        )
    return (named or candidates)[0]


def _valid_id(value: Any) -> int | None:
    return value if isinstance(value, int) and value not in _INVALID_IDS else None


def _rank_and_device(
    db: _Database, collection: Mapping[str, str], path: Path
) -> tuple[int | None, int | None]:
    device_id: int | None = None
    map_rank: int | None = None
    if db.has("RANK_DEVICE_MAP", "deviceId"):
        rows = db.select("RANK_DEVICE_MAP", "rankId", "deviceId")
        if len(rows) == 1:
            map_rank, device_id = (_valid_id(v) for v in rows[0])
    text = collection.get("rank", "")
    if text.lstrip("-").isdigit() and int(text) >= 0:
        return int(text), device_id
    if map_rank is None and (match := re.search(r"_(\d+)\.db$", path.name)):
        map_rank = int(match.group(1))
    return map_rank, device_id


def _read_db_collection(
    db: _Database, text: Callable[[Any], str], device_id: int | None
) -> dict[str, str]:
    out: dict[str, str] = {}
    if db.has("NPU_INFO", "name"):
        rows = db.select("NPU_INFO", "id", "name")
        mine = [name for ident, name in rows if name and ident == device_id]
        if names := mine or [name for _, name in rows if name]:
            out["device"] = text(names[0])
    if db.has("META_DATA", "name", "value"):
        for name, value in db.select("META_DATA", "name", "value"):
            if name == "SCHEMA_VERSION" and value:
                out["db_schema_version"] = str(value)
    return out


# --- tasks --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Task:
    name: str
    op_type: str
    core: str
    start_ns: int
    end_ns: int
    shapes: str = ""
    metrics: Mapping[str, float] | None = None

    @property
    def duration_ns(self) -> int:
        return max(self.end_ns - self.start_ns, 0)


def _read_compute_tasks(
    db: _Database, text: Callable[[Any], str], device_id: int | None, notes: list[str]
) -> list[_Task]:
    if not db.has("TASK", "startNs", "endNs", "globalTaskId"):
        notes.append("ops: no TASK table (NPU activity not collected?)")
        return []
    if not db.has("COMPUTE_TASK_INFO", "globalTaskId", "name"):
        notes.append("ops: no COMPUTE_TASK_INFO table, compute tasks cannot be named")
        return []
    columns = ("name", "opType", "taskType", "inputShapes")
    info = ", ".join(db.column("COMPUTE_TASK_INFO", c, "c") for c in columns)
    rows = db.rows(
        f"SELECT t.startNs, t.endNs, t.globalTaskId, {info} "
        f"FROM {db.table('TASK')} t JOIN {db.table('COMPUTE_TASK_INFO')} c "
        f"ON c.globalTaskId = t.globalTaskId {db.device_where('TASK', device_id, 't')} "
        "ORDER BY t.startNs"
    )
    pmu = _read_pmu(db, text, notes) if rows else {}
    return [
        _Task(
            text(name),
            text(op_type),
            text(core),
            start,
            end,
            shape_text(text(shapes)),
            pmu.get(task_id),
        )
        for start, end, task_id, name, op_type, core, shapes in rows
        if isinstance(start, int) and isinstance(end, int)
    ]


def _pmu_name(name: str) -> tuple[str, float]:
    """The kernel_details.csv header for a TASK_PMU_INFO counter, and the factor to it."""
    if name in _PMU_RENAMES:
        return _PMU_RENAMES[name], 1 / _NS_PER_US
    if name.endswith("_time"):
        return f"{name}(us)", 1 / _NS_PER_US
    return name, 1.0


def _read_pmu(
    db: _Database, text: Callable[[Any], str], notes: list[str]
) -> dict[Any, dict[str, float]]:
    if not db.has("TASK_PMU_INFO", "globalTaskId", "name", "value"):
        notes.append("op metrics: no TASK_PMU_INFO table (aic_metrics not collected?)")
        return {}
    names: dict[Any, tuple[str, float]] = {}
    out: dict[Any, dict[str, float]] = defaultdict(dict)
    for task_id, name, value in db.select("TASK_PMU_INFO", "globalTaskId", "name", "value"):
        if (number := _number(value)) is None:
            continue
        if name not in names:
            names[name] = _pmu_name(text(name))
        metric, factor = names[name]
        out[task_id][metric] = number * factor
    return dict(out)


def _read_communication_ops(
    db: _Database, text: Callable[[Any], str], notes: list[str]
) -> list[_Task]:
    if not db.has("COMMUNICATION_OP", "opName", "startNs", "endNs"):
        notes.append("ops: no COMMUNICATION_OP table, no HCCL ops")
        return []
    rows = db.select("COMMUNICATION_OP", "opName", "startNs", "endNs", "opType", order="startNs")
    return [
        _Task(text(name), text(op_type), "HCCL", start, end)
        for name, start, end, op_type in rows
        if isinstance(start, int) and isinstance(end, int)
    ]


# --- steps --------------------------------------------------------------------------------
def _read_step_windows(db: _Database) -> list[Interval]:
    if not db.has("STEP_TIME", "startNs", "endNs"):
        return []
    rows = db.select("STEP_TIME", "startNs", "endNs", order="startNs")
    return [(s, e) for s, e in rows if isinstance(s, int) and isinstance(e, int) and e >= s]


def _step_key(value: Any) -> tuple[int, float, str]:
    text = "" if value is None else str(value)
    digits = re.sub(r"\D", "", text)
    return (0, float(digits), text) if digits else (1, 0.0, text)


def _step(fields: tuple[float, float, float | None, float, float | None, float | None]) -> _Step:
    """(computing, not overlapped, overlapped, free, bubble, preparing) in µs as a step."""
    computing, not_overlapped, _, free, _, _ = fields
    return computing + not_overlapped + free, dict(zip(STEP_COLUMNS, fields, strict=True))


def _read_step_trace(db: _Database, device_id: int | None, notes: list[str]) -> list[_Step]:
    if not db.has("StepTraceTime", "computing", "communication_not_overlapped", "free"):
        notes.append(f"breakdown: no StepTraceTime table in {_ANALYSIS_DB}")
        return []
    rows = db.select(
        "StepTraceTime",
        *("deviceId", "step", "computing", "communication_not_overlapped", "overlapped"),
        *("communication", "free", "bubble", "preparing"),
    )
    # deviceId is -1 when the profiler only knew "NPU"; then every row is this device's.
    if device_id is not None and any((d := _number(r[0])) is not None and d >= 0 for r in rows):
        rows = [r for r in rows if _number(r[0]) == device_id]
    out: list[_Step] = []
    for row in sorted(rows, key=lambda r: _step_key(r[1])):
        computing, not_overlapped, overlapped, communication, free, bubble, preparing = (
            _number(v) for v in row[2:]
        )
        if computing is None or not_overlapped is None or free is None:
            continue
        if overlapped is None and communication is not None:
            overlapped = communication - not_overlapped
        out.append(_step((computing, not_overlapped, overlapped, free, bubble, preparing)))
    if not out:
        notes.append(f"breakdown: no StepTraceTime rows for this device in {_ANALYSIS_DB}")
    return out


def _length(intervals: Sequence[tuple[float, float]]) -> float:
    return sum(end - start for start, end in intervals)


def _derive_steps(
    windows: list[Interval], tasks: list[_Task], comm_ops: list[_Task], notes: list[str]
) -> list[_Step]:
    """StepTraceTime recomputed from task intervals (torch_npu's Overlap Analysis).

    Computing is the union of compute tasks, Communication the union of communication ops,
    Communication(Not Overlapped) the part of it outside computing, Free the span from the
    first to the last task minus both, Bubble the union of ``hcom_receive*`` ops, Preparing
    the step start to the first compute task. A task belongs to the step it starts in.
    """
    everything = tasks + comm_ops
    if not everything:
        notes.append("breakdown: no analysis.db and no device tasks to derive it from")
        return []
    if windows:
        notes.append(
            "breakdown: recomputed from TASK and COMMUNICATION_OP intervals "
            f"in STEP_TIME windows (no {_ANALYSIS_DB} StepTraceTime)"
        )
    else:
        windows = [(min(t.start_ns for t in everything), max(t.end_ns for t in everything))]
        notes.append(
            "breakdown: no StepTraceTime or STEP_TIME; the whole profile is one step, "
            "recomputed from TASK and COMMUNICATION_OP intervals"
        )
    out: list[_Step] = []
    for start, end in windows:

        def clip(items: Iterable[_Task], begin: int = start, stop: int = end) -> list[Interval]:
            return [(t.start_ns, min(t.end_ns, stop)) for t in items if begin <= t.start_ns < stop]

        compute = merge_intervals(clip(tasks))
        comm = merge_intervals(clip(comm_ops))
        receive = merge_intervals(clip(t for t in comm_ops if t.name.startswith("hcom_receive")))
        busy = merge_intervals(compute + comm)
        not_overlapped = _length(comm) - _length(intersect_intervals(comm, compute))
        free = (busy[-1][1] - busy[0][0] - _length(busy)) if busy else 0
        lengths = (_length(compute), not_overlapped, _length(comm) - not_overlapped, free)
        computing, cno, overlapped, free_us = (v / _NS_PER_US for v in lengths)
        preparing = (compute[0][0] - start) / _NS_PER_US if compute else None
        bubble = _length(receive) / _NS_PER_US
        out.append(_step((computing, cno, overlapped, free_us, bubble, preparing)))
    return out


# --- ops ----------------------------------------------------------------------------------
def _op_stats(tasks: list[_Task], steps: int) -> tuple[OpStat, ...]:
    """Tasks grouped by (name, core); ``metrics`` each PMU counter's duration-weighted
    mean (the plain mean where the group's duration is 0); the first :data:`MAX_SHAPES`
    distinct input shapes in time order, as kernel_details.csv lists them."""
    groups: dict[tuple[str, str], list[_Task]] = defaultdict(list)
    for task in tasks:
        groups[(task.name, task.core)].append(task)
    ops = []
    for (name, core), members in groups.items():
        sums: dict[str, float] = defaultdict(float)
        weights: dict[str, float] = defaultdict(float)
        plain: dict[str, list[float]] = defaultdict(list)
        shapes: list[str] = []
        for task in members:
            for metric, value in (task.metrics or {}).items():
                sums[metric] += value * task.duration_ns
                weights[metric] += task.duration_ns
                plain[metric].append(value)
            if task.shapes and task.shapes not in shapes and len(shapes) < MAX_SHAPES:
                shapes.append(task.shapes)
        op_type = Counter(t.op_type for t in members).most_common(1)[0][0]
        total = sum(t.duration_ns for t in members)
        metrics = {
            m: sums[m] / weights[m] if weights[m] > 0 else sum(vs) / len(vs)
            for m, vs in sorted(plain.items())
        }
        ops.append(
            npu_op(
                name, op_type, core, len(members), total, steps, tuple(shapes), metrics, _NS_PER_MS
            )
        )
    return by_time(ops)


# --- utilisation --------------------------------------------------------------------------
def _pmu_totals(tasks: Sequence[_Task]) -> PmuTotals | None:
    """The compute tasks' TASK_PMU_INFO counters summed the way the text export sums
    kernel_details.csv (see :class:`~perfgate.parsers.ascend.text.PmuTotals`)."""
    sums: dict[str, float] = defaultdict(float)
    weighted: dict[str, float] = defaultdict(float)
    weights: dict[str, float] = defaultdict(float)
    busy: float | None = None
    for task in tasks:
        if not task.metrics:
            continue
        duration_us = task.duration_ns / _NS_PER_US
        for name, value in task.metrics.items():
            key = name.lower()
            sums[key] += value
            weighted[key] += value * duration_us
            weights[key] += duration_us
        if times := [task.metrics[k] for k in (AIC_TIME, AIV_TIME) if k in task.metrics]:
            busy = (busy or 0.0) + max(times)
    if not sums:
        return None
    means = {k: weighted[k] / weights[k] for k in weighted if weights[k] > 0}
    return PmuTotals(sums=dict(sums), means=means, busy_us=busy)


def _read_hbm(
    db: _Database, device_id: int | None, windows: Sequence[Interval], notes: list[str]
) -> float | None:
    """hbm_bandwidth_gb_s from the HBM table: the mean over sample times of the read + write
    bandwidth summed over the HBM units (``bandwidth`` is B/s per unit, ``type`` read or
    write), in GB/s (10^9 B/s). Only samples inside the STEP_TIME windows count, when any
    fall there; else every sample, with a note."""
    if not db.has("HBM", "timestampNs", "bandwidth"):
        notes.append("hbm_bandwidth_gb_s: no HBM table (sys_hardware_mem off?)")
        return None
    rows = db.rows(
        f"SELECT timestampNs, SUM(bandwidth) FROM {db.table('HBM')} "
        f"{db.device_where('HBM', device_id)} GROUP BY timestampNs ORDER BY timestampNs"
    )
    samples = [(t, b) for t, b in rows if isinstance(t, int) and _number(b) is not None]
    if not samples:
        notes.append("hbm_bandwidth_gb_s: the HBM table has no samples")
        return None
    inside = [b for t, b in samples if any(lo <= t <= hi for lo, hi in windows)]
    if not inside:
        inside = [b for _, b in samples]
        if windows:
            notes.append(
                "hbm_bandwidth_gb_s: no HBM sample inside the profiled steps; "
                "mean over every sample"
            )
    return sum(float(b) for b in inside) / len(inside) / _BYTES_PER_GB


_LLC_NOTE = (
    " (its LLC table is the L3 cache: a sampled hit rate per LLC unit, not the L2, "
    "so it is not used)"
)


# --- communication ------------------------------------------------------------------------
def _read_comm_time(db: _Database, notes: list[str]) -> list[tuple[Any, ...]] | None:
    """(op, elapse, transit, wait, synchronization, idle) rows, times in ms (0 for NULL)."""
    if not db.has("CommAnalyzerTime", "hccl_op_name", "elapse_time", "transit_time", "wait_time"):
        notes.append(f"communication: no CommAnalyzerTime table in {_ANALYSIS_DB}")
        return None
    rows = db.select(
        "CommAnalyzerTime",
        *("hccl_op_name", "elapse_time", "transit_time", "wait_time"),
        *("synchronization_time", "idle_time"),
    )
    return [("" if op is None else str(op), *(_number(v) or 0.0 for v in t)) for op, *t in rows]


def _read_comm_bandwidth(db: _Database, notes: list[str]) -> list[tuple[Any, ...]]:
    """(op, link, size MB, time ms, bandwidth GB/s or None) rows, one per (op, link)."""
    needed = ("hccl_op_name", "transport_type", "transit_size", "transit_time")
    if not db.has("CommAnalyzerBandwidth", *needed):
        notes.append(f"communication links: no CommAnalyzerBandwidth table in {_ANALYSIS_DB}")
        return []
    rows = db.select("CommAnalyzerBandwidth", "step", "type", "group_name", *needed, "bandwidth")
    # One row per (op, link, packet size); the op's totals repeat on each of them.
    seen: set[tuple[Any, ...]] = set()
    out: list[tuple[Any, ...]] = []
    for *key, size, time, bandwidth in rows:
        if tuple(key) in seen:
            continue
        seen.add(tuple(key))
        op, link = ("" if v is None else str(v) for v in key[3:])
        out.append((op, link, _number(size) or 0.0, _number(time) or 0.0, _number(bandwidth)))
    return out


def _summarise_communication(
    time_rows: list[tuple[Any, ...]], bandwidth_rows: list[tuple[Any, ...]], steps: int
) -> CommunicationSummary | None:
    op_rows = [r for r in time_rows if r[0] != _TOTAL_OP]
    total_rows = [r for r in time_rows if r[0] == _TOTAL_OP] or op_rows
    if not total_rows:
        return None
    elapse, transit, wait, sync, idle = (sum(r[i] for r in total_rows) for i in range(1, 6))
    by_link: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in [r for r in bandwidth_rows if r[0] == _TOTAL_OP] or bandwidth_rows:
        by_link[row[1]].append(row)
    links = []
    for link, rows in sorted(by_link.items()):
        size, time = (sum(r[i] for r in rows) for i in (2, 3))
        if size == 0 and time == 0:
            continue
        # the one row's own bandwidth, else MB/ms == GB/s
        one = rows[0][4] if len(rows) == 1 else None
        bandwidth = one if one is not None else size / time if time > 0 else 0.0
        links.append(LinkBandwidth(link, size / steps, time / steps, bandwidth))
    return CommunicationSummary(
        ops_per_step=len(op_rows) / steps,
        elapse_ms=elapse / steps,
        transit_ms=transit / steps,
        wait_ms=wait / steps,
        synchronization_ms=sync / steps,
        idle_ms=idle / steps,
        wait_ratio=ratio(wait, transit),
        synchronization_ratio=ratio(sync, transit),
        links=tuple(links),
    )


# --- memory -------------------------------------------------------------------------------
def _read_memory(
    db: _Database, text: Callable[[Any], str], device_id: int | None, notes: list[str]
) -> tuple[int | None, int | None, int | None]:
    """Peak allocated, peak reserved and growth of allocated bytes, from the PTA (torch
    allocator) records of MEMORY_RECORD in time order."""
    if not db.has("MEMORY_RECORD", "component", "totalAllocated"):
        notes.append("peak_memory_bytes: no MEMORY_RECORD table (profile_memory=False?)")
        notes.append("peak_reserved_bytes: no MEMORY_RECORD table")
        notes.append("memory_growth_bytes: no MEMORY_RECORD table")
        return None, None, None
    rows = db.select(
        "MEMORY_RECORD",
        *("component", "totalAllocated", "totalReserved"),
        where=db.device_where("MEMORY_RECORD", device_id),
        order=f"{db.column('MEMORY_RECORD', 'timestamp')}, rowid",
    )
    pta = [r for r in rows if text(r[0]) == "PTA"]
    chosen = pta or rows
    allocated = [int(v) for v in (_number(r[1]) for r in chosen) if v is not None]
    reserved = [int(v) for v in (_number(r[2]) for r in chosen) if v is not None]
    growth: int | None = None
    if not pta:
        if rows:
            notes.append(
                "peak_memory_bytes: MEMORY_RECORD has no PTA (torch allocator) rows; "
                "peak over all components"
            )
        notes.append("memory_growth_bytes: MEMORY_RECORD has no PTA rows")
    elif allocated:
        growth = allocated[-1] - allocated[0]
    if not allocated:
        notes.append("peak_memory_bytes: MEMORY_RECORD has no totalAllocated values")
    if not reserved:
        notes.append("peak_reserved_bytes: MEMORY_RECORD has no totalReserved values")
    return max(allocated, default=None), max(reserved, default=None), growth
