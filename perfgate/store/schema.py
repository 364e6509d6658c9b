"""The store's tables, as the SQLAlchemy Core objects its queries use.

Only the alembic revisions in ``migrations/versions`` create and change the schema; this
module must describe the head revision's tables (``tests/test_store.py`` checks). JSON
documents (fingerprint, spec, CI context, samples, profiles) are TEXT from :func:`json.dumps`,
read back identically on SQLite and PostgreSQL. Timestamps are aware UTC in Python; SQLite
keeps them as sortable naive-UTC text, PostgreSQL as ``timestamptz``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

#: The value of ``perfgate_meta.application`` that marks a database as a perfgate store.
APPLICATION = "perfgate"


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware datetime that always reads back in UTC; a naive one is refused (a
    run's time must say which clock it was read from)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} (a timezone is required)")
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime from the database, got {type(value).__name__}")
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


SUMMARY_COLUMNS = ("centre", "median", "mean", "mad", "p10", "p90", "p99", "min", "max")
"""A measurement's summary statistics (:class:`~perfgate.models.Summary`), a column each."""
FINDING_COLUMNS = ("source", "rule", "severity", "location", "message", "suggestion")
"""The findings table's columns that hold a key of the finding's dict as it is."""

metadata = MetaData()


def _columns(kind: Any, *names: str, nullable: bool = False) -> list[Column[Any]]:
    return [Column(name, kind, nullable=nullable) for name in names]


def _run_id(**key: Any) -> Column[Any]:
    """A child table's reference to its run, deleted with it."""
    return Column("run_id", Text, ForeignKey("runs.id", ondelete="CASCADE"), **key)


perfgate_meta = Table(
    "perfgate_meta",
    metadata,
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", Text, primary_key=True),
    *_columns(Text, "project", "benchmark", "branch", "commit", "base_branch"),
    Column("pr_number", Integer, nullable=True),
    *_columns(Text, "fingerprint_key", "fingerprint", "spec", "ci"),
    *_columns(UTCDateTime, "started_at", "finished_at"),
    Column("excluded", Boolean, nullable=False),
    Column("perfgate_version", Text, nullable=False),
    Column("paired_with", Text, nullable=True),
    # The order the store recorded the runs in (revision 0007): 1, 2, 3, ... assigned under
    # the write lock, whatever clock stamped started_at. "The latest run" is the latest
    # recorded: a runner whose clock said 2099 does not make its run the latest for ever.
    Column("recorded_seq", BigInteger, nullable=True),  # set on every insert (see 0007)
    # The level a run measured in looks was judged at (revision 0008; None: a plain run).
    Column("alpha", Double, nullable=True),
    Index("ix_runs_branch_recorded", "project", "benchmark", "branch", "recorded_seq"),
    # History and latest-run queries: equality on the leading columns, newest first by
    # (started_at, id), so the index order is the query order and LIMIT stops early.
    Index("ix_runs_history", "project", "benchmark", "started_at", "id"),
    Index("ix_runs_branch_history", "project", "benchmark", "branch", "started_at", "id"),
    Index(
        "ix_runs_fingerprint_history", "project", "benchmark", "fingerprint_key", "started_at", "id"
    ),
    # The gate's window query (revision 0005): every equality it filters on, then the order.
    Index(
        "ix_runs_gate_history",
        *("project", "benchmark", "branch", "fingerprint_key", "started_at", "id"),
    ),
    Index("ix_runs_started", "project", "started_at"),
)

measurements = Table(
    "measurements",
    metadata,
    _run_id(primary_key=True),
    Column("metric", Text, primary_key=True),
    Column("seq", Integer, nullable=False),
    *_columns(Text, "unit", "direction"),
    Column("deterministic", Boolean, nullable=False),
    Column("n", Integer, nullable=False),
    *_columns(Double, *SUMMARY_COLUMNS),
    *_columns(Text, "repeat_centres", "samples"),
    Column("dropped", Integer, nullable=False, server_default="0"),
    Column("centre_se", Double, nullable=True),
)

profiles = Table(
    "profiles", metadata, _run_id(primary_key=True), Column("summary", Text, nullable=False)
)

findings = Table(
    "findings",
    metadata,
    _run_id(primary_key=True),
    Column("seq", Integer, primary_key=True),
    *_columns(Text, *FINDING_COLUMNS, "evidence"),
    Column("impact_ms", Double, nullable=True),
)

rank_profiles = Table(
    "rank_profiles",
    metadata,
    _run_id(primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("rank", Integer, nullable=True),
    Column("summary", Text, nullable=False),
)

#: Triage states of an alert (Perfherder's, less the ones about moving alerts around).
ALERT_STATES = ("untriaged", "acknowledged", "invalid", "wontfix", "fixed")
#: States that still ask for attention: such an alert's run is never pruned.
OPEN_ALERT_STATES = ("untriaged", "acknowledged")

alerts = Table(
    "alerts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    *_columns(Text, "project", "benchmark", "metric"),
    _run_id(nullable=False),
    Column("previous_run_id", Text, nullable=True),
    *_columns(Text, "branch", "fingerprint_key", "verdict", "source"),  # source: "gate", ...
    Column("change_pct", Double, nullable=True),
    Column("commit_before", Text, nullable=True),
    *_columns(Text, "commit_after", "status"),
    *_columns(UTCDateTime, "created_at", "updated_at"),
    UniqueConstraint("run_id", "metric", name="uq_alerts_run_metric"),
    Index("ix_alerts_project_status", "project", "status", "id"),
    Index("ix_alerts_benchmark", "project", "benchmark", "metric"),
)

triage_events = Table(
    "triage_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    *_columns(Text, "project", "action"),
    Column("alert_id", Integer, ForeignKey("alerts.id", ondelete="SET NULL"), nullable=True),
    *_columns(Text, "run_id", "benchmark", "state", nullable=True),
    Column("by", Text, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("reason", Text, nullable=False),
    Index("ix_triage_events_project", "project", "at", "id"),
)

baseline_resets = Table(
    "baseline_resets",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    *_columns(Text, "project", "benchmark", "commit", "run_id"),
    Column("starts_at", UTCDateTime, nullable=False),
    Column("by", Text, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("reason", Text, nullable=False),
    Index("ix_baseline_resets_benchmark", "project", "benchmark", "id"),
)
