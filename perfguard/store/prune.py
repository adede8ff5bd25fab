"""Pruning the history store: old documents go, with their points and nights, and what the open
changes and the last nights rest on stays.

Deletes run in chunks of 500 ids, under every backend's bound-parameter limit, all in one
transaction: a prune that fails leaves the store as it was.
"""

from __future__ import annotations

import sqlalchemy as sa

from perfguard.errors import StoreError
from perfguard.store.database import StoreConnection
from perfguard.store.schema import (
    OPEN_STATUSES,
    alerts,
    changes,
    documents,
    nights,
    points,
    utc_stamp,
)


class Pruning(StoreConnection):
    """The store's retention: :meth:`prune`."""

    def prune(self, older_than: str) -> dict[str, int]:
        """Delete documents older than ``older_than`` (an ISO time) with their points and nights,
        except what open changes rest on (their bisect document, the documents of their series'
        points at the good and bad commits) and each suite's last night. Returns the counts
        deleted: ``documents``, ``points``, ``nights``."""
        try:
            cutoff = utc_stamp(older_than)
        except ValueError:
            raise StoreError(f"prune: {older_than!r} is not an ISO-8601 time") from None
        is_open = changes.c.status.in_(OPEN_STATUSES)
        good = nights.c.document_id.is_not(None)  # a broken night stored no document
        newest = (sa.select(sa.func.max(nights.c.time).label("time"), nights.c.suite).where(good)
                  .group_by(nights.c.suite).subquery())
        last_night = sa.select(nights.c.document_id).join(
            newest, sa.and_(nights.c.suite == newest.c.suite, nights.c.time == newest.c.time)).where(good)
        keep = sa.union(
            sa.select(changes.c.bisect_document_id).where(is_open, changes.c.bisect_document_id.is_not(None)),
            sa.select(points.c.document_id).join(changes, changes.c.series_id == points.c.series_id).where(
                is_open, sa.or_(points.c.commit_sha == changes.c.good_commit,
                                points.c.commit_sha == changes.c.bad_commit)),
            last_night)
        doomed = sa.select(documents.c.id).where(documents.c.time < cutoff, documents.c.id.not_in(keep))
        with self._connect(write=True) as conn:
            ids = list(conn.execute(doomed).scalars())
            counts = {"documents": 0, "points": 0, "nights": 0}
            for start in range(0, len(ids), 500):  # under every backend's bound-parameter limit
                chunk = ids[start:start + 500]
                counts["points"] += conn.execute(points.delete().where(points.c.document_id.in_(chunk))).rowcount
                conn.execute(changes.update().where(changes.c.bisect_document_id.in_(chunk))
                             .values(bisect_document_id=None))
                conn.execute(alerts.update().where(alerts.c.fix_bisect_document_id.in_(chunk))
                             .values(fix_bisect_document_id=None))  # the fixing commit itself stays
                counts["nights"] += conn.execute(nights.delete().where(nights.c.document_id.in_(chunk))).rowcount
                counts["documents"] += conn.execute(documents.delete().where(documents.c.id.in_(chunk))).rowcount
        return counts
