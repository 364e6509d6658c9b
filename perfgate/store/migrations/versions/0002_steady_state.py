"""Steady-state summaries: how many warm-up samples were left out, and the centre's
within-process standard error.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("measurements") as batch:
        batch.add_column(sa.Column("dropped", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("centre_se", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("measurements") as batch:
        batch.drop_column("centre_se")
        batch.drop_column("dropped")
