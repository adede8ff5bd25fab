"""The tune section of the HTML report: a ``perfguard tune`` document as plain data for the
template: the outcome, the trajectory plot (best-so-far confirmed effect vs candidates tried,
each screen as a dot), the accepted moves, the top orders, the infeasible candidates with their
reasons and the proof per model. The proof's own verdict rows join the report's verdict table
(its verdicts document is embedded in the tune document).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from markupsafe import Markup

from perfguard.report import format as fmt, svg
from perfguard.tune.document import TuneResult

STATUS_TEXT = {
    "proved": "proved: the tuned order is faster and regresses no model",
    "rejected": "rejected: the tuned order regresses or fails on another model",
    "no-gain": "not proved: the fresh check does not decide a gain",
    "nothing-better": "nothing better within the budget",
    "unproved": "not proved (the proof was skipped)",
}


@dataclass
class OrderRow:
    index: int
    phase: str
    move: str
    order: str
    change: str
    interval: str
    note: str = ""


@dataclass
class ProofRow:
    case: str
    metric: str
    decision: str
    change: str
    interval: str
    rejects: str = ""


@dataclass
class TuneView:
    case: str
    suite: str
    objective: str
    status: str
    status_text: str
    start: str
    best: str
    summary: str
    chart: Markup
    steps: list[OrderRow] = field(default_factory=list)
    top: list[OrderRow] = field(default_factory=list)
    infeasible: list[OrderRow] = field(default_factory=list)
    proof: list[ProofRow] = field(default_factory=list)
    patch: str | None = None
    detectable: str = ""


def _mde(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value * 100:.1f}%"


def tune_view(result: TuneResult) -> TuneView:
    points = result.points
    screens = [(p.index, p.best * p.score(result.objective)) for p in points if p.status == "screened"]
    best = [(s.index, s.effect) for s in result.steps]
    counts = {s: sum(1 for p in points if p.status == s) for s in ("screened", "identical", "infeasible")}
    summary = (f"{len(points)} candidates tried in {result.wall_time_s:.0f} s (stopped: {result.stopped}): "
               f"{counts['screened']} screened, {counts['identical']} identical to the incumbent (not timed), "
               f"{counts['infeasible']} infeasible; {result.confirmations} confirmation probes.")
    view = TuneView(result.case, result.suite, result.objective, result.status,
                    STATUS_TEXT.get(result.status, result.status), result.start.describe(), result.best.describe(),
                    summary, svg.trajectory(screens, best, max(len(points), 1)), patch=result.patch)
    if result.status == "nothing-better":
        view.detectable = (f"A gain had to pass the {result.floor * 100:.1f}% floor; a confirmation could detect "
                           f"{_mde(result.confirm_mde)} (its MDE), a screen {_mde(result.screen_mde)}."
                           if counts["screened"] else "Every candidate compiled to the incumbent's artifact or was "
                           "infeasible: no order within reach changes this model's compiled graph.")
    view.steps = [OrderRow(s.index, "accepted", s.move, s.candidate.describe(), fmt.change(s.latency.ratio),
                           fmt.interval(s.latency.ci_low, s.latency.ci_high), f"vs start {fmt.change(s.effect)}")
                  for s in result.steps]
    view.top = [OrderRow(p.index, p.phase, p.move, p.candidate.describe(), fmt.change(p.score(result.objective)),
                         fmt.interval(p.latency.ci_low if p.latency else None, p.latency.ci_high if p.latency else None),
                         f"{p.node_count} nodes" if p.node_count is not None else "")
                for p in result.top()]
    view.infeasible = [OrderRow(p.index, p.phase, p.move, p.candidate.describe(), "", "", p.reason or "")
                       for p in result.infeasible]
    view.proof = [ProofRow(str(e.get("case")), str(e.get("metric")), str(e.get("decision")),
                           fmt.change(e.get("ratio")), fmt.interval(e.get("ci_low"), e.get("ci_high")),
                           str(e.get("rejects") or "")) for e in result.proof_effects]
    return view
