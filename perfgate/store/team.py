"""The team workflow: alerts and their triage, the triage trail, baseline resets and
retention (prune)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timedelta, timezone

from sqlalchemy import ColumnElement, Table, delete, insert, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from perfgate.errors import NotFoundError, StoreError
from perfgate.models import Alert, BaselineReset, NewAlert, PrunePlan, TriageEvent, Verdict
from perfgate.store.base import StoreBase, finite_or_none, log_event, require_aware, row_to
from perfgate.store.schema import (
    ALERT_STATES,
    OPEN_ALERT_STATES,
    alerts,
    baseline_resets,
    runs,
    triage_events,
)


class TeamStore(StoreBase):
    """Alerts, triage, baseline resets and prune over the runs of a store."""

    # -- alerts and triage ---------------------------------------------------------------

    def record_alerts(self, found: Sequence[NewAlert], *, now: datetime) -> list[Alert]:
        """Store the alerts not stored yet (one per run and metric) as untriaged; those
        already stored keep their state. Returns the alerts created now."""
        require_aware(now, "record_alerts(now=...)")
        unique = {(a.run_id, a.metric): a for a in found}

        def write(conn: Connection) -> list[int]:
            created: list[int] = []
            for (run_id, metric), a in sorted(unique.items()):
                exists = conn.execute(
                    select(alerts.c.id).where(alerts.c.run_id == run_id, alerts.c.metric == metric)
                ).first()
                if exists is not None or not self._has_run(conn, run_id):
                    continue
                row = {
                    **asdict(a),
                    "verdict": Verdict(a.verdict).value,
                    "change_pct": finite_or_none(a.change_pct, "alert"),
                    "status": "untriaged",
                    "created_at": now,
                    "updated_at": now,
                }
                new_id = conn.execute(insert(alerts).returning(alerts.c.id), row).scalar_one()
                created.append(int(new_id))
            return created

        try:
            ids = self._transact(write)
        except IntegrityError:
            # A concurrent gate recorded one of them first: the second pass skips it.
            ids = self._commit("record alerts", write)
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
        conditions = _of_benchmark(alerts, project, benchmark)
        if status:
            conditions.append(alerts.c.status.in_(list(status)))
        query = select(alerts).where(*conditions).order_by(alerts.c.id.desc()).limit(limit)
        with self._read("list alerts") as conn:
            return [_alert_of(r) for r in conn.execute(query).mappings()]

    def alert_statuses(self, *, project: str, benchmark: str | None) -> dict[tuple[str, str], str]:
        """(run id, metric) -> triage state of every alert of ``benchmark`` (of every
        benchmark of ``project`` for ``None``: one read where a gate needs them all)."""
        a = alerts.c
        conditions = _of_benchmark(alerts, project, benchmark)
        with self._read(f"read the alerts of {benchmark or project}") as conn:
            rows = conn.execute(select(a.run_id, a.metric, a.status).where(*conditions))
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
            NotFoundError: no such alert in ``project``.
            StoreError: an unknown state.
        """
        if state not in ALERT_STATES:
            raise StoreError(f"unknown alert state {state!r} (one of {', '.join(ALERT_STATES)})")
        require_aware(now, "triage_alert(now=...)")

        a = alerts.c

        def write(conn: Connection) -> bool:
            found = select(a.run_id, a.benchmark).where(a.id == alert_id, a.project == project)
            row = conn.execute(found).first()
            if row is None:
                return False
            conn.execute(
                update(alerts).where(a.id == alert_id).values(status=state, updated_at=now)
            )
            about = {"alert_id": alert_id, "run_id": row[0], "benchmark": row[1], "state": state}
            log_event(conn, project, action, by, now, reason, **about)
            return True

        if not self._commit(f"triage alert {alert_id}", write):
            raise NotFoundError(
                f"no alert {alert_id} in project {project!r} ({self._target.where})"
            )
        with self._read(f"read alert {alert_id}") as conn:
            return _alert_of(conn.execute(select(alerts).where(a.id == alert_id)).mappings().one())

    def triage_events(self, *, project: str, limit: int = 1000) -> list[TriageEvent]:
        """The triage trail of ``project``, newest first."""
        t = triage_events.c
        query = select(triage_events).where(t.project == project).order_by(t.at.desc(), t.id.desc())
        with self._read("read the triage trail") as conn:
            return [row_to(TriageEvent, r) for r in conn.execute(query.limit(limit)).mappings()]

    # -- baseline resets -----------------------------------------------------------------

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
            NotFoundError: no run of ``benchmark`` at that commit, or the prefix is ambiguous.
        """
        require_aware(now, "reset_baseline(now=...)")
        r = runs.c
        conditions: list[ColumnElement[bool]] = [r.project == project, r.benchmark == benchmark]
        if branch is not None:
            conditions.append(r.branch == branch)
        at_commit = r.commit.startswith(commit, autoescape=True)
        query = select(r.id, r.commit, r.started_at).where(*conditions, at_commit)
        with self._read(f"find commit {commit}") as conn:
            rows = conn.execute(query.order_by(r.started_at, r.id)).all()
        commits = sorted({str(c) for _, c, _ in rows})
        if not rows:
            raise NotFoundError(
                f"no run of {benchmark} at commit {commit!r} in project {project!r}"
                + (f" on branch {branch!r}" if branch else "")
            )
        if len(commits) > 1:
            raise NotFoundError(
                f"commit prefix {commit!r} is ambiguous for {benchmark} "
                f"(matches {', '.join(commits[:3])})"
            )
        run_id, full_commit, starts_at = rows[0]
        values = dict(project=project, benchmark=benchmark, commit=full_commit, run_id=run_id)
        values.update(starts_at=starts_at, by=by, at=now, reason=reason)

        def write(conn: Connection) -> int:
            added = insert(baseline_resets).returning(baseline_resets.c.id)
            new_id = int(conn.execute(added, values).scalar_one())
            log_event(conn, project, "reset", by, now, reason, run_id=run_id, benchmark=benchmark)
            return new_id

        new_id = self._commit(f"reset the baseline of {benchmark}", write)
        return BaselineReset(id=new_id, **values)  # type: ignore[arg-type]

    def baseline_reset(self, *, project: str, benchmark: str) -> BaselineReset | None:
        """The latest accepted reset of ``benchmark``'s baseline, if any."""
        return self.baseline_resets(project=project, benchmark=benchmark).get(benchmark)

    def baseline_resets(
        self, *, project: str, benchmark: str | None = None
    ) -> dict[str, BaselineReset]:
        """:meth:`baseline_reset` of every benchmark of ``project`` (or of ``benchmark``) that
        has one, by benchmark, in one read (resets are few: one per accepted change)."""
        where = _of_benchmark(baseline_resets, project, benchmark)
        query = select(baseline_resets).where(*where).order_by(baseline_resets.c.id)
        with self._read(f"read the baseline resets of {benchmark or project}") as conn:
            rows = conn.execute(query).mappings().all()
        # Ordered by id: the latest of a benchmark wins.
        return {str(row["benchmark"]): row_to(BaselineReset, row) for row in rows}

    # -- retention -----------------------------------------------------------------------

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
        require_aware(now, "prune(now=...)")
        r = runs.c
        cutoff = None if keep_days is None else _days_before(now, keep_days)
        with self._read("plan the prune") as conn:
            columns = (r.id, r.benchmark, r.branch, r.fingerprint_key, r.started_at, r.excluded)
            newest_first = (r.started_at.desc(), r.id.desc())
            query = select(*columns, r.paired_with).where(r.project == project)
            rows = conn.execute(query.order_by(*newest_first)).all()
            a = alerts.c
            alert_rows = conn.execute(
                select(a.run_id, a.previous_run_id, a.source, a.status).where(a.project == project)
            ).all()
            b = baseline_resets.c
            reset_ids = set(conn.execute(select(b.run_id).where(b.project == project)).scalars())
        position: Counter[tuple[str, str, str]] = Counter()  # runs seen, per series
        window_seen: Counter[tuple[str, str, str]] = Counter()  # of them not excluded
        candidates: list[str] = []
        protect: dict[str, set[str]] = {n: set() for n in ("baseline", "change_point", "alert")}
        for run_id, bench, branch, key, started, excluded, _ in rows:
            series = (bench, branch, key)
            if not excluded:
                if window_seen[series] < baseline_window:
                    protect["baseline"].add(run_id)
                window_seen[series] += 1
            beyond = keep_runs is None or position[series] >= keep_runs
            position[series] += 1
            if (cutoff is None or started < cutoff) and beyond:
                candidates.append(run_id)
        for run_id, previous, source, status in alert_rows:
            pair = {i for i in (run_id, previous) if i}
            if source == "history":
                protect["change_point"] |= pair
            if status in OPEN_ALERT_STATES:
                protect["alert"] |= pair
        protect["reset"] = reset_ids
        candidate_set = set(candidates)
        protect["paired"] = {pw for rid, *_, pw in rows if pw and rid not in candidate_set}
        why = {c: next((name for name, ids in protect.items() if c in ids), "") for c in candidates}
        doomed = [run_id for run_id, kept in why.items() if not kept]
        reasons = dict(Counter(kept for kept in why.values() if kept))
        if doomed and not dry_run:

            def write(conn: Connection) -> None:
                for start in range(0, len(doomed), 500):
                    conn.execute(delete(runs).where(runs.c.id.in_(doomed[start : start + 500])))

            self._commit("prune runs", write)
        return PrunePlan(
            candidates=len(candidates),
            protected=len(candidates) - len(doomed),
            deleted_run_ids=tuple(doomed),
            dry_run=dry_run,
            reasons=reasons,
        )


def _days_before(now: datetime, days: int) -> datetime:
    """``days`` days before ``now``; the earliest time a datetime holds where that is
    further back (so a cutoff of a million days keeps every run instead of overflowing)."""
    earliest = datetime.min.replace(tzinfo=timezone.utc)
    if days >= (now - earliest).days:
        return earliest
    return now - timedelta(days=days)


def _of_benchmark(table: Table, project: str, benchmark: str | None) -> list[ColumnElement[bool]]:
    """The rows of ``table`` of ``project``, and of ``benchmark`` unless it is None."""
    c = table.c
    return [c.project == project] + ([] if benchmark is None else [c.benchmark == benchmark])


def _alert_of(row: RowMapping) -> Alert:
    return row_to(Alert, row, verdict=Verdict(row["verdict"]))
