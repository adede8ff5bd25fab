"""The "why it got slower" section of the HTML report: one explanation (``check --explain``, a
bisection's culprit) as plain data for the template.

An explanation arrives typed (``perfguard.results.explanation.Explanation``: the verdicts and
bisect documents read theirs when they are loaded; one that did not read arrives as an
``UnreadableExplanation`` and becomes a warning of the report, not a failed report). The view carries, per op type, the
change of Σ kernel time per inference (after − before) as one bar of a diverging chart, largest
change first, with its share of the total change and the change of its node count; then the
framework overhead (``model_run`` − Σ kernel time), the run time, the dimension the rules named
and their evidence. A hand-written explanation may lack the diff: the dimension alone still shows.
"unclear" is a dimension like the others and is shown as such, never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from markupsafe import Markup

from perfguard.profile.dimension import us
from perfguard.report import svg
from perfguard.report.counted_why import CountedWhyView, pair_view
from perfguard.results.explanation import Change, Explanation, OpDelta, ProfileDiff, StoredExplanation

#: Op types drawn as bars; the smaller rest is summed into one row (as in the terminal table).
TOP_OPS = 15


@dataclass(frozen=True)
class DeltaRow:
    """One bar: an op type (or the framework overhead), its change of kernel time per inference
    and its share of the total change, before → after, and the node counts."""

    name: str
    provider: str
    delta_us: float
    change: str
    before: str
    after: str
    share: str
    nodes: str
    nodes_changed: bool
    chart: Markup


@dataclass(frozen=True)
class WhyView:
    """One explained case: who was compared, the bars, the totals and the dimension."""

    anchor: str
    case: str
    baseline: str
    candidate: str
    dimension: str
    rule: str
    headline: str
    evidence: list[str]
    ops: list[DeltaRow] = field(default_factory=list)
    rest: str = ""
    overhead: DeltaRow | None = None
    run: str = ""
    workers: str = ""
    failures: list[str] = field(default_factory=list)
    counted: CountedWhyView | None = None  # why, counted: the pair's instruction change by function

    @property
    def unclear(self) -> bool:
        return self.dimension == "unclear"


def _share(value: float | None) -> str:
    if value is None:
        return ""
    return f"{round(value * 100)}%"  # an integer: a sliver below zero reads 0%, not -0%


def _nodes(row: OpDelta) -> str:
    if not row.nodes_delta:
        return str(row.nodes_after)
    return f"{row.nodes_before} → {row.nodes_after} ({row.nodes_delta:+d})"


def _row(name: str, provider: str, change: Change, share: float | None, nodes: str, nodes_changed: bool,
         domain: tuple[float, float]) -> DeltaRow:
    return DeltaRow(name, provider.replace("ExecutionProvider", ""), change.delta, us(change.delta),
                    us(change.before.mean, False), us(change.after.mean, False), _share(share), nodes, nodes_changed,
                    svg.delta_bar(change.delta, *domain))


def _run_text(diff: ProfileDiff) -> str:
    run = diff.model_run_us
    ratio = run.ratio
    pct = "" if ratio is None else f", {(ratio - 1) * 100:+.1f}%"
    return (f"model_run {us(run.before.mean, False)} → {us(run.after.mean, False)} ({us(run.delta)}{pct}; "
            f"across workers [{us(run.delta_low)}, {us(run.delta_high)}])")


def why_view(explanation: Explanation, anchor: str) -> WhyView:
    """The view of one explanation."""
    dimension = explanation.dimension
    view = WhyView(anchor, explanation.case, explanation.baseline or "baseline", explanation.candidate or "candidate",
                   dimension.label, dimension.rule, dimension.headline, list(dimension.evidence),
                   failures=list(explanation.failures),
                   counted=None if explanation.counted_pair is None else pair_view(explanation.counted_pair))
    diff = explanation.diff
    if diff is None:
        return view
    ordered = sorted(diff.ops, key=lambda r: -abs(r.kernel_us.delta))  # stable: the diff's own order breaks ties
    shown, rest = ordered[:TOP_OPS], ordered[TOP_OPS:]
    deltas = [r.kernel_us.delta for r in shown] + [diff.overhead_us.delta]
    domain = (min(deltas), max(deltas))
    ops = [_row(r.op_type, r.provider, r.kernel_us, r.share, _nodes(r), bool(r.nodes_delta), domain) for r in shown]
    overhead = _row("framework overhead", "", diff.overhead_us, diff.overhead_share, "", False, domain)
    rest_text = (f"{len(rest)} more op types: {us(sum(r.kernel_us.delta for r in rest))} together" if rest else "")
    return replace(view, ops=ops, rest=rest_text, overhead=overhead, run=_run_text(diff),
                   workers=f"{diff.workers_before} + {diff.workers_after} profiled workers")


def why_views(explanations: Sequence[StoredExplanation], prefix: str, warnings: list[str]) -> list[WhyView]:
    """The views of ``explanations`` (anchors ``{prefix}-1``, ``-2``...); one that did not read
    when its document was loaded becomes a warning of the report instead of failing it."""
    views = []
    for index, explanation in enumerate(explanations, start=1):
        if isinstance(explanation, Explanation):
            views.append(why_view(explanation, f"{prefix}-{index}"))
        else:
            warnings.append(f"the explanation of {explanation.case} does not read: {explanation.problem}")
    return views
