"""Check what a database holds and bring a perfgate store to the head schema revision.

The schema is only created or changed by the alembic revisions in ``migrations/``, run on
perfgate's own connection (no alembic.ini). Before anything is written the database must be
empty (a new store) or have a ``perfgate_meta`` table naming perfgate (upgraded if behind
head, refused untouched if its revision is unknown: a newer perfgate's); anything else
(another application's tables, even alembic-managed ones) is refused untouched.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from perfgate.errors import StoreError
from perfgate.store.schema import APPLICATION, perfgate_meta

if TYPE_CHECKING:
    from alembic.config import Config


class MigrationError(Exception):
    """alembic failed while upgrading the schema (wraps its CommandError)."""


MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "alembic_version"

#: Key of the PostgreSQL advisory lock that serialises concurrent first opens.
POSTGRES_LOCK_KEY = 0x70657266676174  # "perfgat"


def alembic_config(conn: Connection | None = None) -> Config:
    """An in-memory alembic config pointing at the packaged migrations."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.set_main_option("path_separator", "os")
    if conn is not None:
        config.attributes["connection"] = conn
    return config


_REVISION_LINE = re.compile(r'^(revision|down_revision)\s*=\s*(None|"([^"]*)")', re.M)


@functools.cache
def _revisions() -> tuple[frozenset[str], str]:
    """The revisions this perfgate knows, and its head: read once from the files' ``revision``
    / ``down_revision`` lines, so opening a store at head never imports alembic (~0.6 s)."""
    parents: dict[str, str | None] = {}
    for path in sorted((MIGRATIONS_DIR / "versions").glob("*.py")):
        fields = {m.group(1): m.group(3) for m in _REVISION_LINE.finditer(path.read_text())}
        if fields.get("revision"):
            parents[str(fields["revision"])] = fields.get("down_revision")
    heads = set(parents) - {p for p in parents.values() if p}
    if len(heads) != 1:  # pragma: no cover - the package always ships one line of revisions
        raise StoreError("perfgate is installed without a single line of store migrations")
    return frozenset(parents), heads.pop()


def head_revision() -> str:
    return _revisions()[1]


def current_revision(conn: Connection, where: str) -> str | None:
    """The schema revision of the perfgate store behind ``conn`` (maybe one this perfgate
    does not know), None for an empty database; reads only.

    Raises:
        StoreError: the database is not a perfgate store.
    """
    inspector = inspect(conn)
    tables = set(inspector.get_table_names())
    if not tables and not inspector.get_view_names():
        return None

    if perfgate_meta.name not in tables:
        others = sorted(tables | set(inspector.get_view_names()))
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        raise StoreError(
            f"{where} is not a perfgate store: it holds other tables ({shown}); "
            "point perfgate at a new or empty database"
        )
    marker = conn.execute(
        select(perfgate_meta.c.value).where(perfgate_meta.c.key == "application")
    ).scalar()
    if marker != APPLICATION:
        raise StoreError(
            f"{where} is not a perfgate store: its perfgate_meta table does not name perfgate"
        )

    if VERSION_TABLE not in tables:
        raise StoreError(f"{where}: perfgate store without a schema revision ({VERSION_TABLE})")
    revisions = list(conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())
    if len(revisions) != 1:
        raise StoreError(
            f"{where}: perfgate store with {len(revisions)} schema revisions, expected one"
        )
    return str(revisions[0])


def schema_state(revision: str | None) -> str:
    """``empty`` (no store yet: no revision), ``newer`` (a revision this perfgate does not
    ship: a newer one wrote it), ``current`` (head) or ``behind``."""
    if revision is None:
        return "empty"
    if revision not in _revisions()[0]:
        return "newer"
    return "current" if revision == head_revision() else "behind"


def newer_schema_error(where: str, revision: str) -> StoreError:
    return StoreError(
        f"{where}: schema revision {revision} is newer than this perfgate understands "
        f"(head {head_revision()}); upgrade perfgate — the database was left as it is"
    )


def needs_upgrade(conn: Connection, where: str) -> bool:
    """Whether the database behind ``conn`` must be created or upgraded to head; reads only.

    Raises:
        StoreError: the database is not a perfgate store, or is one of a newer schema.
    """
    revision = current_revision(conn, where)
    state = schema_state(revision)
    if state == "newer":
        raise newer_schema_error(where, str(revision))
    return state != "current"


def upgrade(conn: Connection) -> None:
    """Run the migrations up to head inside ``conn``'s open transaction, so a revision that
    fails half-way leaves the database as it was: PostgreSQL and SQLite both roll DDL back
    (perfgate's SQLite connections issue ``BEGIN IMMEDIATE`` themselves, so pysqlite never
    commits early; alembic's batch "copy and move" of a table happens inside it too).
    """
    from alembic import command
    from alembic.util import CommandError

    try:
        command.upgrade(alembic_config(conn), "head")
    except CommandError as exc:
        raise MigrationError(str(exc)) from exc
    except (SQLAlchemyError, StoreError):
        raise
    except Exception as exc:  # a revision's own code failed: still all or nothing
        raise MigrationError(f"{type(exc).__name__}: {exc}") from exc
