"""Team store: alerts with their triage trail, accepted baseline resets, and the index the
gate's history query needs (branch and fingerprint key together).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The gate's window: equality on project, benchmark, branch and fingerprint key, newest
    # first, LIMIT baseline_window. The two older indexes each lack one of the equalities.
    op.create_index(
        "ix_runs_gate_history",
        "runs",
        ["project", "benchmark", "branch", "fingerprint_key", "started_at", "id"],
    )
    # Retention: runs by age within a project.
    op.create_index("ix_runs_started", "runs", ["project", "started_at"])

    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("benchmark", sa.Text(), nullable=False),
        sa.Column("metric", sa.Text(), nullable=False),
        sa.Column(
            "run_id", sa.Text(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("previous_run_id", sa.Text(), nullable=True),
        sa.Column("branch", sa.Text(), nullable=False),
        sa.Column("fingerprint_key", sa.Text(), nullable=False),
        sa.Column("verdict", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("change_pct", sa.Double(), nullable=True),
        sa.Column("commit_before", sa.Text(), nullable=True),
        sa.Column("commit_after", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("run_id", "metric", name="uq_alerts_run_metric"),
    )
    op.create_index("ix_alerts_project_status", "alerts", ["project", "status", "id"])
    op.create_index("ix_alerts_benchmark", "alerts", ["project", "benchmark", "metric"])

    op.create_table(
        "triage_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column(
            "alert_id",
            sa.Integer(),
            sa.ForeignKey("alerts.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("benchmark", sa.Text(), nullable=True),
        sa.Column("state", sa.Text(), nullable=True),
        sa.Column("by", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
    )
    op.create_index("ix_triage_events_project", "triage_events", ["project", "at", "id"])

    op.create_table(
        "baseline_resets",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("project", sa.Text(), nullable=False),
        sa.Column("benchmark", sa.Text(), nullable=False),
        sa.Column("commit", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("by", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
    )
    op.create_index(
        "ix_baseline_resets_benchmark", "baseline_resets", ["project", "benchmark", "id"]
    )


def downgrade() -> None:
    op.drop_table("baseline_resets")
    op.drop_table("triage_events")
    op.drop_table("alerts")
    op.drop_index("ix_runs_started", table_name="runs")
    op.drop_index("ix_runs_gate_history", table_name="runs")
