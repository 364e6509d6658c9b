"""The baseline store: recorded runs in SQLite or PostgreSQL.

``open_store(url)`` opens (creating or upgrading through the packaged alembic migrations) a
store and returns a :class:`SqlStore`; every failure is a :class:`~perfgate.errors.StoreError`
with a one-line message that names the database (passwords masked).
"""

from __future__ import annotations

from perfgate.store.sql import SqlStore, open_store

__all__ = ["SqlStore", "open_store"]
