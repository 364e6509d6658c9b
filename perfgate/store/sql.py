"""Opening a store (:class:`SqlStore`: :class:`~perfgate.store.runs.RunStore` and
:class:`~perfgate.store.team.TeamStore` together), and reporting and upgrading its schema.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from perfgate.errors import StoreError
from perfgate.serial import Serial
from perfgate.store.connect import (
    SQLITE_BUSY_TIMEOUT_MS,
    WRITE_OPTION,
    NewSqliteFile,
    enable_wal,
    first_line,
    make_directories,
    make_target,
    open_failure,
)
from perfgate.store.migrate import (
    POSTGRES_LOCK_KEY,
    MigrationError,
    current_revision,
    head_revision,
    needs_upgrade,
    newer_schema_error,
    schema_state,
    upgrade,
)
from perfgate.store.runs import RunStore
from perfgate.store.schema import runs
from perfgate.store.team import TeamStore


def open_store(url: str, *, create: bool = True) -> SqlStore:
    """Open the store at ``url`` (``sqlite:///PATH``, parent directories created, or
    ``postgresql://...``), creating or upgrading its schema as needed. With ``create``
    False, a SQLite file that does not exist is a UsageError (for commands that only read).

    Raises:
        StoreError: the database cannot be reached or read, is not a perfgate store, or has
            a newer schema. It is left as it was; a SQLite file this open created is removed.
    """
    target = make_target(url, create=create)
    try:
        make_directories(target)
        with target.engine.connect() as conn:
            # Look first without taking any lock; most opens find a store at head.
            with conn.begin():
                pending = needs_upgrade(conn, target.where)
            if pending:
                # Then again under the write lock, as a concurrent open may have migrated.
                conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    if conn.dialect.name == "postgresql":
                        conn.execute(select(func.pg_advisory_xact_lock(POSTGRES_LOCK_KEY)))
                    if needs_upgrade(conn, target.where):
                        try:
                            upgrade(conn)
                        except SQLAlchemyError as exc:
                            raise MigrationError(first_line(exc)) from exc
            enable_wal(target, conn)
    except (StoreError, SQLAlchemyError, MigrationError) as exc:
        target.engine.dispose()
        _discard(target.created)
        if isinstance(exc, SQLAlchemyError):
            raise open_failure(target, exc) from exc
        if isinstance(exc, MigrationError):
            raise StoreError(
                f"cannot migrate store {target.where}: {first_line(exc)} "
                "(rolled back: the database is as it was)"
            ) from exc
        raise
    return SqlStore(target)


def _discard(new: NewSqliteFile | None) -> None:
    """Remove a store file this command created, with SQLite's side files and the
    directories made for it, provided it holds no run (:func:`_holds_runs`). Best effort."""
    if new is None or not new.path.is_file():
        return
    if new.path.stat().st_size > 0 and _holds_runs(new.path):
        return
    for suffix in ("", "-wal", "-shm", "-journal"):  # with SQLite's side files
        with contextlib.suppress(OSError):
            os.unlink(f"{new.path}{suffix}")
    for directory in new.directories:
        try:
            directory.rmdir()
        except OSError:
            break  # not empty (traces, another file): it stays, and so do those above it


def _holds_runs(path: Path) -> bool:
    """Whether the SQLite file at ``path`` holds a run or cannot be checked: counted under
    the write lock, so a run another job is saving into it counts."""
    timeout = SQLITE_BUSY_TIMEOUT_MS / 1000
    try:
        with contextlib.closing(sqlite3.connect(path, timeout, isolation_level=None)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                held = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            except sqlite3.OperationalError:  # no runs table: nothing was ever written
                held = 0
            conn.execute("ROLLBACK")
    except sqlite3.Error:
        return True
    return bool(held)


@dataclass(frozen=True)
class StoreStatus(Serial):
    """What ``perfgate db status`` reports; reading it never changes the database."""

    url: str
    engine: str
    revision: str | None
    head: str
    state: str  # "empty", "behind", "current" or "newer"
    runs: int | None


def store_status(url: str) -> StoreStatus:
    """The :class:`StoreStatus` of the database at ``url``, read without creating,
    upgrading or switching anything (not even SQLite's WAL mode): a SQLite file that is
    not there is ``empty``, and neither it nor its directory is made.

    Raises:
        StoreError: the database cannot be reached or is not a perfgate store.
    """
    target = make_target(url)
    if target.sqlite is not None and not target.sqlite.path.exists():
        target.engine.dispose()
        return StoreStatus(target.url, "sqlite", None, head_revision(), "empty", None)
    try:
        with target.engine.connect() as conn, conn.begin():
            revision = current_revision(conn, target.where)
            state = schema_state(revision)
            runs_count: int | None = None
            if state in ("current", "behind"):
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
    after. A newer schema is refused untouched; errors as :func:`open_store`'s."""
    before = store_status(url)
    if before.state == "newer":
        assert before.revision is not None
        raise newer_schema_error(before.url, before.revision)
    open_store(url).close()
    return before, store_status(url)


class SqlStore(RunStore, TeamStore):
    """The baseline store. Build it with :func:`open_store`; close it when done."""

    def __repr__(self) -> str:
        return f"SqlStore({self.url!r})"

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
        if exc_info[0] is not None:
            # A SQLite file this store's open created goes again while it holds no run, so
            # a failed command leaves no empty store behind.
            _discard(self._target.created)
