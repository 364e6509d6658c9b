"""A run measured in looks (``run --confirm``, ``check``'s more repeats or pairs) keeps the
level its looks were judged at in a column of its own (``alpha``), so that a later gate
judges it there again. Before this revision the level rode inside the run's benchmark spec
(its ``confirm_alpha`` key); it is copied out of the specs of the runs stored before, and the
key, left in those specs, is no longer read.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_BATCH = 1000


def upgrade() -> None:
    op.add_column("runs", sa.Column("alpha", sa.Double(), nullable=True))
    conn = op.get_bind()
    runs = sa.table(
        "runs",
        sa.column("id", sa.Text()),
        sa.column("spec", sa.Text()),
        sa.column("alpha", sa.Double()),
    )
    # only the specs that name a level are read (most hold "confirm_alpha":null)
    named = runs.c.spec.like('%"confirm_alpha"%') & ~runs.c.spec.like('%"confirm_alpha":null%')
    rows = []
    for run_id, spec in conn.execute(sa.select(runs.c.id, runs.c.spec).where(named)):
        level = json.loads(spec).get("confirm_alpha")
        if level is not None:
            rows.append({"run_id": run_id, "level": float(level)})
    update = (
        sa.update(runs)
        .where(runs.c.id == sa.bindparam("run_id"))
        .values(alpha=sa.bindparam("level"))
    )
    for at in range(0, len(rows), _BATCH):
        conn.execute(update, rows[at : at + _BATCH])


def downgrade() -> None:
    op.drop_column("runs", "alpha")  # ALTER TABLE ... DROP COLUMN: no table rebuild
