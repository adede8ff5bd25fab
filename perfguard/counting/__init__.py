"""Taking counts: Valgrind's callgrind around a counted worker, from the Valgrind found on PATH
to the per-inference figures a job records (``docs/guides/exact-evidence.md``).

``hooks``
    What a backend calls inside a counted compile (``counted``, ``counted_process``,
    ``counting_compile``): a layer of its own below ``backends``, importing nothing of perfguard.
``valgrind``
    The one place Valgrind is looked up (``valgrind_path``, ``valgrind_version``), the counted
    worker's command and environment, and the client requests that open and close its windows.
``dumps``
    The profiles a counted worker dumps: globbed, read and parsed here only (totals by window,
    instructions by function).
``child``
    The worker side: one process under callgrind serves a ``count_batch``, a forked child per item.
``plan``
    How a variant is counted (warm-up and window by model size) and what a count gives (the
    per-inference figure, a compile's figures).
``take``
    Counting a job's targets from the parent: one counted process per backend.
``served``
    Counts kept in the artifact cache, keyed by everything that decides a count.

The records stay with the documents: ``perfguard.results.counts`` (``Counts``, ``CompileCounts``)
and ``perfguard.results.counted_functions`` (functions and their attribution). What turns counting
on is the suite's typed ``counts`` mode (``perfguard.suite.model.CountMode``; ``--counts`` sets it).
"""
