"""The history store: every result, verdicts and bisect document perfguard made (and the runs of
other tools imported by :mod:`perfguard.formats`: pytest-benchmark and asv files, stored as read
under their own kind), and the series of points they give, in SQLite (one file, the default) or
PostgreSQL (a fleet of runners).

This module owns the store's contract: its URL (``--store``, ``$PERFGUARD_STORE``, a file path
or ``sqlite:///PATH`` or ``postgresql://USER:PASSWORD@HOST[:PORT]/DATABASE``), the typed rows it
answers with (:class:`Series`, :class:`Point`, :class:`Night`, :class:`Change`), and
:class:`Store`, whose methods are each one transaction. The tables and migrations are
:mod:`perfguard.history.schema`'s; what a document gives is :mod:`perfguard.history.ingest`'s.

Concurrency: any number of processes may write one store. On SQLite every write transaction
starts with ``BEGIN IMMEDIATE`` (writers queue on the file lock, up to a 60 s busy timeout,
instead of failing on a lock upgrade) in WAL mode (readers never wait for a writer); the first
open's switch of a new file to WAL, which SQLite refuses at once instead of waiting, is retried
up to the same timeout, and the schema is created under ``BEGIN IMMEDIATE``. On PostgreSQL,
series rows are created with "insert ... on conflict do nothing" in a fixed order, so concurrent
writers neither fail nor deadlock; the first schema creation is serialized by an
advisory lock. A writer killed mid-document leaves nothing of it: a document and its points are
one transaction.

Every failure is a :class:`StoreError`: one line that names the store (its password masked) and
what to fix. SQLAlchemy, Alembic and psycopg load when a store is opened, not when this module is
imported.
"""

from __future__ import annotations

import fnmatch
import json
import os
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfguard.errors import StorageError, UserError, one_line
from perfguard.history.ingest import SeriesKey as SeriesKey
from perfguard.redact import redact, redact_url

if TYPE_CHECKING:
    from sqlalchemy import Row
    from sqlalchemy.engine import Connection, Engine

    from perfguard.history.ingest import Extracted, PointRow

DEFAULT_STORE = Path(".perfguard") / "history.sqlite"
STORE_ENV = "PERFGUARD_STORE"
URL_HINT = "use a file path, sqlite:///PATH or postgresql://USER:PASSWORD@HOST[:PORT]/DATABASE"
# pg_advisory_xact_lock key of the schema migration: any constant that nothing else uses.
_MIGRATION_LOCK = 0x70657266  # "perf"
_SQLITE_BUSY_TIMEOUT_S = 60.0


class StoreError(UserError):
    """The history store cannot be opened, read or written (a bad URL, an unreachable server,
    wrong credentials, a newer schema, a corrupt document); the message names the store."""


def store_url(arg: str | None) -> str:
    """The store's URL: ``arg`` (``--store``), else ``$PERFGUARD_STORE``, else the SQLite file
    ``.perfguard/history.sqlite`` in the current folder. A value without ``://`` is a SQLite file."""
    value = arg or os.environ.get(STORE_ENV) or str(DEFAULT_STORE)
    if "://" in value:
        return value
    return f"sqlite:///{Path(value).expanduser().absolute()}"


def display_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (works on a malformed URL too): the one
    redaction of :mod:`perfguard.redact`, which the traceback file and error documents use too."""
    return redact_url(url)


@dataclass(frozen=True)
class Series:
    """A series with its number of points, first and last time and last value."""

    id: int
    key: SeriesKey
    points: int
    first_time: str
    last_time: str
    last_value: float


@dataclass(frozen=True)
class Point:
    """One value of a series from one document (see :mod:`perfguard.history.ingest`)."""

    series_id: int
    document_id: int
    time: str
    commit: str | None
    value: float
    ci_low: float | None
    ci_high: float | None
    values: tuple[float, ...]
    base_commit: str | None
    decision: str | None


@dataclass(frozen=True)
class Ingested:
    """What an ingest did: the document's id and kind, whether it was new, the points it added."""

    document_id: int
    kind: str
    new: bool
    points: int


@dataclass(frozen=True)
class Night:
    """A nightly run of a suite: the commit it measured and the document it stored."""

    id: int
    suite: str
    commit: str
    time: str
    document_id: int


@dataclass(frozen=True)
class Change:
    """A change found in a series: commit range, size with interval, status, attribution."""

    id: int
    series_id: int
    key: SeriesKey
    good_commit: str | None
    bad_commit: str | None
    time: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    status: str
    bisect_document_id: int | None
    culprit_commit: str | None
    culprit_pass: str | None
    note: str


def _reason(exc: BaseException, password: str | None) -> str:
    """One line from a driver's exception (without SQLAlchemy's statement and parameters), the
    password scrubbed even where a driver echoes it."""
    orig = getattr(exc, "orig", None)
    text = redact(one_line(orig if isinstance(orig, BaseException) else exc))
    return text.replace(password, "***") if password else text


class Store:
    """An open history store. Open with :meth:`open`; close with :meth:`close` or ``with``."""

    def __init__(self, engine: Engine, url: str, password: str | None) -> None:
        self._engine = engine
        self._display = display_url(url)
        self._password = password

    # --- opening ------------------------------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, create: bool = True, migrations: Path | None = None) -> Store:
        """Connect to the store at ``url`` and bring its schema to this perfguard's head revision
        (create it when ``create``; migrate an older one). A store written by a newer perfguard is
        refused; with ``create=False`` a missing store is a ``StoreError`` saying how to make one.
        ``migrations`` (tests): another Alembic script folder instead of the shipped one."""
        from sqlalchemy.exc import SQLAlchemyError

        engine, password = _engine(url, create)
        store = cls(engine, url, password)
        try:
            store._migrate(create, migrations)
        except SQLAlchemyError as exc:
            engine.dispose()
            raise StoreError(f"cannot open the history store {store.url}: {_reason(exc, password)}; check the "
                             "URL, that the server is up and the credentials (--store or $PERFGUARD_STORE)") from None
        except BaseException:
            engine.dispose()
            raise
        return store

    def _migrate(self, create: bool, migrations: Path | None) -> None:
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory

        from perfguard.history import schema

        folder = migrations or schema.MIGRATIONS_DIR
        script = ScriptDirectory(str(folder))
        head = script.get_current_head()

        def current(conn: Connection) -> tuple[str, ...]:
            revisions = MigrationContext.configure(conn).get_current_heads()
            for revision in revisions:
                if revision not in {s.revision for s in script.walk_revisions()}:
                    raise StoreError(f"the history store {self.url} was written by a newer perfguard (schema "
                                     f"revision {revision}; this one knows up to {head}): upgrade perfguard")
            return revisions

        with self._engine.connect() as conn:
            conn.execution_options(perfguard_read=True)
            if current(conn) == (head,):
                return
        if not create:
            raise StoreError(f"no history store at {self.url} (run `perfguard history ingest` or "
                             "`perfguard nightly` first)")
        from alembic import command
        from alembic.config import Config

        with self._engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE, one migrator at a time
            if conn.dialect.name == "postgresql":
                import sqlalchemy as sa

                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
            if current(conn) == (head,):
                return  # a concurrent first writer created it while this one waited
            config = Config()
            config.set_main_option("script_location", str(folder))
            config.set_main_option("path_separator", "os")
            config.attributes["connection"] = conn
            command.upgrade(config, "head")

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The store's URL as it may be shown (password masked)."""
        return self._display

    @contextmanager
    def _connect(self, write: bool) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back on an exception; database
        errors become ``StoreError``."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            if write:
                with self._engine.begin() as conn:
                    yield conn
            else:
                with self._engine.connect() as conn:
                    conn.execution_options(perfguard_read=True)
                    yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"history store {self.url}: {_reason(exc, self._password)}") from None

    # --- documents ----------------------------------------------------------------------------

    def ingest(self, data: Any, *, source: str = "", extracted: Extracted | None = None) -> Ingested:
        """Store one document (the parsed JSON of a result, verdicts or bisect document) and its
        points in one transaction. The same document again (same canonical JSON) is the same
        record: ``new=False``, no points added. A document that is not valid is refused with its
        parser's one-line message, as a ``StoreError``.

        ``extracted``: what the document gives, already validated by its reader (a file of another
        tool, :mod:`perfguard.formats`: its kind, suite, time, commit and points); ``data`` is then
        stored as it is, under that kind, and not parsed again."""
        import sqlalchemy as sa

        from perfguard.history import ingest as extract
        from perfguard.history.schema import documents, utc_now, utc_stamp

        text = extract.canonical_json(data)
        digest = extract.document_hash(text)
        label = source or "<document>"
        with self._connect(write=False) as conn:
            known = conn.execute(sa.select(documents.c.id, documents.c.kind)
                                 .where(documents.c.sha256 == digest)).first()
        if known is not None:
            return Ingested(known.id, known.kind, False, 0)
        try:
            found = extracted or extract.extract(data, label)
        except StorageError as exc:
            raise StoreError(str(exc)) from None
        now = utc_now()
        try:
            time = utc_stamp(found.time) if found.time else now
            rows = [(row, utc_stamp(row.time) if row.time else time) for row in found.points]
        except ValueError as exc:
            raise StoreError(f"{label}: corrupt {found.kind} document: a time that is not ISO 8601 ({exc})") from None
        with self._connect(write=True) as conn:
            inserted = conn.execute(
                _insert(conn, documents).values(
                    sha256=digest, kind=found.kind, suite=found.suite, time=time, commit_sha=found.commit,
                    source=source, ingested_at=now, points=len(rows), body=zlib.compress(text.encode("utf-8")))
                .on_conflict_do_nothing(index_elements=["sha256"]).returning(documents.c.id)).first()
            if inserted is None:  # a concurrent writer stored it first
                known = conn.execute(sa.select(documents.c.id, documents.c.kind)
                                     .where(documents.c.sha256 == digest)).one()
                return Ingested(known.id, known.kind, False, 0)
            document_id = int(inserted.id)
            self._insert_points(conn, document_id, rows)
        return Ingested(document_id, found.kind, True, len(rows))

    @staticmethod
    def _insert_points(conn: Connection, document_id: int, rows: Sequence[tuple[PointRow, str]]) -> None:
        import sqlalchemy as sa

        from perfguard.history.schema import points, series

        if not rows:
            return
        keys = {row.key.hash(): row.key for row, _ in rows}
        # In key order: concurrent writers lock new series rows in one order and cannot deadlock.
        conn.execute(_insert(conn, series).on_conflict_do_nothing(index_elements=["key_hash"]), [
            {"key_hash": h, "suite": k.suite, "case_id": k.case, "model_hash": k.model_hash,
             "pipeline_hash": k.pipeline_hash, "backend": k.backend, "runner_class": k.runner_class,
             "metric": k.metric, "kind": k.kind} for h, k in sorted(keys.items())])
        ids = {r.key_hash: r.id for r in conn.execute(sa.select(series.c.key_hash, series.c.id)
                                                      .where(series.c.key_hash.in_(list(keys))))}
        conn.execute(points.insert(), [
            {"series_id": ids[row.key.hash()], "document_id": document_id, "time": time, "commit_sha": row.commit,
             "value": row.value, "ci_low": row.ci_low, "ci_high": row.ci_high, "worker_values": list(row.values),
             "base_commit": row.base_commit, "decision": row.decision} for row, time in rows])

    def ingest_file(self, path: str | Path) -> Ingested:
        """Read a document file and :meth:`ingest` it (``source``: the path)."""
        from perfguard.results.documents import read_json

        try:
            data = read_json(Path(path), missing="{path}: file not found", not_json="{path}: not JSON ({exc})")
        except StorageError as exc:
            raise StoreError(str(exc)) from None
        return self.ingest(data, source=str(path))

    def document(self, document_id: int) -> Any:
        """The stored JSON document, as ingested."""
        import sqlalchemy as sa

        from perfguard.history.schema import documents

        with self._connect(write=False) as conn:
            body = conn.execute(sa.select(documents.c.body).where(documents.c.id == document_id)).scalar()
        if body is None:
            raise StoreError(f"history store {self.url}: no document {document_id}")
        return json.loads(zlib.decompress(body))

    def latest_results(self, suite: str) -> list[tuple[int, Any]]:
        """(document id, result JSON) of every stored result of ``suite``, newest first: result
        documents, and the candidate result inside verdicts documents."""
        import sqlalchemy as sa

        from perfguard.history.ingest import candidate_label
        from perfguard.history.schema import documents

        with self._connect(write=False) as conn:
            found = conn.execute(sa.select(documents.c.id, documents.c.kind, documents.c.body)
                                 .where(documents.c.suite == suite, documents.c.kind.in_(("result", "verdicts")))
                                 .order_by(documents.c.time.desc(), documents.c.id.desc())).all()
        out = []
        for row in found:
            data = json.loads(zlib.decompress(row.body))
            if row.kind == "verdicts":
                label = candidate_label(data.get("results") or {})
                data = data["results"][label] if label else None
            if data is not None:
                out.append((int(row.id), data))
        return out

    def prune(self, older_than: str) -> dict[str, int]:
        """Delete documents older than ``older_than`` (an ISO time) with their points and nights,
        except what open changes rest on (their bisect document, the documents of their series'
        points at the good and bad commits) and each suite's last night. Returns the counts
        deleted: ``documents``, ``points``, ``nights``."""
        import sqlalchemy as sa

        from perfguard.history.schema import OPEN_STATUSES, changes, documents, nights, points, utc_stamp

        try:
            cutoff = utc_stamp(older_than)
        except ValueError:
            raise StoreError(f"prune: {older_than!r} is not an ISO-8601 time") from None
        is_open = changes.c.status.in_(OPEN_STATUSES)
        newest = sa.select(sa.func.max(nights.c.time).label("time"), nights.c.suite).group_by(nights.c.suite).subquery()
        last_night = sa.select(nights.c.document_id).join(
            newest, sa.and_(nights.c.suite == newest.c.suite, nights.c.time == newest.c.time))
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
                counts["nights"] += conn.execute(nights.delete().where(nights.c.document_id.in_(chunk))).rowcount
                counts["documents"] += conn.execute(documents.delete().where(documents.c.id.in_(chunk))).rowcount
        return counts

    # --- series and points --------------------------------------------------------------------

    def series(self, *, suite: str | None = None, case: str | None = None, metric: str | None = None,
               kind: str | None = None) -> list[Series]:
        """Every series with points, filtered: ``suite``, ``metric``, ``kind`` exactly; ``case`` a
        glob (``resnet*/cpu``) or a substring of the case id. Ordered by suite, case, metric, kind."""
        import sqlalchemy as sa

        from perfguard.history.schema import points, series

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
        found = [Series(int(r.id), _series_key(r), int(r.n), r.first, r.last, float(r.last_value)) for r in rows]
        if case is not None:
            found = [s for s in found if case in s.key.case or fnmatch.fnmatchcase(s.key.case, case)]
        return found

    def points(self, series_id: int) -> list[Point]:
        """The points of one series, ordered by time, then document."""
        from perfguard.history.schema import points

        return self._points(points.c.series_id == series_id).get(series_id, [])

    def all_points(self, *, kind: str | None = None) -> dict[int, list[Point]]:
        """Every series' points (of ``kind``, if given) by series id, in one query."""
        import sqlalchemy as sa

        from perfguard.history.schema import points, series

        where = None if kind is None else points.c.series_id.in_(sa.select(series.c.id).where(series.c.kind == kind))
        return self._points(where)

    def _points(self, where: Any) -> dict[int, list[Point]]:
        import sqlalchemy as sa

        from perfguard.history.schema import points

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
        values = json.loads("[" + ",".join(row[7] for row in rows) + "]")
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
        import sqlalchemy as sa

        from perfguard.history.schema import documents, nights, utc_stamp

        with self._connect(write=True) as conn:
            stored = conn.execute(sa.select(documents.c.time).where(documents.c.id == document_id)).scalar()
            if stored is None:
                raise StoreError(f"history store {self.url}: no document {document_id} to record a night of")
            stamp = utc_stamp(time) if time else stored
            conn.execute(_insert(conn, nights).values(suite=suite, commit_sha=commit, time=stamp,
                                                      document_id=document_id)
                         .on_conflict_do_nothing(index_elements=["suite", "document_id"]))
            row = conn.execute(sa.select(nights).where(nights.c.suite == suite,
                                                       nights.c.document_id == document_id)).one()
        return _night(row)

    def last_night(self, suite: str) -> Night | None:
        """The newest night of ``suite``, or None before its first."""
        found = self._nights(suite, newest_first=True, limit=1)
        return found[0] if found else None

    def nights(self, suite: str) -> list[Night]:
        """Every night of ``suite``, oldest first."""
        return self._nights(suite, newest_first=False, limit=None)

    def _nights(self, suite: str, *, newest_first: bool, limit: int | None) -> list[Night]:
        import sqlalchemy as sa

        from perfguard.history.schema import nights

        order = (nights.c.time.desc(), nights.c.id.desc()) if newest_first else (nights.c.time, nights.c.id)
        with self._connect(write=False) as conn:
            rows = conn.execute(sa.select(nights).where(nights.c.suite == suite).order_by(*order).limit(limit)).all()
        return [_night(r) for r in rows]

    # --- changes ------------------------------------------------------------------------------

    def upsert_change(self, series_id: int, *, good_commit: str | None, bad_commit: str | None, time: str,
                      ratio: float, ci_low: float | None, ci_high: float | None, status: str,
                      note: str = "") -> Change:
        """Record a change of a series at ``bad_commit``; the same series and bad commit again
        updates its status, size and interval (and its good commit and note, when given)."""
        import sqlalchemy as sa

        from perfguard.history.schema import changes, utc_stamp

        _check_status(status)
        bad = bad_commit or ""
        with self._connect(write=True) as conn:
            conn.execute(_insert(conn, changes).values(
                series_id=series_id, good_commit=good_commit, bad_commit=bad, time=utc_stamp(time), ratio=ratio,
                ci_low=ci_low, ci_high=ci_high, status=status, note=note)
                .on_conflict_do_nothing(index_elements=["series_id", "bad_commit"]))
            update: dict[str, Any] = {"ratio": ratio, "ci_low": ci_low, "ci_high": ci_high, "status": status}
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

    def _changes(self, *, id: int | None = None, status: str | None = None, suite: str | None = None) -> list[Change]:
        import sqlalchemy as sa

        from perfguard.history.schema import OPEN_STATUSES, changes, series

        query = (sa.select(changes, series).join(series, series.c.id == changes.c.series_id)
                 .order_by(changes.c.time, changes.c.id))
        if id is not None:
            query = query.where(changes.c.id == id)
        else:
            query = query.where(changes.c.status.in_(OPEN_STATUSES) if status is None else changes.c.status == status)
        if suite is not None:
            query = query.where(series.c.suite == suite)
        with self._connect(write=False) as conn:
            rows = conn.execute(query).mappings().all()
        c = changes.c
        return [Change(r[c.id], r[c.series_id], _series_key(r, series_columns=True), r[c.good_commit],
                       r[c.bad_commit] or None, r[c.time], r[c.ratio], r[c.ci_low], r[c.ci_high], r[c.status],
                       r[c.bisect_document_id], r[c.culprit_commit], r[c.culprit_pass], r[c.note]) for r in rows]

    def set_change_status(self, change_id: int, status: str, note: str = "") -> None:
        """Set a change's status (and its note, when given)."""
        from perfguard.history.schema import changes

        _check_status(status)
        values: dict[str, Any] = {"status": status, **({"note": note} if note else {})}
        self._update_change(change_id, changes.update().where(changes.c.id == change_id).values(**values))

    def link_bisect(self, change_id: int, document_id: int, culprit_commit: str | None,
                    culprit_pass: str | None) -> None:
        """Attach the bisect document that attributed a change, with its culprit commit and pass."""
        from perfguard.history.schema import changes

        self._update_change(change_id, changes.update().where(changes.c.id == change_id).values(
            bisect_document_id=document_id, culprit_commit=culprit_commit, culprit_pass=culprit_pass))

    def _update_change(self, change_id: int, statement: Any) -> None:
        with self._connect(write=True) as conn:
            if conn.execute(statement).rowcount == 0:
                raise StoreError(f"history store {self.url}: no change {change_id}")


# --- helpers ----------------------------------------------------------------------------------------

def _check_status(status: str) -> None:
    from perfguard.history.schema import STATUSES

    if status not in STATUSES:
        raise ValueError(f"change status {status!r} is not one of {', '.join(STATUSES)}")


def _series_key(row: Any, *, series_columns: bool = False) -> SeriesKey:
    if series_columns:  # a mapping row of a join: address the series table's columns
        from perfguard.history.schema import series

        s = series.c
        return SeriesKey(row[s.suite], row[s.case_id], row[s.model_hash], row[s.pipeline_hash], row[s.backend],
                         row[s.runner_class], row[s.metric], row[s.kind])
    return SeriesKey(row.suite, row.case_id, row.model_hash, row.pipeline_hash, row.backend, row.runner_class,
                     row.metric, row.kind)


def _night(row: Row[Any]) -> Night:
    return Night(int(row.id), row.suite, row.commit_sha, row.time, int(row.document_id))


def _insert(conn: Connection, table: Any) -> Any:
    """An INSERT with ``on_conflict_do_nothing`` for the connection's backend."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def _engine(url: str, create: bool) -> tuple[Engine, str | None]:
    """An engine for ``url`` with the backend's settings, and the URL's password (to scrub it from
    driver messages); a bad URL or SQLite path is a ``StoreError``."""
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    shown = display_url(url)
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise StoreError(f"malformed history store URL {shown}; {URL_HINT}") from None
    backend, _, driver = parsed.drivername.partition("+")
    password = parsed.password if isinstance(parsed.password, str) and parsed.password else None
    if backend in ("postgresql", "postgres") and driver in ("", "psycopg"):
        if not parsed.database:
            raise StoreError(f"history store URL {shown} names no database; {URL_HINT}")
        engine = sa.create_engine(parsed.set(drivername="postgresql+psycopg"), pool_pre_ping=True,
                                  connect_args={"connect_timeout": 10})
        return engine, password
    if backend == "sqlite" and driver in ("", "pysqlite"):
        return _sqlite_engine(parsed, shown, create), None
    raise StoreError(f"history store URL {shown}: unsupported kind {parsed.drivername!r}; {URL_HINT}")


def _sqlite_engine(parsed: Any, shown: str, create: bool) -> Engine:
    import sqlalchemy as sa

    database = parsed.database
    if database and database != ":memory:":
        path = Path(database)
        if not path.exists():
            if not create:
                raise StoreError(f"no history store at {shown} (run `perfguard history ingest` or "
                                 "`perfguard nightly` first)")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                reason = (f"{path.parent}: a file is in the way of its folder"
                          if isinstance(exc, FileExistsError | NotADirectoryError) else
                          f"{path.parent}: {exc.strerror or exc}")
                raise StoreError(f"cannot create the history store {shown}: {reason}; choose a writable path "
                                 "(--store or $PERFGUARD_STORE)") from None
        elif path.is_dir():
            raise StoreError(f"history store {shown} is a folder, not a SQLite file; name a file inside it")
    engine = sa.create_engine(parsed.set(drivername="sqlite+pysqlite"),
                              connect_args={"timeout": _SQLITE_BUSY_TIMEOUT_S})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        # Transactions are ours (the "begin" hook), not pysqlite's implicit ones.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(_SQLITE_BUSY_TIMEOUT_S * 1000)}")
            _switch_to_wal(cursor)
            cursor.execute("PRAGMA foreign_keys = ON")
            # WAL with NORMAL survives a killed process (the commit is in the log); only a power
            # loss can drop the last commits, never corrupt the file.
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        read = conn.get_execution_options().get("perfguard_read", False)
        conn.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")

    return engine


def _switch_to_wal(cursor: Any) -> None:
    """Put the connection's database in WAL mode (a no-op once it is: the mode is stored in the file).

    SQLite answers "database is locked" at once, without its busy timeout, to a switch to WAL while
    another connection holds the write lock of a file not yet in WAL: another process's switch of
    the same fresh store (16 processes switching a new file at once: one failed in 5 of 30 rounds
    on 2 cores), or a program writing it without WAL. The switch is retried until the busy timeout,
    so the first open queues like any write."""
    import sqlite3
    import time

    deadline = time.monotonic() + _SQLITE_BUSY_TIMEOUT_S
    pause = 0.001
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "database is locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
