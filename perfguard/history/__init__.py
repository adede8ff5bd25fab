"""History: the series the store's documents make, what changed, and who hears of it.

The store itself is :mod:`perfguard.store`, a layer of its own below this package and
:mod:`perfguard.report` (``LAYERS`` in ``tests/test_import_graph.py``).

``changepoints``, ``series_changes``
    Change detection over the series, and the per-metric rules the night, the site and
    ``perfguard history`` share (``perfguard nightly`` itself is :mod:`perfguard.flows.nightly.night`).
"""
