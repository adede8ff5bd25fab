"""Revision 0006_alert_culprit_facts: the culprit commit's subject, author and date on its alert
(``alerts.culprit_subject``, ``culprit_author``, ``culprit_date``).

Frozen: this file says what this revision changed, whatever ``perfguard.store.schema`` says today.
The store records them when a culprit is attached to an alert (from the bisect document that named
it), so the issue writer and the history site read the alert instead of each stored bisection.
An older store's alerts with a culprit are backfilled here, the way the issue writer read them
until now: the first stored bisection of the alert's changes whose culprit is the alert's commit
(the same 7-character prefix). A bisection that does not read leaves them NULL (shown without).
"""

from __future__ import annotations

import json
import zlib

import sqlalchemy as sa
from alembic import op

revision = "0006_alert_culprit_facts"
down_revision = "0005_pipeline_edits"
branch_labels = None
depends_on = None

FACTS = ("subject", "author", "date")


def upgrade() -> None:
    with op.batch_alter_table("alerts") as batch:
        batch.add_column(sa.Column("culprit_subject", sa.String, nullable=True))
        batch.add_column(sa.Column("culprit_author", sa.String, nullable=True))
        batch.add_column(sa.Column("culprit_date", sa.String, nullable=True))
    _backfill(op.get_bind())


def downgrade() -> None:
    with op.batch_alter_table("alerts") as batch:
        batch.drop_column("culprit_date")
        batch.drop_column("culprit_author")
        batch.drop_column("culprit_subject")


def _backfill(conn: sa.Connection) -> None:
    meta = sa.MetaData()
    alerts = sa.Table("alerts", meta, autoload_with=conn)
    changes = sa.Table("changes", meta, autoload_with=conn)
    documents = sa.Table("documents", meta, autoload_with=conn)
    culprits = conn.execute(sa.select(alerts.c.id, alerts.c.culprit_commit)
                            .where(alerts.c.culprit_commit.is_not(None))).all()
    for alert_id, commit in culprits:
        bodies = conn.execute(sa.select(documents.c.body).join(changes, changes.c.bisect_document_id == documents.c.id)
                              .where(changes.c.alert_id == alert_id).order_by(changes.c.id)).scalars().all()
        facts = next((found for body in bodies if (found := _facts(body, commit)) is not None), None)
        if facts is not None:
            conn.execute(alerts.update().where(alerts.c.id == alert_id).values(
                {f"culprit_{key}": facts.get(key) for key in FACTS}))


def _facts(body: bytes, commit: str) -> dict[str, str | None] | None:
    """The subject, author and date of ``commit`` as a stored bisect document's culprits name it."""
    try:
        document: object = json.loads(zlib.decompress(body).decode("utf-8"))
    except (ValueError, zlib.error, RecursionError):
        return None
    found = document.get("culprits") if isinstance(document, dict) else None
    for culprit in found if isinstance(found, list) else ():
        named = culprit.get("commit") if isinstance(culprit, dict) else None
        if not isinstance(named, dict):
            continue
        sha = named.get("sha")
        if isinstance(sha, str) and sha and commit.startswith(sha[:7]):
            return {key: value if isinstance(value := named.get(key), str) else None for key in FACTS}
    return None
