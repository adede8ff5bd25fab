"""Why the culprit is slower: once a bisection has found its culprit, both of the culprit's sides
are compiled again and profiled (``perfguard.profile.pairs.explain_versions``, the machinery of
``check --explain``), and the explanation goes into the bisect document.

Commits (``bisect commits``, ``bisect passes --good --bad``): the culprit's parent against the
culprit. A counted command (``--counts``, ``[measure] counts``) also counts both sides once and
attributes their instruction change to functions (the explanation's ``counted``, which the
nightly's alert keeps: "why, counted"). Pipelines: the good pipeline against the good one with the smallest reproducing set of
edits applied, the pipeline that isolates the regression.

The bisection's answer is already decided when this runs: a failure here (a side that no longer
builds, a profiler that cannot read the artifact, a worker that dies) never fails the bisection.
It is recorded as an explanation whose dimension is "unclear" and whose headline says
``explanation unavailable: <reason>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from perfguard.compile.case import Side, Variant
from perfguard.compile.checkout import CompilerCheckout
from perfguard.errors import first_line
from perfguard.flows.probe import checkouts, side_of
from perfguard.profile.explain import ProfileSettings, unavailable
from perfguard.progress import Progress
from perfguard.results.explanation import Explanation
from perfguard.suite import CaseSpec, Suite


def _guarded(case: CaseSpec, labels: tuple[str, str], explain: Callable[[], Explanation | str],
             progress: Progress) -> Explanation:
    """``explain()``; a reason it returns, or any exception it raises, as an unavailable
    explanation (logged)."""
    progress.log(f"explaining the culprit: profiling {labels[0]} and {labels[1]}")
    try:
        outcome = explain()
    except Exception as exc:  # noqa: BLE001 - the bisection has its answer; a profile failure only loses the why
        outcome = first_line(exc) or type(exc).__name__
    if isinstance(outcome, str):
        progress.log(f"explanation unavailable: {outcome}")
        outcome = unavailable(case.id, labels, outcome)
    return outcome


def explain_commits(suite: Suite, case: CaseSpec, before: str, after: str, labels: tuple[str, str],
                    settings: ProfileSettings, progress: Progress) -> Explanation:
    """The explanation of commit ``after`` against commit ``before`` (shas), built anew."""
    from perfguard.profile.pairs import explain_versions

    def explain() -> Explanation | str:
        with checkouts(suite, [before, after]) as trees:
            variants = []
            for sha, label in zip((before, after), labels, strict=True):
                tree = trees[sha]
                if not isinstance(tree, CompilerCheckout):
                    return f"{label} does not build: {first_line(tree)}"
                variants.append(Variant(label, side_of(tree, label)))
            return explain_versions(suite, case, variants[0], variants[1], settings, progress)

    return _guarded(case, labels, explain, progress)


def explain_pipelines(suite: Suite, case: CaseSpec, good: Sequence[str], candidate: Sequence[str],
                      labels: tuple[str, str], settings: ProfileSettings, progress: Progress) -> Explanation:
    """The explanation of pass list ``candidate`` against ``good``, both compiled by the suite's
    compiler (labels name the pipelines in the explanation)."""
    from perfguard.profile.pairs import explain_versions

    side = Side("head", suite.compiler.path)
    return _guarded(case, labels, lambda: explain_versions(
        suite, case, Variant(labels[0], side, tuple(good)), Variant(labels[1], side, tuple(candidate)), settings,
        progress), progress)
