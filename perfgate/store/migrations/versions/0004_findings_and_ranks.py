"""Advisor findings stored with their run, and one profile per rank of a multi-device job.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "findings",
        sa.Column(
            "run_id", sa.Text(), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("severity", sa.Text(), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("suggestion", sa.Text(), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=False),
    )
    op.create_table(
        "rank_profiles",
        sa.Column(
            "run_id", sa.Text(), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rank_profiles")
    op.drop_table("findings")
