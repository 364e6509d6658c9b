"""Initial perfgate store: runs, measurements, profiles and the perfgate_meta marker.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    meta = op.create_table(
        "perfgate_meta",
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )
    op.bulk_insert(meta, [{"key": "application", "value": "perfgate"}])

    op.create_table(
        "runs",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("benchmark", sa.Text(), nullable=False),
        sa.Column("branch", sa.Text(), nullable=False),
        sa.Column("commit", sa.Text(), nullable=False),
        sa.Column("base_branch", sa.Text(), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        sa.Column("fingerprint_key", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("ci", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("excluded", sa.Boolean(), nullable=False),
        sa.Column("perfgate_version", sa.Text(), nullable=False),
    )
    op.create_index("ix_runs_history", "runs", ["project", "benchmark", "started_at", "id"])
    op.create_index(
        "ix_runs_branch_history",
        "runs",
        ["project", "benchmark", "branch", "started_at", "id"],
    )
    op.create_index(
        "ix_runs_fingerprint_history",
        "runs",
        ["project", "benchmark", "fingerprint_key", "started_at", "id"],
    )

    op.create_table(
        "measurements",
        sa.Column(
            "run_id",
            sa.Text(),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("metric", sa.Text(), primary_key=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("unit", sa.Text(), nullable=False),
        sa.Column("direction", sa.Text(), nullable=False),
        sa.Column("deterministic", sa.Boolean(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("centre", sa.Double(), nullable=False),
        sa.Column("median", sa.Double(), nullable=False),
        sa.Column("mean", sa.Double(), nullable=False),
        sa.Column("mad", sa.Double(), nullable=False),
        sa.Column("p10", sa.Double(), nullable=False),
        sa.Column("p90", sa.Double(), nullable=False),
        sa.Column("p99", sa.Double(), nullable=False),
        sa.Column("min", sa.Double(), nullable=False),
        sa.Column("max", sa.Double(), nullable=False),
        sa.Column("repeat_centres", sa.Text(), nullable=False),
        sa.Column("samples", sa.Text(), nullable=False),
    )

    op.create_table(
        "profiles",
        sa.Column(
            "run_id",
            sa.Text(),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("summary", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("profiles")
    op.drop_table("measurements")
    op.drop_index("ix_runs_fingerprint_history", table_name="runs")
    op.drop_index("ix_runs_branch_history", table_name="runs")
    op.drop_index("ix_runs_history", table_name="runs")
    op.drop_table("runs")
    op.drop_table("perfgate_meta")
