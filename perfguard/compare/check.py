"""Compare and gate: verdicts per case and metric, adaptive sampling, false-discovery control.

A comparison pairs a *baseline* case entry with a *candidate* entry (result-document entries, so
stored baselines and same-job measurements go through the same code):

* **paired** (same job: another git ref of the compiler, or another pipeline): latency and memory
  are compared worker by worker (``stats.compare_paired``), because both sides ran interleaved in
  the same worker processes;
* **unpaired** (a stored baseline, ``perfguard compare``): ``stats.compare_unpaired``, conservative;
* compile time is always unpaired (each compile is its own sample);
* artifact size and node count are deterministic (``stats.compare_deterministic``).

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
from datetime import datetime, timezone
from typing import Any

from perfguard import __version__
from perfguard.exit_codes import ExitCode
from perfguard.stats import bh_adjust, compare_deterministic, compare_paired, compare_unpaired
from perfguard.stats.adaptive import SequentialPlan, sequential_sampling
from perfguard.stats.verdict import Comparison
from perfguard.suite.gates import METRICS, CheckSettings, ThresholdSet

VERDICTS_VERSION = 1
# Format history (VERDICTS_VERSION):
# 1. First format: mode, settings, summary, verdicts[] (case, metric, comparison, gate), results.


@dataclass(frozen=True)
class Pair:
    """Which entry is the baseline and which the candidate, and how to compare them."""

    case: str
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    paired: bool
    baseline_label: str
    candidate_label: str


def latency_groups(entry: dict[str, Any]) -> dict[int, list[float]]:
    """Per-worker latency values of an entry, keyed by worker id (the key two sides are paired by)."""
    latency = entry.get("metrics", {}).get("latency_s") or {}
    ids = (entry.get("measurement") or {}).get("worker_ids") or list(range(len(latency.get("per_worker", []))))
    return dict(zip(ids, latency.get("per_worker", []), strict=False))


def _unknown(reason: str, baseline: float = math.nan, candidate: float = math.nan) -> Comparison:
    return Comparison(decision="unknown", direction="none", ratio=math.nan, ci_low=math.nan, ci_high=math.nan,
                      p_value=math.nan, mde=math.inf, n_pairs=0, baseline_median=baseline,
                      candidate_median=candidate, floor=math.nan, reason=reason, method="none")


def _noisy(groups_a: dict[int, list[float]], groups_b: dict[int, list[float]], pair: Pair, metric: str,
           kwargs: dict[str, Any]) -> Comparison:
    if not groups_a or not groups_b:
        return _unknown(f"no {metric} values on one side")
    if any(v <= 0 for g in (*groups_a.values(), *groups_b.values()) for v in g):
        return _unknown(f"{metric} was not measurable (a zero value)")
    if pair.paired:
        common = sorted(set(groups_a) & set(groups_b))
        if not common:
            return _unknown("no worker measured both sides")
        return compare_paired([groups_a[i] for i in common], [groups_b[i] for i in common], **kwargs)
    return compare_unpaired(list(groups_a.values()), list(groups_b.values()), **kwargs)


def _device_gate(comparison: Comparison, pair: Pair) -> Comparison:
    """A latency verdict measured on a throttling GPU, or on clocks that differ from the
    baseline's, is never trusted: it becomes UNKNOWN with the device's reasons."""
    from perfguard.runners.telemetry import judge_device_state

    def summary(entry: dict[str, Any]) -> dict[str, Any] | None:
        telemetry = (entry.get("measurement") or {}).get("telemetry") or {}
        return telemetry.get("summary")

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
                 seed: int = 0, once: tuple[float, float] | None = None) -> list[dict[str, Any]]:
    """Every metric's verdict for one pair (rows for the verdict document).

    Latency is tested at ``alpha`` with its interval at ``confidence`` (the levels of the pair's
    current look); compile time, measured once and never re-sampled, at ``once`` = (alpha,
    confidence) of a single look (default: the same levels)."""
    rows = []
    for metric, spec in METRICS.items():
        gate = thresholds.gate(pair.case, metric)
        base_m, cand_m = pair.baseline.get("metrics", {}), pair.candidate.get("metrics", {})
        kwargs = {"statistic": gate.statistic, "rel_floor": gate.relative, "abs_floor": gate.absolute,
                  "alpha": alpha, "confidence": confidence, "seed": seed}
        if metric == "latency":
            comparison = _noisy(latency_groups(pair.baseline), latency_groups(pair.candidate), pair, metric, kwargs)
            comparison = _device_gate(comparison, pair)
        elif metric == "compile_time":
            a = {i: [t] for i, t in enumerate(base_m.get("compile_times_s") or [])}
            b = {i: [t] for i, t in enumerate(cand_m.get("compile_times_s") or [])}
            if once is not None:
                kwargs = {**kwargs, "alpha": once[0], "confidence": once[1]}
            comparison = _noisy(a, b, Pair(pair.case, {}, {}, False, "", ""), metric, kwargs)
        else:
            key = {"artifact_size": "artifact_size_bytes", "node_count": "node_count", "memory": "peak_rss_bytes"}[metric]
            if base_m.get(key) is None or cand_m.get(key) is None:
                comparison = _unknown(f"no {metric} on one side")
            else:
                comparison = compare_deterministic(float(base_m[key]), float(cand_m[key]), gate.threshold())
        rows.append({"case": pair.case, "metric": metric, "unit": spec.unit, "noisy": spec.noisy,
                     "gate": gate.text, "baseline": pair.baseline_label, "candidate": pair.candidate_label,
                     "paired": pair.paired and metric == "latency",
                     "comparison": comparison.to_json(), "decision": comparison.decision,
                     "direction": comparison.direction, "bh_adjusted_p": None})
    return rows


def failed_rows(pair: Pair) -> list[dict[str, Any]]:
    """Rows for a pair where one side failed to compile, check or measure."""
    side, entry = ("candidate", pair.candidate) if pair.candidate.get("status") != "ok" else ("baseline", pair.baseline)
    error = entry.get("error") or {"stage": "?", "message": "failed"}
    decision = "failed" if side == "candidate" else "unknown"
    reason = f"{side} {error['stage']} failed: {error['message']}"
    return [{"case": pair.case, "metric": "status", "unit": "", "noisy": False, "gate": "", "paired": False,
             "baseline": pair.baseline_label, "candidate": pair.candidate_label,
             "comparison": _unknown(reason).to_json(), "decision": decision, "direction": "none",
             "bh_adjusted_p": None}]


def check_plan(settings: CheckSettings, adaptive: bool = True) -> SequentialPlan:
    """The looks of a check and their levels, from the suite's ``[check]`` settings: the intervals
    are at ``1 - level`` of each look (no separate confidence setting; see ``SequentialPlan``)."""
    return SequentialPlan(settings.workers, settings.step_workers, settings.max_workers, settings.alpha,
                          adaptive=adaptive)


def evaluate(pairs: Sequence[Pair], thresholds: ThresholdSet, plan: SequentialPlan,
             looks: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Every row of every pair; latency of ``pair`` at the levels of its look ``looks[pair.case]``
    (default 1), compile time at the levels of a single look (it is measured once)."""
    once = (plan.alpha, 1.0 - plan.alpha if plan.confidence is None else plan.confidence)
    rows: list[dict[str, Any]] = []
    for index, pair in enumerate(pairs):
        if pair.baseline.get("status") != "ok" or pair.candidate.get("status") != "ok":
            rows += failed_rows(pair)
        else:
            look = (looks or {}).get(pair.case, 1)
            rows += compare_pair(pair, thresholds, alpha=plan.level(look), confidence=plan.confidence_at(look),
                                 seed=index, once=once)
    return rows


#: The false-discovery families: every noisy metric is its own family over all cases x runners.
FAMILIES = tuple(name for name, spec in METRICS.items() if spec.noisy)


def control_false_discoveries(rows: list[dict[str, Any]], plan: SequentialPlan) -> None:
    """Benjamini-Hochberg at ``plan.alpha`` within each family (latency; compile time) over the
    p-values on the scale of the whole sequence (``plan.sequential_p``: a comparison made at a look
    of level a_k counts as ``p * alpha / a_k``); a DIFFERENT whose adjusted p-value misses becomes
    UNKNOWN. Deterministic metrics (memory, sizes, node count) have no test and no family."""
    for family in FAMILIES:
        members = [r for r in rows if r["metric"] == family and r["comparison"].get("p_value") is not None]
        if not members:
            continue
        sequential = [plan.sequential_p(r["comparison"]["p_value"], r["comparison"]["alpha"]) for r in members]
        for row, p_adj in zip(members, bh_adjust(sequential), strict=True):
            row["bh_adjusted_p"] = p_adj
            if row["decision"] == "different" and p_adj > plan.alpha:
                row["decision"] = "unknown"
                row["direction"] = "none"
                row["comparison"]["reason"] += (
                    f"; not significant after false-discovery control over the {len(members)} {family} "
                    f"comparisons (BH-adjusted p={p_adj:.3g} > {plan.alpha:g})")


def adaptive_check(pairs_of: Callable[[], list[Pair]], remeasure: Callable[[set[str], int], None],
                   thresholds: ThresholdSet, settings: CheckSettings,
                   variant_ids: Callable[[Pair], set[str]] | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Looks at the data, adds workers to undecided paired comparisons, decides: the one sequential
    loop of every check, compare and bisection probe (``stats.adaptive.sequential_sampling``).

    ``pairs_of`` rebuilds the pairs from the current entries; ``remeasure(ids, n)`` measures ``n``
    more workers for the variants ``ids``; ``variant_ids`` maps a pair to its variants (None: no
    adaptive sampling, e.g. a stored baseline: one look at ``alpha``). A pair's latency is tested
    at the level of its own look (how many batches of workers it has had), so a pair decided
    early keeps the level it was decided at."""
    plan = check_plan(settings, adaptive=variant_ids is not None)
    looks: dict[str, int] = {}
    state: dict[str, Any] = {}

    def look(_: int) -> set[str]:
        pairs = pairs_of()
        rows = evaluate(pairs, thresholds, plan, looks)
        # A DIFFERENT that false-discovery control would demote is undecided: sample it further.
        control_false_discoveries(rows, plan)
        state.update(pairs=pairs, rows=rows)
        return {r["case"] for r in rows if r["metric"] == "latency" and r["paired"] and r["decision"] == "unknown"}

    def more(undecided: Collection[str], n: int) -> bool:
        assert variant_ids is not None  # one look when there is nothing to re-measure
        ids: set[str] = set()
        for pair in state["pairs"]:
            if pair.case in undecided:
                ids |= variant_ids(pair)
                looks[pair.case] = looks.get(pair.case, 1) + 1
        remeasure(ids, n)
        return True

    history = sequential_sampling(plan, look, more)
    info = {"alpha": settings.alpha, "looks_planned": plan.looks, "alpha_by_look": list(plan.levels),
            "confidence_by_look": list(plan.confidences), "families": list(FAMILIES),
            "initial_workers": settings.workers, "step_workers": settings.step_workers,
            "max_workers": settings.max_workers, "history": history}
    return state["rows"], info


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts, and the suite-wide geometric-mean latency change with an interval."""
    counts = {"regressions": 0, "improvements": 0, "same": 0, "unknown": 0, "unknown_latency": 0, "failed": 0}
    for row in rows:
        if row["decision"] == "unknown" and row["metric"] == "latency":
            counts["unknown_latency"] += 1
        if row["decision"] == "failed":
            counts["failed"] += 1
        elif row["decision"] == "different":
            counts["regressions" if row["direction"] == "regression" else "improvements"] += 1
        elif row["decision"] == "same":
            counts["same"] += 1
        else:
            counts["unknown"] += 1
    logs, lows, highs = [], [], []
    for row in rows:
        c = row["comparison"]
        if row["metric"] == "latency" and c.get("ratio") and c.get("ci_low") and c.get("ci_high"):
            logs.append(math.log(c["ratio"]))
            # Half-widths combine as independent errors of a mean of logs.
            lows.append(math.log(c["ratio"]) - math.log(c["ci_low"]))
            highs.append(math.log(c["ci_high"]) - math.log(c["ratio"]))
    geomean = None
    if logs:
        mean = sum(logs) / len(logs)
        low = math.sqrt(sum(x * x for x in lows)) / len(logs)
        high = math.sqrt(sum(x * x for x in highs)) / len(logs)
        geomean = {"ratio": math.exp(mean), "ci_low": math.exp(mean - low), "ci_high": math.exp(mean + high),
                   "cases": len(logs)}
    return {**counts, "latency_geomean": geomean}


def verdict_document(mode: dict[str, Any], rows: list[dict[str, Any]], settings: dict[str, Any],
                     results: dict[str, dict[str, Any]], warnings: list[str]) -> dict[str, Any]:
    return {
        "version": VERDICTS_VERSION,
        "tool": {"name": "perfguard", "version": __version__},
        "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "mode": mode, "settings": settings, "summary": summarize(rows), "warnings": warnings,
        "verdicts": rows, "results": results,
    }


def exit_code(document: dict[str, Any], fail_on_unknown: bool) -> ExitCode:
    """0 no regression; 1 a regression (or a failed candidate); 3 an undecided latency verdict with
    --fail-on-unknown (compile time is gated loosely and often stays undecided; it never sets 3)."""
    summary = document["summary"]
    if summary["regressions"] or summary["failed"]:
        return ExitCode.REGRESSION
    if fail_on_unknown and summary["unknown_latency"]:
        return ExitCode.UNKNOWN
    return ExitCode.OK
