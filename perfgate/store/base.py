"""What every part of the store shares: the engine, read and write transactions (writes
retried when the database is locked or busy), and the checks on values before they are
written. :class:`~perfgate.store.runs.RunStore` and :class:`~perfgate.store.team.TeamStore`
build on :class:`StoreBase`; :class:`~perfgate.store.sql.SqlStore` is the two together.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import fields
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Engine, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from perfgate.errors import StoreError
from perfgate.store.connect import WRITE_OPTION, Target, first_line, sqlite_error_code
from perfgate.store.schema import runs, triage_events

#: Write transactions tried at most this often when the database is locked or busy.
WRITE_ATTEMPTS = 5
#: First retry waits about this long; each later one twice as long (with jitter).
RETRY_BACKOFF_S = 0.05

_T = TypeVar("_T")

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6


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


class StoreBase:
    """The engine of one store and the transactions every store method runs in."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._engine = target.engine
        self.url: str = target.url  # password masked
        self._pinned: Connection | None = None  # the open snapshot's connection

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for exports and tests; the schema is the store's own)."""
        return self._engine

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only (a SQLite file that cannot be written)."""
        return self._target.read_only

    def close(self) -> None:
        self._engine.dispose()

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

    def _commit(self, action: str, body: Callable[[Connection], _T]) -> _T:
        """:meth:`_transact`; a database failure is a StoreError naming ``action``."""
        try:
            return self._transact(body)
        except SQLAlchemyError as exc:
            raise self._failure(action, exc) from exc

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        if self._pinned is not None:
            raise RuntimeError("a store write inside a read snapshot (it would not see it)")
        with self._engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                yield conn

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read inside the block in one read transaction: the reads agree with each
        other while other jobs commit runs, and a gate over many benchmarks pays one
        checkout, BEGIN and COMMIT instead of one per read. A write inside is a bug."""
        if self._pinned is not None:
            yield  # already inside one: the outer snapshot holds
            return
        with self._read("open a read snapshot") as conn:
            self._pinned = conn
            try:
                yield
            finally:
                self._pinned = None

    @contextmanager
    def _read(self, action: str) -> Iterator[Connection]:
        """A read transaction (the open :meth:`snapshot`'s, if any); a failure to read, or a
        stored document that does not decode, is a StoreError naming ``action``."""
        try:
            with ExitStack() as stack:
                conn = self._pinned
                if conn is None:
                    conn = stack.enter_context(self._engine.connect())
                    if conn.dialect.name == "postgresql":
                        # One snapshot per read, as SQLite's is: a read of several
                        # statements agrees with itself while other jobs commit runs.
                        conn.execution_options(isolation_level="REPEATABLE READ")
                    stack.enter_context(conn.begin())
                yield conn
        except SQLAlchemyError as exc:
            raise self._failure(action, exc) from exc
        except (ValueError, KeyError) as exc:
            # a stored JSON document or enum value that does not decode: a damaged row
            damaged = f"stored data is damaged ({exc!r})"
            raise StoreError(f"store {self._target.where}: cannot {action}: {damaged}") from exc

    @staticmethod
    def _has_run(conn: Connection, run_id: str) -> bool:
        return conn.execute(select(runs.c.id).where(runs.c.id == run_id)).first() is not None

    def has_run(self, run_id: str) -> bool:
        """Whether a run with exactly this id is stored."""
        with self._read(f"read run {run_id}") as conn:
            return self._has_run(conn, run_id)

    def _failure(self, action: str, exc: SQLAlchemyError) -> StoreError:
        return StoreError(f"store {self._target.where}: cannot {action}: {first_line(exc)}")


def require_aware(value: datetime, what: str) -> None:
    """StoreError when ``value`` has no timezone (the store keeps aware times only)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise StoreError(f"{what} is a naive datetime ({value.isoformat()}); a timezone is needed")


def finite_or_none(value: float | None, where: str) -> float | None:
    """``value`` as a float, None kept; a non-finite one is a StoreError naming ``where``."""
    if value is None:
        return None
    if not math.isfinite(value):
        raise StoreError(f"{where} has a non-finite standard error")
    return float(value)


def row_to(cls: type[_T], row: Mapping[Any, Any], **coerced: Any) -> _T:
    """The dataclass ``cls`` of a row whose columns are named as its fields, ``coerced``
    taken over the row's values."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    return cls(**{n: row[n] for n in names} | coerced)


def log_event(
    conn: Connection, project: str, action: str, by: str, at: datetime, reason: str, **about: Any
) -> None:
    """Add one entry to the triage trail: the action, who did it, when and why, and the
    alert, run, benchmark and state it concerns (``about``; None: none)."""
    who = {"project": project, "action": action, "by": by, "at": at, "reason": reason}
    about = {"alert_id": None, "run_id": None, "benchmark": None, "state": None, **about}
    conn.execute(insert(triage_events), {**who, **about})
