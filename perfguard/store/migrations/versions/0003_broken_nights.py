"""Revision 0003: broken nights (``nights.status``, ``nights.note``; ``nights.document_id`` nullable).

Frozen: this file says what revision 0003 changed, whatever ``perfguard.store.schema`` says today.
An older store's nights are ``good``; a ``broken`` night (the compiler commit did not build or its
passes did not import) stores no document.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nights") as batch:
        batch.add_column(sa.Column("status", sa.String(16), nullable=False, server_default="good"))
        batch.add_column(sa.Column("note", sa.Text, nullable=False, server_default=""))
        batch.alter_column("document_id", existing_type=sa.Integer, nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM nights WHERE document_id IS NULL")
    with op.batch_alter_table("nights") as batch:
        batch.alter_column("document_id", existing_type=sa.Integer, nullable=False)
        batch.drop_column("note")
        batch.drop_column("status")
