"""A finding's estimated impact (``impact_ms``: the step time its suggestion could save) is
stored with it; before this revision it was dropped on save, so stored findings came back
without it and the HTML run page's "could save" column stayed empty.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("findings") as batch:
        batch.add_column(sa.Column("impact_ms", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("findings") as batch:
        batch.drop_column("impact_ms")
