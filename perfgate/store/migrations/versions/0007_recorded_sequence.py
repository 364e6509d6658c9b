"""Runs carry the order the store recorded them in (``recorded_seq``: 1, 2, 3, ...), and
"the latest run" of a branch is the latest recorded, not the latest ``started_at``: a run
stamped by a runner whose clock said 2099 was the branch's latest run until 2099. Runs
stored before this revision are numbered in the order of their start (the order the old
query took them in), oldest first.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_BATCH = 1000


def upgrade() -> None:
    # Nullable in the database: making it NOT NULL would make SQLite rebuild the table, and
    # dropping the old ``runs`` would cascade to every measurement. The store fills it on
    # every insert.
    op.add_column("runs", sa.Column("recorded_seq", sa.BigInteger(), nullable=True))
    conn = op.get_bind()
    runs = sa.table(
        "runs",
        sa.column("id", sa.Text()),
        sa.column("started_at", sa.DateTime()),
        sa.column("recorded_seq", sa.BigInteger()),
    )
    ids = conn.execute(sa.select(runs.c.id).order_by(runs.c.started_at, runs.c.id)).scalars().all()
    update = (
        sa.update(runs)
        .where(runs.c.id == sa.bindparam("run_id"))
        .values(recorded_seq=sa.bindparam("seq"))
    )
    for at in range(0, len(ids), _BATCH):
        rows = [
            {"run_id": run_id, "seq": at + i + 1} for i, run_id in enumerate(ids[at : at + _BATCH])
        ]
        conn.execute(update, rows)
    op.create_index(
        "ix_runs_branch_recorded", "runs", ["project", "benchmark", "branch", "recorded_seq"]
    )


def downgrade() -> None:
    op.drop_index("ix_runs_branch_recorded", table_name="runs")
    op.drop_column("runs", "recorded_seq")  # ALTER TABLE ... DROP COLUMN: no table rebuild
