"""``perfguard bisect passes``: which pass, inside one commit or between two pipelines.

Two compiler versions, same pipeline: the pass traces of good and bad (IR hash after each pass,
same input) name the first pass whose output differs. Timing then confirms it: hybrid compiles
take the bad version's first k passes and the good version's rest (``H(k)``; ``H(0)`` is good,
``H(n)`` bad), searched like LLVM's ``-opt-bisect-limit`` with the noise-aware sequence search, and
always confirmed by measuring ``H(k-1)`` against ``H(k)`` (prefix effects are not monotone).

Two pipelines: the edit script between the ordered lists (insertions, deletions, moves,
replacements) is searched by delta debugging (ddmin, memoized; leave-one-out first when the
script is short) for the smallest set of edits that reproduces the regression. A candidate
pipeline that cannot compile is "unresolved", not "good".
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfguard.bisect.document import (
    BisectResult,
    FirstDivergence,
    MinimalEdit,
    PassCulprit,
    PassSearch,
    PipelineProbe,
    Trace,
    VerdictSummary,
)
from perfguard.bisect.search import SearchDirection, SequenceBisector
from perfguard.bisect.state import BisectState, ProbeEntry, ProbeRecord
from perfguard.compile.case import Side
from perfguard.compile.checkout import CompilerCheckout
from perfguard.flows.probe import Variant, checkouts, run_probe
from perfguard.jsonfields import objects
from perfguard.progress import Progress
from perfguard.results.explanation import StoredExplanation
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings

if TYPE_CHECKING:
    from perfguard.profile.explain import ProfileSettings


def first_divergence(good_trace: Trace | None, bad_trace: Trace | None) -> int | None:
    """Index of the first pass whose output IR hash differs (None: identical or no traces)."""
    if not good_trace or not bad_trace:
        return None
    if good_trace.get("input_hash") != bad_trace.get("input_hash"):
        return 0
    good_passes, bad_passes = (objects(trace, "passes", "trace") for trace in (good_trace, bad_trace))
    for index, (a, b) in enumerate(zip(good_passes, bad_passes, strict=False)):
        if a["ir_hash"] != b["ir_hash"]:
            return index
    return None


def bisect_passes_between(suite: Suite, case: CaseSpec, good_sha: str, bad_sha: str, settings: CheckSettings,
                          progress: Progress, state: BisectState, entries: dict[str, ProbeEntry],
                          labels: tuple[str, str], direction: SearchDirection = "regression") -> PassSearch:
    """Find the pass of ``case.pipeline`` that turned ``good_sha`` into ``bad_sha``'s regression
    (``direction="improvement"``: into its fix, the pass that made it faster).

    ``entries`` are the probe entries of good and bad by label (``labels``): their pass traces."""
    passes = list(case.pipeline.passes)
    good_entry, bad_entry = entries.get(labels[0]), entries.get(labels[1])
    first = first_divergence(good_entry.trace if good_entry else None, bad_entry.trace if bad_entry else None)
    if first is None:
        progress.log("pass search: every pass produced the same IR in both versions; the change is outside "
                     "the pipeline's passes (runtime, build settings)")
        return PassSearch("no-divergence")
    progress.log(f"pass search: first IR divergence after pass #{first + 1} {passes[first]!r}; confirming by timing")

    def name(k: int) -> str:
        return f"H{first + k}"  # H(j): the bad version's first j passes, the good version's rest

    measured = 0

    def probe(positions: list[int], comparisons: list[tuple[int, int]]) -> ProbeRecord:
        nonlocal measured
        key = f"hybrid:{good_sha}:{bad_sha}:" + ":".join(str(first + k) for k in positions)
        cached = state.get(key)
        if cached is not None:
            return cached
        measured += 1
        with checkouts(suite, [good_sha, bad_sha]) as trees:
            good_tree, bad_tree = trees[good_sha], trees[bad_sha]
            assert isinstance(good_tree, CompilerCheckout) and isinstance(bad_tree, CompilerCheckout)
            variants = [Variant(name(k), Side(name(k), good_tree.pass_path, prefix_path=bad_tree.pass_path,
                                              prefix_len=first + k)) for k in positions]
            result = run_probe(suite, case, variants,
                                                     [(name(a), name(b)) for a, b in comparisons], settings, progress)
        state.record(key, result)
        return result

    # Position k of the search is H(first + k): H(first) equals good (the passes before the first
    # divergence produce identical IR), H(len(passes)) equals bad.
    search = SequenceBisector(len(passes) - first, probe, name, lambda text: progress.log(f"  pass search: {text}"),
                              direction)
    result = search.run()
    culprits = []
    for culprit in result.culprits:
        position = first + culprit.position
        culprits.append(PassCulprit(passes[position - 1], position, culprit.confirmed, culprit.confirmation))
    chosen = culprits[0] if culprits else None
    if chosen:
        progress.log(f"pass search: culprit pass #{chosen.position} {chosen.name!r}"
                     + ("" if chosen.confirmed else " (not confirmed by timing)"))
    return PassSearch("found" if chosen and chosen.confirmed else "inconclusive", FirstDivergence(first, passes[first]),
                      chosen, culprits, len(result.probes), measured)


@dataclass(frozen=True)
class Edit:
    """One edit turning the good pipeline into the bad one, as element-level units:
    ``("del", i)`` removes good[i], ``("ins", j)`` adds bad[j] where the bad list has it."""

    index: int
    kind: str  # insert | delete | replace | move
    describe: str
    units: tuple[tuple[str, int], ...]


def _opcodes(good: list[str], bad: list[str]) -> list[tuple[str, int, int, int, int]]:
    return [tuple(op) for op in difflib.SequenceMatcher(a=good, b=bad, autojunk=False).get_opcodes()]  # type: ignore[misc]


def edit_script(good: list[str], bad: list[str]) -> list[Edit]:
    """Edits between two ordered pass lists: a pass deleted in one place and inserted in another
    is one move; a one-for-one swap inside a changed block is a replacement."""
    deletes: list[int] = []
    inserts: list[int] = []
    swaps: list[tuple[int, int]] = []
    for tag, a0, a1, b0, b1 in _opcodes(good, bad):
        if tag == "equal":
            continue
        olds, news = list(range(a0, a1)), list(range(b0, b1))
        if tag == "replace":
            for i, j in zip(olds, news, strict=False):
                if good[i] not in bad and bad[j] not in good:
                    swaps.append((i, j))
            olds = [i for i in olds if all(i != a for a, _ in swaps)]
            news = [j for j in news if all(j != b for _, b in swaps)]
        deletes += olds
        inserts += news
    edits: list[Edit] = []
    for i in list(deletes):
        match = next((j for j in inserts if bad[j] == good[i]), None)
        if match is not None:
            j = match
            deletes.remove(i)
            inserts.remove(j)
            where = f"before {bad[j + 1]}" if j + 1 < len(bad) else "to the end"
            edits.append(Edit(0, "move", f"move {good[i]} (position {i + 1}) {where}", (("del", i), ("ins", j))))
    edits += [Edit(0, "replace", f"replace {good[i]} with {bad[j]} at position {i + 1}", (("del", i), ("ins", j)))
              for i, j in swaps]
    edits += [Edit(0, "delete", f"delete {good[i]} (position {i + 1})", (("del", i),)) for i in deletes]
    edits += [Edit(0, "insert", f"insert {bad[j]} at position {j + 1}", (("ins", j),)) for j in inserts]
    edits.sort(key=lambda e: min(u[1] for u in e.units))
    return [Edit(n, e.kind, e.describe, e.units) for n, e in enumerate(edits)]


def apply_edits(good: list[str], bad: list[str], edits: list[Edit], chosen: frozenset[int]) -> list[str]:
    """The good pipeline with only the ``chosen`` edits applied; with all of them it is ``bad``.

    Walks the diff: unchanged passes stay, a good pass is dropped when its deletion is chosen, a
    bad pass appears (at its place in the bad order) when its insertion is chosen."""
    active = {unit for edit in edits if edit.index in chosen for unit in edit.units}
    out: list[str] = []
    for tag, a0, a1, b0, b1 in _opcodes(good, bad):
        if tag == "equal":
            out.extend(good[a0:a1])
            continue
        out.extend(good[i] for i in range(a0, a1) if ("del", i) not in active)
        out.extend(bad[j] for j in range(b0, b1) if ("ins", j) in active)
    return out


#: How often one candidate pipeline is measured when its verdict stays undecided and the search
#: asks about it again (a fresh probe each time, with its own state key).
UNDECIDED_TRIES = 2


def bisect_pipelines(suite: Suite, case: CaseSpec, good_pipeline: str, bad_pipeline: str, settings: CheckSettings,
                     progress: Progress, state: BisectState, explain: ProfileSettings | None = None) -> BisectResult:
    """ddmin over the edit script from ``good_pipeline`` to ``bad_pipeline`` on ``case``'s model;
    ``explain``: once found, profile the good pipeline against the smallest reproducing edit."""
    started = time.perf_counter()
    good = list(suite.pipelines[good_pipeline].passes)
    bad = list(suite.pipelines[bad_pipeline].passes)
    edits = edit_script(good, bad)
    progress.log(f"edit script {good_pipeline} -> {bad_pipeline}: " + "; ".join(e.describe for e in edits))
    side = Side("head", suite.compiler.path)
    memo: dict[tuple[str, ...], str] = {}
    probes: list[PipelineProbe] = []

    tries: dict[tuple[str, ...], int] = {}

    def test(chosen: frozenset[int]) -> str:
        passes = tuple(apply_edits(good, bad, edits, chosen))
        if passes in memo and (memo[passes] != "undecided" or tries[passes] >= UNDECIDED_TRIES):
            return memo[passes]
        tries[passes] = attempt = tries.get(passes, 0) + 1  # an undecided pipeline asked again is measured again
        key = f"pipeline:{good_pipeline}:" + "|".join(passes) + (f"#{attempt}" if attempt > 1 else "")
        result = state.get(key)
        if result is None:
            variants = [Variant("good", side, tuple(good)), Variant("candidate", side, passes)]
            result = run_probe(suite, case, variants, [("good", "candidate")], settings,
                                                     progress)
            state.record(key, result)
        verdict = result.verdicts.get("good->candidate")
        if not result.ok:
            outcome = "unresolved"
        elif result.verdicts["good->candidate"].is_regression:
            outcome = "fail"
        else:  # a loaded machine can leave a real regression undecided: not evidence of a pass
            outcome = "undecided" if result.verdicts["good->candidate"].decision == "unknown" else "pass"
        memo[passes] = outcome
        probes.append(PipelineProbe(sorted(chosen), list(passes), outcome, verdict, result.reason))
        progress.log(f"  {{{', '.join(edits[i].describe for i in sorted(chosen)) or 'no edits'}}}: {outcome}")
        return outcome

    def document(status: str, minimal: list[MinimalEdit], effect: VerdictSummary | None,
                 explanations: list[StoredExplanation] | None = None) -> BisectResult:
        return BisectResult("pipelines", status, suite.name, case.id, len(probes), time.perf_counter() - started,
                            probes=list(probes), good_pipeline=good_pipeline, bad_pipeline=bad_pipeline,
                            edits=[e.describe for e in edits], minimal=minimal, effect=effect,
                            explanations=explanations or [])

    everything = frozenset(e.index for e in edits)
    if edits and test(everything) == "undecided":
        test(everything)  # the ends undecided once (a loaded machine): measured again before giving up
    if not edits or test(everything) != "fail":
        return document("no-regression", [], None)
    minimal = ddmin(sorted(everything), test)
    chosen = [edits[i] for i in minimal]
    final = probes[-1] if probes else None
    confirm = next((p for p in reversed(probes) if p.edits == sorted(minimal)), final)
    progress.log("smallest set of edits that reproduces the regression: " + "; ".join(e.describe for e in chosen))
    explanations: list[StoredExplanation] = []
    if explain is not None:
        from perfguard.flows.bisection.culprit_explain import explain_pipelines

        # The good pipeline with just the minimal edits: the pipeline that isolates the regression.
        reproducing = apply_edits(good, bad, edits, frozenset(minimal))
        label = bad_pipeline if len(minimal) == len(edits) else f"{good_pipeline}-minimal-edits"
        explanations = [explain_pipelines(suite, case, good, reproducing, (good_pipeline, label), explain, progress)]
    return document("found", [MinimalEdit(e.kind, e.describe) for e in chosen], confirm.verdict if confirm else None,
                    explanations)


def ddmin(items: list[int], test: Callable[[frozenset[int]], str]) -> list[int]:
    """Zeller's ddmin: a 1-minimal subset of ``items`` for which ``test`` says "fail".

    Short scripts (<= 4 edits) start with leave-one-out: an edit whose removal stops the failure
    (a decided "pass") is necessary; if every removal decided and the necessary edits alone fail,
    that is the answer. A removal that is "unresolved" (does not compile) or "undecided" (timing
    could not tell) proves nothing, so then the search is ddmin's own, which needs a "fail" for
    every step it takes: an undecided probe read as a pass once kept a do-nothing pass in the
    answer on a loaded machine."""
    if len(items) <= 4:
        outcomes = {i: test(frozenset(x for x in items if x != i)) for i in items}
        necessary = [i for i in items if outcomes[i] == "pass"]
        decided = all(outcome in ("pass", "fail") for outcome in outcomes.values())
        if decided and necessary and test(frozenset(necessary)) == "fail":
            return necessary
    current, n = list(items), 2
    while len(current) >= 2:
        chunks = [current[i * len(current) // n:(i + 1) * len(current) // n] for i in range(n)]
        reduced = False
        for chunk in chunks:
            if chunk and test(frozenset(chunk)) == "fail":
                current, n, reduced = chunk, 2, True
                break
        if not reduced:
            for chunk in chunks:
                complement = [x for x in current if x not in chunk]
                if complement and test(frozenset(complement)) == "fail":
                    current, n, reduced = complement, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(current):
                break
            n = min(len(current), 2 * n)
    return current
