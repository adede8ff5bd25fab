"""``perfguard calibrate``: A/A, the same compiler twice in the same workers (paired), to measure
noise, and the latency floors it recommends (``--write``: a thresholds file the suite includes).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from perfguard.compare.check import Pair, check_plan, evaluate
from perfguard.compile.case import Side
from perfguard.errors import UserError
from perfguard.flows.check import compile_while_importing
from perfguard.jsonfields import JsonDict
from perfguard.measure.job import Job
from perfguard.progress import Progress
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings
from perfguard.workers.protocol import variant_id


@dataclass(frozen=True)
class CalibrationRow:
    """The A/A of one case: ``ok`` with the noise, the A/A verdict and the recommended floor;
    ``unknown`` (too few workers measured both sides) or ``failed`` with the reason."""

    case: str
    status: str
    reason: str = ""
    workers: int | None = None
    noise_sd: float | None = None
    within_cv: float | None = None
    aa_ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    decision: str = ""
    mde: float | None = None
    recommended_floor: float | None = None

    @property
    def false_positive(self) -> bool:
        return self.decision == "different"

    def to_json(self) -> JsonDict:
        if self.status == "failed":
            return {"case": self.case, "status": self.status, "reason": self.reason}
        if self.status != "ok":
            return {"case": self.case, "status": self.status, "workers": self.workers, "reason": self.reason}
        return {"case": self.case, "status": self.status, "workers": self.workers, "noise_sd": self.noise_sd,
                "within_cv": self.within_cv, "aa_ratio": self.aa_ratio, "ci_low": self.ci_low,
                "ci_high": self.ci_high, "p_value": self.p_value, "decision": self.decision,
                "false_positive": self.false_positive, "mde": self.mde, "recommended_floor": self.recommended_floor}


@dataclass(frozen=True)
class Calibration:
    """What ``perfguard calibrate`` measured (``--json``), and the floors it recommends (``--write``)."""

    suite: str
    workers: int
    alpha: float
    cases: tuple[CalibrationRow, ...]

    @property
    def false_positives(self) -> int:
        return sum(1 for r in self.cases if r.false_positive)

    def to_json(self) -> JsonDict:
        return {"suite": self.suite, "workers": self.workers, "alpha": self.alpha,
                "cases": [r.to_json() for r in self.cases], "false_positives": self.false_positives}


def calibrate(suite: Suite, cases: list[CaseSpec], settings: CheckSettings, progress: Progress) -> Calibration:
    """A/A: every case compiled twice by the same compiler and measured in the same workers.

    Per case: the noise (standard deviation of per-worker log ratios), the A/A verdict (any
    DIFFERENT is a false positive), the minimum detectable effect at this budget, and a
    recommended latency floor: the A/A estimate's distance from 1 plus two standard errors, at
    least 1 %, rounded up to 0.5 %. The floor protects against steady biases the test cannot
    see as noise (a session created first can be 1-2 % faster).

    Workers are paired by worker id, as ``check`` pairs them (a worker that crashed on one side
    drops out); a case with fewer than 2 workers that measured both sides has no spread to
    measure and is reported ``unknown`` with the reason."""
    if settings.workers < 2:
        raise UserError(f"calibrate needs at least 2 workers to measure noise, found workers = {settings.workers}")
    sides = [Side("a", suite.compiler.path), Side("b", suite.compiler.path)]
    job = Job(suite, cases, sides=sides, progress=progress)
    try:
        compile_while_importing(job)  # no memory: calibrate judges latency only
        job.measure(workers=settings.workers)
        by_variant = {c.variant_id: c for c in job.compiled}
        pairs = [Pair(c.id, by_variant[variant_id("a", c.id)].entry, by_variant[variant_id("b", c.id)].entry, True, "A", "A'")
                 for c in cases]
        rows = [r for r in evaluate(pairs, suite.thresholds, check_plan(settings, adaptive=False))
                if r.metric in ("latency", "status")]
    finally:
        job.close()
    report: list[CalibrationRow] = []
    for pair, row in zip(pairs, rows, strict=True):
        entry_a, entry_b = pair.baseline, pair.candidate
        if row.metric != "latency":
            report.append(CalibrationRow(pair.case, "failed", row.comparison.reason))
            continue
        a, b = entry_a.latency_by_worker(), entry_b.latency_by_worker()
        common = sorted(set(a) & set(b))
        if len(common) < 2:
            report.append(CalibrationRow(pair.case, "unknown", f"needs at least 2 workers that measured both sides, "
                                                               f"{len(common)} did", workers=len(common)))
            continue
        logs = np.log([np.median(b[i]) / np.median(a[i]) for i in common])
        sd = float(np.std(logs, ddof=1))
        se = sd / math.sqrt(len(logs))
        c = row.comparison
        floor = max(0.01, abs(float(np.mean(logs))) + 2 * se)
        floor = math.ceil(floor * 200) / 200

        def finite(value: float) -> float | None:
            return value if math.isfinite(value) else None

        report.append(CalibrationRow(
            pair.case, "ok", workers=len(logs), noise_sd=sd,
            within_cv=entry_a.metrics.latency_s.cv if entry_a.metrics.latency_s else None,
            aa_ratio=finite(c.ratio), ci_low=finite(c.ci_low), ci_high=finite(c.ci_high), p_value=finite(c.p_value),
            decision=row.decision, mde=finite(c.mde), recommended_floor=floor))
    return Calibration(suite.name, settings.workers, settings.alpha, tuple(report))


def floors_toml(calibration: Calibration) -> str:
    lines = [f"# Written by perfguard calibrate for suite {calibration.suite!r} "
             f"({calibration.workers} workers per A/A comparison).",
             "# Include it from the suite:  [thresholds] include = \"<this file>\"", ""]
    for row in calibration.cases:
        if row.status != "ok" or row.recommended_floor is None:
            continue
        lines += ["[[thresholds.overrides]]", f"pattern = \"^{re.escape(row.case)}$\"".replace("\\", "\\\\"),
                  f"latency = \"median:{row.recommended_floor * 100:g}%\"",
                  f"# noise sd {(row.noise_sd or 0.0) * 100:.2f}%, A/A {((row.aa_ratio or 1.0) - 1) * 100:+.2f}%, "
                  f"MDE {row.mde * 100 if row.mde is not None else float('inf'):.1f}%", ""]
    return "\n".join(lines)
