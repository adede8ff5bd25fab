"""``perfguard tvm-tune``: one pinned MetaSchedule database for every pipeline of a model.

The case names the model (and the backend); the database is tuned on the union of the tasks of
every pipeline of the suite that runs that model on that backend, so each variant is compared on
the same tuning (``perfguard.backends.tvm.meta_schedule``). The model is materialized as ``run`` does.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from perfguard.backends import get_backend
from perfguard.backends.tvm.meta_schedule import TuneSummary, build_database
from perfguard.compile.preflight import check_model_backend
from perfguard.models.loader import materialize
from perfguard.suite import CaseSpec, Suite


def tune_database(suite: Suite, case: CaseSpec, out: Path, trials: int, seed: int = 0,
                  log: Callable[[str], None] = lambda _: None) -> TuneSummary:
    """Tune ``case``'s model over the suite's pipelines of its backend and write the database to ``out``."""
    pipelines = {c.pipeline.name: (c.pipeline.passes, c.pipeline.options) for c in suite.cases
                 if c.model.name == case.model.name and c.pipeline.backend == case.pipeline.backend}
    backend = get_backend(case.pipeline.backend)
    check_model_backend(suite, case)
    for name in pipelines:
        backend.check_pipeline(suite.pipelines[name])  # names and options, before minutes of tuning
    with tempfile.TemporaryDirectory(prefix="perfguard-tvm-tune-") as folder:
        model = materialize(case.model, Path(folder))
        return build_database(model.path, pipelines, out, trials, threads=case.measure.threads, seed=seed, log=log)
