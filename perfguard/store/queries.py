"""What the history store answers and records about its series: the series with their points,
the nights of each suite, and the changes found in the series with their status and attribution.

Reads run in a plain ``BEGIN`` (SQLite, WAL: never waiting for a writer); each method is one
transaction. ``Store.all_points`` reads every series in one query, ordered by the index on
(``series_id``, ``time``, ``document_id``), without a sort.
"""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import sqlalchemy as sa

from perfguard.errors import StoreError
from perfguard.store import schema
from perfguard.store.database import StoreConnection, insert_ignoring
from perfguard.store.rows import Change, Night, Point, Series, night_of, series_key
from perfguard.store.schema import (
    OPEN_STATUSES,
    STATUSES,
    changes,
    documents,
    nights,
    points,
    series,
    utc_stamp,
)


class Querying(StoreConnection):
    """The store's series and points, nights and changes."""

    # --- series and points --------------------------------------------------------------------

    def series(self, *, suite: str | None = None, case: str | None = None, metric: str | None = None,
               kind: str | None = None) -> list[Series]:
        """Every series with points, filtered: ``suite``, ``metric``, ``kind`` exactly; ``case`` a
        glob (``resnet*/cpu``) or a substring of the case id. Ordered by suite, case, metric, kind."""
        stats = (sa.select(points.c.series_id, sa.func.count().label("n"), sa.func.min(points.c.time).label("first"),
                           sa.func.max(points.c.time).label("last"))
                 .group_by(points.c.series_id).subquery())
        latest = points.alias("latest")
        last_value = (sa.select(latest.c.value).where(latest.c.series_id == series.c.id)
                      .order_by(latest.c.time.desc(), latest.c.document_id.desc(), latest.c.id.desc())
                      .limit(1).scalar_subquery())
        query = (sa.select(series, stats.c.n, stats.c.first, stats.c.last, last_value.label("last_value"))
                 .join(stats, stats.c.series_id == series.c.id)
                 .order_by(series.c.suite, series.c.case_id, series.c.metric, series.c.kind, series.c.id))
        for column, value in ((series.c.suite, suite), (series.c.metric, metric), (series.c.kind, kind)):
            if value is not None:
                query = query.where(column == value)
        with self._connect(write=False) as conn:
            rows = conn.execute(query).all()
        found = [Series(int(r.id), series_key(r), int(r.n), r.first, r.last, float(r.last_value)) for r in rows]
        if case is not None:
            found = [s for s in found if case in s.key.case or fnmatch.fnmatchcase(s.key.case, case)]
        return found

    def points(self, series_id: int) -> list[Point]:
        """The points of one series, ordered by time, then document."""
        return self._points(points.c.series_id == series_id).get(series_id, [])

    def all_points(self, *, kind: str | None = None) -> dict[int, list[Point]]:
        """Every series' points (of ``kind``, if given) by series id, in one query."""
        where = None if kind is None else points.c.series_id.in_(sa.select(series.c.id).where(series.c.kind == kind))
        return self._points(where)

    def _points(self, where: Any) -> dict[int, list[Point]]:
        p = points.c
        # The per-worker lists come back as text and are decoded in one json.loads of all of them:
        # one call per point was half the time of reading 550k points.
        query = sa.select(p.series_id, p.document_id, p.time, p.commit_sha, p.value, p.ci_low, p.ci_high,
                          sa.cast(p.worker_values, sa.Text), p.base_commit, p.decision
                          ).order_by(p.series_id, p.time, p.document_id)
        if where is not None:
            query = query.where(where)
        with self._connect(write=False) as conn:
            rows = conn.execute(query).all()
        try:  # not parse_json: its checks would double the cost here, and the store wrote these lists
            values = json.loads("[" + ",".join(row[7] for row in rows) + "]")
        except (ValueError, RecursionError) as exc:  # a row edited by hand: one line, never exit 70
            raise StoreError(f"history store {self.url}: corrupt worker values in a point ({type(exc).__name__})") from None
        out: dict[int, list[Point]] = {}
        bucket: list[Point] = []
        current = None
        for (series_id, document_id, time, commit, value, low, high, _, base, decision), worker in zip(
                rows, values, strict=True):
            if series_id != current:
                current, bucket = series_id, out.setdefault(series_id, [])
            bucket.append(Point(series_id, document_id, time, commit, value, low, high, tuple(worker), base, decision))
        return out

    # --- nights -------------------------------------------------------------------------------

    def record_night(self, suite: str, commit: str, document_id: int, time: str | None = None) -> Night:
        """Record a nightly run of ``suite`` at ``commit`` that stored ``document_id`` (its time: the
        document's unless given). Recording the same document again returns the same night."""
        with self._connect(write=True) as conn:
            stored = conn.execute(sa.select(documents.c.time).where(documents.c.id == document_id)).scalar()
            if stored is None:
                raise StoreError(f"history store {self.url}: no document {document_id} to record a night of")
            stamp = utc_stamp(time) if time else stored
            conn.execute(insert_ignoring(conn, nights).values(suite=suite, commit_sha=commit, time=stamp,
                                                      document_id=document_id)
                         .on_conflict_do_nothing(index_elements=["suite", "document_id"]))
            row = conn.execute(sa.select(nights).where(nights.c.suite == suite,
                                                       nights.c.document_id == document_id)).one()
        return night_of(row)

    def record_broken_night(self, suite: str, commit: str, note: str) -> Night:
        """Record a ``broken`` night of ``suite`` at ``commit`` (it did not build or its passes did not
        import: no document), with why (``note``)."""
        with self._connect(write=True) as conn:
            night_id = conn.execute(nights.insert().values(suite=suite, commit_sha=commit, time=schema.utc_now(),
                                                           document_id=None, status="broken", note=note)
                                    .returning(nights.c.id)).scalar_one()
            row = conn.execute(sa.select(nights).where(nights.c.id == night_id)).one()
        return night_of(row)

    def last_night(self, suite: str, *, good: bool = False) -> Night | None:
        """The newest night of ``suite`` (with ``good``, the newest that was not broken: what the
        next night is checked against), or None before its first."""
        if good:
            return next((n for n in reversed(self.nights(suite)) if not n.broken), None)
        found = self._nights(suite, newest_first=True, limit=1)
        return found[0] if found else None

    def nights(self, suite: str) -> list[Night]:
        """Every night of ``suite``, oldest first."""
        return self._nights(suite, newest_first=False, limit=None)

    def _nights(self, suite: str, *, newest_first: bool, limit: int | None) -> list[Night]:
        order = (nights.c.time.desc(), nights.c.id.desc()) if newest_first else (nights.c.time, nights.c.id)
        with self._connect(write=False) as conn:
            rows = conn.execute(sa.select(nights).where(nights.c.suite == suite).order_by(*order).limit(limit)).all()
        return [night_of(r) for r in rows]

    # --- changes ------------------------------------------------------------------------------

    def upsert_change(self, series_id: int, *, good_commit: str | None, bad_commit: str | None, time: str,
                      ratio: float, ci_low: float | None, ci_high: float | None, status: str,
                      note: str = "") -> Change:
        """Record a change of a series at ``bad_commit``; the same series and bad commit again
        updates its status, size and interval (and its good commit and note, when given)."""
        _check_status(status)
        bad = bad_commit or ""
        with self._connect(write=True) as conn:
            conn.execute(insert_ignoring(conn, changes).values(
                series_id=series_id, good_commit=good_commit, bad_commit=bad, time=utc_stamp(time), ratio=ratio,
                ci_low=ci_low, ci_high=ci_high, status=status, note=note)
                .on_conflict_do_nothing(index_elements=["series_id", "bad_commit"]))
            update: dict[str, object] = {"ratio": ratio, "ci_low": ci_low, "ci_high": ci_high, "status": status}
            if good_commit is not None:
                update["good_commit"] = good_commit
            if note:
                update["note"] = note
            conn.execute(changes.update().where(changes.c.series_id == series_id, changes.c.bad_commit == bad)
                         .values(**update))
            change_id = conn.execute(sa.select(changes.c.id).where(changes.c.series_id == series_id,
                                                                   changes.c.bad_commit == bad)).scalar_one()
        return self._changes(id=change_id)[0]

    def changes(self, *, status: str | None = None, suite: str | None = None) -> list[Change]:
        """Changes with ``status`` (None: the open ones, pending and confirmed), of ``suite`` if
        given, oldest first."""
        if status is not None:
            _check_status(status)
        return self._changes(status=status, suite=suite)

    def change(self, change_id: int) -> Change | None:
        """The change ``change_id``, whatever its status (None: no such change)."""
        found = self._changes(id=change_id)
        return found[0] if found else None

    def _changes(self, *, id: int | None = None, status: str | None = None, suite: str | None = None) -> list[Change]:
        if id is not None:
            return self._changes_where(changes.c.id == id)
        where = [changes.c.status.in_(OPEN_STATUSES) if status is None else changes.c.status == status]
        if suite is not None:
            where.append(series.c.suite == suite)
        return self._changes_where(*where)

    def _changes_where(self, *where: Any) -> list[Change]:
        """The changes matching ``where`` (clauses on ``changes`` and ``series``), oldest first."""
        query = (sa.select(changes, series).join(series, series.c.id == changes.c.series_id).where(*where)
                 .order_by(changes.c.time, changes.c.id))
        with self._connect(write=False) as conn:
            rows = conn.execute(query).mappings().all()
        c = changes.c
        return [Change(r[c.id], r[c.series_id], series_key(r, series_columns=True), r[c.good_commit],
                       r[c.bad_commit] or None, r[c.time], r[c.ratio], r[c.ci_low], r[c.ci_high], r[c.status],
                       r[c.bisect_document_id], r[c.culprit_commit], r[c.culprit_pass], r[c.note], r[c.alert_id])
                for r in rows]

    def set_change_status(self, change_id: int, status: str, note: str = "") -> None:
        """Set a change's status (and its note, when given)."""
        _check_status(status)
        values: dict[str, object] = {"status": status, **({"note": note} if note else {})}
        self._update_change(change_id, changes.update().where(changes.c.id == change_id).values(**values))

    def link_bisect(self, change_id: int, document_id: int, culprit_commit: str | None,
                    culprit_pass: str | None) -> None:
        """Attach the bisect document that attributed a change, with its culprit commit and pass."""
        self._update_change(change_id, changes.update().where(changes.c.id == change_id).values(
            bisect_document_id=document_id, culprit_commit=culprit_commit, culprit_pass=culprit_pass))

    def _update_change(self, change_id: int, statement: Any) -> None:
        with self._connect(write=True) as conn:
            if conn.execute(statement).rowcount == 0:
                raise StoreError(f"history store {self.url}: no change {change_id}")


def _check_status(status: str) -> None:
    if status not in STATUSES:
        raise ValueError(f"change status {status!r} is not one of {', '.join(STATUSES)}")
