"""Revision 0002: alerts (``alerts``, ``alert_events``) and the alert of each change (``changes.alert_id``).

Frozen: this file says what revision 0002 created, whatever ``perfguard.store.schema`` says today.
An older store's changes keep ``alert_id`` NULL; the next night groups its confirmed changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TIME = sa.String(32)


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("suite", sa.String, nullable=False),
        sa.Column("runner_class", sa.String, nullable=False),
        sa.Column("good_commit", sa.String, nullable=False),
        sa.Column("bad_commit", sa.String, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("culprit_commit", sa.String, nullable=True),
        sa.Column("culprit_pass", sa.String, nullable=True),
        sa.Column("explanation", sa.JSON, nullable=True),
        sa.Column("assignee", sa.String, nullable=True),
        sa.Column("issue_url", sa.String, nullable=True),
        sa.Column("fix_first_commit", sa.String, nullable=True),
        sa.Column("fix_last_commit", sa.String, nullable=True),
        sa.Column("notes", sa.Text, nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_alerts"),
        sa.UniqueConstraint("suite", "runner_class", "good_commit", "bad_commit",
                            name="uq_alerts_suite_runner_class_good_commit_bad_commit"),
    )
    op.create_index("ix_alerts_status", "alerts", ["status"])
    op.create_table(
        "alert_events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("alert_id", sa.Integer, nullable=False),
        sa.Column("who", sa.String, nullable=False),
        sa.Column("time", TIME, nullable=False),
        sa.Column("from_status", sa.String(16), nullable=True),
        sa.Column("to_status", sa.String(16), nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_alert_events"),
        sa.ForeignKeyConstraint(["alert_id"], ["alerts.id"], name="fk_alert_events_alert_id_alerts"),
    )
    op.create_index("ix_alert_events_alert_id", "alert_events", ["alert_id"])
    with op.batch_alter_table("changes") as batch:
        batch.add_column(sa.Column("alert_id", sa.Integer, nullable=True))
        batch.create_foreign_key("fk_changes_alert_id_alerts", "alerts", ["alert_id"], ["id"])
        batch.create_index("ix_changes_alert_id", ["alert_id"])


def downgrade() -> None:
    with op.batch_alter_table("changes") as batch:
        batch.drop_index("ix_changes_alert_id")
        batch.drop_constraint("fk_changes_alert_id_alerts", type_="foreignkey")
        batch.drop_column("alert_id")
    op.drop_table("alert_events")
    op.drop_table("alerts")
