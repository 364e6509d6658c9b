"""Rank-to-rank traffic of one Ascend rank: ``communication_matrix.json`` or ``analysis.db``.

The format is in ``shared/fixtures/ascend/FORMATS.md`` §1.7 and §1.9 (torch_npu's
``prof_view/_communication_parser.py``, the writer of both JSON files, and the PT-DOC
"analysis.db Data" tables, checked against the fixtures ``msinsight_pt_{text,db}_level1_2rank``);
what the op classes mean, in MindStudio Insight's user guide, "Communication Matrix". The
text export, per step::

    {"step50": {"p2p": {...}, "collective": {
        "allreduce-total@<group>": {"0-1": {"Transport Type": "HCCS", "Transit Size(MB)": ...,
                                            "Transit Time(ms)": ..., "Bandwidth(GB/s)": ...}},
        "allreduce-top1@<group>": {"0-1": {..., "Op Name": "hcom_allReduce__586_2_1"}},
        ...}}}

torch_npu groups a step's ops by (op type, group, link ``src-dst``), the op type being the
first HCCL kind found in the lower-cased op name (:data:`_OP_TYPE`). Within a group it
writes ``top1`` (the fastest op by bandwidth), ``middle``, ``bottom1``/``2``/``3`` (samples,
each with its ``Op Name``) and ``total``, the sums of size and time over *every* op of the
group: a pair is read from ``total`` alone. Without a ``total`` entry (a hand-made file) the
distinct sampled ops are summed, which may undercount, and a note says so. The db export's
``CommAnalyzerMatrix`` holds the same rows (``hccl_op_name`` ``allreduce-total`` etc.; MB, ms).

A pair (src, dst, link) sums its ``total`` rows over op types and groups, per profiled step
(the mean over the file's steps). ``bandwidth_gb_s`` is size / time (MB / ms = GB/s).

Wait: the matrix has no wait. ``communication.json`` (``CommAnalyzerTime`` in the db) gives
each op's ``Wait Time(ms)``, the time the *source* rank's op waited for its peers. An op
waits once for all of its links, so a pair's ``wait_ms`` is the summed wait of the source
rank's ops of the groups that carried the pair's traffic (each op of a group moves data on
every link of that group) and ``ops`` their number; waits of one source rank's pairs are not
additive. Without ``communication.json`` ``wait_ms`` is None and ``ops`` counts the distinct
op names the samples carry. Pure apart from reading the two files; no pandas.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfgate.models import RankPair
from perfgate.parsers.ascend.discovery import load_json

__all__ = ["MATRIX_FILE", "op_type", "rank_pairs_from_db", "rank_pairs_from_text"]

MATRIX_FILE = "communication_matrix.json"
_COMMUNICATION_FILE = "communication.json"
_KINDS = ("collective", "p2p")
# torch_npu's HCCL_PATTERN: the first of these kinds found in the lower-cased op name is the
# op type its matrix keys are named by (alternatives tried in this order at each position).
_OP_TYPE = re.compile(
    r"send|reduce|invalid|broadcast|allreduce|receive|allgather|reducescatter|scatter"
    r"|alltoall|alltoallv|alltoallvc|batchsendrecv"
)

_GroupKey = tuple[str, str, str, str]
"""(step, kind, op type, group)."""
_Row = tuple[_GroupKey, str, int, int, str, float, float, str]
"""(group, class, src, dst, link, size MB, time ms, op name): one matrix entry."""


def op_type(op_name: str) -> str:
    """The op type torch_npu names a matrix group by (``hcom_allReduce__586_0_1`` ->
    ``allreduce``)."""
    found = _OP_TYPE.search(op_name.lower())
    return found.group() if found else op_name.split("__")[0]


@dataclass
class _Acc:
    size: float = 0.0
    time: float = 0.0
    groups: set[_GroupKey] = field(default_factory=set)
    sampled_ops: set[str] = field(default_factory=set)


@dataclass
class _Ops:
    """Each (step, kind, op type, group): its ops' count and summed wait (ms)."""

    count: dict[_GroupKey, int] = field(default_factory=lambda: defaultdict(int))
    wait: dict[_GroupKey, float] = field(default_factory=lambda: defaultdict(float))


def _number(value: Any, where: str) -> float:
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError
        number = float(value)
    except (ValueError, OverflowError):
        raise ValueError(f"{where} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{where} is not a finite number")
    return number


def _link_key(key: str, where: str) -> tuple[int, int]:
    src, sep, dst = key.partition("-")
    if not sep or not src.strip().isdigit() or not dst.strip().isdigit():
        raise ValueError(f"{where}: link {key!r} is not 'src-dst'")
    return int(src), int(dst)


def _split_group(key: str) -> tuple[str, str, str]:
    """``allreduce-top1@123`` -> (``allreduce``, ``top1``, ``123``)."""
    name, _, group = key.rpartition("@")
    if not name:
        name, group = key, ""
    kind, _, cls = name.rpartition("-")
    if not kind:
        kind, cls = name, ""
    return kind, cls, group


def _load(path: Path) -> tuple[Any, str | None]:
    return load_json(path, problem=lambda exc: f"not valid JSON ({exc.msg}, line {exc.lineno})")


def _ops(rows: Iterable[tuple[Any, ...]]) -> _Ops:
    """(step, kind, op name, group, wait ms, where) rows: the ops counted and their waits
    summed per matrix group."""
    ops = _Ops()
    for step, kind, name, group, wait, where in rows:
        g = (str(step), str(kind), op_type(str(name)), str(group))
        ops.count[g] += 1
        ops.wait[g] += _number(wait, where)
    return ops


def _text_ops(doc: Any) -> Iterator[tuple[Any, ...]]:
    """The ops of communication.json as :func:`_ops` rows."""
    if not isinstance(doc, Mapping):
        raise ValueError("not an object keyed by step")
    for step, block in doc.items():
        if not isinstance(block, Mapping):
            raise ValueError(f"step {step!r} is not an object")
        for kind in _KINDS:
            ops_of_kind = block.get(kind) or {}
            if not isinstance(ops_of_kind, Mapping):
                raise ValueError(f"step {step!r} {kind} is not an object")
            for key, info in ops_of_kind.items():
                if key == "Total Op Info" or not isinstance(info, Mapping):
                    continue
                name, _, group = str(key).rpartition("@")
                times = info.get("Communication Time Info") or {}
                if not isinstance(times, Mapping):
                    raise ValueError(f"{key} Communication Time Info is not an object")
                wait = times.get("Wait Time(ms)", 0.0)
                yield str(step), kind, name or str(key), group, wait, f"{key} Wait Time(ms)"


def _pairs(
    accs: Mapping[tuple[int, int, str], _Acc], steps: int, ops: _Ops | None
) -> tuple[RankPair, ...]:
    out: list[RankPair] = []
    for (src, dst, link), acc in sorted(accs.items()):
        if ops is not None:
            n_ops = sum(ops.count.get(g, 0) for g in acc.groups)
            wait: float | None = sum(ops.wait.get(g, 0.0) for g in acc.groups) / steps
        else:
            n_ops, wait = len(acc.sampled_ops), None
        size, time = acc.size / steps, acc.time / steps
        bandwidth = size / time if time > 0 else 0.0
        out.append(RankPair(src, dst, link, size, time, bandwidth, wait, round(n_ops / steps)))
    return tuple(out)


def _sum_rows(rows: Iterable[_Row]) -> tuple[dict[tuple[int, int, str], _Acc], list[str]]:
    """Sum (group, class, src, dst, link, size, time, op name) rows per (src, dst, link): a
    group's ``total`` rows when it has them, else its distinct sampled ops (and a note)."""
    by_group: dict[_GroupKey, list[_Row]] = defaultdict(list)
    for row in rows:
        by_group[row[0]].append(row)
    accs: dict[tuple[int, int, str], _Acc] = {}
    untotalled = False
    for g, entries in by_group.items():
        if not (chosen := [e for e in entries if e[1] == "total"]):
            untotalled = True
            first: dict[tuple[int, int, str], _Row] = {}
            for e in entries:
                first.setdefault((e[2], e[3], e[7]), e)  # one op per link, whatever its classes
            chosen = list(first.values())
        for _, _, src, dst, link, size, time, _ in chosen:
            acc = accs.setdefault((src, dst, link), _Acc())
            acc.size += size
            acc.time += time
            acc.groups.add(g)
        for _, _, src, dst, link, _, _, op in entries:
            if op:
                accs.setdefault((src, dst, link), _Acc()).sampled_ops.add(op)
    if not untotalled:
        return accs, []
    return accs, [
        "rank_pairs: a matrix group has no '-total' entry; its sampled ops (top/middle/bottom) "
        "were summed, which may undercount"
    ]


def rank_pairs_from_text(out_dir: Path) -> tuple[tuple[RankPair, ...], tuple[str, ...]]:
    """The rank pairs of ``out_dir/communication_matrix.json`` and notes on what is missing.

    ``communication.json`` beside it gives the pairs' ops and waits. No matrix file means
    no pairs (a single-card or Level0 profile) and no note; a broken one is a note, not an
    error: the rest of the profile stands without the pairs.
    """
    path = Path(out_dir) / MATRIX_FILE
    if not path.is_file():
        return (), ()  # a single-card or Level0 profile: no pairs, nothing missing
    doc, why = _load(path)
    if why is not None:
        return (), (f"rank_pairs: {MATRIX_FILE} {why}",)
    rows: list[_Row] = []
    try:
        if not isinstance(doc, Mapping) or not doc:
            raise ValueError("no steps (expected an object keyed by step)")
        for step, block in doc.items():
            if not isinstance(block, Mapping):
                raise ValueError(f"step {step!r} is not an object")
            for kind in _KINDS:
                groups = block.get(kind) or {}
                if not isinstance(groups, Mapping):
                    raise ValueError(f"{step}.{kind} is not an object")
                for key, links in groups.items():
                    if not isinstance(links, Mapping):
                        raise ValueError(f"{step}.{kind}.{key} is not an object")
                    op_kind, cls, group = _split_group(str(key))
                    g = (str(step), kind, op_kind, group)
                    for link_key, info in links.items():
                        where = f"{step}.{kind}.{key}.{link_key}"
                        if not isinstance(info, Mapping):
                            raise ValueError(f"{where} is not an object")
                        src, dst = _link_key(str(link_key), where)
                        link = str(info.get("Transport Type", ""))
                        size = _number(info.get("Transit Size(MB)", 0.0), where)
                        time = _number(info.get("Transit Time(ms)", 0.0), where)
                        op = str(info.get("Op Name", ""))
                        rows.append((g, cls, src, dst, link, size, time, op))
    except ValueError as exc:
        return (), (f"rank_pairs: {MATRIX_FILE} unexpected content ({exc})",)
    accs, notes = _sum_rows(rows)
    ops: _Ops | None = None
    comm_path = Path(out_dir) / _COMMUNICATION_FILE
    if comm_path.is_file():
        comm, why = _load(comm_path)
        try:
            ops = _ops(_text_ops(comm)) if why is None else None
        except ValueError as exc:
            why = f"unexpected content ({exc})"
        if why is not None:
            notes.append(f"rank_pairs: wait_ms unknown, {_COMMUNICATION_FILE} {why}")
    elif accs:
        notes.append(f"rank_pairs: wait_ms unknown, {_COMMUNICATION_FILE} absent")
    return _pairs(accs, len(doc), ops), tuple(notes)


def rank_pairs_from_db(analysis_db: Path) -> tuple[tuple[RankPair, ...], tuple[str, ...]]:
    """The rank pairs of ``analysis.db`` (``CommAnalyzerMatrix``, with ``CommAnalyzerTime``
    for ops and waits), and notes on what is missing."""
    path = Path(analysis_db)
    if not path.is_file():
        return (), ()  # a single-card job: the db parser already notes the missing file
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        return (), (f"rank_pairs: {path.name} cannot be opened ({exc})",)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "CommAnalyzerMatrix" not in tables:
            return (), (f"rank_pairs: {path.name} has no CommAnalyzerMatrix table",)
        matrix = conn.execute(
            "SELECT step, type, hccl_op_name, group_name, src_rank, dst_rank, transport_type,"
            " transit_size, transit_time, op_name FROM CommAnalyzerMatrix"
        ).fetchall()
        times = (
            conn.execute(
                "SELECT step, type, hccl_op_name, group_name, COALESCE(wait_time, 0.0)"
                " FROM CommAnalyzerTime"
            ).fetchall()
            if "CommAnalyzerTime" in tables
            else None
        )
    except sqlite3.Error as exc:
        return (), (f"rank_pairs: {path.name} cannot be read ({exc})",)
    finally:
        conn.close()
    if not matrix:
        return (), (f"rank_pairs: {path.name} CommAnalyzerMatrix is empty",)
    notes: list[str] = []
    rows: list[_Row] = []
    steps: set[str] = set()
    try:
        for step, kind, hccl_op, group, src, dst, link, size, time, op in matrix:
            where = f"CommAnalyzerMatrix {hccl_op}@{group} {src}-{dst}"
            op_kind, _, cls = str(hccl_op).rpartition("-")
            g = (str(step), str(kind), op_kind or str(hccl_op), str(group))
            steps.add(str(step))
            src_i, dst_i = _link_key(f"{src}-{dst}", where)
            size_mb = _number(size if size is not None else 0.0, where)
            time_ms = _number(time if time is not None else 0.0, where)
            rows.append((g, cls, src_i, dst_i, str(link or ""), size_mb, time_ms, str(op or "")))
        ops: _Ops | None = None
        if times is None:
            notes.append(f"rank_pairs: wait_ms unknown, {path.name} has no CommAnalyzerTime")
        else:
            ops = _ops((*row, f"{row[2]} wait_time") for row in times)
    except ValueError as exc:
        return (), (f"rank_pairs: {path.name} unexpected content ({exc})",)
    accs, total_notes = _sum_rows(rows)
    return _pairs(accs, len(steps), ops), (*notes, *total_notes)
