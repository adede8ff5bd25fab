"""The change points a series of the history store shows: exact steps for the metrics without
noise, ``changepoints.detect`` for the others. The night, the site and ``perfguard history``
read changes through the same rules, so the minimal steps live here, below all three."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfguard.history.changepoints import ChangePoint
    from perfguard.history.store import Point, Series

#: Metrics without noise: a change is exact and confirmed the night it appears.
EXACT_METRICS = ("node_count", "artifact_size", "instructions", "estimated_cycles", "compile_instructions")
#: Smallest relative step reported as a change, per metric (compile time is noisy and ungated).
MIN_STEP = {"latency": 0.01, "memory": 0.01, "compile_time": 0.10, "artifact_size": 0.001, "node_count": 0.001}


def series_changes(series: Series, points: Sequence[Point]) -> list[ChangePoint]:
    """The change points of one series (oldest first): exact steps for metrics without noise,
    ``changepoints.detect`` for the others (ratio series with each night's paired interval)."""
    from perfguard.history.changepoints import detect

    values = [p.value for p in points]
    min_size = MIN_STEP.get(series.key.metric, 0.01)
    if series.key.metric in EXACT_METRICS:
        return exact_changes(values, min_size)
    ci = [(p.ci_low, p.ci_high) for p in points] if series.key.kind == "ratio" else None
    return detect(values, kind=series.key.kind, ci=ci, min_size=min_size)


def exact_changes(values: Sequence[float], min_size: float) -> list[ChangePoint]:
    """Every night where a metric without noise (node count, artifact size) changed by at least
    ``min_size``: the change is the value itself, its interval a point."""
    from perfguard.history.changepoints import ChangePoint

    found = []
    for i in range(1, len(values)):
        before, after = values[i - 1], values[i]
        if before > 0 and abs(after / before - 1.0) >= min_size:
            ratio = after / before
            found.append(ChangePoint(i, before, after, ratio, ratio, ratio,
                                     "regression" if ratio > 1 else "improvement"))
    return found
