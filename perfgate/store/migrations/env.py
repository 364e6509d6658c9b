"""Alembic environment for the perfgate store.

perfgate runs its migrations itself (``perfgate.store.migrate``), on a connection it has
already opened and put in a transaction; that connection arrives in
``config.attributes["connection"]``. There is no alembic.ini and no offline (SQL script) mode.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError(
        "perfgate migrations run only through perfgate.store.open_store, on an open connection"
    )

context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
