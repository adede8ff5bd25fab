"""Revision 0001: the first schema of the history store (documents, series, points, nights, changes).

Frozen: this file says what revision 0001 created, whatever ``perfguard.store.schema`` says today.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TIME = sa.String(32)
HASH = sa.String(64)


def upgrade() -> None:
    op.create_table(
        "documents",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("sha256", HASH, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("suite", sa.String, nullable=False),
        sa.Column("time", TIME, nullable=False),
        sa.Column("commit_sha", sa.String, nullable=True),
        sa.Column("source", sa.String, nullable=False),
        sa.Column("ingested_at", TIME, nullable=False),
        sa.Column("points", sa.Integer, nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_documents"),
        sa.UniqueConstraint("sha256", name="uq_documents_sha256"),
    )
    op.create_index("ix_documents_suite_kind_time", "documents", ["suite", "kind", "time"])
    op.create_table(
        "series",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key_hash", HASH, nullable=False),
        sa.Column("suite", sa.String, nullable=False),
        sa.Column("case_id", sa.String, nullable=False),
        sa.Column("model_hash", sa.String, nullable=False),
        sa.Column("pipeline_hash", sa.String, nullable=False),
        sa.Column("backend", sa.String, nullable=False),
        sa.Column("runner_class", sa.String, nullable=False),
        sa.Column("metric", sa.String, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_series"),
        sa.UniqueConstraint("key_hash", name="uq_series_key_hash"),
    )
    op.create_index("ix_series_suite", "series", ["suite"])
    op.create_table(
        "points",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("series_id", sa.Integer, nullable=False),
        sa.Column("document_id", sa.Integer, nullable=False),
        sa.Column("time", TIME, nullable=False),
        sa.Column("commit_sha", sa.String, nullable=True),
        sa.Column("value", sa.Double, nullable=False),
        sa.Column("ci_low", sa.Double, nullable=True),
        sa.Column("ci_high", sa.Double, nullable=True),
        sa.Column("worker_values", sa.JSON, nullable=False),
        sa.Column("base_commit", sa.String, nullable=True),
        sa.Column("decision", sa.String(16), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_points"),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name="fk_points_series_id_series"),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"], name="fk_points_document_id_documents"),
    )
    op.create_index("ix_points_series_id_time_document_id", "points", ["series_id", "time", "document_id"])
    op.create_index("ix_points_document_id", "points", ["document_id"])
    op.create_table(
        "nights",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("suite", sa.String, nullable=False),
        sa.Column("commit_sha", sa.String, nullable=False),
        sa.Column("time", TIME, nullable=False),
        sa.Column("document_id", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_nights"),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"], name="fk_nights_document_id_documents"),
        sa.UniqueConstraint("suite", "document_id", name="uq_nights_suite_document_id"),
    )
    op.create_index("ix_nights_suite_time", "nights", ["suite", "time"])
    op.create_table(
        "changes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("series_id", sa.Integer, nullable=False),
        sa.Column("good_commit", sa.String, nullable=True),
        sa.Column("bad_commit", sa.String, nullable=False),
        sa.Column("time", TIME, nullable=False),
        sa.Column("ratio", sa.Double, nullable=False),
        sa.Column("ci_low", sa.Double, nullable=True),
        sa.Column("ci_high", sa.Double, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("bisect_document_id", sa.Integer, nullable=True),
        sa.Column("culprit_commit", sa.String, nullable=True),
        sa.Column("culprit_pass", sa.String, nullable=True),
        sa.Column("note", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_changes"),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name="fk_changes_series_id_series"),
        sa.ForeignKeyConstraint(["bisect_document_id"], ["documents.id"],
                                name="fk_changes_bisect_document_id_documents"),
        sa.UniqueConstraint("series_id", "bad_commit", name="uq_changes_series_id_bad_commit"),
    )
    op.create_index("ix_changes_status", "changes", ["status"])


def downgrade() -> None:
    for table in ("changes", "nights", "points", "series", "documents"):
        op.drop_table(table)
