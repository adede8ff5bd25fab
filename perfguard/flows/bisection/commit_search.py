"""``perfguard bisect commits``: which commit of the compiler under test made the case slower.

With ``direction="improvement"`` the same search finds which commit made it *faster* again: the
nightly bisects the fixing range of an alert that a later night saw fixed (good is the slow side,
bad the fast one; a culprit is the fixing commit, and its pass the pass that fixed it).
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.bisect.document import (
    BisectResult,
    CommitInfo,
    Culprit,
    Effect,
    Probe,
    ProbeRow,
)
from perfguard.bisect.search import SearchDirection, SearchProbe, SequenceBisector, undecided
from perfguard.bisect.state import BisectState, ProbeRecord, StateHeader, state_key
from perfguard.compile.checkout import CompilerCheckout, compiler_repo_root, resolve_commit
from perfguard.errors import UserError
from perfguard.flows.probe import Variant, checkouts, run_probe, side_of
from perfguard.progress import Progress
from perfguard.results.explanation import StoredExplanation
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings

if TYPE_CHECKING:
    from perfguard.profile.explain import ProfileSettings

__all__ = ["bisect_commits", "commit_range"]


def commit_range(root: Path, good: str, bad: str) -> list[CommitInfo]:
    """``good`` then every first-parent commit up to ``bad`` (oldest first), with metadata."""
    good_sha, _ = resolve_commit(root, good)
    bad_sha, _ = resolve_commit(root, bad)
    ancestor = subprocess.run(["git", "-C", str(root), "merge-base", "--is-ancestor", good_sha, bad_sha],
                              capture_output=True, check=False)
    if ancestor.returncode != 0:
        raise UserError(f"--good {good} ({good_sha[:10]}) is not an ancestor of --bad {bad} ({bad_sha[:10]})")
    out = subprocess.run(["git", "-C", str(root), "log", "--reverse", "--first-parent", "--ancestry-path",
                          "--format=%H%x1f%s%x1f%an <%ae>%x1f%aI", f"{good_sha}..{bad_sha}"],
                         capture_output=True, text=True, check=True).stdout
    first = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%H%x1f%s%x1f%an <%ae>%x1f%aI", good_sha],
                           capture_output=True, text=True, check=True).stdout
    commits = []
    for line in (first + out).splitlines():
        sha, subject, author, date = line.split("\x1f")
        commits.append(CommitInfo(sha, subject, author, date))
    if len(commits) < 2:
        raise UserError(f"no commits between --good {good} and --bad {bad}")
    return commits


def bisect_commits(suite: Suite, case: CaseSpec, good: str, bad: str, settings: CheckSettings,
                   progress: Progress, state_path: Path | None, with_passes: bool = True,
                   explain: ProfileSettings | None = None,
                   direction: SearchDirection = "regression") -> BisectResult:
    """Bisect ``good..bad`` for the commit that made ``case`` slower, then (``with_passes``) the
    pass inside each confirmed culprit; ``explain``: once found, profile each culprit against its
    parent and keep the explanation (None: ``--no-explain``). ``direction="improvement"``: the
    commit that made it faster (the fix of a regression); nothing to find is then status
    ``no-improvement``."""
    started = time.perf_counter()
    root = compiler_repo_root(suite)
    commits = commit_range(root, good, bad)
    key = state_key("commits", suite.sha256, case.id, commits[0].sha, commits[-1].sha, str(settings),
                    *(() if direction == "regression" else (direction,)))
    path = state_path or Path(".perfguard") / f"bisect-{key}.json"
    state = BisectState(path, key, StateHeader(str(suite.path), case.id, good, bad))
    shas = [c.sha for c in commits]
    probes_measured = 0

    def name(i: int) -> str:
        return shas[i][:10]

    def probe(positions: list[int], comparisons: list[tuple[int, int]]) -> ProbeRecord:
        nonlocal probes_measured
        probe_key = "commits:" + ":".join(shas[i] for i in positions)
        cached = state.get(probe_key)
        if cached is not None:
            progress.log(f"  (resumed probe {', '.join(name(i) for i in positions)} from {path})")
            return cached
        probes_measured += 1
        with checkouts(suite, [shas[i] for i in positions]) as trees:
            failed = [i for i in positions if not isinstance(trees[shas[i]], CompilerCheckout)]
            if failed:
                result = ProbeRecord("skip", f"{name(failed[0])} does not build: {trees[shas[failed[0]]]}")
            else:
                variants = [Variant(name(i), side_of(trees[shas[i]], name(i))) for i in positions]  # type: ignore[arg-type]
                result = run_probe(suite, case, variants,
                                                         [(name(a), name(b)) for a, b in comparisons], settings,
                                                         progress)
        state.record(probe_key, result)
        return result

    def narrate(text: str) -> None:
        progress.log(text)

    search = SequenceBisector(len(shas) - 1, probe, name, narrate, direction)
    looking = "" if direction == "regression" else " for the fix"
    progress.log(f"bisecting {case.id}{looking} over {len(shas) - 1} commits ({name(0)}..{name(len(shas) - 1)})")
    endpoint = search.confirm_endpoints()

    def document(status: str, culprits: list[Culprit], probes: list[SearchProbe], skipped: list[CommitInfo] | None,
                 explanations: list[StoredExplanation] | None = None) -> BisectResult:
        return BisectResult("commits", status, suite.name, case.id, len(probes), time.perf_counter() - started,
                            good=dataclasses.replace(commits[0], ref=good),
                            bad=dataclasses.replace(commits[-1], ref=bad),
                            endpoints=endpoint, culprits=culprits, probes=_probe_rows(probes, name),
                            commits=len(shas) - 1, state_file=str(path), measured_probes=probes_measured,
                            skipped=skipped, explanations=explanations or [])

    if endpoint is None:
        measured, changed = search.endpoints()
        if direction == "regression" and undecided(measured):  # not "no regression": too noisy to tell
            endpoint = measured
            return dataclasses.replace(document("undecided", [], search.result.probes, None), exact_changes=changed)
        return document("no-regression" if direction == "regression" else "no-improvement", [],
                        search.result.probes, None)
    result = search.run()
    culprits = []
    for culprit in result.culprits:
        position, confirmed = culprit.position, culprit.confirmed
        pass_search = None
        if with_passes and confirmed:
            from perfguard.flows.bisection.pass_search import bisect_passes_between

            pass_search = bisect_passes_between(suite, case, shas[position - 1], shas[position], settings, progress,
                                                state, culprit.entries, (name(position - 1), name(position)),
                                                direction)
        culprits.append(Culprit(
            commits[position], Effect.of(culprit.confirmation),
            pass_search.culprit if pass_search else None, confirmed, position,
            commits[culprit.span[0]:culprit.span[1] + 1] if culprit.span else None, pass_search))
    confirmed_all = all(c.confirmed for c in culprits)
    status = "found" if culprits and confirmed_all else "inconclusive"
    explanations: list[StoredExplanation] = []
    if status == "found" and explain is not None:
        from perfguard.flows.bisection.culprit_explain import explain_commits

        explanations = [explain_commits(suite, case, shas[c.position - 1], shas[c.position],
                                        (name(c.position - 1), name(c.position)), explain, progress)
                        for c in culprits if c.position]
    return document(status, culprits, result.probes, [commits[i] for i in sorted(result.skipped)], explanations)


def _probe_rows(probes: list[SearchProbe], name: Callable[[int], str]) -> list[Probe]:
    return [ProbeRow(probe.kind, [name(i) for i in probe.positions], probe.record.status, probe.record.reason,
                     probe.uncertain, dict(probe.record.verdicts), list(probe.record.looks)) for probe in probes]
