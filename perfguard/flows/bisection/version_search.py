"""The pass bisections ``perfguard bisect passes`` runs, callable without argparse: between two
pipelines of the suite, and between two commits of the compiler (first the endpoints, then the
passes that differ). Each keeps its probes in a state file keyed by what it compares, so a second
run resumes where the first stopped.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.bisect.document import BisectResult, CommitInfo, Culprit, PassSearch
from perfguard.bisect.search import exact_changes, undecided
from perfguard.bisect.state import BisectState, ProbeRecord, StateHeader, state_key
from perfguard.compile.checkout import CompilerCheckout, compiler_repo_root, resolve_commit
from perfguard.errors import UserError
from perfguard.flows.bisection.pass_search import bisect_passes_between, bisect_pipelines
from perfguard.flows.probe import Variant, checkouts, run_probe, side_of
from perfguard.results.explanation import StoredExplanation

if TYPE_CHECKING:
    from perfguard.profile.explain import ProfileSettings
    from perfguard.progress import Progress
    from perfguard.suite import CaseSpec, Suite
    from perfguard.suite.gates import CheckSettings


def bisect_state(path: Path | None, *parts: str) -> BisectState:
    """The state file of a bisection keyed by ``parts`` (``path``, else ``.perfguard/bisect-KEY.json``)."""
    key = state_key(*parts)
    return BisectState(path or Path(".perfguard") / f"bisect-{key}.json", key, StateHeader(parts=list(parts)))


def bisect_between_pipelines(suite: Suite, case: CaseSpec, good_pipeline: str, bad_pipeline: str,
                             settings: CheckSettings, progress: Progress, state_path: Path | None,
                             explain: ProfileSettings | None) -> BisectResult:
    """The passes that turn pipeline ``good_pipeline`` into ``bad_pipeline`` and make ``case`` slower."""
    for name in (good_pipeline, bad_pipeline):
        if name not in suite.pipelines:
            raise UserError(f"unknown pipeline {name!r}; defined: {', '.join(suite.pipelines)}")
    case = dataclasses.replace(case, pipeline=suite.pipelines[good_pipeline])
    state = bisect_state(state_path, "pipelines", suite.sha256, case.id, good_pipeline, bad_pipeline, str(settings))
    return bisect_pipelines(suite, case, good_pipeline, bad_pipeline, settings, progress, state, explain)


def bisect_passes_between_commits(suite: Suite, case: CaseSpec, good_ref: str, bad_ref: str,
                                  settings: CheckSettings, progress: Progress, state_path: Path | None,
                                  explain: ProfileSettings | None) -> BisectResult:
    """The pass that made ``case`` slower between compiler commits ``good_ref`` and ``bad_ref``:
    one probe of the endpoints, then (on a regression) the search over the passes that differ."""
    started = time.perf_counter()
    root = compiler_repo_root(suite)
    good, bad = resolve_commit(root, good_ref)[0], resolve_commit(root, bad_ref)[0]
    state = bisect_state(state_path, "passes", suite.sha256, case.id, good, bad, str(settings))
    labels = (good[:10], bad[:10])
    result = state.get(f"pair:{good}:{bad}")
    if result is None:
        with checkouts(suite, [good, bad]) as trees:
            if not all(isinstance(trees[s], CompilerCheckout) for s in (good, bad)):
                result = ProbeRecord("skip", "a version does not build")
            else:
                variants = [Variant(labels[0], side_of(trees[good], labels[0])),  # type: ignore[arg-type]
                            Variant(labels[1], side_of(trees[bad], labels[1]))]  # type: ignore[arg-type]
                result = run_probe(suite, case, variants, [labels], settings, progress)
        state.record(f"pair:{good}:{bad}", result)
    verdict = result.verdicts.get(f"{labels[0]}->{labels[1]}")

    def document(status: str, total_probes: int, culprits: list[Culprit], search: PassSearch | None,
                 explanations: list[StoredExplanation] | None = None) -> BisectResult:
        return BisectResult("passes", status, suite.name, case.id, total_probes, time.perf_counter() - started,
                            good=CommitInfo(good), bad=CommitInfo(bad), endpoints=verdict, culprits=culprits,
                            pass_search=search, explanations=explanations or [])

    if result.ok and undecided(verdict):  # not "no regression": too noisy to tell (exit 6)
        changed = exact_changes(result.entries.get(labels[0]), result.entries.get(labels[1]))
        return dataclasses.replace(document("undecided", 1, [], None), exact_changes=changed)
    if not result.ok or verdict is None or not verdict.is_regression:
        return document("no-regression", 1, [], None)
    search = bisect_passes_between(suite, case, good, bad, settings, progress, state, result.entries, labels)
    culprit = Culprit(CommitInfo(bad), verdict, search.culprit, search.status == "found")
    explanations: list[StoredExplanation] = []
    if search.status == "found" and explain is not None:
        from perfguard.flows.bisection.culprit_explain import explain_commits

        explanations = [explain_commits(suite, case, good, bad, labels, explain, progress)]
    # the endpoints probe, then the pass search's
    return document(search.status, 1 + search.probes, [culprit], search, explanations)
