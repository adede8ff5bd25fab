"""``perfguard bisect commits``: which commit of the compiler under test made the case slower."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from perfguard.bisect import BISECT_VERSION
from perfguard.bisect.probe import Variant, checkouts, run_probe, side_of
from perfguard.bisect.search import SequenceBisector
from perfguard.bisect.state import BisectState, state_key
from perfguard.compile.checkout import CompilerCheckout, compiler_repo_root, resolve_commit
from perfguard.errors import UserError
from perfguard.measure.progress import Progress
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings

__all__ = ["BISECT_VERSION", "bisect_commits", "commit_range"]


def commit_range(root: Path, good: str, bad: str) -> list[dict[str, str]]:
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
        commits.append({"sha": sha, "subject": subject, "author": author, "date": date})
    if len(commits) < 2:
        raise UserError(f"no commits between --good {good} and --bad {bad}")
    return commits


def bisect_commits(suite: Suite, case: CaseSpec, good: str, bad: str, settings: CheckSettings,
                   progress: Progress, state_path: Path | None, with_passes: bool = True) -> dict[str, Any]:
    started = time.perf_counter()
    root = compiler_repo_root(suite)
    commits = commit_range(root, good, bad)
    key = state_key("commits", suite.sha256, case.id, commits[0]["sha"], commits[-1]["sha"], str(settings))
    path = state_path or Path(".perfguard") / f"bisect-{key}.json"
    state = BisectState(path, key, {"suite": str(suite.path), "case": case.id, "good": good, "bad": bad})
    shas = [c["sha"] for c in commits]
    probes_measured = 0

    def name(i: int) -> str:
        return shas[i][:10]

    def probe(positions: list[int], comparisons: list[tuple[int, int]]) -> dict[str, Any]:
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
                result = {"status": "skip", "reason": f"{name(failed[0])} does not build: {trees[shas[failed[0]]]}"}
            else:
                variants = [Variant(name(i), side_of(trees[shas[i]], name(i))) for i in positions]  # type: ignore[arg-type]
                result = run_probe(suite, case, variants, [(name(a), name(b)) for a, b in comparisons], settings,
                                   progress)
        state.record(probe_key, result)
        return result

    def narrate(text: str) -> None:
        progress.log(text)

    search = SequenceBisector(len(shas) - 1, probe, name, narrate)
    progress.log(f"bisecting {case.id} over {len(shas) - 1} commits ({name(0)}..{name(len(shas) - 1)})")
    endpoint = search.confirm_endpoints()
    report: dict[str, Any] = {
        "version": BISECT_VERSION, "kind": "bisect", "mode": "commits", "suite": suite.name, "case": case.id,
        "good": {"ref": good, **commits[0]}, "bad": {"ref": bad, **commits[-1]}, "commits": len(shas) - 1,
        "state_file": str(path), "endpoints": endpoint,
    }
    if endpoint is None:
        report.update(status="no-regression", culprits=[], probes=_probe_rows(search.result.probes, name),
                      total_probes=len(search.result.probes), measured_probes=probes_measured,
                      wall_time_s=time.perf_counter() - started)
        return report
    result = search.run()
    culprits = []
    for culprit in result.culprits:
        position = culprit["position"]
        entry: dict[str, Any] = {"commit": commits[position], "position": position,
                                 "range": [commits[i] for i in range(culprit["range"][0], culprit["range"][1] + 1)]
                                 if culprit["range"] else None,
                                 "confirmed": culprit.get("confirmed", False),
                                 "effect": _effect(culprit.get("confirmation")), "pass": None}
        if with_passes and culprit.get("confirmed"):
            from perfguard.bisect.passes import bisect_passes_between

            entry["pass_search"] = bisect_passes_between(suite, case, shas[position - 1], shas[position], settings,
                                                         progress, state, culprit.get("entries", {}),
                                                         (name(position - 1), name(position)))
            entry["pass"] = entry["pass_search"].get("culprit")
        culprits.append(entry)
    confirmed = [c for c in culprits if c["confirmed"]]
    status = "found" if confirmed and len(confirmed) == len(culprits) else "inconclusive"
    report.update(status=status, culprits=culprits, probes=_probe_rows(result.probes, name),
                  total_probes=len(result.probes), measured_probes=probes_measured,
                  skipped=[commits[i] for i in sorted(result.skipped)], wall_time_s=time.perf_counter() - started)
    return report


def _effect(verdict: dict[str, Any] | None) -> dict[str, Any] | None:
    if not verdict:
        return None
    return {k: verdict.get(k) for k in ("ratio", "ci_low", "ci_high", "p_value", "workers")}


def _probe_rows(probes: list[dict[str, Any]], name: Any) -> list[dict[str, Any]]:
    rows = []
    for probe in probes:
        rows.append({"kind": probe["kind"], "commits": [name(i) for i in probe["positions"]],
                     "status": probe["status"], "reason": probe.get("reason"), "uncertain": probe.get("uncertain", False),
                     "verdicts": probe.get("verdicts", {}), "looks": probe.get("looks", [])})
    return rows
