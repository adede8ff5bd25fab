"""The proof of a tuned pipeline: a fresh, paired ``check --against-pipeline`` of the winner
against the starting pipeline on every model of the suite that the starting pipeline applies to.

Screening data never decides: the winner of many noisy screens is biased towards luck (the
winner's curse), and the confirmations along the search were each one model. The proof compiles
everything again (correctness guard included) and measures in new workers with the check's own
sequential test and false-discovery control. The tuned order is *proved* when the tuned case's
objective is DIFFERENT-better and no model got DIFFERENT-worse in latency or memory (or compile
time, when that is the objective), and no model failed; otherwise it is *rejected* with the rows
that reject it, or *no gain* when the tuned case is not decidedly better.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from perfguard.compare.verdicts import Verdict, VerdictsDocument
from perfguard.flows.check import check_against_pipeline
from perfguard.progress import Progress
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings
from perfguard.tune.document import ProofEffect
from perfguard.tune.space import Candidate


@dataclass(frozen=True)
class ModelEffect:
    """The proof's verdict on one model: the objective's row, and why it rejects, if it does."""

    case: str
    metric: str
    decision: str
    direction: str
    ratio: float
    ci_low: float
    ci_high: float
    mde: float
    rejects: str | None = None

    def to_json(self) -> ProofEffect:
        def finite(value: float) -> float | None:
            return value if math.isfinite(value) else None

        return {"case": self.case, "metric": self.metric, "decision": self.decision, "direction": self.direction,
                "ratio": finite(self.ratio), "ci_low": finite(self.ci_low), "ci_high": finite(self.ci_high),
                "mde": finite(self.mde), "rejects": self.rejects}


@dataclass(frozen=True)
class Proof:
    status: str  # proved | no-gain | rejected
    pipeline: str
    effects: list[ModelEffect] = field(default_factory=list)
    document: VerdictsDocument | None = None


def tuned_name(suite: Suite, start: str) -> str:
    """A pipeline name for the tuned order that the suite does not use yet."""
    name, n = f"{start}_tuned", 2
    while name in suite.pipelines:
        name, n = f"{start}_tuned{n}", n + 1
    return name


def with_tuned(suite: Suite, case: CaseSpec, tuned: Candidate) -> tuple[Suite, str, list[CaseSpec]]:
    """The suite with the tuned pipeline added beside the start, on every model the start
    pipeline runs on (on the tuned case's runner), and those new cases."""
    start = case.pipeline.name
    name = tuned_name(suite, start)
    spec = tuned.pipeline(name, case.pipeline.backend)
    bases = [c for c in suite.cases if c.pipeline.name == start and c.runner == case.runner]
    cases = [dataclasses.replace(c, pipeline=spec) for c in bases]
    pipelines = {**suite.pipelines, name: spec}
    return dataclasses.replace(suite, pipelines=pipelines, cases=(*suite.cases, *cases)), name, cases


def prove(suite: Suite, case: CaseSpec, tuned: Candidate, objective: str, settings: CheckSettings,
          progress: Progress) -> Proof:
    """Check ``tuned`` against ``case``'s pipeline on every model it applies to (module docstring)."""
    derived, name, cases = with_tuned(suite, case, tuned)
    document = check_against_pipeline(derived, cases, case.pipeline.name, settings, progress)
    status, effects = judge(document.verdicts, str(case.case_id.with_pipeline(name)), objective)
    return Proof(status, name, effects, document)


def judge(verdicts: Sequence[Verdict], tuned_case: str, objective: str) -> tuple[str, list[ModelEffect]]:
    """The proof's status from its verdict rows (module docstring), and the effect per model."""
    metric = "compile_time" if objective == "compile_time" else "latency"
    guarded = {"latency", "memory"} | ({"compile_time"} if objective != "latency" else set())
    rows: dict[str, list[Verdict]] = {}
    for row in verdicts:
        rows.setdefault(row.case, []).append(row)
    effects = []
    for case_id, case_rows in rows.items():
        rejects = None
        for row in case_rows:
            if row.metric == "status" and row.decision in ("failed", "unknown"):
                rejects = f"{row.metric}: {row.comparison.reason}"
            elif row.metric in guarded and row.is_regression:
                rejects = f"{row.metric} {(row.comparison.ratio - 1) * 100:+.1f}%: {row.comparison.reason}"
        main = next((r for r in case_rows if r.metric == metric), None) or case_rows[0]
        c = main.comparison
        effects.append(ModelEffect(case_id, main.metric, main.decision, main.direction, c.ratio, c.ci_low,
                                   c.ci_high, c.mde, rejects))
    target = next((e for e in effects if e.case == tuned_case), None)
    if any(e.rejects for e in effects):
        return "rejected", effects
    if target is not None and target.decision == "different" and target.direction == "improvement":
        return "proved", effects
    return "no-gain", effects
