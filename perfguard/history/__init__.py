"""History: every night's documents in one store, the series they make, and what changed.

``store``
    The history store (SQLite or PostgreSQL), a package: ``engine`` (URL, connection, migration),
    ``ingest`` (typed documents in), ``queries`` (series, points, nights, changes), ``prune``,
    ``rows`` (the typed rows it answers with), and ``Store``, the one class callers use. Import
    it as ``perfguard.history.store``; it loads SQLAlchemy only when a store is opened.
``schema``
    The tables, the Alembic migrations shipped in ``migrations/`` and their history.
``ingest``
    What a result, verdicts or bisect document gives the store (pure, no database).
``changepoints``, ``series_changes``
    Change detection over the series, and the per-metric rules the night, the site and
    ``perfguard history`` share (``perfguard nightly`` itself is :mod:`perfguard.flows.nightly`).
"""
