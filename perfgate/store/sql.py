"""SqlStore: runs in and out of a SQLite or PostgreSQL database (SQLAlchemy Core).

One run is written in one transaction: the run row, one row per measurement (raw samples
grouped by repeat, summary statistics and per-repeat medians) and the profile summary.
Reads rebuild the full :class:`~perfgate.models.RunRecord`; the history query returns
:class:`~perfgate.models.RunPoint` rows only, without raw samples, so that a gate over many
benchmarks stays fast.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Engine, delete, func, insert, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from perfgate.errors import StoreError
from perfgate.models import (
    Alert,
    BaselineReset,
    BenchmarkSpec,
    CIContext,
    Direction,
    Finding,
    Fingerprint,
    GitContext,
    Measurement,
    NewAlert,
    ProfileSummary,
    PrunePlan,
    RunPoint,
    RunRecord,
    Summary,
    TriageEvent,
    Verdict,
)
from perfgate.store.connect import (
    WRITE_OPTION,
    Target,
    enable_wal,
    first_line,
    make_target,
    open_failure,
    sqlite_error_code,
)
from perfgate.store.migrate import (
    POSTGRES_LOCK_KEY,
    MigrationError,
    current_revision,
    head_revision,
    is_known,
    needs_upgrade,
    newer_schema_error,
    upgrade,
)
from perfgate.store.schema import (
    ALERT_STATES,
    OPEN_ALERT_STATES,
    alerts,
    baseline_resets,
    findings,
    measurements,
    profiles,
    rank_profiles,
    runs,
    triage_events,
)

#: Shortest run-id prefix :meth:`SqlStore.get_run` accepts.
MIN_ID_PREFIX = 6

#: Write transactions tried at most this often when the database is locked or busy.
WRITE_ATTEMPTS = 5
#: First retry waits about this long; each later one twice as long (with jitter).
RETRY_BACKOFF_S = 0.05

_T = TypeVar("_T")

#: Test hook: called inside a run's write transaction after its rows are inserted (tests
#: use it to stop a recorder mid-transaction); None in normal use.
_SAVE_HOOK: Callable[[str], None] | None = None


def _transient(exc: OperationalError) -> bool:
    """Whether a failed write may succeed when simply tried again."""
    code = sqlite_error_code(exc)
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return True
    text_ = first_line(exc).lower()
    if "database is locked" in text_ or "database table is locked" in text_:
        return True
    sqlstate = getattr(exc.orig, "sqlstate", None)
    return sqlstate in ("40001", "40P01")  # serialization failure, deadlock detected


_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6

_SUMMARY_COLUMNS = ("centre", "median", "mean", "mad", "p10", "p90", "p99", "min", "max")


def open_store(url: str, *, create: bool = True) -> SqlStore:
    """Open the store at ``url``, creating or upgrading its schema as needed.

    Args:
        url: ``sqlite:///PATH`` (parent directories are created) or ``postgresql://...``
            (``postgresql+psycopg://`` is used for plain ``postgresql://``).
        create: with False, a SQLite file that does not exist is a UsageError instead of
            a new store (for commands that only read).

    Raises:
        StoreError: the database cannot be reached or read, is not a perfgate store, or has
            a schema newer than this perfgate. Such a database is left as it was.
    """
    target = make_target(url, create=create)
    try:
        with target.engine.connect() as conn:
            # Look first without taking any lock; most opens find a store at head.
            with conn.begin():
                pending = needs_upgrade(conn, target.where)
            if pending:
                # Then again under the write lock, as a concurrent open may have migrated.
                conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    if target.is_postgres:
                        conn.execute(select(func.pg_advisory_xact_lock(POSTGRES_LOCK_KEY)))
                    if needs_upgrade(conn, target.where):
                        try:
                            upgrade(conn)
                        except SQLAlchemyError as exc:
                            raise MigrationError(first_line(exc)) from exc
            enable_wal(target, conn)
    except StoreError:
        target.engine.dispose()
        raise
    except SQLAlchemyError as exc:
        target.engine.dispose()
        raise open_failure(target, exc) from exc
    except MigrationError as exc:
        target.engine.dispose()
        raise StoreError(
            f"cannot migrate store {target.where}: {first_line(exc)} "
            "(rolled back: the database is as it was)"
        ) from exc
    return SqlStore(target)


@dataclass(frozen=True)
class StoreStatus:
    """What ``perfgate db status`` reports; reading it never changes the database."""

    url: str
    engine: str
    revision: str | None
    head: str
    state: str  # "empty", "behind", "current" or "newer"
    runs: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "engine": self.engine,
            "revision": self.revision,
            "head": self.head,
            "state": self.state,
            "runs": self.runs,
        }


def store_status(url: str) -> StoreStatus:
    """The schema revision, head, engine and run count of the database at ``url``, read
    without creating, upgrading or switching anything (not even SQLite's WAL mode).

    Raises:
        StoreError: the database cannot be reached or is not a perfgate store.
    """
    target = make_target(url)
    if target.sqlite is not None and target.sqlite.path is not None:
        if not target.sqlite.path.exists():
            target.engine.dispose()
            return StoreStatus(target.url, "sqlite", None, head_revision(), "empty", None)
    try:
        with target.engine.connect() as conn, conn.begin():
            revision = current_revision(conn, target.where)
            runs_count: int | None = None
            if revision is None:
                state = "empty"
            elif not is_known(revision):
                state = "newer"
            else:
                state = "current" if revision == head_revision() else "behind"
                runs_count = int(conn.execute(select(func.count()).select_from(runs)).scalar_one())
    except SQLAlchemyError as exc:
        raise open_failure(target, exc) from exc
    finally:
        target.engine.dispose()
    return StoreStatus(
        target.url, target.engine.dialect.name, revision, head_revision(), state, runs_count
    )


def upgrade_store(url: str) -> tuple[StoreStatus, StoreStatus]:
    """Bring the store at ``url`` to head (creating it when empty); its status before and
    after. A store of a newer schema is refused untouched.

    Raises:
        StoreError: as :func:`open_store`.
    """
    before = store_status(url)
    if before.state == "newer":
        assert before.revision is not None
        raise newer_schema_error(before.url, before.revision)
    open_store(url).close()
    return before, store_status(url)


class SqlStore:
    """The baseline store. Build it with :func:`open_store`; close it when done."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._engine = target.engine
        self.url: str = target.url  # password masked

    def __repr__(self) -> str:
        return f"SqlStore({self.url!r})"

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for exports and tests; the schema is the store's own)."""
        return self._engine

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._engine.dispose()

    # -- writing -------------------------------------------------------------------------

    def save_run(self, run: RunRecord) -> None:
        """Store ``run`` with its measurements and profile, all or nothing.

        Saving a run whose id is already stored does nothing.

        Raises:
            StoreError: the run holds values the store cannot keep (non-finite numbers,
                naive timestamps, a metric twice), or the database failed; nothing is written.
        """
        self.save_runs([run])

    def save_runs(self, batch: Sequence[RunRecord], *, supersedes: Sequence[str] = ()) -> None:
        """Store several runs in one transaction (a paired base and head): all or none.

        Runs whose id is already stored are skipped. The runs named in ``supersedes`` (a run
        that ``run --confirm`` extended into a new one) are marked excluded in the same
        transaction, so history never holds both.
        """
        prepared = [(run, _rows_of(run)) for run in batch]
        ids = ", ".join(run.id for run in batch)

        def write(conn: Connection) -> None:
            for run, rows in prepared:
                if self._has_run(conn, run.id):
                    continue
                conn.execute(insert(runs), [rows.run])
                if rows.measurements:
                    conn.execute(insert(measurements), rows.measurements)
                if rows.profile is not None:
                    conn.execute(insert(profiles), [rows.profile])
                if rows.rank_profiles:
                    conn.execute(insert(rank_profiles), rows.rank_profiles)
                if rows.findings:
                    conn.execute(insert(findings), rows.findings)
                if _SAVE_HOOK is not None:
                    _SAVE_HOOK(run.id)
            if supersedes:
                conn.execute(
                    update(runs).where(runs.c.id.in_(list(supersedes))).values(excluded=True)
                )

        try:
            self._transact(write)
        except IntegrityError as exc:
            # Another writer may have stored the same run ids first: then they are stored once.
            if all(self._run_exists(run.id) for run in batch):
                return
            raise self._failure(f"save run {ids}", exc) from exc
        except SQLAlchemyError as exc:
            raise self._failure(f"save run {ids}", exc) from exc

    # -- reading -------------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord:
        """The run with id ``run_id``, or the one run whose id starts with it (>= 6 chars).

        Raises:
            StoreError: no such run, or the prefix matches several.
        """
        with self._read(f"read run {run_id}") as conn:
            row = conn.execute(select(runs).where(runs.c.id == run_id)).mappings().first()
            if row is None and len(run_id) >= MIN_ID_PREFIX:
                matches = (
                    conn.execute(
                        select(runs)
                        .where(runs.c.id.startswith(run_id, autoescape=True))
                        .order_by(runs.c.id)
                        .limit(3)
                    )
                    .mappings()
                    .all()
                )
                if len(matches) > 1:
                    shown = ", ".join(m["id"] for m in matches[:2])
                    raise StoreError(
                        f"run id prefix {run_id!r} is ambiguous in {self._target.where} "
                        f"(matches {shown}{', ...' if len(matches) > 2 else ''})"
                    )
                row = matches[0] if matches else None
            if row is None:
                hint = "" if len(run_id) >= MIN_ID_PREFIX else f" (prefixes need {MIN_ID_PREFIX}+)"
                raise StoreError(f"no run {run_id!r} in {self._target.where}{hint}")
            return _load_run(conn, row)

    def latest_run(self, *, project: str, benchmark: str, branch: str) -> RunRecord | None:
        """The most recently started run of ``benchmark`` on ``branch`` that is not excluded."""
        with self._read(f"read the latest run of {benchmark}") as conn:
            row = (
                conn.execute(
                    select(runs)
                    .where(
                        runs.c.project == project,
                        runs.c.benchmark == benchmark,
                        runs.c.branch == branch,
                        runs.c.excluded.is_(False),
                    )
                    .order_by(runs.c.started_at.desc(), runs.c.id.desc())
                    .limit(1)
                )
                .mappings()
                .first()
            )
            return None if row is None else _load_run(conn, row)

    def benchmarks(self, *, project: str, branch: str | None = None) -> list[str]:
        """Sorted names of the benchmarks with stored runs (excluded runs count too)."""
        conditions: list[ColumnElement[bool]] = [runs.c.project == project]
        if branch is not None:
            conditions.append(runs.c.branch == branch)
        with self._read("list benchmarks") as conn:
            return sorted(_distinct(conn, runs.c.benchmark, conditions))

    def history(
        self,
        *,
        project: str,
        benchmark: str,
        branch: str | None,
        before: datetime | None = None,
        exclude_run_ids: Sequence[str] = (),
        fingerprint_key: str | None = None,
        limit: int = 30,
        since: datetime | None = None,
    ) -> list[RunPoint]:
        """One point per (run, metric) of the last ``limit`` eligible runs, oldest run first.

        Eligible runs are those of ``benchmark`` on ``branch`` (any branch if ``None``), not
        excluded, not in ``exclude_run_ids``, started strictly before ``before``, at or after
        ``since`` (a baseline reset) and with ``fingerprint_key`` when these are given.
        """
        if limit <= 0:
            return []
        r = runs.c
        conditions = _history_conditions(
            project, benchmark, branch, before, exclude_run_ids, fingerprint_key, since
        )
        window = (
            select(r.id, r.branch, r.commit, r.fingerprint_key, r.started_at)
            .where(*conditions)
            .order_by(r.started_at.desc(), r.id.desc())
            .limit(limit)
            .subquery("recent")
        )
        m = measurements.c
        query = (
            select(
                window.c.id,
                window.c.branch,
                window.c.commit,
                window.c.fingerprint_key,
                window.c.started_at,
                m.metric,
                m.unit,
                m.direction,
                m.deterministic,
                m.centre,
                m.repeat_centres,
                m.centre_se,
            )
            .join_from(window, measurements, m.run_id == window.c.id)
            .order_by(window.c.started_at, window.c.id, m.seq)
        )
        points: list[RunPoint] = []
        with self._read(f"read the history of {benchmark}") as conn:
            for (
                run_id,
                run_branch,
                commit,
                key,
                started_at,
                metric,
                unit,
                direction,
                deterministic,
                centre,
                repeat_centres,
                centre_se,
            ) in conn.execute(query):
                points.append(
                    RunPoint(
                        run_id=run_id,
                        benchmark=benchmark,
                        metric=metric,
                        unit=unit,
                        direction=Direction(direction),
                        branch=run_branch,
                        commit=commit,
                        fingerprint_key=key,
                        started_at=started_at,
                        centre=float(centre),
                        repeat_centres=tuple(float(x) for x in json.loads(repeat_centres)),
                        deterministic=bool(deterministic),
                        centre_se=None if centre_se is None else float(centre_se),
                    )
                )
        return points

    def centres(
        self,
        *,
        project: str,
        benchmark: str,
        branch: str | None,
        before: datetime | None = None,
        exclude_run_ids: Sequence[str] = (),
        fingerprint_key: str | None = None,
        limit: int = 100,
        since: datetime | None = None,
    ) -> dict[str, list[tuple[str, float]]]:
        """Per metric, (run id, centre) of the same runs :meth:`history` selects, oldest
        first: the light read change-point scans need (no JSON, no timestamps decoded)."""
        if limit <= 0:
            return {}
        r = runs.c
        conditions = _history_conditions(
            project, benchmark, branch, before, exclude_run_ids, fingerprint_key, since
        )
        window = (
            select(r.id, r.started_at)
            .where(*conditions)
            .order_by(r.started_at.desc(), r.id.desc())
            .limit(limit)
            .subquery("recent")
        )
        m = measurements.c
        query = (
            select(window.c.id, m.metric, m.centre)
            .join_from(window, measurements, m.run_id == window.c.id)
            .order_by(window.c.started_at, window.c.id)
        )
        out: dict[str, list[tuple[str, float]]] = {}
        with self._read(f"read the history of {benchmark}") as conn:
            for run_id, metric, centre in conn.execute(query):
                out.setdefault(metric, []).append((run_id, float(centre)))
        return out

    def fingerprints(
        self, *, project: str, benchmark: str, branch: str | None
    ) -> dict[str, Fingerprint]:
        """Each fingerprint key seen for ``benchmark`` on ``branch`` (any if ``None``), with
        the fingerprint of its most recent non-excluded run."""
        r = runs.c
        conditions: list[ColumnElement[bool]] = [
            r.project == project,
            r.benchmark == benchmark,
            r.excluded.is_(False),
        ]
        if branch is not None:
            conditions.append(r.branch == branch)
        found: dict[str, Fingerprint] = {}
        with self._read(f"read the fingerprints of {benchmark}") as conn:
            for key in sorted(_distinct(conn, r.fingerprint_key, conditions)):
                doc = conn.execute(
                    select(r.fingerprint)
                    .where(*conditions, r.fingerprint_key == key)
                    .order_by(r.started_at.desc(), r.id.desc())
                    .limit(1)
                ).scalar_one()
                found[key] = Fingerprint.from_dict(json.loads(doc))
        return found

    # -- team: alerts, triage, baseline resets, exclusion, retention ------------------------

    def record_alerts(self, found: Sequence[NewAlert], *, now: datetime) -> list[Alert]:
        """Store the alerts not stored yet (one per run and metric) as untriaged; those
        already stored keep their state. Returns the alerts created now."""
        _require_aware(now, "record_alerts(now=...)")
        unique = {(a.run_id, a.metric): a for a in found}

        def write(conn: Connection) -> list[int]:
            created: list[int] = []
            for (run_id, metric), a in sorted(unique.items()):
                exists = conn.execute(
                    select(alerts.c.id).where(alerts.c.run_id == run_id, alerts.c.metric == metric)
                ).first()
                if exists is not None or not self._has_run(conn, run_id):
                    continue
                created.append(
                    int(
                        conn.execute(
                            insert(alerts).returning(alerts.c.id),
                            {
                                "project": a.project,
                                "benchmark": a.benchmark,
                                "metric": a.metric,
                                "run_id": a.run_id,
                                "previous_run_id": a.previous_run_id,
                                "branch": a.branch,
                                "fingerprint_key": a.fingerprint_key,
                                "verdict": Verdict(a.verdict).value,
                                "source": a.source,
                                "change_pct": _finite_or_none(a.change_pct, "alert"),
                                "commit_before": a.commit_before,
                                "commit_after": a.commit_after,
                                "status": "untriaged",
                                "created_at": now,
                                "updated_at": now,
                            },
                        ).scalar_one()
                    )
                )
            return created

        for attempt in range(2):
            try:
                ids = self._transact(write)
                break
            except IntegrityError as exc:
                # A concurrent gate recorded one of them first: the second pass skips it.
                if attempt:
                    raise self._failure("record alerts", exc) from exc
            except SQLAlchemyError as exc:
                raise self._failure("record alerts", exc) from exc
        if not ids:
            return []
        with self._read("read alerts") as conn:
            rows = conn.execute(select(alerts).where(alerts.c.id.in_(ids)).order_by(alerts.c.id))
            return [_alert_of(r) for r in rows.mappings()]

    def alerts(
        self,
        *,
        project: str,
        status: Sequence[str] = (),
        benchmark: str | None = None,
        limit: int = 1000,
    ) -> list[Alert]:
        """Alerts of ``project``, newest first, optionally of some states or one benchmark."""
        conditions: list[ColumnElement[bool]] = [alerts.c.project == project]
        if status:
            conditions.append(alerts.c.status.in_(list(status)))
        if benchmark is not None:
            conditions.append(alerts.c.benchmark == benchmark)
        with self._read("list alerts") as conn:
            rows = conn.execute(
                select(alerts).where(*conditions).order_by(alerts.c.id.desc()).limit(limit)
            )
            return [_alert_of(r) for r in rows.mappings()]

    def alert_statuses(self, *, project: str, benchmark: str) -> dict[tuple[str, str], str]:
        """(run id, metric) -> triage state of every alert of ``benchmark``."""
        a = alerts.c
        with self._read(f"read the alerts of {benchmark}") as conn:
            rows = conn.execute(
                select(a.run_id, a.metric, a.status).where(
                    a.project == project, a.benchmark == benchmark
                )
            )
            return {(str(r), str(m)): str(st) for r, m, st in rows}

    def triage_alert(
        self,
        alert_id: int,
        *,
        project: str,
        state: str,
        action: str,
        by: str,
        reason: str,
        now: datetime,
    ) -> Alert:
        """Move alert ``alert_id`` to ``state`` and record who did it, when and why.

        Raises:
            StoreError: no such alert in ``project``, or an unknown state.
        """
        if state not in ALERT_STATES:
            raise StoreError(f"unknown alert state {state!r} (one of {', '.join(ALERT_STATES)})")
        _require_aware(now, "triage_alert(now=...)")

        def write(conn: Connection) -> bool:
            row = conn.execute(
                select(alerts.c.run_id, alerts.c.benchmark).where(
                    alerts.c.id == alert_id, alerts.c.project == project
                )
            ).first()
            if row is None:
                return False
            conn.execute(
                update(alerts).where(alerts.c.id == alert_id).values(status=state, updated_at=now)
            )
            conn.execute(
                insert(triage_events),
                {
                    "project": project,
                    "action": action,
                    "alert_id": alert_id,
                    "run_id": row[0],
                    "benchmark": row[1],
                    "state": state,
                    "by": by,
                    "at": now,
                    "reason": reason,
                },
            )
            return True

        try:
            found = self._transact(write)
        except SQLAlchemyError as exc:
            raise self._failure(f"triage alert {alert_id}", exc) from exc
        if not found:
            raise StoreError(f"no alert {alert_id} in project {project!r} ({self._target.where})")
        with self._read(f"read alert {alert_id}") as conn:
            return _alert_of(
                conn.execute(select(alerts).where(alerts.c.id == alert_id)).mappings().one()
            )

    def triage_events(self, *, project: str, limit: int = 1000) -> list[TriageEvent]:
        """The triage trail of ``project``, newest first."""
        t = triage_events.c
        with self._read("read the triage trail") as conn:
            rows = conn.execute(
                select(triage_events)
                .where(t.project == project)
                .order_by(t.at.desc(), t.id.desc())
                .limit(limit)
            ).mappings()
            return [
                TriageEvent(
                    id=int(r["id"]),
                    project=r["project"],
                    action=r["action"],
                    alert_id=r["alert_id"],
                    run_id=r["run_id"],
                    benchmark=r["benchmark"],
                    state=r["state"],
                    by=r["by"],
                    at=r["at"],
                    reason=r["reason"],
                )
                for r in rows
            ]

    def reset_baseline(
        self,
        *,
        project: str,
        benchmark: str,
        commit: str,
        by: str,
        reason: str,
        now: datetime,
        branch: str | None = None,
    ) -> BaselineReset:
        """Accept a change: from now on the baseline window of ``benchmark`` starts at the
        first stored run of ``commit`` (a unique prefix of 7+ characters is enough).

        Raises:
            StoreError: no run of ``benchmark`` at that commit, or the prefix is ambiguous.
        """
        _require_aware(now, "reset_baseline(now=...)")
        r = runs.c
        conditions: list[ColumnElement[bool]] = [r.project == project, r.benchmark == benchmark]
        if branch is not None:
            conditions.append(r.branch == branch)
        with self._read(f"find commit {commit}") as conn:
            rows = conn.execute(
                select(r.id, r.commit, r.started_at)
                .where(*conditions, r.commit.startswith(commit, autoescape=True))
                .order_by(r.started_at, r.id)
            ).all()
        commits = sorted({str(c) for _, c, _ in rows})
        if not rows:
            raise StoreError(
                f"no run of {benchmark} at commit {commit!r} in project {project!r}"
                + (f" on branch {branch!r}" if branch else "")
            )
        if len(commits) > 1:
            raise StoreError(
                f"commit prefix {commit!r} is ambiguous for {benchmark} "
                f"(matches {', '.join(commits[:3])})"
            )
        run_id, full_commit, starts_at = rows[0]
        values = {
            "project": project,
            "benchmark": benchmark,
            "commit": full_commit,
            "run_id": run_id,
            "starts_at": starts_at,
            "by": by,
            "at": now,
            "reason": reason,
        }

        def write(conn: Connection) -> int:
            new_id = int(
                conn.execute(
                    insert(baseline_resets).returning(baseline_resets.c.id), values
                ).scalar_one()
            )
            conn.execute(
                insert(triage_events),
                {
                    "project": project,
                    "action": "reset",
                    "alert_id": None,
                    "run_id": run_id,
                    "benchmark": benchmark,
                    "state": None,
                    "by": by,
                    "at": now,
                    "reason": reason,
                },
            )
            return new_id

        try:
            new_id = self._transact(write)
        except SQLAlchemyError as exc:
            raise self._failure(f"reset the baseline of {benchmark}", exc) from exc
        return BaselineReset(id=new_id, **values)  # type: ignore[arg-type]

    def baseline_reset(self, *, project: str, benchmark: str) -> BaselineReset | None:
        """The latest accepted reset of ``benchmark``'s baseline, if any."""
        b = baseline_resets.c
        with self._read(f"read the baseline resets of {benchmark}") as conn:
            row = (
                conn.execute(
                    select(baseline_resets)
                    .where(b.project == project, b.benchmark == benchmark)
                    .order_by(b.id.desc())
                    .limit(1)
                )
                .mappings()
                .first()
            )
        if row is None:
            return None
        return BaselineReset(
            id=int(row["id"]),
            project=row["project"],
            benchmark=row["benchmark"],
            commit=row["commit"],
            run_id=row["run_id"],
            starts_at=row["starts_at"],
            by=row["by"],
            at=row["at"],
            reason=row["reason"],
        )

    def exclude_run(self, run_id: str, *, by: str, reason: str, now: datetime) -> RunRecord:
        """Mark a run (its id or a unique prefix) excluded from every history and window,
        recording who, when and why. Returns the run as it was before."""
        _require_aware(now, "exclude_run(now=...)")
        run = self.get_run(run_id)

        def write(conn: Connection) -> None:
            conn.execute(update(runs).where(runs.c.id == run.id).values(excluded=True))
            conn.execute(
                insert(triage_events),
                {
                    "project": run.project,
                    "action": "exclude",
                    "alert_id": None,
                    "run_id": run.id,
                    "benchmark": run.benchmark,
                    "state": "excluded",
                    "by": by,
                    "at": now,
                    "reason": reason,
                },
            )

        try:
            self._transact(write)
        except SQLAlchemyError as exc:
            raise self._failure(f"exclude run {run.id}", exc) from exc
        return run

    def has_run(self, run_id: str) -> bool:
        """Whether a run with exactly this id is stored."""
        return self._run_exists(run_id)

    def count_runs(self, *, project: str | None = None) -> int:
        conditions = [] if project is None else [runs.c.project == project]
        with self._read("count runs") as conn:
            return int(
                conn.execute(select(func.count()).select_from(runs).where(*conditions)).scalar_one()
            )

    def prune(
        self,
        *,
        project: str,
        baseline_window: int,
        now: datetime,
        keep_days: int | None = None,
        keep_runs: int | None = None,
        dry_run: bool = False,
    ) -> PrunePlan:
        """Delete old runs of ``project`` with everything stored with them, in one
        transaction: runs started more than ``keep_days`` ago, or beyond the newest
        ``keep_runs`` of their (benchmark, branch, fingerprint) series (both given: a run
        goes only when both say so). Never deleted: the newest ``baseline_window`` runs of
        each series (a gate's window), the runs around a recorded change point, the run of
        an open alert, a baseline reset's run, and the base run of a kept A/B head.
        """
        if keep_days is None and keep_runs is None:
            raise StoreError("prune needs keep_days or keep_runs")
        _require_aware(now, "prune(now=...)")
        r = runs.c
        cutoff = None if keep_days is None else now - timedelta(days=keep_days)
        with self._read("plan the prune") as conn:
            rows = conn.execute(
                select(
                    r.id,
                    r.benchmark,
                    r.branch,
                    r.fingerprint_key,
                    r.started_at,
                    r.excluded,
                    r.paired_with,
                )
                .where(r.project == project)
                .order_by(r.started_at.desc(), r.id.desc())
            ).all()
            a = alerts.c
            alert_rows = conn.execute(
                select(a.run_id, a.previous_run_id, a.source, a.status).where(a.project == project)
            ).all()
            reset_ids = set(
                conn.execute(
                    select(baseline_resets.c.run_id).where(baseline_resets.c.project == project)
                ).scalars()
            )
        position: dict[tuple[str, str, str], int] = {}
        window_seen: dict[tuple[str, str, str], int] = {}
        candidates: list[str] = []
        protect: dict[str, set[str]] = {
            "baseline": set(),
            "change_point": set(),
            "alert": set(),
            "reset": reset_ids,
            "paired": set(),
        }
        for run_id, bench, branch, key, started, excluded, _ in rows:
            series = (bench, branch, key)
            index = position.get(series, 0)
            position[series] = index + 1
            if not excluded:
                seen = window_seen.get(series, 0)
                if seen < baseline_window:
                    protect["baseline"].add(run_id)
                window_seen[series] = seen + 1
            old = cutoff is None or started < cutoff
            beyond = keep_runs is None or index >= keep_runs
            if old and beyond:
                candidates.append(run_id)
        for run_id, previous, source, status in alert_rows:
            if source == "history":
                protect["change_point"].update(i for i in (run_id, previous) if i)
            if status in OPEN_ALERT_STATES:
                protect["alert"].update(i for i in (run_id, previous) if i)
        candidate_set = set(candidates)
        kept_heads = {pw for rid, *_, pw in rows if pw and rid not in candidate_set}
        protect["paired"] = kept_heads
        reasons: dict[str, int] = {}
        doomed: list[str] = []
        for run_id in candidates:
            why = next((name for name, ids in protect.items() if run_id in ids), None)
            if why is None:
                doomed.append(run_id)
            else:
                reasons[why] = reasons.get(why, 0) + 1
        if doomed and not dry_run:

            def write(conn: Connection) -> None:
                for start in range(0, len(doomed), 500):
                    chunk = doomed[start : start + 500]
                    conn.execute(delete(runs).where(runs.c.id.in_(chunk)))

            try:
                self._transact(write)
            except SQLAlchemyError as exc:
                raise self._failure("prune runs", exc) from exc
        return PrunePlan(
            candidates=len(candidates),
            protected=len(candidates) - len(doomed),
            deleted_run_ids=tuple(doomed),
            dry_run=dry_run,
            reasons=reasons,
        )

    # -- plumbing ------------------------------------------------------------------------

    def _transact(self, body: Callable[[Connection], _T]) -> _T:
        """``body`` in one write transaction, run again (a bounded number of times, with
        backoff) when the database answers "locked" / "busy" (SQLite, past busy_timeout or
        where SQLite does not wait at all) or reports a deadlock or serialization failure
        (PostgreSQL). Each attempt is all or nothing, so a retry never doubles a write."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                with self._write() as conn:
                    return body(conn)
            except OperationalError as exc:
                if attempt + 1 >= WRITE_ATTEMPTS or not _transient(exc):
                    raise
            time.sleep(RETRY_BACKOFF_S * (2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self, action: str) -> Iterator[Connection]:
        try:
            with self._engine.connect() as conn, conn.begin():
                yield conn
        except SQLAlchemyError as exc:
            raise self._failure(action, exc) from exc
        except (ValueError, KeyError) as exc:
            # A stored JSON document or enum value that does not decode: a damaged row.
            raise StoreError(
                f"store {self._target.where}: cannot {action}: stored data is damaged ({exc!r})"
            ) from exc

    @staticmethod
    def _has_run(conn: Connection, run_id: str) -> bool:
        return conn.execute(select(runs.c.id).where(runs.c.id == run_id)).first() is not None

    def _run_exists(self, run_id: str) -> bool:
        with self._read(f"read run {run_id}") as conn:
            return self._has_run(conn, run_id)

    def _failure(self, action: str, exc: SQLAlchemyError) -> StoreError:
        return StoreError(f"store {self._target.where}: cannot {action}: {first_line(exc)}")


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


def _require_aware(value: datetime, what: str) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise StoreError(f"{what} is a naive datetime ({value.isoformat()}); a timezone is needed")


def _dumps(value: Any, run_id: str, what: str) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise StoreError(f"run {run_id}: {what} holds a non-finite number") from exc
    except TypeError as exc:
        raise StoreError(f"run {run_id}: {what} cannot be stored as JSON: {exc}") from exc


@dataclass(frozen=True)
class _Rows:
    run: dict[str, Any]
    measurements: list[dict[str, Any]]
    profile: dict[str, Any] | None
    rank_profiles: list[dict[str, Any]]
    findings: list[dict[str, Any]]


def _rows_of(run: RunRecord) -> _Rows:
    """Validate ``run`` and turn it into table rows; raises StoreError before any write."""
    if not run.id:
        raise StoreError("cannot save a run without an id")
    _require_aware(run.started_at, f"run {run.id}: started_at")
    _require_aware(run.finished_at, f"run {run.id}: finished_at")

    run_row: dict[str, Any] = {
        "id": run.id,
        "project": run.project,
        "benchmark": run.benchmark,
        "branch": run.git.branch,
        "commit": run.git.commit,
        "base_branch": run.git.base_branch,
        "pr_number": run.git.pr_number,
        "fingerprint_key": run.fingerprint.key(),
        "fingerprint": _dumps(run.fingerprint.to_dict(), run.id, "the fingerprint"),
        "spec": _dumps(run.spec.to_dict(), run.id, "the benchmark spec"),
        "ci": _dumps(run.ci.to_dict(), run.id, "the CI context"),
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "excluded": run.excluded,
        "perfgate_version": run.fingerprint.perfgate_version,
        "paired_with": run.paired_with,
    }

    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for seq, m in enumerate(run.measurements):
        rows.append(_measurement_row(run.id, seq, m, seen))

    profile_row = None
    if run.profile is not None:
        profile_row = {
            "run_id": run.id,
            "summary": _dumps(run.profile.to_dict(), run.id, "the profile summary"),
        }
    rank_rows = [
        {
            "run_id": run.id,
            "seq": seq,
            "rank": p.rank,
            "summary": _dumps(p.to_dict(), run.id, f"the profile of rank {p.rank}"),
        }
        for seq, p in enumerate(run.rank_profiles)
    ]
    finding_rows = []
    for seq, f in enumerate(run.findings):
        doc = f.to_dict()
        finding_rows.append(
            {
                "run_id": run.id,
                "seq": seq,
                "source": f.source,
                "rule": f.rule,
                "severity": f.severity.value,
                "location": f.location,
                "message": f.message,
                "suggestion": f.suggestion,
                "evidence": _dumps(doc["evidence"], run.id, f"the evidence of finding {f.rule}"),
            }
        )
    return _Rows(run_row, rows, profile_row, rank_rows, finding_rows)


def _finite_or_none(value: float | None, where: str) -> float | None:
    if value is None:
        return None
    if not math.isfinite(value):
        raise StoreError(f"{where} has a non-finite standard error")
    return float(value)


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
    for name in _SUMMARY_COLUMNS:
        if not math.isfinite(float(summary[name])):
            raise StoreError(f"{where} has a non-finite summary value ({name})")
    row: dict[str, Any] = {
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
        "centre_se": _finite_or_none(m.summary.centre_se, where),
        "samples": _dumps(repeats, run_id, f"metric {m.metric!r}"),
    }
    for name in _SUMMARY_COLUMNS:
        row[name] = float(summary[name])
    return row


def _load_run(conn: Connection, row: RowMapping) -> RunRecord:
    run_id = str(row["id"])
    measurement_rows = conn.execute(
        select(measurements).where(measurements.c.run_id == run_id).order_by(measurements.c.seq)
    ).mappings()
    profile_doc = conn.execute(
        select(profiles.c.summary).where(profiles.c.run_id == run_id)
    ).scalar()
    rank_docs = conn.execute(
        select(rank_profiles.c.summary)
        .where(rank_profiles.c.run_id == run_id)
        .order_by(rank_profiles.c.seq)
    ).scalars()
    finding_rows = conn.execute(
        select(findings).where(findings.c.run_id == run_id).order_by(findings.c.seq)
    ).mappings()
    ci: Mapping[str, Any] = json.loads(row["ci"])
    return RunRecord(
        id=run_id,
        project=row["project"],
        benchmark=row["benchmark"],
        fingerprint=Fingerprint.from_dict(json.loads(row["fingerprint"])),
        git=GitContext(
            commit=row["commit"],
            branch=row["branch"],
            base_branch=row["base_branch"],
            pr_number=row["pr_number"],
        ),
        ci=CIContext(
            provider=str(ci.get("provider", "")),
            job_url=str(ci.get("job_url", "")),
            trigger=str(ci.get("trigger", "")),
        ),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        measurements=tuple(_measurement_of(m) for m in measurement_rows),
        spec=BenchmarkSpec.from_dict(json.loads(row["spec"])),
        profile=None if profile_doc is None else ProfileSummary.from_dict(json.loads(profile_doc)),
        excluded=bool(row["excluded"]),
        paired_with=row["paired_with"],
        rank_profiles=tuple(ProfileSummary.from_dict(json.loads(doc)) for doc in rank_docs),
        findings=tuple(
            Finding.from_dict({**f, "evidence": json.loads(f["evidence"])}) for f in finding_rows
        ),
    )


def _alert_of(row: RowMapping) -> Alert:
    return Alert(
        id=int(row["id"]),
        project=row["project"],
        benchmark=row["benchmark"],
        metric=row["metric"],
        run_id=row["run_id"],
        previous_run_id=row["previous_run_id"],
        branch=row["branch"],
        fingerprint_key=row["fingerprint_key"],
        verdict=Verdict(row["verdict"]),
        source=row["source"],
        change_pct=None if row["change_pct"] is None else float(row["change_pct"]),
        commit_before=row["commit_before"],
        commit_after=row["commit_after"],
        status=row["status"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _measurement_of(row: RowMapping) -> Measurement:
    return Measurement(
        metric=row["metric"],
        unit=row["unit"],
        direction=Direction(row["direction"]),
        repeats=tuple(tuple(float(x) for x in rep) for rep in json.loads(row["samples"])),
        summary=Summary(
            n=int(row["n"]),
            centre=float(row["centre"]),
            median=float(row["median"]),
            mean=float(row["mean"]),
            mad=float(row["mad"]),
            p10=float(row["p10"]),
            p90=float(row["p90"]),
            p99=float(row["p99"]),
            minimum=float(row["min"]),
            maximum=float(row["max"]),
            repeat_centres=tuple(float(x) for x in json.loads(row["repeat_centres"])),
            dropped=int(row["dropped"]),
            centre_se=None if row["centre_se"] is None else float(row["centre_se"]),
        ),
        deterministic=bool(row["deterministic"]),
    )


def _history_conditions(
    project: str,
    benchmark: str,
    branch: str | None,
    before: datetime | None,
    exclude_run_ids: Sequence[str],
    fingerprint_key: str | None,
    since: datetime | None = None,
) -> list[ColumnElement[bool]]:
    if before is not None:
        _require_aware(before, "history(before=...)")
    if since is not None:
        _require_aware(since, "history(since=...)")
    if isinstance(exclude_run_ids, str):
        exclude_run_ids = (exclude_run_ids,)
    r = runs.c
    conditions: list[ColumnElement[bool]] = [
        r.project == project,
        r.benchmark == benchmark,
        r.excluded.is_(False),
    ]
    if branch is not None:
        conditions.append(r.branch == branch)
    if before is not None:
        conditions.append(r.started_at < before)
    if exclude_run_ids:
        conditions.append(r.id.not_in(list(exclude_run_ids)))
    if fingerprint_key is not None:
        conditions.append(r.fingerprint_key == fingerprint_key)
    if since is not None:
        conditions.append(r.started_at >= since)
    return conditions
