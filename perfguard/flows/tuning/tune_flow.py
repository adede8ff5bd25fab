"""``perfguard tune``: search for a better pinned pass order of one case, and prove it.

The flow: the space of one-edit neighbours (:mod:`perfguard.tune.space`), screening with legality
and a memo by execution identity (:mod:`perfguard.flows.tuning.screen`), greedy ablation + insert/move +
random local search with confirmation probes (:mod:`perfguard.flows.tuning.order_search`), the proof in a fresh
check on every model the pipeline runs on (:mod:`perfguard.flows.tuning.proof`), the document and the
suite patch (:mod:`perfguard.tune.document`). Every screen, compile and confirmation is saved in a
state file as it finishes; the same command resumes a killed run.
"""

from __future__ import annotations

from pathlib import Path

from perfguard.flows.tuning.order_search import OBJECTIVES
from perfguard.progress import Progress
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings
from perfguard.tune.document import TuneResult, suite_patch

__all__ = ["OBJECTIVES", "TuneResult", "default_state_path", "tune"]


def _state_parts(suite: Suite, case: CaseSpec, objective: str, universe: tuple[str, ...], seed: int,
                 settings: CheckSettings, screen_workers: int, batch: int) -> list[str]:
    return ["tune", suite.sha256, case.id, objective, ",".join(universe), str(seed), str(settings),
            str(screen_workers), str(batch)]


def default_state_path(key: str) -> Path:
    return Path(".perfguard") / f"tune-{key}.json"


def tune(suite: Suite, case: CaseSpec, settings: CheckSettings, progress: Progress, *, objective: str = "latency",
         budget: int = 60, time_limit_s: float | None = None, passes: str | None = None, seed: int = 0,
         screen_workers: int = 4, batch: int = 8, state_path: Path | None = None, proof: bool = True) -> TuneResult:
    """Search from ``case``'s pinned pipeline under ``budget`` candidates (and ``time_limit_s``),
    then prove the best order found (``proof=False``: search only, status ``unproved``)."""
    from perfguard.bisect.state import BisectState, StateHeader, state_key
    from perfguard.flows.tuning.order_search import Tuner
    from perfguard.flows.tuning.proof import prove
    from perfguard.flows.tuning.screen import Screener
    from perfguard.tune.space import Candidate, pass_universe

    backend = case.pipeline.backend
    universe = pass_universe(suite, backend, passes)
    parts = _state_parts(suite, case, objective, universe, seed, settings, screen_workers, batch)
    key = state_key(*parts)
    state = BisectState(state_path or default_state_path(key), key, StateHeader(suite.name, case.id, parts=parts),
                        what="tune")
    screener = Screener(suite, case, settings, state, progress, screen_workers=screen_workers, batch=batch,
                        compile_objective=objective != "latency")
    outcome = Tuner(screener, Candidate.of(case.pipeline), universe, objective=objective, budget=budget,
                    time_limit_s=time_limit_s, seed=seed, progress=progress).run()
    common = (suite.name, case.id, case.pipeline.name, objective, universe, budget, time_limit_s, outcome)
    if outcome.best == outcome.start:
        return TuneResult.of(*common, status="nothing-better")
    if not proof:
        return TuneResult.of(*common, status="unproved")
    progress.log(f"proof: {outcome.best.describe()} against {case.pipeline.name} on every model it runs on "
                 "(a fresh paired check)")
    result = prove(suite, case, outcome.best, objective, settings, progress)
    effects = [e.to_json() for e in result.effects]
    patch = (suite_patch(str(suite.path), case.pipeline.name, outcome.best, result.pipeline, effects)
             if result.status == "proved" else None)
    return TuneResult.of(*common, status=result.status, proof_pipeline=result.pipeline, proof_effects=effects,
                         proof=result.document, patch=patch)
