"""Compare and gate: verdicts per case and metric, adaptive sampling, false-discovery control.

A comparison pairs a *baseline* case entry with a *candidate* entry (result-document entries, so
stored baselines and same-job measurements go through the same code):

* **paired** (same job: another git ref of the compiler, or another pipeline): latency and memory
  are compared worker by worker (``stats.compare_paired``), because both sides ran interleaved in
  the same worker processes;
* **unpaired** (a stored baseline, ``perfguard compare``): ``stats.compare_unpaired``, conservative;
* compile time is always unpaired (each compile is its own sample);
* artifact size and node count are deterministic (``stats.compare_deterministic``), and so are
  the counted metrics (``instructions``, ``estimated_cycles``: ``--counts``), one value a side
  with their own floor; a pair where neither side was counted has no row for them.

Adaptive sampling (same job only): after the first look, every undecided latency comparison gets
``step_workers`` more worker processes, up to ``max_workers``. The number of looks K is planned in
advance and look k tests at the level ``a_k`` of the spending schedule
(``stats.adaptive.spending_schedule``: half of ``alpha`` at the first look, the other half split
equally over the later ones; the levels sum to ``alpha``), with its interval at ``1 - a_k``. The
loop is ``stats.adaptive.sequential_sampling``, the one ``stats.adaptive_compare`` runs too, and
the simulations in ``tests/test_stats_sim.py`` drive :func:`adaptive_check` itself with a
simulated ``remeasure``: the code they validate is the code ``perfguard check`` runs.

False discoveries: Benjamini-Hochberg at ``alpha`` within each *family*, one per noisy metric over
all cases x runners (:data:`FAMILIES`): every latency comparison of the check is one family,
every compile-time comparison another. Compile time (unpaired, 5 compiles a side, gated loosely
at 25 %, measured once and never re-sampled: a single look at ``alpha``) would otherwise add
p-values that almost never decide to the latency family and raise the bar for every latency
regression: over the four p-values of a check of two models a first-look p of 2/256 became
0.0156, over that look's level. BH runs on look-adjusted p-values ``p * alpha / a_k``
(``SequentialPlan.sequential_p``), so a lone comparison is rejected exactly when ``p <= a_k``,
and a DIFFERENT whose adjusted p-value misses becomes UNKNOWN (and is sampled further while the
budget lasts). Memory, artifact size and node count are exact values with no test: no family.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from perfguard.compare.verdicts import Sampling, Verdict, VerdictsDocument
from perfguard.exit_codes import ExitCode
from perfguard.jsonfields import JsonDict
from perfguard.results import CaseEntry
from perfguard.stats import bh_adjust, compare_deterministic, compare_paired, compare_unpaired
from perfguard.stats.adaptive import SequentialPlan, sequential_sampling
from perfguard.stats.options import ComparisonOptions
from perfguard.stats.verdict import Comparison
from perfguard.suite.gates import METRICS, CheckSettings, ThresholdSet


@dataclass(frozen=True)
class Pair:
    """Which entry is the baseline and which the candidate, and how to compare them."""

    case: str
    baseline: CaseEntry
    candidate: CaseEntry
    paired: bool
    baseline_label: str
    candidate_label: str
    # The measured variants of each side (same job only: what adaptive sampling re-measures).
    variants: frozenset[str] = frozenset()
    # Both artifacts have one execution identity: latency and memory are SAME, not timed.
    identical: bool = False


def same_execution(baseline: CaseEntry, candidate: CaseEntry) -> bool:
    """Whether two compiled entries run the same code on the same runner: both compiled and their
    artifacts' execution identities (``Backend.execution_identity`` and the runner) are equal."""
    identity = baseline.execution_identity
    return baseline.ok and candidate.ok and identity is not None and identity == candidate.execution_identity


def unmeasured_variants(pairs: Sequence[Pair]) -> dict[str, str]:
    """The variants that need no timing, with the reason: those that appear only in pairs whose
    two artifacts are identical (a variant compared with something else is still timed)."""
    needed = {v for pair in pairs if not pair.identical for v in pair.variants}
    skip: dict[str, str] = {}
    for pair in pairs:
        if pair.identical:
            for variant in sorted(pair.variants - needed):
                skip[variant] = (f"identical artifact to its pair in {pair.case} (execution identity "
                                 f"{pair.baseline.execution_identity}): SAME without timing")
    return skip


def decidable(comparison: Comparison) -> bool:
    """Whether an undecided comparison could have decided at all: its smallest detectable change
    (MDE, at the noise it measured) is within its floor. Compile time from a few unpaired
    compiles a side usually cannot decide a 25 % floor; such a comparison is reported, not gated
    (one summary line instead of an undecided row per case). Decided comparisons are gated."""
    if comparison.decision != "unknown":
        return True
    return math.isfinite(comparison.mde) and comparison.mde <= comparison.floor


def detectable(mde: float, samples: int | None = None) -> str:
    """The smallest detectable change in words: ``25%``. Past 100 % the number says nothing
    ("smallest detectable: 150795%" from three compiles a side), so it is capped: ``over 100%, far
    beyond what 3 samples resolve``."""
    if not math.isfinite(mde) or mde > 1.0:
        what = f"{samples} sample{'' if samples == 1 else 's'}" if samples else "these samples"
        return f"over 100%, far beyond what {what} resolve"
    return f"{mde:.0%}"


def _identical(gate_floor: float, identity: str | None) -> Comparison:
    return Comparison(decision="same", direction="none", ratio=1.0, ci_low=1.0, ci_high=1.0, p_value=math.nan,
                      mde=math.nan, n_pairs=0, baseline_median=math.nan, candidate_median=math.nan,
                      floor=gate_floor, reason=f"identical artifact (execution identity {identity}): not timed",
                      method="identity")


def _unknown(reason: str, baseline: float = math.nan, candidate: float = math.nan) -> Comparison:
    return Comparison(decision="unknown", direction="none", ratio=math.nan, ci_low=math.nan, ci_high=math.nan,
                      p_value=math.nan, mde=math.inf, n_pairs=0, baseline_median=baseline,
                      candidate_median=candidate, floor=math.nan, reason=reason, method="none")


def _noisy(groups_a: dict[int, list[float]], groups_b: dict[int, list[float]], paired: bool, metric: str,
           options: ComparisonOptions) -> Comparison:
    if not groups_a or not groups_b:
        return _unknown(f"no {metric} values on one side")
    if any(v <= 0 for g in (*groups_a.values(), *groups_b.values()) for v in g):
        return _unknown(f"{metric} was not measurable (a zero value)")
    if paired:
        common = sorted(set(groups_a) & set(groups_b))
        if not common:
            return _unknown("no worker measured both sides")
        return compare_paired([groups_a[i] for i in common], [groups_b[i] for i in common], options)
    return compare_unpaired(list(groups_a.values()), list(groups_b.values()), options)


def _device_gate(comparison: Comparison, pair: Pair) -> Comparison:
    """A latency verdict measured on a throttling GPU, or on clocks that differ from the
    baseline's, is never trusted: it becomes UNKNOWN with the device's reasons."""
    from perfguard.runners.telemetry import judge_device_state

    def summary(entry: CaseEntry) -> JsonDict | None:
        return entry.measurement.telemetry_summary if entry.measurement else None

    base, cand = summary(pair.baseline), summary(pair.candidate)
    if base is None and cand is None:
        return comparison
    reasons = []
    for side, own, other in (("baseline", base, None), ("candidate", cand, base)):
        state = judge_device_state(own, baseline=other)
        if state.flagged:
            reasons += [f"{side}: {r}" for r in state.reasons]
    if not reasons:
        return comparison
    return dataclasses.replace(comparison, decision="unknown", direction="none",
                               reason=f"device state flagged ({'; '.join(reasons)}); {comparison.reason}")


def compare_pair(pair: Pair, thresholds: ThresholdSet, *, alpha: float, confidence: float,
                 seed: int = 0, once: tuple[float, float] | None = None) -> list[Verdict]:
    """Every metric's verdict for one pair (rows for the verdict document).

    Latency is tested at ``alpha`` with its interval at ``confidence`` (the levels of the pair's
    current look); compile time, measured once and never re-sampled, at ``once`` = (alpha,
    confidence) of a single look (default: the same levels)."""
    rows = []
    for metric, spec in METRICS.items():
        gate = thresholds.gate(pair.case, metric)
        gated = True
        base_m, cand_m = pair.baseline.metrics, pair.candidate.metrics
        if spec.counted and base_m.value(metric) is None and cand_m.value(metric) is None:
            continue  # not counted (no --counts): no row, as for a metric nobody asked for
        options = ComparisonOptions(statistic=gate.statistic, rel_floor=gate.relative, abs_floor=gate.absolute,
                                    alpha=alpha, confidence=confidence, seed=seed)
        if pair.identical and metric in ("latency", "memory"):
            comparison = _identical(gate.relative or 0.0, pair.baseline.execution_identity)
        elif metric == "latency":
            if not pair.paired:  # across separate runs: never below the across-runs floor
                options = dataclasses.replace(options, rel_floor=max(gate.relative or 0.0, thresholds.across_runs))
            comparison = _noisy(pair.baseline.latency_by_worker(), pair.candidate.latency_by_worker(), pair.paired,
                                metric, options)
            comparison = _device_gate(comparison, pair)
        elif metric == "compile_time":
            a = {i: [t] for i, t in enumerate(base_m.compile_times_s or ())}
            b = {i: [t] for i, t in enumerate(cand_m.compile_times_s or ())}
            if once is not None:
                options = dataclasses.replace(options, alpha=once[0], confidence=once[1])
            comparison = _noisy(a, b, False, metric, options)
            gated = decidable(comparison)
            if not gated:
                why = ("compile time was not measured on one side (an artifact served from a cache)" if not a or not b
                       else f"{len(a)} and {len(b)} compiles cannot detect a change of the {comparison.floor:.0%} "
                            f"floor (smallest detectable: {detectable(comparison.mde, min(len(a), len(b)))})")
                comparison = dataclasses.replace(comparison, reason=f"{comparison.reason}; not gated: {why}")
        else:
            key = {"artifact_size": "artifact_size_bytes", "memory": "peak_rss_bytes"}.get(metric, metric)
            before, after = base_m.value(key), cand_m.value(key)
            differently = (base_m.counts.incomparable(cand_m.counts)
                           if spec.counted and base_m.counts and cand_m.counts else None)
            if before is None or after is None:
                comparison = _unknown(f"no {metric} on one side")
            elif differently is not None:  # a perfguard or Valgrind upgrade between the two sides
                comparison = _unknown(differently, before, after)
            else:
                comparison = compare_deterministic(before, after, gate.threshold(before))
        rows.append(Verdict(pair.case, metric, spec.unit, spec.noisy, gate.text, pair.baseline_label,
                            pair.candidate_label, pair.paired and metric == "latency", comparison,
                            comparison.decision, comparison.direction, gated=gated))
    return rows


def failed_rows(pair: Pair) -> list[Verdict]:
    """Rows for a pair where one side failed to compile, check or measure."""
    side, entry = ("candidate", pair.candidate) if not pair.candidate.ok else ("baseline", pair.baseline)
    stage, message = (entry.error.stage, entry.error.message) if entry.error else ("?", "failed")
    reason = f"{side} {stage} failed: {message}"
    return [Verdict(pair.case, "status", "", False, "", pair.baseline_label, pair.candidate_label, False,
                    _unknown(reason), "failed" if side == "candidate" else "unknown", "none")]


def check_plan(settings: CheckSettings, adaptive: bool = True) -> SequentialPlan:
    """The looks of a check and their levels, from the suite's ``[check]`` settings: the intervals
    are at ``1 - level`` of each look (no separate confidence setting; see ``SequentialPlan``)."""
    return SequentialPlan(settings.workers, settings.step_workers, settings.max_workers, settings.alpha,
                          adaptive=adaptive)


def evaluate(pairs: Sequence[Pair], thresholds: ThresholdSet, plan: SequentialPlan,
             looks: dict[str, int] | None = None) -> list[Verdict]:
    """Every row of every pair; latency of ``pair`` at the levels of its look ``looks[pair.case]``
    (default 1), compile time at the levels of a single look (it is measured once)."""
    once = (plan.alpha, 1.0 - plan.alpha if plan.confidence is None else plan.confidence)
    rows: list[Verdict] = []
    for index, pair in enumerate(pairs):
        if not pair.baseline.ok or not pair.candidate.ok:
            rows += failed_rows(pair)
        else:
            look = (looks or {}).get(pair.case, 1)
            rows += compare_pair(pair, thresholds, alpha=plan.level(look), confidence=plan.confidence_at(look),
                                 seed=index, once=once)
    return rows


#: The false-discovery families: every noisy metric is its own family over all cases x runners.
FAMILIES = tuple(name for name, spec in METRICS.items() if spec.noisy)


#: What :func:`control_false_discoveries` appends to the reason of a DIFFERENT it demotes (and
#: :func:`uncorrected` takes off again).
DEMOTED_BY_FDR = "; not significant after false-discovery control over the "


def uncorrected(row: Verdict) -> Verdict:
    """``row`` as :func:`evaluate` made it, before :func:`control_false_discoveries`: no BH-adjusted
    p-value, and a DIFFERENT that the correction demoted to UNKNOWN restored (the comparison kept
    the test's own decision and direction; the demotion's note comes off its reason). What
    ``perfguard merge`` corrects again over the union of shards."""
    if row.metric not in FAMILIES:
        return row
    comparison = row.comparison
    if row.decision == "unknown" and comparison.decision == "different" and DEMOTED_BY_FDR in comparison.reason:
        reason = comparison.reason[:comparison.reason.rindex(DEMOTED_BY_FDR)]
        return dataclasses.replace(row, decision="different", direction=comparison.direction, bh_adjusted_p=None,
                                   comparison=dataclasses.replace(comparison, reason=reason))
    return dataclasses.replace(row, bh_adjusted_p=None)


def control_false_discoveries(rows: list[Verdict], plan: SequentialPlan) -> list[Verdict]:
    """Benjamini-Hochberg at ``plan.alpha`` within each family (latency; compile time) over the
    p-values on the scale of the whole sequence (``plan.sequential_p``: a comparison made at a look
    of level a_k counts as ``p * alpha / a_k``); a DIFFERENT whose adjusted p-value misses becomes
    UNKNOWN. Deterministic metrics (memory, sizes, node count) have no test and no family, and a
    row that is not gated (undecidable at its sample size) is no member.
    Returns the rows, in order, with ``bh_adjusted_p`` set."""
    rows = list(rows)
    for family in FAMILIES:
        # A row that could not have decided (not gated) is no member: its p-value would only
        # raise the bar for the comparisons of its family that can decide.
        members = [i for i, r in enumerate(rows)
                   if r.metric == family and r.gated and math.isfinite(r.comparison.p_value)]
        if not members:
            continue
        sequential = [plan.sequential_p(rows[i].comparison.p_value, rows[i].comparison.alpha) for i in members]
        for i, p_adj in zip(members, bh_adjust(sequential), strict=True):
            row = dataclasses.replace(rows[i], bh_adjusted_p=p_adj)
            if row.decision == "different" and p_adj > plan.alpha:
                reason = (f"{row.comparison.reason}{DEMOTED_BY_FDR}"
                          f"{len(members)} {family} comparisons (BH-adjusted p={p_adj:.3g} > {plan.alpha:g})")
                row = dataclasses.replace(row, decision="unknown", direction="none",
                                          comparison=dataclasses.replace(row.comparison, reason=reason))
            rows[i] = row
    return rows


@dataclass
class _Latest:
    """The pairs and rows of the latest look of :func:`adaptive_check`."""

    pairs: list[Pair] = dataclasses.field(default_factory=list)
    rows: list[Verdict] = dataclasses.field(default_factory=list)


def adaptive_check(pairs_of: Callable[[], list[Pair]], remeasure: Callable[[set[str], int], None],
                   thresholds: ThresholdSet, settings: CheckSettings,
                   adaptive: bool) -> tuple[list[Verdict], Sampling]:
    """Looks at the data, adds workers to undecided paired comparisons, decides: the one sequential
    loop of every check, compare and bisection probe (``stats.adaptive.sequential_sampling``).

    ``pairs_of`` rebuilds the pairs from the current entries; ``remeasure(ids, n)`` measures ``n``
    more workers for the variants ``ids`` (a pair's ``variants``); without ``adaptive`` (a stored
    baseline) there is one look at ``alpha``. A pair's latency is tested
    at the level of its own look (how many batches of workers it has had), so a pair decided
    early keeps the level it was decided at."""
    plan = check_plan(settings, adaptive=adaptive)
    looks: dict[str, int] = {}
    state = _Latest()

    def look(_: int) -> set[str]:
        pairs = pairs_of()
        # A DIFFERENT that false-discovery control would demote is undecided: sample it further.
        rows = control_false_discoveries(evaluate(pairs, thresholds, plan, looks), plan)
        state.pairs, state.rows = pairs, rows
        return {r.case for r in rows if r.metric == "latency" and r.paired and r.decision == "unknown"}

    def more(undecided: Collection[str], n: int) -> bool:
        assert adaptive  # one look when there is nothing to re-measure
        ids: set[str] = set()
        for pair in state.pairs:
            if pair.case in undecided:
                ids |= pair.variants
                looks[pair.case] = looks.get(pair.case, 1) + 1
        remeasure(ids, n)
        return True

    history = sequential_sampling(plan, look, more)
    info = Sampling(settings.alpha, plan.looks, tuple(plan.levels), tuple(plan.confidences), tuple(FAMILIES),
                    settings.workers, settings.step_workers, settings.max_workers, tuple(history))
    return state.rows, info


def exit_code(document: VerdictsDocument, fail_on_unknown: bool) -> ExitCode:
    """0 no regression; 1 a regression (or a failed candidate); 3 an undecided latency verdict with
    --fail-on-unknown (compile time is gated loosely and often stays undecided; it never sets 3)."""
    summary = document.summary
    if summary.regressions or summary.failed:
        return ExitCode.REGRESSION
    if fail_on_unknown and summary.unknown_latency:
        return ExitCode.UNKNOWN
    return ExitCode.OK
