"""History: every night's documents in one store, the series they make, and what changed.

``store``
    The history store (SQLite or PostgreSQL), a package and a layer of its own below the rest of
    ``history``, which it never imports: ``engine`` (URL, connection, migration), ``schema`` (the
    tables, the Alembic migrations shipped in ``store/migrations/`` and their history),
    ``extract`` (what a result, verdicts or bisect document gives the store: pure, no database),
    ``ingest`` (typed documents in), ``queries`` (series, points, nights, changes), ``alerts`` and
    ``alert_rows`` (changes grouped into alerts, the typed alerts), ``prune``, ``rows`` (the typed
    rows it answers with), and ``Store``, the one class callers use. Import it as
    ``perfguard.history.store``; it loads SQLAlchemy only when ``Store`` is first used.
``changepoints``, ``series_changes``
    Change detection over the series, and the per-metric rules the night, the site and
    ``perfguard history`` share (``perfguard nightly`` itself is :mod:`perfguard.flows.nightly`).
"""
