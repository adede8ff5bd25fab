"""History: every night's documents in one store, the series they make, and what changed.

``store``
    The history store (SQLite or PostgreSQL): its URL, the typed rows it answers with, and
    ``Store`` (ingest, series, points, nights, changes, prune). Import it as
    ``perfguard.history.store``; it loads SQLAlchemy only when a store is opened.
``schema``
    The tables, the Alembic migrations shipped in ``migrations/`` and their history.
``ingest``
    What a result, verdicts or bisect document gives the store (pure, no database).
``changepoints``, ``nightly``
    Change detection over the series, and ``perfguard nightly``.
"""
