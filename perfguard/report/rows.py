"""The verdict row as a report shows it, and the vocabulary of verdict states.

Shared by the report model (which builds rows from verdict documents), the per-case detail (which
lists a case's rows) and the writers (which sort and label them); it imports none of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfguard.compare.verdicts import Verdict

#: Display order of verdict states: what needs attention first.
SEVERITY = {"failed": 0, "regression": 1, "unknown": 2, "improvement": 3, "same": 4, "ungated": 5}
STATE_LABELS = {"failed": "failed", "regression": "regression", "unknown": "undecided",
                "improvement": "improvement", "same": "same", "ungated": "not gated"}
METRIC_ORDER = {"status": 0, "latency": 1, "instructions": 1.1, "estimated_cycles": 1.2, "memory": 2,
                "compile_time": 3, "compile_instructions": 3.1, "node_count": 4, "artifact_size": 5}


def state_of(row: Verdict) -> str:
    """One word per verdict row: failed, regression, improvement, same, unknown, or ungated (an
    undecided row that could not have decided: reported, never gated)."""
    if not row.gated:
        return "ungated"
    if row.decision == "failed":
        return "failed"
    if row.decision == "different":
        return row.direction if row.direction in ("regression", "improvement") else "unknown"
    return "same" if row.decision == "same" else "unknown"


@dataclass
class VerdictRow:
    """One verdict (case x metric) as the report shows it."""

    case: str
    case_label: str
    runner: str
    metric: str
    unit: str
    noisy: bool
    state: str
    baseline_label: str
    candidate_label: str
    baseline_value: float | None
    candidate_value: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    mde: float | None
    floor: float | None
    gate: str
    reason: str
    anchor: str = ""
    floor_note: str = ""  # "+1.5%, under the 2% floor": a real change the gate lets through (state same)

    @property
    def sort_key(self) -> tuple[float, ...]:
        magnitude = abs(math.log(self.ratio)) if self.ratio and self.ratio > 0 else 0.0
        return (SEVERITY[self.state], METRIC_ORDER.get(self.metric, 9), -magnitude)
