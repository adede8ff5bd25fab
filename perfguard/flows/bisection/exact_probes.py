"""Bisection on an exact metric: which commit, and which pass, changed a node count or an
artifact size, by compiling only (``perfguard bisect commits --metric node_count``, and the
nightly for every confirmed exact change that timing did not confirm).

An exact metric has no noise, so a version is probed once and nothing is confirmed again: the two
ends are compiled together (one probe), then each commit the search picks (:func:`perfguard.bisect.
exact.search_exact`: ``ceil(log2 N)`` probes over a range of N commits). Inside the culprit, the pass
traces of its parent and of it name the first pass whose IR differs; hybrid compiles (the culprit's
first k passes, the parent's rest, as the timed pass search builds them) are then searched the same
way for the first pass that moves the metric. A commit that does not build, or a version that does
not compile, is skipped, never guessed.

:data:`EXACT_PROBES` says how each exact metric is probed; a metric is bisectable when it is there.
Node count and artifact size are read from a compile. A counted metric (``instructions`` of
issue 34, one counted run per version) plugs in by adding an :class:`ExactProbe` whose ``values``
runs that count: the searches, the documents and the nightly take every metric of the table.

A culprit known already (the nightly's, from another metric's bisection) is tested first
(:func:`attribute_exact`): it and its parent probed once, together, and each change it explains
is attributed to it in a document of one probe, with no search and no second count.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfguard.bisect.document import (
    BisectResult,
    CommitInfo,
    Culprit,
    Effect,
    FirstDivergence,
    PassCulprit,
    PassSearch,
    ProbeRow,
    Trace,
    VerdictSummary,
)
from perfguard.bisect.exact import ExactSearch, moved, search_exact
from perfguard.compile.case import Side, Variant
from perfguard.compile.checkout import CompilerCheckout, compiler_repo_root
from perfguard.errors import UserError
from perfguard.flows.probe import checkouts, side_of
from perfguard.progress import Progress
from perfguard.suite import CaseSpec, Suite

if TYPE_CHECKING:
    from perfguard.profile.explain import ProfileSettings
    from perfguard.results.explanation import StoredExplanation
    from perfguard.results.result import CaseEntry



@dataclass(frozen=True)
class Probed:
    """One version as a probe saw it: the metric's value, or why there is none, and the pass trace
    of its compile when the probe compiled (the pass search starts from the traces)."""

    value: float | str
    trace: Trace | None = None


#: ``values(suite, case, variants, progress)``: each variant as probed, by label.
ValuesFn = Callable[[Suite, CaseSpec, Sequence[Variant], Progress], dict[str, Probed]]


#: Smallest relative change a version must show to count as moved (as the history's exact steps).
MIN_STEP = 0.001


@dataclass(frozen=True)
class ExactProbe:
    """How one exact metric is probed: its name (the history series' metric), what one probe
    does (said in the narrative and the docs), the function that gives each version's value, the
    entry metric a probe reads (``Metrics.value``) and whether a probe of it counts under Valgrind
    (what it costs: a counted probe reads every counted metric). The smallest change that counts
    is :meth:`min_step`."""

    metric: str
    how: str
    values: ValuesFn
    key: str = ""
    counted: bool = False

    def min_step(self, suite: Suite, case: CaseSpec, at: float) -> float:
        """The smallest relative change of a version from the value ``at`` that counts as moved: any
        change of a compiled metric (:data:`MIN_STEP`), the suite's floor of a counted one there
        (``[thresholds]``, the floor check and the nightly decide with: above the metric's small
        A/A spread between counted processes, an absolute part included)."""
        if not self.counted:
            return MIN_STEP
        return suite.thresholds.gate(case.id, self.metric).relative_at(at)


def probe_entries(suite: Suite, case: CaseSpec, variants: Sequence[Variant], progress: Progress,
                  counted: bool, cache: bool = False) -> dict[str, CaseEntry]:
    """Compile every variant once (one job, no measurement) and return each compiled entry by
    label; ``counted``: each compiled variant is first counted once under Valgrind (one counted
    process per probe, a forked child for each version's inferences and one for its compile:
    ``perfguard.counting.take``). Counts repeat within their small A/A spread, so one count per
    version decides, as one compile does for a node count. ``cache``: with the cache simulation
    (``estimated_cycles`` needs it, whatever the command's ``--counts`` said)."""
    from perfguard.counting.valgrind import valgrind_path
    from perfguard.measure.job import compile_variants

    if counted:
        valgrind_path()  # one line and exit 2 before any compile when Valgrind is missing
    once = dataclasses.replace(case, measure=dataclasses.replace(case.measure, compile_repeats=1, memory_probes=0))
    job, compiled = compile_variants(suite, once, variants, progress)
    try:
        if counted:
            if cache:
                job.counts = "cache"
            job.count(list(compiled.values()))
    finally:
        job.close()
    return {label: c.entry for label, c in compiled.items()}


def probed_value(entry: CaseEntry, key: str, counted: bool) -> Probed:
    """``entry``'s exact metric ``key`` as a probe saw it: the value, or why there is none."""
    value = entry.metrics.value(key)
    trace = entry.trace.to_json() if entry.trace else None
    if entry.error is not None:
        return Probed(f"{entry.error.stage} failed: {entry.error.message}", trace)
    if value is None:
        return Probed(f"not counted: no {key} (the log says why)" if counted else f"the backend gives no {key}", trace)
    return Probed(value, trace)


def _probe_values(key: str, counted: bool) -> ValuesFn:
    """A probe that compiles (``counted``: and counts) every variant once (:func:`probe_entries`)
    and reads the exact metric ``key`` of each compiled entry."""

    def values(suite: Suite, case: CaseSpec, variants: Sequence[Variant], progress: Progress) -> dict[str, Probed]:
        entries = probe_entries(suite, case, variants, progress, counted, cache=key == "estimated_cycles")
        return {label: probed_value(entry, key, counted) for label, entry in entries.items()}

    return values


def _compiled(metric: str, key: str) -> ExactProbe:
    """Compile only: ``node_count``, ``artifact_size_bytes``."""
    return ExactProbe(metric, "compile only", _probe_values(key, counted=False), key)


def _counted(metric: str, how: str) -> ExactProbe:
    """Compile, then one count: ``instructions``, ``estimated_cycles``, ``compile_instructions``."""
    return ExactProbe(metric, how, _probe_values(metric, counted=True), metric, counted=True)


#: Every metric an exact bisection can search, by the name the history store gives its series.
EXACT_PROBES: dict[str, ExactProbe] = {
    "node_count": _compiled("node_count", "node_count"),
    "artifact_size": _compiled("artifact_size", "artifact_size_bytes"),
    "instructions": _counted("instructions", "one counted run"),
    "estimated_cycles": _counted("estimated_cycles", "one counted run"),
    "compile_instructions": _counted("compile_instructions", "one counted compile"),
}


def exact_probe(metric: str) -> ExactProbe:
    """The probe of ``metric``; a ``UserError`` listing the exact metrics otherwise."""
    if metric not in EXACT_PROBES:
        raise UserError(f"--metric {metric!r} cannot be bisected by compiling: choose latency (timed) or one of "
                        f"{', '.join(EXACT_PROBES)}")
    return EXACT_PROBES[metric]


def _verdict(before: float, after: float, label: str, metric: str) -> VerdictSummary:
    ratio = after / before if before else float("inf") if after else 1.0
    return VerdictSummary(decision="different" if after != before else "same",
                          direction="regression" if after > before else "improvement" if after < before else "none",
                          ratio=ratio if ratio != float("inf") else None, ci_low=None, ci_high=None,
                          reason=f"{label}: {metric} {before:g} -> {after:g} (exact)")


def bisect_exact_commits(suite: Suite, case: CaseSpec, good: str, bad: str, metric: str, progress: Progress,
                         *, with_passes: bool = True, explain: ProfileSettings | None = None) -> BisectResult:
    """The commit of ``good..bad`` that changed ``case``'s exact ``metric``, then the pass inside it
    (``with_passes``), by compiling only; ``explain``: the found culprit profiled against its parent
    (see the module docstring)."""
    from perfguard.flows.bisection.commit_search import commit_range

    probe = exact_probe(metric)
    started = time.perf_counter()
    commits = commit_range(compiler_repo_root(suite), good, bad)
    shas = [c.sha for c in commits]
    rows: list[ProbeRow] = []
    traces: dict[int, Trace | None] = {}

    def values_at(positions: list[int]) -> dict[int, float | str]:
        names = [shas[i][:10] for i in positions]
        with checkouts(suite, [shas[i] for i in positions]) as trees:
            broken = {i: f"does not build: {trees[shas[i]]}" for i in positions
                      if not isinstance(trees[shas[i]], CompilerCheckout)}
            variants = [Variant(shas[i][:10], side_of(trees[shas[i]], shas[i][:10]))  # type: ignore[arg-type]
                        for i in positions if i not in broken]
            got = probe.values(suite, case, variants, progress) if variants else {}
        out: dict[int, float | str] = {**broken, **{i: got[shas[i][:10]].value for i in positions if i not in broken}}
        traces.update({i: got[shas[i][:10]].trace for i in positions if i not in broken})
        skipped = {names[k]: v for k, i in enumerate(positions) if isinstance(v := out[i], str)}
        rows.append(ProbeRow("exact" if len(positions) == 1 else "endpoints", names,
                             "skip" if skipped else "ok", "; ".join(f"{k}: {v}" for k, v in skipped.items()) or None,
                             values={names[k]: v for k, i in enumerate(positions) if not isinstance(v := out[i], str)}))
        for i in positions:
            progress.log(f"  {shas[i][:10]}: {metric} {out[i]:g}" if not isinstance(out[i], str)
                         else f"  {shas[i][:10]}: skipped ({out[i]})")
        return out

    progress.log(f"bisecting {case.id} on {metric} ({probe.how}) over {len(shas) - 1} commits "
                 f"({shas[0][:10]}..{shas[-1][:10]})")
    ends = values_at([0, len(shas) - 1])
    low, high = ends[0], ends[len(shas) - 1]

    def document(status: str, culprits: list[Culprit], found: ExactSearch | None = None) -> BisectResult:
        skipped = [commits[i] for i, v in sorted((found.values if found else {}).items()) if isinstance(v, str)]
        return BisectResult("commits", status, suite.name, case.id, len(rows), time.perf_counter() - started,
                            good=CommitInfo(commits[0].sha, commits[0].subject, commits[0].author, commits[0].date, good),
                            bad=CommitInfo(commits[-1].sha, commits[-1].subject, commits[-1].author, commits[-1].date,
                                           bad),
                            endpoints=None if isinstance(low, str) or isinstance(high, str)
                            else _verdict(low, high, f"{shas[0][:10]}->{shas[-1][:10]}", metric),
                            culprits=culprits, probes=list(rows), commits=len(shas) - 1, state_file=None,
                            measured_probes=len(rows), skipped=skipped if found else None, metric=metric)

    if isinstance(low, str) or isinstance(high, str):
        raise UserError(f"bisect --metric {metric}: an end of the range has no value "
                        f"({shas[0][:10]}: {low}; {shas[-1][:10]}: {high})")
    found = search_exact(len(shas) - 1, low, high, lambda i: values_at([i])[i], probe.min_step(suite, case, low))
    if found.culprit is None:
        progress.log(f"{metric} is {low:g} at both ends: nothing to bisect")
        return document("no-regression", [])
    position = found.culprit
    parent_value = low if position - 1 == 0 else found.values.get(position - 1, low)
    value = high if position == len(shas) - 1 else found.values[position]
    assert not isinstance(parent_value, str) and not isinstance(value, str)
    effect = _verdict(parent_value, value, f"{shas[position - 1][:10]}->{shas[position][:10]}", metric)
    pass_search = None
    if with_passes and found.span is None:
        pass_search = bisect_exact_passes(suite, case, (shas[position - 1], shas[position]), (parent_value, value),
                                          (traces.get(position - 1), traces.get(position)), probe, progress)
    culprit = Culprit(commits[position], Effect.of(effect), pass_search.culprit if pass_search else None,
                      found.span is None, position,
                      commits[found.span[0]:found.span[1] + 1] if found.span else None, pass_search)
    progress.log(f"culprit: {shas[position][:10]} {commits[position].subject or ''}: {metric} "
                 f"{parent_value:g} -> {value:g}" + (f", pass {culprit.pass_.name!r}" if culprit.pass_ else "")
                 + f" ({len(rows)} probes, each compiled once)")
    result = document(found.status, [culprit], found)
    if found.status == "found" and explain is not None:
        from perfguard.flows.bisection.culprit_explain import explain_commits

        labels = (shas[position - 1][:10], shas[position][:10])
        result = dataclasses.replace(result, explanations=[explain_commits(
            suite, case, shas[position - 1], shas[position], labels, explain, progress)])
    return result


def bisect_exact_passes(suite: Suite, case: CaseSpec, shas: tuple[str, str], ends: tuple[float, float],
                        traces: tuple[Trace | None, Trace | None], probe: ExactProbe,
                        progress: Progress) -> PassSearch:
    """The pass of ``case``'s pipeline that changed the exact metric between two adjacent commits
    (``shas``: parent, culprit; ``ends``: their values; ``traces``: their pass traces, compiled
    again when a probe kept none): the first pass whose IR differs, then hybrid compiles H(k)
    searched by compiling only."""
    from perfguard.flows.bisection.pass_search import first_divergence
    from perfguard.measure.job import compile_variants

    passes = list(case.pipeline.passes)
    probes = 0
    with checkouts(suite, list(shas)) as trees:
        good_tree, bad_tree = trees[shas[0]], trees[shas[1]]
        assert isinstance(good_tree, CompilerCheckout) and isinstance(bad_tree, CompilerCheckout)
        if traces[0] is None or traces[1] is None:
            job, compiled = compile_variants(suite, case, [Variant("good", side_of(good_tree, "good")),
                                                           Variant("bad", side_of(bad_tree, "bad"))], progress)
            job.close()
            traces = tuple(c.entry.trace.to_json() if c.entry.trace else None  # type: ignore[assignment]
                           for c in (compiled["good"], compiled["bad"]))
        first = first_divergence(traces[0], traces[1])
        if first is None:
            progress.log("pass search: every pass produced the same IR in both versions")
            return PassSearch("no-divergence")

        def hybrid(k: int) -> float | str:
            nonlocal probes
            probes += 1
            name = f"H{first + k}"
            side = Side(name, good_tree.pass_path, prefix_path=bad_tree.pass_path, prefix_len=first + k)
            return probe.values(suite, case, [Variant(name, side)], progress)[name].value

        # Position k is H(first + k): the culprit's first first+k passes, the parent's rest. H(first)
        # is the parent (the passes before the divergence give the same IR), H(len) the culprit.
        found = search_exact(len(passes) - first, ends[0], ends[1], hybrid, probe.min_step(suite, case, ends[0]))
    if found.culprit is None:
        return PassSearch("inconclusive", FirstDivergence(first, passes[first]), probes=probes, measured_probes=probes)
    position = first + found.culprit
    before = found.values.get(found.culprit - 1, ends[0]) if found.culprit > 1 else ends[0]
    after = found.values.get(found.culprit, ends[1])
    assert not isinstance(before, str) and not isinstance(after, str)
    chosen = PassCulprit(passes[position - 1], position, found.span is None,
                         _verdict(before, after, f"H{position - 1}->H{position}", probe.metric))
    progress.log(f"pass search: pass #{position} {chosen.name!r} changes {probe.metric} {before:g} -> {after:g}")
    return PassSearch("found" if found.span is None else "inconclusive", FirstDivergence(first, passes[first]),
                      chosen, [chosen], probes, probes)


def bisect_exact_between(suite: Suite, case: CaseSpec, good: str, bad: str, metric: str,
                         progress: Progress) -> BisectResult:
    """``bisect passes --good --bad --metric M``: the pass that changed ``metric`` between two
    commits, by compiling only (mode ``passes``)."""
    from perfguard.compile.checkout import resolve_commit

    probe = exact_probe(metric)
    started = time.perf_counter()
    root = compiler_repo_root(suite)
    (good_sha, good_subject), (bad_sha, bad_subject) = resolve_commit(root, good), resolve_commit(root, bad)
    with checkouts(suite, [good_sha, bad_sha]) as trees:
        for sha, ref in ((good_sha, good), (bad_sha, bad)):
            if not isinstance(trees[sha], CompilerCheckout):
                raise UserError(f"{ref} ({sha[:10]}) does not build: {trees[sha]}")
        got = probe.values(suite, case, [Variant("good", side_of(trees[good_sha], "good")),  # type: ignore[arg-type]
                                         Variant("bad", side_of(trees[bad_sha], "bad"))], progress)  # type: ignore[arg-type]
    low, high = got["good"].value, got["bad"].value
    if isinstance(low, str) or isinstance(high, str):
        raise UserError(f"bisect passes --metric {metric}: good: {low}; bad: {high}")
    endpoints = _verdict(low, high, f"{good_sha[:10]}->{bad_sha[:10]}", metric)
    search = None
    if moved(high, low, high, probe.min_step(suite, case, low)):
        search = bisect_exact_passes(suite, case, (good_sha, bad_sha), (low, high), (got["good"].trace,
                                     got["bad"].trace), probe, progress)
    status = "no-regression" if search is None else search.status
    culprits = [] if search is None else [Culprit(CommitInfo(bad_sha, bad_subject), Effect.of(endpoints),
                                                   search.culprit, search.status == "found")]
    return BisectResult("passes", status, suite.name, case.id, 1 + (search.probes if search else 0),
                        time.perf_counter() - started, good=CommitInfo(good_sha, good_subject, ref=good),
                        bad=CommitInfo(bad_sha, bad_subject, ref=bad), endpoints=endpoints, culprits=culprits,
                        pass_search=search, metric=metric)


@dataclass(frozen=True)
class ExactChange:
    """An exact change a known culprit may explain: its metric, its range (``good``..``bad``) and
    the series' values at its two ends (None: the series has no point there)."""

    metric: str
    good: str
    bad: str
    before: float | None
    after: float | None


def explains(parent: float, culprit: float, change: ExactChange, min_step: float) -> bool:
    """Whether a step from ``parent`` to ``culprit`` (the culprit commit's parent and the culprit,
    probed together) is ``change``: it moved by ``min_step`` (relative) in the change's direction,
    and the ends agree, the parent at the good end's level and the culprit at the bad end's (neither
    off by ``min_step`` toward the other end), so no other commit of the range moved the metric.
    A change without both end values is judged by its direction alone."""
    if not moved(culprit, parent, culprit, min_step):
        return False
    if change.before is None or change.after is None:
        return True
    before, after = change.before, change.after
    return (after > before) == (culprit > parent) and not moved(parent, before, after, min_step) \
        and not moved(culprit, after, before, min_step)


def attribute_exact(suite: Suite, case: CaseSpec, culprit: str, changes: Sequence[ExactChange], progress: Progress,
                    *, explanations: Sequence[StoredExplanation] = ()) -> list[BisectResult | None]:
    """Test a known culprit commit first: whether ``culprit`` explains each of ``case``'s exact
    ``changes`` (see :func:`explains`). Its parent and it are probed once, together: counted (two
    counted versions, one counted process) when a change is of a counted metric, else compiled,
    and every change of the case is read from that one probe. Returns, per change, the document
    that attributes it to ``culprit`` (a commits bisection found in one probe; ``explanations``:
    the culprit's, from the bisection that found it, not profiled again), or None: its range does
    not hold the culprit, or the culprit does not explain it (the nightly bisects it on its own)."""
    from perfguard.compile.checkout import resolve_commit
    from perfguard.flows.bisection.commit_search import commit_range

    started = time.perf_counter()
    root = compiler_repo_root(suite)
    ranges: list[list[CommitInfo] | None] = []
    for change in changes:
        try:
            commits = commit_range(root, change.good, change.bad)
        except UserError:
            commits = []
        holds = [c.sha for c in commits[1:]].count(culprit) == 1 and change.metric in EXACT_PROBES
        ranges.append(commits if holds else None)
    if not any(ranges):
        return [None] * len(changes)
    parent, _ = resolve_commit(root, f"{culprit}^")
    counted = any(EXACT_PROBES[c.metric].counted for c, r in zip(changes, ranges, strict=True) if r)
    labels = (parent[:10], culprit[:10])
    progress.log(f"testing the known culprit {labels[1]} on {case.id} first: {labels[0]} and {labels[1]}, "
                 + ("counted once each" if counted else "compiled once each"))
    with checkouts(suite, [parent, culprit]) as trees:
        broken = [f"{sha[:10]} does not build: {trees[sha]}" for sha in (parent, culprit)
                  if not isinstance(trees[sha], CompilerCheckout)]
        if broken:
            progress.log(f"  not tested: {'; '.join(broken)}")
            return [None] * len(changes)
        entries = probe_entries(suite, case, [Variant(label, side_of(trees[sha], label))  # type: ignore[arg-type]
                                              for sha, label in zip((parent, culprit), labels, strict=True)],
                                progress, counted,
                                cache=any(c.metric == "estimated_cycles" for c, r in zip(changes, ranges, strict=True) if r))
    out: list[BisectResult | None] = []
    for change, held in zip(changes, ranges, strict=True):
        if held is None:
            out.append(None)
            continue
        commits = held
        probe = EXACT_PROBES[change.metric]
        low, high = (probed_value(entries[label], probe.key, probe.counted).value for label in labels)
        if isinstance(low, str) or isinstance(high, str) or \
                not explains(low, high, change, probe.min_step(suite, case, low)):
            progress.log(f"  {change.metric}: " + (f"{low} / {high}" if isinstance(low, str) or isinstance(high, str)
                                                   else f"{low:g} -> {high:g}, not the change ({change.before} -> "
                                                   f"{change.after}): bisected on its own"))
            out.append(None)
            continue
        progress.log(f"  {change.metric}: {low:g} -> {high:g}: attributed to {labels[1]}")
        position = [c.sha for c in commits].index(culprit)
        effect = _verdict(low, high, f"{labels[0]}->{labels[1]}", change.metric)
        ends = None if change.before is None or change.after is None else _verdict(
            change.before, change.after, f"{commits[0].sha[:10]}->{commits[-1].sha[:10]}", change.metric)
        out.append(BisectResult(
            "commits", "found", suite.name, case.id, 1, time.perf_counter() - started,
            good=dataclasses.replace(commits[0], ref=change.good), bad=dataclasses.replace(commits[-1], ref=change.bad),
            endpoints=ends, culprits=[Culprit(commits[position], Effect.of(effect), None, True, position, None)],
            probes=[ProbeRow("culprit", list(labels), "ok", values={labels[0]: low, labels[1]: high})],
            commits=len(commits) - 1, state_file=None, measured_probes=1, skipped=[],
            explanations=list(explanations), metric=change.metric))
    return out
