"""Why, exactly: for a pair whose exact metrics regressed (node count, artifact size), what the
two pass traces say, in lines the terminal, the PR comment and ``check --explain`` share.

Nothing is run: both sides' entries already hold their pass traces (``Trace.passes``: per pass the
nodes before and after, whether it changed the graph, the op histogram after it). The view says
where the pipelines differ (a pass list that changed is an edit of the pipeline), the first pass
after which the two graphs differ with its node counts on both sides, the passes that stopped
or started changing the graph, and the op-type diff of the final graphs (``Transpose 0 -> 12,
BatchNormalization 0 -> 6``), as the nightly's alert shows it. A profile explains time; this
explains structure, so ``check --explain`` uses it where only exact metrics regressed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfguard.report.escape import md_text
from perfguard.report.reasons import fired_only_in, stopped_passes

if TYPE_CHECKING:
    from perfguard.backends.base import PassRecord
    from perfguard.compare.verdicts import Verdict, VerdictsDocument
    from perfguard.results import CaseEntry

__all__ = ["ExactWhyView", "exact_why", "exact_whys"]

#: Op types shown in the diff; the rest are counted.
TOP_OPS = 6


@dataclass(frozen=True)
class ExactWhyView:
    """One pair's structural explanation: its case, what regressed, and the trace's lines."""

    case: str
    metrics: tuple[str, ...]
    passes: tuple[str, ...]
    ops: tuple[tuple[str, int, int], ...]

    @property
    def op_diff(self) -> str:
        """``Transpose 0 -> 12, BatchNormalization 0 -> 6`` (largest change first)."""
        shown = ", ".join(f"{op} {before} -> {after}" for op, before, after in self.ops[:TOP_OPS])
        rest = len(self.ops) - TOP_OPS
        return shown + (f" and {rest} more op type{'' if rest == 1 else 's'}" if rest > 0 else "")

    def lines(self) -> list[str]:
        return [*self.passes, *([f"op types in the final graph: {self.op_diff}"] if self.ops else [])]

    def text_lines(self) -> list[str]:
        """Plain text (terminal, CI log): ``why, exactly, CASE (node_count):``, then each line indented."""
        return [f"why, exactly, {self.case} ({', '.join(self.metrics)}): the pass traces of both sides",
                *(f"  {line}" for line in self.lines())]

    def markdown(self) -> list[str]:
        """A paragraph and its list (PR comment, job summary), names escaped as data; a paragraph,
        not an item, so a list just before it (the rows' reasons) stays a list of its own."""
        return [f"Why, exactly, {md_text(self.case)} ({md_text(', '.join(self.metrics))}), from the pass traces:",
                "", *(f"- {md_text(line)}" for line in self.lines()), ""]


def _final_ops(passes: tuple[PassRecord, ...]) -> dict[str, int]:
    return dict(passes[-1].op_histogram) if passes else {}


def _nodes(record: PassRecord) -> str:
    return f"{record.nodes_before} -> {record.nodes_after} nodes"


def _pass_lines(before: tuple[PassRecord, ...], after: tuple[PassRecord, ...]) -> list[str]:
    lines = []
    names = ([p.name for p in before], [p.name for p in after])
    if names[0] != names[1]:
        lines.append(f"the pipeline changed: {', '.join(names[0]) or '(no passes)'} -> "
                     f"{', '.join(names[1]) or '(no passes)'}")
        lines += [f"added pass #{p.index} {p.name}: {_nodes(p)}" for p in after if p.name not in names[0] and p.changed]
        lines += [f"removed pass {p.name} (it made {_nodes(p)})" for p in before if p.name not in names[1] and p.changed]
    for old, new in zip(before, after, strict=False):
        if old.ir_hash != new.ir_hash or old.nodes_after != new.nodes_after:
            lines.append(f"the graphs differ from pass #{new.index} {new.name}: {_nodes(old)} before, "
                         f"{_nodes(new)} now" if old.name == new.name else
                         f"the graphs differ from pass #{new.index}: {old.name} ({_nodes(old)}) before, "
                         f"{new.name} ({_nodes(new)}) now")
            break
    lines += [f"stopped changing the graph: {stopped}" for stopped in stopped_passes(before, after)]
    lines += [f"now changes the graph: {p.name} ({_nodes(p)})" for p in fired_only_in(after, before)]
    return lines


def exact_why(case: str, metrics: tuple[str, ...], baseline: CaseEntry | None,
              candidate: CaseEntry | None) -> ExactWhyView | str:
    """The view of one pair, or one line saying why there is none (a side with no pass trace,
    traces that show no difference)."""
    traces = [entry.trace if entry is not None else None for entry in (baseline, candidate)]
    if traces[0] is None or traces[1] is None:
        side = "either side" if traces[0] is None and traces[1] is None else \
            "the baseline" if traces[0] is None else "the candidate"
        return f"{case}: no pass trace recorded for {side}, so nothing to compare pass by pass"
    before, after = traces[0].passes, traces[1].passes
    if not before and not after:
        return (f"{case}: neither side recorded a pass (no passes, or a backend that compiles in one step), so "
                "nothing to compare pass by pass")
    ops: list[tuple[str, int, int]] = []
    if before and after:  # a side with no pass is the graph as loaded, whose op types no trace records
        ops_before, ops_after = _final_ops(before), _final_ops(after)
        ops = sorted(((op, ops_before.get(op, 0), ops_after.get(op, 0)) for op in set(ops_before) | set(ops_after)
                      if ops_before.get(op, 0) != ops_after.get(op, 0)), key=lambda t: (-abs(t[2] - t[1]), t[0]))
    passes = _pass_lines(before, after)
    if not passes and not ops:
        return (f"{case}: the pass traces of both sides are the same (the change is not in the passes: the "
                "model, the backend or its settings)")
    return ExactWhyView(case, metrics, tuple(passes), tuple(ops))


def exact_whys(document: VerdictsDocument) -> tuple[list[ExactWhyView], list[str]]:
    """Per case with an exact (not noisy) REGRESSION: its view, or the line saying why there is
    none. A profiled case gets one too: the profile says where the time went, the traces which
    pass made the graph different."""
    from perfguard.report.pairs import pair_entries

    regressed: dict[str, list[str]] = {}
    rows: dict[str, Verdict] = {}
    for row in document.verdicts:
        if not row.noisy and row.is_regression and row.metric != "status":
            regressed.setdefault(row.case, []).append(row.metric)
            rows.setdefault(row.case, row)
    views: list[ExactWhyView] = []
    why_not: list[str] = []
    for case, metrics in regressed.items():
        base, cand, _, _ = pair_entries(document, rows[case])
        found = exact_why(case, tuple(metrics), base, cand)
        if isinstance(found, ExactWhyView):
            views.append(found)
        else:
            why_not.append(found)
    return views, why_not
