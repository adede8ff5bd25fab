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
    Confirmed changes grouped into alerts, read back typed, triaged; the typed alerts and the
    grouping rules are :mod:`.alert_rows`'s.
``edits``
    The suite's pipeline edits, and the series they join into one lineage.
``prune``
    Retention: old documents go, what open changes rest on stays.
``rows``
    The typed rows above.

The tables and migrations are :mod:`.schema`'s (Alembic's script folder,
``perfguard/store/migrations``, sits beside it); what a document gives is
:mod:`.extract`'s (pure, no database). Nothing here imports :mod:`perfguard.history` or
:mod:`perfguard.report` (a layer of its own, below them: ``LAYERS`` in ``tests/test_import_graph.py``).

It starts no process: who acts on an alert (``Store.triage``'s ``who``) is the caller's to say.

Concurrency: any number of processes may write one store (see :mod:`.engine` for SQLite's
locking and WAL, :mod:`.ingest` for concurrent writers of one document or one series).

Every failure is a :class:`~perfguard.errors.StoreError`: one line that names the store (its
password masked) and what to fix. SQLAlchemy, Alembic and psycopg load when a store is opened,
not when this package is imported: its parts import SQLAlchemy and the tables at their top, and
this package loads them (:class:`Store`, in :mod:`.api`) only when ``Store`` is first asked for,
so ``perfguard --help`` and the measuring path, which name the store's rows and URL but open no
store, load no database library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfguard.store.database import (
    DEFAULT_STORE as DEFAULT_STORE,
    STORE_ENV as STORE_ENV,
    URL_HINT as URL_HINT,
    display_url as display_url,
    store_url as store_url,
)
from perfguard.store.extract import StoredDocument as StoredDocument
from perfguard.store.rows import (
    Change as Change,
    Ingested as Ingested,
    Night as Night,
    Point as Point,
    Series as Series,
    SeriesKey as SeriesKey,
)

if TYPE_CHECKING:
    from perfguard.store.api import Store as Store


def __getattr__(name: str) -> object:
    """``Store``, loaded with SQLAlchemy on first use (module ``__getattr__``, PEP 562)."""
    if name == "Store":
        from perfguard.store.api import Store

        return Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
