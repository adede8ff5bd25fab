"""The history store: every result, verdicts and bisect document perfguard made (and the runs of
other tools imported by :mod:`perfguard.formats`: pytest-benchmark and asv files, stored as read
under their own kind), and the series of points they give, in SQLite (one file, the default) or
PostgreSQL (a fleet of runners).

This package owns the store's contract: its URL (``--store``, ``$PERFGUARD_STORE``, a file path
or ``sqlite:///PATH`` or ``postgresql://USER:PASSWORD@HOST[:PORT]/DATABASE``), the typed rows it
answers with (:class:`Series`, :class:`Point`, :class:`Night`, :class:`Change`), and
:class:`Store`, the one class callers use, whose methods are each one transaction. Its parts:

``engine``
    The URL and its display (password masked), the engine of each backend with its settings,
    transactions, and the schema brought to the head revision under a lock.
``ingest``
    Typed documents in (:data:`StoredDocument`), as rows of ``documents`` and ``points``; the
    stored documents back out.
``queries``
    Series and points, nights, changes.
``alerts``
    Confirmed changes grouped into alerts, read back typed, triaged (:mod:`perfguard.history.alerts`).
``prune``
    Retention: old documents go, what open changes rest on stays.
``rows``
    The typed rows above.

The tables and migrations are :mod:`perfguard.history.schema`'s (Alembic's script folder,
``perfguard/history/migrations``, sits beside it); what a document gives is
:mod:`perfguard.history.ingest`'s.

Concurrency: any number of processes may write one store (see :mod:`.engine` for SQLite's
locking and WAL, :mod:`.ingest` for concurrent writers of one document or one series).

Every failure is a :class:`~perfguard.errors.StoreError`: one line that names the store (its
password masked) and what to fix. SQLAlchemy, Alembic and psycopg load when a store is opened,
not when this package is imported.
"""

from __future__ import annotations

from perfguard.history.store.alerts import Alerting
from perfguard.history.store.engine import (
    DEFAULT_STORE as DEFAULT_STORE,
    STORE_ENV as STORE_ENV,
    URL_HINT as URL_HINT,
    display_url as display_url,
    store_url as store_url,
)
from perfguard.history.store.ingest import Ingesting, StoredDocument as StoredDocument
from perfguard.history.store.prune import Pruning
from perfguard.history.store.queries import Querying
from perfguard.history.store.rows import (
    Change as Change,
    Ingested as Ingested,
    Night as Night,
    Point as Point,
    Series as Series,
    SeriesKey as SeriesKey,
)


class Store(Alerting, Ingesting, Querying, Pruning):
    """An open history store. Open with :meth:`open`; close with :meth:`close` or ``with``.

    Each part is one module of this package (documents in :mod:`.ingest`, series, nights and
    changes in :mod:`.queries`, alerts in :mod:`.alerts`, retention in :mod:`.prune`), all on one connection
    (:class:`.engine.StoreConnection`)."""
