"""The measurement protocol driven from the parent: groups of fresh workers and their values
(:mod:`.groups`), and the job that compiles and measures a suite into result documents
(:mod:`.job`). The worker processes themselves are :mod:`perfguard.workers`."""
