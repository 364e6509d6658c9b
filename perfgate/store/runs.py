"""Runs and their history: saving runs, reading them back, the history and centres a
gate compares against, fingerprints, benchmark names, excluding a run.

One run is written in one transaction: the run row, a row per measurement (raw samples by
repeat, summary statistics, per-repeat medians), its profile, rank profiles and findings.
Reads rebuild the full :class:`~perfgate.models.RunRecord`; history reads return
:class:`~perfgate.models.RunPoint` rows, without raw samples, so a gate stays fast.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import ColumnElement, Select, Table, exists, func, insert, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from perfgate.errors import NotFoundError, StoreError
from perfgate.models import (
    BenchmarkSpec,
    CIContext,
    Direction,
    Finding,
    Fingerprint,
    GitContext,
    Measurement,
    ProfileSummary,
    RunPoint,
    RunRecord,
    Summary,
)
from perfgate.store.base import StoreBase, finite_or_none, log_event, require_aware
from perfgate.store.schema import (
    FINDING_COLUMNS,
    SUMMARY_COLUMNS,
    findings,
    measurements,
    profiles,
    rank_profiles,
    runs,
)

#: Shortest run-id prefix :meth:`SqlStore.get_run` accepts.
MIN_ID_PREFIX = 6

#: Test hook: called inside a run's write transaction after its rows are inserted.
_SAVE_HOOK: Callable[[str], None] | None = None

_IDS_PER_QUERY = 500
"""Run ids one ``IN (...)`` query names at most (well under every backend's limit)."""

CLOCK_NOTE_AFTER = timedelta(hours=1)
"""How far a run's start may be from the store's clock before saving it says so."""

#: Key of the PostgreSQL advisory lock that serialises recording runs (their sequence).
RECORD_LOCK_KEY = 0x70657266726563  # "perfrec"


class RunStore(StoreBase):
    """Runs in and out of the store, and the history read from them."""

    # -- writing -------------------------------------------------------------------------

    def save_run(self, run: RunRecord) -> tuple[str, ...]:
        """:meth:`save_runs` of one run."""
        return self.save_runs([run])

    def save_runs(
        self, batch: Sequence[RunRecord], *, supersedes: Sequence[str] = ()
    ) -> tuple[str, ...]:
        """Store runs (a paired base and head) in one transaction, all or none; runs whose id
        is already stored are skipped. The runs named in ``supersedes`` (one that ``run
        --confirm`` extended into a new one) are marked excluded in the same transaction, so
        history never holds both. Each run gets the next number of the store's recording
        sequence (what "the latest run" goes by). Returns a note for each run that starts
        more than :data:`CLOCK_NOTE_AFTER` from the store's clock (a runner's wrong clock).

        Raises:
            StoreError: a run holds values the store cannot keep (non-finite numbers, naive
                timestamps, a metric twice), or the database failed; nothing is written.
        """
        prepared = [(run, _rows_of(run)) for run in batch]
        notes: list[str] = []

        def write(conn: Connection) -> None:
            notes.clear()
            if conn.dialect.name == "postgresql":  # SQLite's BEGIN IMMEDIATE serialises already
                conn.execute(select(func.pg_advisory_xact_lock(RECORD_LOCK_KEY)))
            seq = conn.execute(select(func.coalesce(func.max(runs.c.recorded_seq), 0))).scalar_one()
            clock = _store_clock(conn)
            for run, (run_row, children) in prepared:
                if self._has_run(conn, run.id):
                    continue
                seq += 1
                conn.execute(insert(runs), [{**run_row, "recorded_seq": seq}])
                note = _clock_note(run, clock)
                if note is not None:
                    notes.append(note)
                for table, rows in children:
                    if rows:
                        conn.execute(insert(table), rows)
                if _SAVE_HOOK is not None:
                    _SAVE_HOOK(run.id)
            if supersedes:
                conn.execute(
                    update(runs).where(runs.c.id.in_(list(supersedes))).values(excluded=True)
                )

        try:
            self._transact(write)
        except SQLAlchemyError as exc:
            # Another writer may have stored the same run ids first: then they are stored once.
            if isinstance(exc, IntegrityError) and all(self.has_run(run.id) for run in batch):
                return ()
            raise self._failure(f"save run {', '.join(run.id for run in batch)}", exc) from exc
        return tuple(notes)

    # -- reading -------------------------------------------------------------------------

    def get_run(self, run_id: str, *, project: str | None = None) -> RunRecord:
        """The run with id ``run_id``, or the one run whose id starts with it (>= 6 chars),
        of ``project`` (of any project for ``None``).

        Raises:
            NotFoundError: no such run (in ``project``), or the prefix matches several.
        """
        of_project = [] if project is None else [runs.c.project == project]
        where = self._target.where
        where = where if project is None else f"project {project!r} ({where})"
        with self._read(f"read run {run_id}") as conn:
            exact = _run_select().where(runs.c.id == run_id, *of_project)
            row = conn.execute(exact).mappings().first()
            if row is None and len(run_id) >= MIN_ID_PREFIX:
                prefix = runs.c.id.startswith(run_id, autoescape=True)
                query = _run_select().where(prefix, *of_project).order_by(runs.c.id).limit(3)
                matches = conn.execute(query).mappings().all()
                if len(matches) > 1:
                    shown = ", ".join(m["id"] for m in matches[:2])
                    raise NotFoundError(
                        f"run id prefix {run_id!r} is ambiguous in {where} "
                        f"(matches {shown}{', ...' if len(matches) > 2 else ''})"
                    )
                row = matches[0] if matches else None
            if row is None:
                hint = "" if len(run_id) >= MIN_ID_PREFIX else f" (prefixes need {MIN_ID_PREFIX}+)"
                raise NotFoundError(f"no run {run_id!r} in {where}{hint}")
            return _load_runs(conn, [row])[0]

    def profiles(self, run_ids: Sequence[str]) -> dict[str, ProfileSummary]:
        """The profile summaries of the runs ``run_ids`` (exact ids, excluded runs too) that
        have one, by run id: what an attribution reads of a window's runs, not whole runs."""
        ids = list(dict.fromkeys(run_ids))
        docs: dict[str, str] = {}
        p = profiles.c
        with self._read("read profiles") as conn:
            for at in range(0, len(ids), _IDS_PER_QUERY):
                query = select(p.run_id, p.summary).where(
                    p.run_id.in_(ids[at : at + _IDS_PER_QUERY])
                )
                docs.update((str(run_id), doc) for run_id, doc in conn.execute(query).all())
        return {run_id: _profile(doc) for run_id, doc in docs.items()}

    def latest_run(self, *, project: str, benchmark: str, branch: str) -> RunRecord | None:
        """The last run of ``benchmark`` on ``branch`` that the store recorded (whatever its
        start time says: a runner's clock may be wrong) and is not excluded."""
        latest = self.latest_runs(project=project, benchmarks=[benchmark], branch=branch)
        return latest.get(benchmark)

    def latest_runs(
        self, *, project: str, benchmarks: Sequence[str], branch: str
    ) -> dict[str, RunRecord]:
        """:meth:`latest_run` of each of ``benchmarks`` that has one, in a few queries for
        all of them: what a gate reads first."""
        names = list(dict.fromkeys(benchmarks))
        found: dict[str, RunRecord] = {}
        r = runs.c
        with self._read(f"read the latest runs on {branch}") as conn:
            for at in range(0, len(names), _IDS_PER_QUERY):
                newest = [
                    select(r.id)
                    .where(*_history_conditions(project, name, branch))
                    .order_by(r.recorded_seq.desc())
                    .limit(1)
                    .scalar_subquery()
                    for name in names[at : at + _IDS_PER_QUERY]
                ]
                rows = conn.execute(_run_select().where(r.id.in_(newest))).mappings().all()
                found.update((run.benchmark, run) for run in _load_runs(conn, rows))
        return found

    def benchmarks(self, *, project: str, branch: str | None = None) -> list[str]:
        """Sorted names of the benchmarks with stored runs (excluded runs count too)."""
        conditions: list[ColumnElement[bool]] = [runs.c.project == project]
        if branch is not None:
            conditions.append(runs.c.branch == branch)
        with self._read("list benchmarks") as conn:
            return sorted(_distinct(conn, runs.c.benchmark, conditions))

    def branches(self, *, project: str) -> list[str]:
        """Sorted names of the branches with stored runs (excluded runs count too)."""
        with self._read("list branches") as conn:
            return sorted(_distinct(conn, runs.c.branch, [runs.c.project == project]))

    def history(self, *, limit: int = 30, **query: Any) -> list[RunPoint]:
        """One point per (run, metric) of the last ``limit`` eligible runs, oldest run first.

        Eligible runs (``query``, keyword arguments: :func:`_history_conditions`) are those
        of ``benchmark`` on ``branch`` (any branch if ``None``), not excluded, not in
        ``exclude_run_ids``, started strictly before ``before``, at or after ``since`` (a
        baseline reset) and with ``fingerprint_key`` when these are given.
        """
        return self.history_and_centres(limit=limit, scan=0, **query)[0]

    def recent_runs(self, *, limit: int = 30, **query: Any) -> list[tuple[str, str, datetime]]:
        """(run id, commit, start) of the last ``limit`` runs :meth:`history` would take,
        newest first, without their measurements (where a PR's window may end)."""
        if limit <= 0:
            return []
        r = runs.c
        window = _newest(_history_conditions(**query), limit, r.id, r.commit, r.started_at)
        with self._read(f"read the runs of {query['benchmark']}") as conn:
            return [(run_id, commit, at) for run_id, commit, at in conn.execute(window).all()]

    def history_and_centres(
        self, *, limit: int = 30, scan: int = 100, **query: Any
    ) -> tuple[list[RunPoint], dict[str, list[tuple[str, float]]]]:
        """In one read of two statements: :meth:`history`'s points of the last ``limit``
        eligible runs, and per metric the (run id, centre) of the last ``scan``, oldest
        first (what a change-point scan needs; repeat centres not decoded)."""
        n = max(limit, scan)
        if n <= 0:
            return [], {}
        r = runs.c
        conditions = _history_conditions(**query)
        benchmark = query["benchmark"]
        window = _newest(conditions, n, r.id, r.branch, r.commit, r.fingerprint_key, r.started_at)
        m = measurements.c
        columns = (m.run_id, m.metric, m.unit, m.direction, m.deterministic, m.centre)
        metric_columns = select(*columns, m.repeat_centres, m.centre_se).order_by(m.seq)
        points: list[RunPoint] = []
        centres: dict[str, list[tuple[str, float]]] = {}
        with self._read(f"read the history of {benchmark}") as conn:
            recent = conn.execute(window).all()[::-1]  # oldest first
            run_ids = [row[0] for row in recent]
            # The run's columns come once per run, not once per metric: a gate reads about
            # 100 runs of 4 metrics for each benchmark, and each row costs its decoding.
            by_run: dict[str, list[Any]] = {}
            ids = window.with_only_columns(r.id)
            for row in conn.execute(metric_columns.where(m.run_id.in_(ids))).all():
                by_run.setdefault(row[0], []).append(row)
            newest = set(run_ids[-limit:]) if limit > 0 else set()
            scanned = set(run_ids[-scan:]) if scan > 0 else set()
            for run_id, run_branch, commit, key, started_at in recent:
                for row in by_run.get(run_id, ()):
                    if run_id in scanned:
                        centres.setdefault(row.metric, []).append((run_id, float(row.centre)))
                    if run_id in newest:
                        points.append(
                            RunPoint(
                                run_id=run_id,
                                benchmark=benchmark,
                                metric=row.metric,
                                unit=row.unit,
                                direction=Direction(row.direction),
                                branch=run_branch,
                                commit=commit,
                                fingerprint_key=key,
                                started_at=started_at,
                                centre=float(row.centre),
                                repeat_centres=tuple(map(float, json.loads(row.repeat_centres))),
                                deterministic=bool(row.deterministic),
                                centre_se=None if row.centre_se is None else float(row.centre_se),
                            )
                        )
        return points, centres

    def fingerprints(
        self, *, project: str, benchmark: str, branch: str | None
    ) -> dict[str, Fingerprint]:
        """Each fingerprint key seen for ``benchmark`` on ``branch`` (any if ``None``), with
        the fingerprint of its most recent non-excluded run."""
        r = runs.c
        conditions = _history_conditions(project, benchmark, branch)
        found: dict[str, Fingerprint] = {}
        with self._read(f"read the fingerprints of {benchmark}") as conn:
            for key in sorted(_distinct(conn, r.fingerprint_key, conditions)):
                newest = _newest([*conditions, r.fingerprint_key == key], 1, r.fingerprint)
                found[key] = Fingerprint.from_dict(json.loads(conn.execute(newest).scalar_one()))
        return found

    # -- exclusion and counts ------------------------------------------------------------

    def exclude_run(
        self, run_id: str, *, project: str, by: str, reason: str, now: datetime
    ) -> RunRecord:
        """Mark a run of ``project`` (its id or a unique prefix) excluded from every history
        and window, recording who, when and why; returns the run as it was.

        Raises:
            NotFoundError: no such run in ``project``, or the prefix matches several.
        """
        require_aware(now, "exclude_run(now=...)")
        run = self.get_run(run_id, project=project)

        def write(conn: Connection) -> None:
            conn.execute(update(runs).where(runs.c.id == run.id).values(excluded=True))
            about = {"run_id": run.id, "benchmark": run.benchmark, "state": "excluded"}
            log_event(conn, run.project, "exclude", by, now, reason, **about)

        self._commit(f"exclude run {run.id}", write)
        return run

    def count_runs(self, *, project: str | None = None) -> int:
        conditions = [] if project is None else [runs.c.project == project]
        query = select(func.count()).select_from(runs).where(*conditions)
        with self._read("count runs") as conn:
            return int(conn.execute(query).scalar_one())


def _distinct(
    conn: Connection, column: ColumnElement[str], conditions: Sequence[ColumnElement[bool]]
) -> list[str]:
    """Distinct non-null values of ``column`` in the runs matching ``conditions``.

    A loose index scan (a recursive ``MIN(column) > previous``): one index seek per value
    instead of reading every matching run, which matters with thousands of runs per name.
    """
    found = select(func.min(column).label("value")).where(*conditions).cte("found", recursive=True)
    following = select(func.min(column)).where(*conditions, column > found.c.value)
    found = found.union_all(select(following.scalar_subquery()).where(found.c.value.is_not(None)))
    query = select(found.c.value).where(found.c.value.is_not(None))
    return [str(value) for value in conn.execute(query).scalars()]


# -- RunRecord <-> rows ------------------------------------------------------------------


def _dumps(value: Any, run_id: str, what: str) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise StoreError(f"run {run_id}: {what} holds a non-finite number") from exc
    except TypeError as exc:
        raise StoreError(f"run {run_id}: {what} cannot be stored as JSON: {exc}") from exc


def _rows_of(run: RunRecord) -> tuple[dict[str, Any], list[tuple[Table, list[dict[str, Any]]]]]:
    """Validate ``run`` and turn it into its runs row and the rows of the tables that hang off
    it, in the order they are inserted; raises StoreError before any write."""
    if not run.id:
        raise StoreError("cannot save a run without an id")
    require_aware(run.started_at, f"run {run.id}: started_at")
    require_aware(run.finished_at, f"run {run.id}: finished_at")

    run_row: dict[str, Any] = {
        "id": run.id,
        "project": run.project,
        "benchmark": run.benchmark,
        **run.git.to_dict(),  # commit, branch, base_branch, pr_number
        "fingerprint_key": run.fingerprint.key(),
        "fingerprint": _dumps(run.fingerprint.to_dict(), run.id, "the fingerprint"),
        "spec": _dumps(run.spec.to_dict(), run.id, "the benchmark spec"),
        "ci": _dumps(run.ci.to_dict(), run.id, "the CI context"),
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "excluded": run.excluded,
        "perfgate_version": run.fingerprint.perfgate_version,
        "paired_with": run.paired_with,
        "alpha": run.alpha,
    }

    seen: set[str] = set()
    rows = [_measurement_row(run.id, seq, m, seen) for seq, m in enumerate(run.measurements)]

    profile_rows: list[dict[str, Any]] = []
    if run.profile is not None:
        summary = _dumps(run.profile.to_dict(), run.id, "the profile summary")
        profile_rows.append({"run_id": run.id, "summary": summary})
    rank_rows = [
        {
            "run_id": run.id,
            "seq": seq,
            "rank": p.rank,
            "summary": _dumps(p.to_dict(), run.id, f"the profile of rank {p.rank}"),
        }
        for seq, p in enumerate(run.rank_profiles)
    ]
    finding_rows = [
        {
            "run_id": run.id,
            "seq": seq,
            **{k: doc[k] for k in FINDING_COLUMNS},
            "evidence": _dumps(doc["evidence"], run.id, f"the evidence of finding {f.rule}"),
            "impact_ms": f.impact_ms if math.isfinite(f.impact_ms or 0.0) else None,
        }
        for seq, (f, doc) in enumerate((f, f.to_dict()) for f in run.findings)
    ]
    children = [(profiles, profile_rows), (rank_profiles, rank_rows), (findings, finding_rows)]
    return run_row, [(measurements, rows), *children]


def _measurement_row(run_id: str, seq: int, m: Measurement, seen: set[str]) -> dict[str, Any]:
    where = f"run {run_id}: metric {m.metric!r}"
    if m.metric in seen:
        raise StoreError(f"{where} appears more than once")
    seen.add(m.metric)
    if not m.repeats or any(len(rep) == 0 for rep in m.repeats):
        raise StoreError(f"{where} has a repeat without samples")
    repeats = [[float(x) for x in rep] for rep in m.repeats]
    if not all(math.isfinite(x) for rep in repeats for x in rep):
        raise StoreError(f"{where} has a non-finite sample")
    summary = m.summary.to_dict()
    for name in SUMMARY_COLUMNS:
        if not math.isfinite(float(summary[name])):
            raise StoreError(f"{where} has a non-finite summary value ({name})")
    return {
        "run_id": run_id,
        "metric": m.metric,
        "seq": seq,
        "unit": m.unit,
        "direction": Direction(m.direction).value,
        "deterministic": m.deterministic,
        "n": int(summary["n"]),
        "repeat_centres": _dumps(
            list(m.summary.repeat_centres) or [statistics.median(rep) for rep in repeats],
            run_id,
            f"metric {m.metric!r}",
        ),
        "dropped": int(m.summary.dropped),
        "centre_se": finite_or_none(m.summary.centre_se, where),
        "samples": _dumps(repeats, run_id, f"metric {m.metric!r}"),
        **{name: float(summary[name]) for name in SUMMARY_COLUMNS},
    }


def _run_select() -> Select[Any]:
    """The runs row with, in the same round trip, its profile summary and whether it has
    rank profiles and findings (most runs have neither)."""
    run_id = runs.c.id
    profile = select(profiles.c.summary).where(profiles.c.run_id == run_id).scalar_subquery()
    has_ranks = exists().where(rank_profiles.c.run_id == run_id)
    has_findings = exists().where(findings.c.run_id == run_id)
    return select(
        runs,
        profile.label("_profile"),
        has_ranks.label("_has_ranks"),
        has_findings.label("_has_findings"),
    )


def _load_runs(conn: Connection, rows: Sequence[RowMapping]) -> list[RunRecord]:
    """The full runs of :func:`_run_select` rows (at most ``_IDS_PER_QUERY``), with one query
    per table for all of them, rank profiles and findings only for the runs that have some."""
    ids = [str(row["id"]) for row in rows]
    by_run = _children(conn, measurements, ids)
    ranks = _children(conn, rank_profiles, [str(r["id"]) for r in rows if r["_has_ranks"]])
    found = _children(conn, findings, [str(r["id"]) for r in rows if r["_has_findings"]])
    return [
        RunRecord(
            id=i,
            project=row["project"],
            benchmark=row["benchmark"],
            fingerprint=Fingerprint.from_dict(json.loads(row["fingerprint"])),
            git=GitContext.from_dict(dict(row)),
            ci=CIContext.from_dict(json.loads(row["ci"])),
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            measurements=tuple(_measurement_of(m) for m in by_run[i]),
            spec=BenchmarkSpec.from_dict(json.loads(row["spec"])),
            profile=None if row["_profile"] is None else _profile(row["_profile"]),
            excluded=bool(row["excluded"]),
            paired_with=row["paired_with"],
            alpha=row["alpha"],
            rank_profiles=tuple(_profile(p["summary"]) for p in ranks[i]),
            findings=tuple(
                Finding.from_dict({**f, "evidence": json.loads(f["evidence"])}) for f in found[i]
            ),
        )
        for row, i in zip(rows, ids, strict=True)
    ]


def _children(conn: Connection, table: Table, ids: list[str]) -> dict[str, list[RowMapping]]:
    """The rows of ``table`` of the runs ``ids``, by run, in their order, in one query."""
    found: dict[str, list[RowMapping]] = defaultdict(list)
    if ids:
        c = table.c
        query = select(table).where(c.run_id.in_(ids)).order_by(c.run_id, c.seq)
        for row in conn.execute(query).mappings():
            found[str(row["run_id"])].append(row)
    return found


def _profile(doc: str) -> ProfileSummary:
    return ProfileSummary.from_dict(json.loads(doc))


def _measurement_of(row: RowMapping) -> Measurement:
    return Measurement(
        metric=row["metric"],
        unit=row["unit"],
        direction=Direction(row["direction"]),
        repeats=tuple(tuple(float(x) for x in rep) for rep in json.loads(row["samples"])),
        # The columns are the summary's keys (min, max, ...), repeat centres a JSON list.
        summary=Summary.from_dict({**row, "repeat_centres": json.loads(row["repeat_centres"])}),
        deterministic=bool(row["deterministic"]),
    )


def _store_clock(conn: Connection) -> datetime | None:
    """The database's current time (UTC), or None where it cannot be read as one."""
    value = conn.execute(select(func.current_timestamp())).scalar_one()
    if isinstance(value, str):  # SQLite: 'YYYY-MM-DD HH:MM:SS' in UTC
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def _clock_note(run: RunRecord, clock: datetime | None) -> str | None:
    """A note when ``run`` starts more than :data:`CLOCK_NOTE_AFTER` from ``clock``."""
    if clock is None:
        return None
    off = run.started_at - clock
    if abs(off) <= CLOCK_NOTE_AFTER:
        return None
    hours = abs(off).total_seconds() / 3600
    far = f"{hours / 24:.0f} days" if hours >= 48 else f"{hours:.0f} hours"
    side = "ahead of" if off > timedelta(0) else "behind"
    return (
        f"run {run.id} is stamped {run.started_at:%Y-%m-%d %H:%M} UTC, {far} {side} the "
        f"store's clock ({clock:%Y-%m-%d %H:%M} UTC): check the runner's clock; perfgate "
        "takes the latest run by the order runs were recorded in, not by this time"
    )


def _newest(
    conditions: Sequence[ColumnElement[bool]], limit: int, *columns: ColumnElement[Any]
) -> Select[Any]:
    """``columns`` of the newest ``limit`` runs meeting ``conditions`` (by start, then id):
    the window every history read takes."""
    r = runs.c
    return (
        select(*columns).where(*conditions).order_by(r.started_at.desc(), r.id.desc()).limit(limit)
    )


def _history_conditions(
    project: str,
    benchmark: str,
    branch: str | None,
    before: datetime | None = None,
    exclude_run_ids: Sequence[str] = (),
    fingerprint_key: str | None = None,
    since: datetime | None = None,
) -> list[ColumnElement[bool]]:
    """The conditions on the runs a history read may take (see :meth:`RunStore.history`)."""
    for name, at in (("before", before), ("since", since)):
        if at is not None:
            require_aware(at, f"history({name}=...)")
    r = runs.c
    c: list[ColumnElement[bool]] = [r.project == project, r.benchmark == benchmark]
    c += [r.excluded.is_(False)]
    c += [] if branch is None else [r.branch == branch]
    c += [] if before is None else [r.started_at < before]
    c += [r.id.not_in(list(exclude_run_ids))] if exclude_run_ids else []
    c += [] if fingerprint_key is None else [r.fingerprint_key == fingerprint_key]
    c += [] if since is None else [r.started_at >= since]
    return c
