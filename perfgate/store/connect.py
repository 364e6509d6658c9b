"""From a database URL to a configured SQLAlchemy engine, and database errors to one line.

SQLite connections get ``busy_timeout`` and ``foreign_keys``, and WAL journal mode (with
``synchronous = NORMAL``) once the database is known to be a perfgate store: setting WAL
rewrites the file header, which must not happen to someone else's database. A SQLite file
that cannot be written is opened read-only (:func:`_read_only_target`), and nothing is
written to it. SQLAlchemy emits ``BEGIN`` itself (the pysqlite recipe), ``BEGIN IMMEDIATE``
for connections with the ``perfgate_write`` execution option, so that a writer takes the
write lock up front and waits on ``busy_timeout`` instead of failing half-way.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass, field
from itertools import takewhile
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
)

from perfgate.errors import ConfigError, StoreError, UsageError, mask_query, require

SQLITE_BUSY_TIMEOUT_MS = 30_000
POSTGRES_CONNECT_TIMEOUT_S = 10

#: Execution option that makes SQLite start the transaction with ``BEGIN IMMEDIATE``.
WRITE_OPTION = "perfgate_write"

_SQLITE_NOTADB = 26
_SQLITE_CORRUPT = 11
_SQLITE_CANTOPEN = 14


@dataclass
class SqliteSettings:
    """Per-engine switches read by the SQLite connect hook."""

    path: Path
    wal: bool = False
    read_only: bool = False


@dataclass(frozen=True)
class NewSqliteFile:
    """A SQLite store file this command's open creates, and the directories it creates:
    what :func:`perfgate.store.sql._discard` removes when the command records nothing."""

    path: Path
    directories: tuple[Path, ...] = field(default=())  # the deepest first


@dataclass
class Target:
    """An engine plus how to name its database in messages."""

    engine: Engine
    url: str  # the URL with any password masked
    where: str  # the file path for SQLite, the masked URL otherwise
    sqlite: SqliteSettings | None = field(default=None)
    created: NewSqliteFile | None = None  # None: a file (even a broken link) is there, or no file

    @property
    def read_only(self) -> bool:
        return self.sqlite is not None and self.sqlite.read_only


def parse_url(raw: str) -> URL:
    """``raw`` as a SQLAlchemy URL, the credentials ending at the *last* ``@`` of the URL:
    ``postgresql://u:p@ss:w/rd@host/db`` is user ``u``, password ``p@ss:w/rd`` on ``host``
    (SQLAlchemy alone would end the password at the first ``@`` and read ``ss`` as the host
    and ``w`` as the port). A host name never holds an ``@``; one in the database name or
    the query must be written ``%40``. A user name holds no ``/`` either, so in
    ``postgresql://host/db@x`` the ``@`` stays in the path.

    Raises:
        ArgumentError, ValueError: not a URL SQLAlchemy can parse.
    """
    scheme, sep, after = raw.partition("://")
    userinfo, at, rest = after.rpartition("@")
    user, colon, password = userinfo.partition(":")
    # No credentials to re-encode without an ``@``, nor in a SQLite URL (its path may hold one)
    if sep and at and not scheme.startswith("sqlite") and "/" not in user:
        creds = quote(unquote(user), safe="")
        if colon:
            creds += ":" + quote(unquote(password), safe="")
        raw = f"{scheme}://{creds}@{rest}"
    return make_url(raw)


def mask_url(raw: str) -> str:
    """``raw`` with the password (read as :func:`parse_url` reads it, so an unencoded ``@``
    or ``/`` in it leaks nothing) and every secret query parameter replaced by ``***``
    (:func:`masked`). A URL that does not parse keeps only its scheme and what follows the
    last ``@``, its secret query parameters masked as well."""
    with contextlib.suppress(ArgumentError, ValueError):
        return masked(parse_url(raw))
    scheme, sep, after = raw.partition("://")
    if not sep:
        _, at, rest = raw.rpartition("@")
        return mask_query(f"***@{rest}" if at else raw)
    _, at, rest = after.rpartition("@")
    return mask_query(f"{scheme}://***@{rest}" if at else f"{scheme}://***")


def masked(url: URL) -> str:
    """``url`` as every message shows it: the password and the value of each secret query
    parameter (:func:`perfgate.errors.mask_query`) replaced by ``***``."""
    return mask_query(url.render_as_string(hide_password=True))


def first_line(exc: BaseException) -> str:
    """The first non-empty line of the driver's message (SQLAlchemy's own adds SQL and links)."""
    inner = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    lines = (line.strip() for line in str(inner).splitlines())
    return next((line for line in lines if line), type(inner).__name__)


def sqlite_error_code(exc: BaseException) -> int | None:
    inner = exc.orig if isinstance(exc, DBAPIError) else exc
    if not isinstance(inner, sqlite3.Error):
        return None
    code = getattr(inner, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF
    text = str(inner).lower()
    if "file is not a database" in text:
        return _SQLITE_NOTADB
    if "malformed" in text:
        return _SQLITE_CORRUPT
    if "unable to open database file" in text:
        return _SQLITE_CANTOPEN
    return None


def open_failure(target: Target, exc: SQLAlchemyError) -> StoreError:
    """The one-line error for a failure while connecting to and checking a store."""
    if target.sqlite is not None:
        code = sqlite_error_code(exc)
        if code in (_SQLITE_NOTADB, _SQLITE_CORRUPT):
            return StoreError(
                f"{target.where} is not a SQLite database (file is corrupt or of another kind)"
            )
        if code == _SQLITE_CANTOPEN:
            return StoreError(f"cannot open SQLite database {target.where}: {first_line(exc)}")
    elif isinstance(exc, OperationalError):
        # psycopg reports an unreachable, refusing or unknown server/database this way.
        return StoreError(f"cannot connect to {target.where}: {first_line(exc)}")
    return StoreError(f"cannot open store {target.where}: {first_line(exc)}")


def make_target(raw: str, *, create: bool = True) -> Target:
    """Parse ``raw`` and build its engine (nothing connects yet, and nothing is created:
    :func:`make_directories` makes a new SQLite file's directories).

    Raises:
        ConfigError: the URL cannot be parsed, names an unsupported database, or is a SQLite
            URL without a file path or with query arguments (:func:`_sqlite_path`).
        UsageError: ``create`` is False and the SQLite file does not exist.
    """
    shown = mask_url(raw)
    try:
        url = parse_url(raw)
    except (ArgumentError, ValueError) as exc:
        raise ConfigError(
            f"cannot parse database URL {shown!r}: expected sqlite:///PATH or postgresql://..."
        ) from exc

    backend = url.get_backend_name()
    if backend == "sqlite":
        return _sqlite_target(url, create=create)
    if backend in ("postgresql", "postgres"):
        return _postgres_target(url)
    raise ConfigError(
        f"unsupported database URL {shown}: perfgate stores runs in SQLite (sqlite:///PATH) "
        "or PostgreSQL (postgresql://USER@HOST/DB)"
    )


def make_directories(target: Target) -> None:
    """Create the directories a new SQLite store file goes in (``target.created``).

    Raises:
        StoreError: one cannot be created.
    """
    if target.created is None:
        return
    path = target.created.path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the directory for SQLite database {path}: {exc.strerror or exc}"
        ) from exc


def _sqlite_path(url: URL) -> Path:
    """The absolute path of the store file that ``url`` (``sqlite:///PATH``) names.

    Raises:
        ConfigError: the URL names no file (``sqlite://``, ``sqlite:///``, ``:memory:``: an
            in-memory database, which keeps nothing once the command ends), a SQLite URI
            (``file:...``), or has query arguments. perfgate sets SQLite's connection
            options itself (busy timeout, transactions, read-only where the file cannot be
            written); a query argument would be ignored (SQLAlchemy only warns) or undo one
            of them (``uri=true&mode=memory`` keeps nothing again).
    """
    database = url.database or ""
    shown = f"sqlite:///{database}"
    if url.query:
        names = ", ".join(sorted(url.query))
        raise ConfigError(
            f"{shown}: a SQLite store URL takes no query arguments ({names}); perfgate sets "
            "the connection's options itself: give sqlite:///PATH"
        )
    if not database or database == ":memory:":
        raise ConfigError(
            f"{shown}: no database file path (an in-memory store would keep nothing): "
            "give sqlite:///PATH"
        )
    if database.startswith("file:"):
        raise ConfigError(f"{shown}: a SQLite URI is not a file path: give sqlite:///PATH")
    return Path(database).expanduser().absolute()


def _sqlite_target(url: URL, *, create: bool = True) -> Target:
    path = _sqlite_path(url)
    if not create and not path.is_file():
        raise UsageError(
            f"no perfgate store at {path}: nothing recorded there yet (record runs with "
            "'perfgate run' or 'perfgate ingest') or pass the right --db"
        )
    if path.is_file() and not _writable(path):
        return _read_only_target(url, path)
    created = None
    if not os.path.lexists(path):  # with the directories that do not exist yet
        missing = takewhile(lambda parent: not os.path.lexists(parent), path.parents)
        created = NewSqliteFile(path, tuple(missing))
    url = url.set(database=str(path))
    return _sqlite_engine(url, SqliteSettings(path), f"sqlite:///{path}", str(path), created)


def _writable(path: Path) -> bool:
    """Whether SQLite can write the file and its directory (for the journal or ``-wal`` and
    ``-shm`` files); ``access`` reports a read-only mount or immutable file even to root."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def _in_wal_mode(path: Path) -> bool:
    """Whether the database header says WAL (read and write versions 2, bytes 18-19)."""
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def _read_only_target(url: URL, path: Path) -> Target:
    """A SQLite file that cannot be written (file, directory or mount), opened ``mode=ro``.
    In WAL mode SQLite reads through the ``-shm`` index, which it must open or create; where
    it cannot, the file is opened ``immutable`` (nothing can be writing it there anyway)."""
    query = {"uri": "true", "mode": "ro"}
    side_files = all(Path(f"{path}-{side}").is_file() for side in ("wal", "shm"))
    if _in_wal_mode(path) and not os.access(path.parent, os.W_OK | os.X_OK) and not side_files:
        query["immutable"] = "1"
    ro_url = url.set(database=path.as_uri(), query=query)
    settings = SqliteSettings(path, read_only=True)
    return _sqlite_engine(ro_url, settings, f"sqlite:///{path}", str(path))


def _sqlite_engine(
    url: URL, settings: SqliteSettings, shown: str, where: str, created: NewSqliteFile | None = None
) -> Target:
    engine = create_engine(url)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        # Let SQLAlchemy, not the sqlite3 module, decide when a transaction begins.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if settings.wal:
                cursor.execute("PRAGMA journal_mode = WAL")
                # In WAL mode NORMAL never corrupts; a power cut may lose the last commits.
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return Target(engine, shown, where, settings, created)


def enable_wal(target: Target, conn: Connection) -> None:
    """Switch the SQLite file to WAL (outside a transaction); new connections set it too."""
    if target.sqlite is None or target.sqlite.read_only:
        return
    driver_connection = conn.connection.driver_connection
    if driver_connection is None:  # pragma: no cover - a checked-out connection always has one
        return
    try:
        driver_connection.execute("PRAGMA journal_mode = WAL").fetchall()
        driver_connection.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error:
        # A read-only file (or directory) cannot switch; it can still be read as it is.
        return
    target.sqlite.wal = True


def _postgres_target(url: URL) -> Target:
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    defaults = {"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S, "application_name": "perfgate"}
    connect_args = {key: value for key, value in defaults.items() if key not in url.query}
    shown = masked(url)
    if url.drivername == "postgresql+psycopg":
        require("psycopg", extra="postgres", feature=f"the store {shown}")
    try:
        engine = create_engine(url, connect_args=connect_args, pool_pre_ping=True)
    except (NoSuchModuleError, ImportError) as exc:
        raise StoreError(
            f"cannot use {shown}: the PostgreSQL driver is not installed "
            "(pip install 'perfgate[postgres]')"
        ) from exc
    return Target(engine=engine, url=shown, where=shown)
