"""Revision 0005_pipeline_edits: the suite's pipeline edits (table ``pipeline_edits``).

Frozen: this file says what this revision created, whatever ``perfguard.store.schema`` says
today. An older store has no edit recorded: a pipeline edited before it was upgraded still starts a
series of its own; the edits of the nights from now on continue theirs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_pipeline_edits"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pipeline_edits",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("suite", sa.String, nullable=False),
        sa.Column("pipeline", sa.String, nullable=False),
        sa.Column("before_hash", sa.String(64), nullable=False),
        sa.Column("after_hash", sa.String(64), nullable=False),
        sa.Column("passes_before", sa.JSON, nullable=False),
        sa.Column("passes_after", sa.JSON, nullable=False),
        sa.Column("good_commit", sa.String, nullable=False),
        sa.Column("bad_commit", sa.String, nullable=False),
        sa.Column("commit_sha", sa.String, nullable=True),
        sa.Column("note", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_pipeline_edits"),
        sa.UniqueConstraint("suite", "before_hash", "after_hash", "bad_commit",
                            name="uq_pipeline_edits_suite_before_hash_after_hash_bad_commit"),
    )
    op.create_index("ix_pipeline_edits_suite_after_hash", "pipeline_edits", ["suite", "after_hash"])


def downgrade() -> None:
    op.drop_index("ix_pipeline_edits_suite_after_hash", table_name="pipeline_edits")
    op.drop_table("pipeline_edits")
