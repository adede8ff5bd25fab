"""Why a verdict row says what it says, in plain words, the same in the terminal, the reports, the
pull-request comment and the workflow annotations.

The comparison's own reason is written for the statistics (``regression: 17 -> 35 (+18,
+105.88%) exceeds median:5%``); "median" of one exact number is jargon. For an exact metric the
row's reason is rebuilt from its numbers (``17 -> 35 (+18, +105.88 %), floor 5 %``); for a noisy
one the two medians go in front of the test's reason. A compile that got cheaper because a pass
stopped changing the graph is said to be that (the pass traces of both sides show it), not left
as a plain improvement.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from perfguard.report import format as fmt

if TYPE_CHECKING:
    from collections.abc import Sequence

    from perfguard.backends.base import PassRecord
    from perfguard.compare.verdicts import Verdict, VerdictsDocument
    from perfguard.results import CaseEntry

__all__ = ["floor_words", "latency_out_of_reach", "fired_only_in", "passes_of", "row_reason", "stopped_passes"]

#: Metrics whose change follows the work the passes did: a pass that stopped firing shows here.
COMPILE_METRICS = ("compile_instructions", "compile_time")


def floor_words(gate: str, unit: str) -> str:
    """The allowed change of a gate in words: ``floor 5 %``, ``floor 3 nodes``, ``any change``; a
    gate of several parts (``median:0.25% + median:750``): ``floor 0.25 % or 750 instr, the larger``."""
    from perfguard.errors import UserError
    from perfguard.stats.thresholds import parse_threshold

    parts = [part.strip() for part in gate.split(" + ")]
    if len(parts) > 1:
        words = [floor_words(part, unit) for part in parts]
        if all(w.startswith("floor ") for w in words):
            return f"floor {' or '.join(w.removeprefix('floor ') for w in words)}, the larger"

    try:
        threshold = parse_threshold(gate, kind="count" if unit not in ("s", "B") else None)
    except UserError:
        return f"gate {gate}"
    if threshold.relative is not None:
        return f"floor {threshold.relative * 100:.15g} %"
    if not threshold.absolute:
        return "any change"
    amount = fmt.quantity(threshold.absolute, unit)
    return f"floor {amount} {unit}" if unit not in ("s", "B", "") else f"floor {amount}"


def _exact(row: Verdict) -> str:
    c = row.comparison
    before, after = fmt.finite(c.baseline_median), fmt.finite(c.candidate_median)
    if before is None or after is None:
        return c.reason
    if before == after:
        return f"unchanged at {fmt.quantity(before, row.unit)}"
    delta = after - before
    sign = "+" if delta > 0 else "-"
    change = sign + fmt.quantity(abs(delta), row.unit)
    if before > 0:
        change += f", {(after / before - 1) * 100:+.2f} %"
    return (f"{fmt.quantity(before, row.unit)} -> {fmt.quantity(after, row.unit)} ({change}), "
            f"{floor_words(row.gate, row.unit)}")


def passes_of(entry: CaseEntry | None) -> tuple[PassRecord, ...]:
    """The pass records of an entry's trace (none without an entry or a trace)."""
    return entry.trace.passes if entry is not None and entry.trace is not None else ()


def fired_only_in(first: Sequence[PassRecord], second: Sequence[PassRecord]) -> list[PassRecord]:
    """The passes of ``first`` that changed the graph there and not in ``second``, where ``second``
    runs a pass of that name too: (baseline, candidate) gives the passes that stopped changing
    the graph, (candidate, baseline) the ones that started."""
    quiet = {p.name for p in second if not p.changed}
    return [p for p in dict((p.name, p) for p in first if p.changed).values() if p.name in quiet]


def stopped_passes(before: Sequence[PassRecord], after: Sequence[PassRecord]) -> list[str]:
    """Passes that changed the graph in the baseline's trace ``before`` and no longer do in the
    candidate's ``after``: ``fuse_bn_into_conv (40 -> 30 nodes before, now unchanged)``."""
    return [f"{p.name} ({p.nodes_before} -> {p.nodes_after} nodes before, now unchanged)"
            for p in fired_only_in(before, after)]


def row_reason(row: Verdict, baseline: CaseEntry | None = None, candidate: CaseEntry | None = None) -> str:
    """The reason a verdict row is shown with: before -> after and the floor for an exact metric,
    the medians and the test's reason for a noisy one; for a compile metric that improved, the
    passes that stopped changing the graph."""
    c = row.comparison
    if row.decision == "failed" or c.method in ("identity", "none"):
        reason = c.reason
    elif not row.noisy:
        reason = _exact(row)
    else:
        before, after = fmt.quantity(c.baseline_median, row.unit), fmt.quantity(c.candidate_median, row.unit)
        reason = f"{before} -> {after}: {c.reason}" if before and after and c.reason else c.reason
    if row.metric in COMPILE_METRICS and row.direction == "improvement" and not math.isnan(c.ratio):
        stopped = stopped_passes(passes_of(baseline), passes_of(candidate))
        if stopped:
            reason += ("; not a plain improvement: " + ("pass " if len(stopped) == 1 else "passes ")
                       + ", ".join(stopped) + " stopped changing the graph")
    return reason


def _span(values: list[float], digits: int = 0) -> str:
    """``12 %`` or ``12-40 %`` for fractions (the range of a few cases)."""
    low, high = min(values) * 100, max(values) * 100
    return f"{low:.{digits}f} %" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else \
        f"{low:.{digits}f}-{high:.{digits}f} %"


def latency_out_of_reach(document: VerdictsDocument) -> str | None:
    """One line when latency verdicts stayed undecided because they could not reach their floor
    (the smallest detectable change, at the noise measured, is above it): how many, the smallest
    detectable change, the measured noise (cv of both sides), and what would decide it. None when
    every latency verdict decided or could have."""
    from perfguard.compare.check import detectable
    from perfguard.report.pairs import pair_entries

    rows = [r for r in document.verdicts if r.metric == "latency" and r.gated and r.decision == "unknown"
            and r.comparison.method not in ("identity", "none") and not r.comparison.mde <= r.comparison.floor]
    if not rows:
        return None
    latency = [r for r in document.verdicts if r.metric == "latency"]
    cvs = []
    for row in rows:
        for entry in pair_entries(document, row)[:2]:
            stats = entry.metrics.latency_s if entry is not None else None
            if stats is not None and fmt.finite(stats.cv) is not None:
                cvs.append(float(stats.cv))
    floors = [r.comparison.floor for r in rows if fmt.finite(r.comparison.floor) is not None]
    mdes = [r.comparison.mde for r in rows if math.isfinite(r.comparison.mde)]
    reach = ("smallest detectable " + (_span(mdes) if mdes and max(mdes) <= 1.0
                                        else detectable(max(mdes, default=math.inf),
                                                        min(r.comparison.n_pairs for r in rows) or None)))
    noise = f", measured noise (cv) {_span(cvs, 1)}" if cvs else ""
    floor = f"the {_span(floors, 1 if min(floors) < 0.01 else 0)} floor" if floors else "its floor"
    return (f"latency undecided in {len(rows)} of {fmt.plural(len(latency), 'case')}: this runner cannot resolve "
            f"{floor} ({reach}{noise}); to decide, count instead of timing (--counts), add workers "
            "(--workers, --max-workers) or use a quieter runner")
