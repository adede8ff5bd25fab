"""Revision 0004: the commit that fixed an alert (``alerts.fix_commit``, ``fix_pass``, ``fix_bisect_document_id``).

Frozen: this file says what revision 0004 changed, whatever ``perfguard.store.schema`` says today.
An older store's alerts have no fixing commit (NULL); only alerts fixed from now on get one, when
the nightly bisects their fixing range (or the range is one commit).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("alerts") as batch:
        batch.add_column(sa.Column("fix_commit", sa.String, nullable=True))
        batch.add_column(sa.Column("fix_pass", sa.String, nullable=True))
        batch.add_column(sa.Column("fix_bisect_document_id", sa.Integer, nullable=True))
        batch.create_foreign_key("fk_alerts_fix_bisect_document_id_documents", "documents",
                                 ["fix_bisect_document_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("alerts") as batch:
        batch.drop_constraint("fk_alerts_fix_bisect_document_id_documents", type_="foreignkey")
        batch.drop_column("fix_bisect_document_id")
        batch.drop_column("fix_pass")
        batch.drop_column("fix_commit")
