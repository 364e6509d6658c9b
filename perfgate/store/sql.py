"""SqlStore: runs in and out of a SQLite or PostgreSQL database (SQLAlchemy Core).

:class:`SqlStore` is :class:`~perfgate.store.runs.RunStore` (runs and history) together with
:class:`~perfgate.store.team.TeamStore` (alerts, triage, baseline resets, prune), over the
shared plumbing of :mod:`perfgate.store.base`. This module opens stores and reports and
upgrades their schema.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from perfgate.errors import StoreError
from perfgate.store.connect import (
    SQLITE_BUSY_TIMEOUT_MS,
    WRITE_OPTION,
    enable_wal,
    first_line,
    make_target,
    open_failure,
    parse_url,
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
from perfgate.store.runs import RunStore
from perfgate.store.schema import runs
from perfgate.store.team import TeamStore


def open_store(url: str, *, create: bool = True) -> SqlStore:
    """Open the store at ``url``, creating or upgrading its schema as needed.

    Args:
        url: ``sqlite:///PATH`` (parent directories are created) or ``postgresql://...``
            (``postgresql+psycopg://`` is used for plain ``postgresql://``).
        create: with False, a SQLite file that does not exist is a UsageError instead of
            a new store (for commands that only read).

    Raises:
        StoreError: the database cannot be reached or read, is not a perfgate store, or has
            a schema newer than this perfgate. Such a database is left as it was; a SQLite
            file this open created (a full disk, say) is removed again.
    """
    new = NewSqliteFile.of(url) if create else None
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
    except (StoreError, SQLAlchemyError, MigrationError) as exc:
        target.engine.dispose()
        _discard(new)
        if isinstance(exc, SQLAlchemyError):
            raise open_failure(target, exc) from exc
        if isinstance(exc, MigrationError):
            raise StoreError(
                f"cannot migrate store {target.where}: {first_line(exc)} "
                "(rolled back: the database is as it was)"
            ) from exc
        raise
    store = SqlStore(target)
    store.created = new
    return store


@dataclass(frozen=True)
class NewSqliteFile:
    """A SQLite store file that did not exist before this command opened it, and the
    directories opening it created: what :func:`_discard` removes when the command fails
    before it recorded anything."""

    path: Path
    directories: tuple[Path, ...] = field(default=())  # the deepest first

    @classmethod
    def of(cls, url: str) -> NewSqliteFile | None:
        """The file a ``sqlite:///PATH`` URL names when it does not exist yet; None for one
        that exists, another database or a URL that does not parse (opening it says why)."""
        try:
            parsed = parse_url(url)
        except Exception:  # noqa: BLE001 - make_target reports a bad URL
            return None
        database = parsed.database or ""
        if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:"):
            return None
        if database.startswith("file:"):
            return None
        path = Path(database).expanduser().absolute()
        if os.path.lexists(path):
            return None
        missing = []
        parent = path.parent
        while not os.path.lexists(parent) and parent != parent.parent:
            missing.append(parent)
            parent = parent.parent
        return cls(path, tuple(missing))


_SIDE_FILES = ("-wal", "-shm", "-journal")


def _discard(new: NewSqliteFile | None) -> None:
    """Remove a store file this command created, with SQLite's side files and the
    directories made for it, provided it holds no run: checked under the write lock, so a
    run another job is saving into the same new file keeps it. Best effort: a file that
    cannot be checked or removed stays."""
    if new is None or not new.path.is_file():
        return
    if new.path.stat().st_size > 0 and _holds_runs(new.path):
        return
    for suffix in ("", *_SIDE_FILES):
        try:
            os.unlink(f"{new.path}{suffix}")
        except OSError:
            pass
    for directory in new.directories:
        try:
            directory.rmdir()
        except OSError:
            break  # not empty (traces, another file): it stays, and so do those above it


def _holds_runs(path: Path) -> bool:
    """Whether the SQLite file at ``path`` holds a run, or cannot be checked (then it is
    kept): counted under the write lock, so a run being saved into it counts."""
    try:
        conn = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                held = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            except sqlite3.OperationalError:  # no runs table: nothing was ever written
                held = 0
            conn.execute("ROLLBACK")
        finally:
            conn.close()
    except sqlite3.Error:
        return True
    return bool(held)


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
        return asdict(self)


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


class SqlStore(RunStore, TeamStore):
    """The baseline store. Build it with :func:`open_store`; close it when done."""

    created: NewSqliteFile | None = None
    """The SQLite file :func:`open_store` created for this store (None: it existed, or
    another database): leaving the ``with`` block on an exception removes it again while
    it holds no run, so a failed command leaves no empty store behind."""

    def __repr__(self) -> str:
        return f"SqlStore({self.url!r})"

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        if exc_type is not None:
            _discard(self.created)
