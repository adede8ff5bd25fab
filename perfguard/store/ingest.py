"""Storing documents: a typed document becomes one row of ``documents`` and its points, in one
transaction; and the stored documents read back.

What a document gives the store (its kind, suite, time, commit and points) is
:mod:`perfguard.store.extract`'s, pure functions over the typed documents; this module writes
it. A document is stored as JSON, compressed, and identified by the sha256 of its canonical JSON
(sorted keys, compact separators): the same document twice is one record, also when two
writers race (the second one's insert does nothing and it answers with the first one's id).

On PostgreSQL, series rows are created with "insert ... on conflict do nothing" in the order of
their keys, so concurrent writers neither fail nor deadlock. A writer killed mid-document leaves
nothing of it: a document and its points are one transaction.

One night per suite, runner class and commit: a night's document (``source="nightly"``) is stored
only when no other night's document of its suite, at its commit, holds points of one of its runner
classes (the parts of one sharded night, same N and another K, aside), and no broken night was
recorded there. The nightly checks that before it measures (``perfguard.flows.nightly.one_per_commit``); two
nightlies started together both pass that check, so the store checks again in the transaction that
stores the document, with nightly writers queued (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: an
advisory lock), and the second is refused in one line with nothing of it stored.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from perfguard.errors import StorageError, StoreError
from perfguard.store import extract, schema
from perfguard.store.database import StoreConnection, insert_ignoring
from perfguard.store.rows import Ingested
from perfguard.store.schema import documents, nights, pipeline_edits, points, series, utc_stamp

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from perfguard.store.extract import Extracted, PointRow, StoredDocument


#: The ``source`` of a night's document (``perfguard nightly``): one per suite, runner class and commit.
NIGHTLY = "nightly"
# pg_advisory_xact_lock key that queues the writers of nights' documents (distinct from the migration's).
_NIGHT_LOCK = 0x6E696768  # "nigh"


class Ingesting(StoreConnection):
    """The store's documents: ingest them (typed, or JSON read from a file) and read them back."""

    def ingest(self, document: StoredDocument, *, source: str = "",
               as_read: Mapping[str, object] | None = None) -> Ingested:
        """Store ``document`` and its points in one transaction (``source``: where it came from,
        a file name or ``nightly``, kept with it and naming it in messages).

        It is stored, and identified, as ``as_read`` when given: the JSON it was parsed from, so a
        file is kept as it was written (an older format version too) and the same file twice is
        one record; else as its ``to_json()``. A file of another tool is stored as read. The same
        JSON again is the same record: ``new=False``, no points added. A document the store cannot
        keep (a verdicts document without a candidate side) is refused in one line, as a
        ``StoreError``."""
        from perfguard.store.extract import Imported

        if isinstance(document, Imported):
            imported = document
            return self._store(imported.data, lambda: imported.extracted, source)
        typed = document
        body = as_read if as_read is not None else typed.to_json()
        return self._store(body, lambda: extract.extract_document(typed, source or "<document>"), source)

    def ingest_json(self, data: object, *, source: str = "") -> Ingested:
        """Parse ``data`` (the JSON of a result, verdicts or bisect document, as read from
        ``source``) with its kind's one parser and :meth:`ingest` it as read. JSON already stored is
        recognised before it is parsed again. A document that is not valid is refused with its
        parser's one-line message, as a ``StoreError``."""
        return self._store(data, lambda: extract.extract(data, source or "<document>"), source)

    def ingest_file(self, path: str | Path) -> Ingested:
        """Read a document file and :meth:`ingest_json` it (``source``: the path)."""
        from perfguard.results.documents import read_json

        try:
            data = read_json(Path(path), missing="{path}: file not found", not_json="{path}: not JSON ({exc})")
        except StorageError as exc:
            raise StoreError(str(exc)) from None
        return self.ingest_json(data, source=str(path))

    def _store(self, body: object, extracted: Callable[[], Extracted], source: str) -> Ingested:
        """Store the JSON ``body`` with what ``extracted()`` gives of it, unless it is stored already
        (then ``extracted`` is not called: a known document is not validated again)."""
        text = extract.canonical_json(body)
        digest = extract.document_hash(text)
        label = source or "<document>"
        with self._connect(write=False) as conn:
            known = conn.execute(sa.select(documents.c.id, documents.c.kind)
                                 .where(documents.c.sha256 == digest)).first()
        if known is not None:
            return Ingested(known.id, known.kind, False, 0)
        try:
            found = extracted()
        except StorageError as exc:
            raise StoreError(str(exc)) from None
        now = schema.utc_now()
        try:
            time = utc_stamp(found.time) if found.time else now
            rows = [(row, utc_stamp(row.time) if row.time else time) for row in found.points]
        except ValueError as exc:
            raise StoreError(f"{label}: corrupt {found.kind} document: a time that is not ISO 8601 ({exc})") from None
        with self._connect(write=True) as conn:
            inserted = conn.execute(
                insert_ignoring(conn, documents).values(
                    sha256=digest, kind=found.kind, suite=found.suite, time=time, commit_sha=found.commit,
                    source=source, ingested_at=now, points=len(rows), body=zlib.compress(text.encode("utf-8")))
                .on_conflict_do_nothing(index_elements=["sha256"]).returning(documents.c.id)).first()
            if inserted is None:  # a concurrent writer stored it first
                known = conn.execute(sa.select(documents.c.id, documents.c.kind)
                                     .where(documents.c.sha256 == digest)).one()
                return Ingested(known.id, known.kind, False, 0)
            document_id = int(inserted.id)
            if source == NIGHTLY:
                self._refuse_a_second_night(conn, found, body, document_id)
            self._insert_points(conn, document_id, rows)
            _insert_pipeline_edits(conn, found)
        return Ingested(document_id, found.kind, True, len(rows))

    def _refuse_a_second_night(self, conn: Connection, found: Extracted, body: object, document_id: int) -> None:
        """A ``StoreError`` when another night holds ``found``'s commit on one of its runner
        classes (see the module docstring); ``document_id``, just inserted, rolls back with it."""
        from perfguard.runners import runner_kind

        if conn.dialect.name == "postgresql":  # nightly writers one at a time: the check sees every other
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_NIGHT_LOCK)))
        if found.commit is None:
            return
        here = f"history store {self.url}: {found.suite} already has a night at commit {found.commit[:10]}"
        broken = conn.execute(sa.select(nights.c.id).where(nights.c.suite == found.suite, nights.c.status == "broken",
                                                           nights.c.commit_sha == found.commit)).first()
        if broken is not None:
            raise StoreError(f"{here} (night {broken.id}, broken); tonight's document is not stored")
        tonight = {runner_kind(row.key.runner_class) for row in found.points}
        part = _shard_part(body)
        others = conn.execute(sa.select(documents.c.id, documents.c.body).where(
            documents.c.suite == found.suite, documents.c.commit_sha == found.commit,
            documents.c.source == NIGHTLY, documents.c.id != document_id)).all()
        for other in others:
            theirs = _shard_part(_stored(other.body, f"history store {self.url}: document {other.id}"))
            if part is not None and theirs is not None and part[1] == theirs[1] and part[0] != theirs[0]:
                continue  # another part of one sharded night
            classes = {runner_kind(name) for name in conn.execute(
                sa.select(series.c.runner_class).distinct().join(points, points.c.series_id == series.c.id)
                .where(points.c.document_id == other.id)).scalars()}
            shared = sorted(tonight & classes)
            if shared:
                raise StoreError(f"{here} on {', '.join(shared)} (document {other.id}, stored by a nightly that ran "
                                 "beside this one); tonight's document is not stored")

    @staticmethod
    def _insert_points(conn: Connection, document_id: int, rows: Sequence[tuple[PointRow, str]]) -> None:
        if not rows:
            return
        keys = {row.key.hash(): row.key for row, _ in rows}
        # In key order: concurrent writers lock new series rows in one order and cannot deadlock.
        conn.execute(insert_ignoring(conn, series).on_conflict_do_nothing(index_elements=["key_hash"]), [
            {"key_hash": h, "suite": k.suite, "case_id": k.case, "model_hash": k.model_hash,
             "pipeline_hash": k.pipeline_hash, "backend": k.backend, "runner_class": k.runner_class,
             "metric": k.metric, "kind": k.kind} for h, k in sorted(keys.items())])
        ids = {r.key_hash: r.id for r in conn.execute(sa.select(series.c.key_hash, series.c.id)
                                                      .where(series.c.key_hash.in_(list(keys))))}
        conn.execute(points.insert(), [
            {"series_id": ids[row.key.hash()], "document_id": document_id, "time": time, "commit_sha": row.commit,
             "value": row.value, "ci_low": row.ci_low, "ci_high": row.ci_high, "worker_values": list(row.values),
             "base_commit": row.base_commit, "decision": row.decision} for row, time in rows])

    def document(self, document_id: int) -> Any:
        """The stored JSON document, as ingested."""
        with self._connect(write=False) as conn:
            body = conn.execute(sa.select(documents.c.body).where(documents.c.id == document_id)).scalar()
        if body is None:
            raise StoreError(f"history store {self.url}: no document {document_id}")
        return _stored(body, f"history store {self.url}: document {document_id}")

    def latest_results(self, suite: str) -> list[tuple[int, Any]]:
        """(document id, result JSON) of every stored result of ``suite``, newest first: result
        documents, and the candidate result inside verdicts documents."""
        from perfguard.store.extract import candidate_label
        with self._connect(write=False) as conn:
            found = conn.execute(sa.select(documents.c.id, documents.c.kind, documents.c.body)
                                 .where(documents.c.suite == suite, documents.c.kind.in_(("result", "verdicts")))
                                 .order_by(documents.c.time.desc(), documents.c.id.desc())).all()
        out = []
        for row in found:
            data = _stored(row.body, f"history store {self.url}: document {row.id}")
            if not isinstance(data, dict):  # ingested as an object: another value is not a result
                continue
            if row.kind == "verdicts":
                label = candidate_label(data.get("results") or {})
                data = data["results"][label] if label else None
            if data is not None:
                out.append((int(row.id), data))
        return out


def _insert_pipeline_edits(conn: Connection, found: Extracted) -> None:
    """The pipeline edits a document shows (:func:`.extract.pipeline_edits`), each once."""
    if not found.pipeline_edits:
        return
    conn.execute(insert_ignoring(conn, pipeline_edits).on_conflict_do_nothing(
        index_elements=["suite", "before_hash", "after_hash", "bad_commit"]), [
        {"suite": e.suite, "pipeline": e.pipeline, "before_hash": e.before_hash, "after_hash": e.after_hash,
         "passes_before": list(e.passes_before), "passes_after": list(e.passes_after), "good_commit": e.good_commit,
         "bad_commit": e.bad_commit, "commit_sha": None, "note": ""} for e in found.pipeline_edits])


def _stored(body: bytes, where: str) -> object:
    """A stored document's JSON, read as its file was (``parse_json``, NaN allowed as in the asv
    and pytest-benchmark files it may hold): a row nested deeper than any document perfguard
    reads, or not JSON, is a one-line ``StoreError``, never a ``RecursionError``."""
    from perfguard.results.documents import parse_json

    try:
        return parse_json(zlib.decompress(body).decode("utf-8"), where, finite=False)
    except StorageError as exc:
        raise StoreError(str(exc)) from None
    except (ValueError, zlib.error) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise StoreError(f"{where}: corrupt ({exc})") from None


def _shard_part(body: object) -> tuple[int, int] | None:
    """(K, N) of a document's ``shard`` object (``nightly --shard K/N``), or None."""
    shard = body.get("shard") if isinstance(body, dict) else None
    if not isinstance(shard, dict):
        return None
    k, n = shard.get("k"), shard.get("n")
    return (k, n) if isinstance(k, int) and isinstance(n, int) else None
