"""The history store's schema: its tables (SQLAlchemy Core) and the Alembic migrations that build them.

Tables (revision ``0006_alert_culprit_facts``):

``documents``
    Every ingested document, once: ``sha256`` of its canonical JSON (sorted keys, compact
    separators) is unique, so the same document ingested twice is one row. ``kind`` (``result``,
    ``verdicts``, ``bisect``), ``suite``, ``time`` (the document's own finish or creation time; a
    bisect document has none, so the time it was ingested), ``commit_sha`` (the compiler commit it
    measured, if known), ``source`` (where it came from: a file name, ``nightly``), ``ingested_at``,
    ``points`` (how many points it gave: a consistency check, every stored document has exactly
    that many rows in ``points``) and ``body``: the canonical JSON text, zlib-compressed (a result
    document of 15 kB is about 3 kB; the store keeps every night of every suite).
``series``
    One row per thing measured over time: suite, case, model and pipeline hashes, backend with its
    versions, runner class and metric, and ``kind`` (``absolute``: the measured value; ``ratio``:
    a paired candidate/baseline latency ratio of a check). ``key_hash`` (sha256 of those eight
    parts) is unique: concurrent writers insert a series with "on conflict do nothing" on it.
``points``
    One value of one series from one document: ``time``, ``commit_sha``, ``value``, its interval
    (``ci_low``/``ci_high``, ratio points), ``worker_values`` (JSON list: per-worker medians or
    ratios, compile times, memory probes), and for ratio points ``base_commit`` and the verdict
    row's ``decision``. Indexed on (``series_id``, ``time``, ``document_id``): one series'
    history, and every series' in order without a sort (``Store.all_points``); and on
    ``document_id`` for pruning.
``nights``
    The nightly runs of a suite: commit, time and the document the night stored (unique per suite
    and document, so recording a night twice is one row); (revision ``0003``) ``status``
    (``good``, or ``broken``: the compiler did not build or its passes did not import; no
    document) and ``note`` (why it was broken).
``changes``
    Regressions found in the series: commit range (``good_commit`` .. ``bad_commit``; unique per
    series and bad commit, a missing bad commit stored as ``''`` so the constraint holds), size
    with interval, ``status`` (``pending``, ``confirmed``, ``closed``), the bisect document that
    attributed it with its culprit commit and pass, a note, and (revision ``0002``) the alert it
    belongs to (``alert_id``).
``alerts`` (revision ``0002``)
    One per (suite, runner class, commit range: ``good_commit`` .. ``bad_commit``, a missing
    commit stored as ``''``): kind, status (:data:`perfguard.store.alert_rows.STATUSES`), the shared
    culprit commit and pass, the culprit's explanation (JSON of
    :class:`~perfguard.store.alert_rows.AlertExplanation`), assignee, linked issue URL, the range a
    later night saw it fixed in (``fix_first_commit`` .. ``fix_last_commit``), notes, and when it
    was raised and last changed; (revision ``0004``) the commit of that range that fixed it, found
    by the nightly's bisection of the range (``fix_commit``, ``fix_pass``, and the stored bisect
    document ``fix_bisect_document_id``); (revision ``0006_alert_culprit_facts``) the culprit
    commit's subject, author and date (``culprit_subject``, ``culprit_author``, ``culprit_date``),
    recorded from the bisect document that named it when the culprit is attached.
``alert_events`` (revision ``0002``)
    Every status change of an alert: who, when, from and to which status, the note.
``pipeline_edits`` (revision ``0005_pipeline_edits``)
    A pipeline the suite file defined anew between two nights, where the suite file is part of the
    compiler's repository (a nightly's check compiled the base side with the old definition):
    suite, pipeline name, its hash before and after (``before_hash`` .. ``after_hash``: the series
    of the new hash continues the series of the old), both pass lists (JSON), the nights' range
    (``good_commit`` .. ``bad_commit``), the commit that made the edit once the nightly found it
    (``commit_sha``; NULL: not found, ``note`` says why). Unique per suite, both hashes and bad
    commit.

Times are ISO-8601 UTC text, normalized on the way in to one fixed-width form
(``2026-12-01T12:20:45.161989Z``, :func:`utc_stamp`): text of one width sorts in time order on
every backend, compares with the documents' own stamps without conversion, and round-trips exactly
(SQLite has no timezone-aware type, and drivers convert aware datetimes to the session's zone).

Migration history (``perfguard/store/migrations/versions``, one file per revision):

``0001``
    First schema: documents, series, points, nights, changes.
``0002``
    Alerts: the ``alerts`` and ``alert_events`` tables and ``changes.alert_id``.
``0003``
    Broken nights: ``nights.status`` and ``nights.note``; ``nights.document_id`` nullable.
``0004``
    The fixing commit of an alert: ``alerts.fix_commit``, ``fix_pass``, ``fix_bisect_document_id``.
``0005_pipeline_edits``
    The suite's pipeline edits: the ``pipeline_edits`` table.
``0006_alert_culprit_facts``
    The culprit commit's subject, author and date on its alert: ``alerts.culprit_subject``,
    ``culprit_author``, ``culprit_date`` (an older store's alerts backfilled from their bisections).

``Store.open`` upgrades an older store to :func:`head_revision` in one transaction, under a lock
(SQLite ``BEGIN IMMEDIATE``; a PostgreSQL advisory lock), so concurrent first writers create the
schema once; it refuses a store whose revision this perfguard does not know ("written by a newer
perfguard: upgrade perfguard"). A new revision is a new file in ``versions/`` whose
``down_revision`` is the previous head; ``render_as_batch`` is on, so ALTERs work on SQLite too.
The tables below always describe the head revision; the migration files are frozen copies of
what each revision created, and a test checks that the two agree.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa

#: The Alembic script folder shipped inside the package.
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

OPEN_STATUSES = ("pending", "confirmed")
STATUSES = (*OPEN_STATUSES, "closed")

# Named constraints: Alembic's batch mode (SQLite ALTERs) needs names to drop or change them.
metadata = sa.MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})

TIME = sa.String(32)
HASH = sa.String(64)

documents = sa.Table(
    "documents", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("sha256", HASH, nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("suite", sa.String, nullable=False),
    sa.Column("time", TIME, nullable=False),
    sa.Column("commit_sha", sa.String, nullable=True),
    sa.Column("source", sa.String, nullable=False),
    sa.Column("ingested_at", TIME, nullable=False),
    sa.Column("points", sa.Integer, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.Index(None, "suite", "kind", "time"),
)

series = sa.Table(
    "series", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("key_hash", HASH, nullable=False, unique=True),
    sa.Column("suite", sa.String, nullable=False, index=True),
    sa.Column("case_id", sa.String, nullable=False),
    sa.Column("model_hash", sa.String, nullable=False),
    sa.Column("pipeline_hash", sa.String, nullable=False),
    sa.Column("backend", sa.String, nullable=False),
    sa.Column("runner_class", sa.String, nullable=False),
    sa.Column("metric", sa.String, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
)

points = sa.Table(
    "points", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("series_id", sa.Integer, sa.ForeignKey("series.id"), nullable=False),
    sa.Column("document_id", sa.Integer, sa.ForeignKey("documents.id"), nullable=False, index=True),
    sa.Column("time", TIME, nullable=False),
    sa.Column("commit_sha", sa.String, nullable=True),
    sa.Column("value", sa.Double, nullable=False),
    sa.Column("ci_low", sa.Double, nullable=True),
    sa.Column("ci_high", sa.Double, nullable=True),
    sa.Column("worker_values", sa.JSON, nullable=False),
    sa.Column("base_commit", sa.String, nullable=True),
    sa.Column("decision", sa.String(16), nullable=True),
    sa.Index(None, "series_id", "time", "document_id"),
)

nights = sa.Table(
    "nights", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("suite", sa.String, nullable=False),
    sa.Column("commit_sha", sa.String, nullable=False),
    sa.Column("time", TIME, nullable=False),
    sa.Column("document_id", sa.Integer, sa.ForeignKey("documents.id"), nullable=True),
    sa.Column("status", sa.String(16), nullable=False, server_default="good"),
    sa.Column("note", sa.Text, nullable=False, server_default=""),
    sa.UniqueConstraint("suite", "document_id"),
    sa.Index(None, "suite", "time"),
)

changes = sa.Table(
    "changes", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("series_id", sa.Integer, sa.ForeignKey("series.id"), nullable=False),
    sa.Column("good_commit", sa.String, nullable=True),
    sa.Column("bad_commit", sa.String, nullable=False),
    sa.Column("time", TIME, nullable=False),
    sa.Column("ratio", sa.Double, nullable=False),
    sa.Column("ci_low", sa.Double, nullable=True),
    sa.Column("ci_high", sa.Double, nullable=True),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("bisect_document_id", sa.Integer, sa.ForeignKey("documents.id"), nullable=True),
    sa.Column("culprit_commit", sa.String, nullable=True),
    sa.Column("culprit_pass", sa.String, nullable=True),
    sa.Column("note", sa.Text, nullable=False),
    sa.Column("alert_id", sa.Integer, sa.ForeignKey("alerts.id"), nullable=True, index=True),
    sa.UniqueConstraint("series_id", "bad_commit"),
)

alerts = sa.Table(
    "alerts", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("suite", sa.String, nullable=False),
    sa.Column("runner_class", sa.String, nullable=False),
    sa.Column("good_commit", sa.String, nullable=False),
    sa.Column("bad_commit", sa.String, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
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
    sa.Column("fix_commit", sa.String, nullable=True),
    sa.Column("fix_pass", sa.String, nullable=True),
    sa.Column("fix_bisect_document_id", sa.Integer, sa.ForeignKey("documents.id"), nullable=True),
    sa.Column("culprit_subject", sa.String, nullable=True),
    sa.Column("culprit_author", sa.String, nullable=True),
    sa.Column("culprit_date", sa.String, nullable=True),
    sa.UniqueConstraint("suite", "runner_class", "good_commit", "bad_commit"),
)

pipeline_edits = sa.Table(
    "pipeline_edits", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("suite", sa.String, nullable=False),
    sa.Column("pipeline", sa.String, nullable=False),
    sa.Column("before_hash", HASH, nullable=False),
    sa.Column("after_hash", HASH, nullable=False),
    sa.Column("passes_before", sa.JSON, nullable=False),
    sa.Column("passes_after", sa.JSON, nullable=False),
    sa.Column("good_commit", sa.String, nullable=False),
    sa.Column("bad_commit", sa.String, nullable=False),
    sa.Column("commit_sha", sa.String, nullable=True),
    sa.Column("note", sa.Text, nullable=False),
    sa.UniqueConstraint("suite", "before_hash", "after_hash", "bad_commit"),
    sa.Index(None, "suite", "after_hash"),
)

alert_events = sa.Table(
    "alert_events", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("alert_id", sa.Integer, sa.ForeignKey("alerts.id"), nullable=False, index=True),
    sa.Column("who", sa.String, nullable=False),
    sa.Column("time", TIME, nullable=False),
    sa.Column("from_status", sa.String(16), nullable=True),
    sa.Column("to_status", sa.String(16), nullable=False),
    sa.Column("note", sa.Text, nullable=False),
)


def head_revision(migrations: Path | None = None) -> str:
    """The newest schema revision this perfguard writes (the head of its migration scripts)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory(str(migrations or MIGRATIONS_DIR)).get_current_head()
    assert head is not None, "the history store ships at least one migration"
    return head


def utc_stamp(text: str) -> str:
    """``text`` (ISO 8601; ``Z``, an offset, or none: UTC) as the store's fixed-width UTC stamp
    ``YYYY-MM-DDTHH:MM:SS.ffffffZ``; ``ValueError`` when it is not such a time."""
    value = text.strip()
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def utc_now() -> str:
    """Now, as the store's UTC stamp."""
    return datetime.now(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
