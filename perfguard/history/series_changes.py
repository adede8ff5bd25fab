"""The change points a series of the history store shows: exact steps for the metrics without
noise, ``changepoints.detect`` for the others. The night, the site and ``perfguard history``
read changes through the same rules, so the minimal steps live here, below all three.

An exact metric (node count, artifact size, the counted ones: ``perfguard.suite.gates.EXACT_METRICS``)
changes where ``check`` would call the same pair of values DIFFERENT: the same gate from the one
table of floors (the suite's ``[thresholds]``, else the defaults of ``perfguard.suite.gates.METRICS``)
and the same comparison (``stats.compare_deterministic``: strictly past the floor)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from perfguard.suite.gates import DEFAULT_THRESHOLDS, EXACT_METRICS, Gate, ThresholdSet

if TYPE_CHECKING:
    from perfguard.history.changepoints import ChangePoint
    from perfguard.store import Point, Series

__all__ = ["EXACT_METRICS", "MIN_STEP", "exact_changes", "series_changes"]

#: Smallest relative step reported as a change, per metric: the noisy ones' own (compile time is
#: noisy and ungated), the exact ones' default floors of ``check`` (what the site's markers use).
MIN_STEP = {"latency": 0.01, "memory": 0.01, "compile_time": 0.10,
            **{metric: DEFAULT_THRESHOLDS.defaults[metric].relative for metric in EXACT_METRICS}}


def series_changes(series: Series, points: Sequence[Point],
                   thresholds: ThresholdSet = DEFAULT_THRESHOLDS) -> list[ChangePoint]:
    """The change points of one series (oldest first): exact steps for metrics without noise,
    past the gate ``thresholds`` gives the series' case and metric (the nightly's suite's, so its
    history agrees with its check), ``changepoints.detect`` for the others (ratio series with each
    night's paired interval)."""
    from perfguard.history.changepoints import detect

    values = [p.value for p in points]
    if series.key.metric in EXACT_METRICS:
        return exact_changes(values, thresholds.gate(series.key.case, series.key.metric))
    ci = [(p.ci_low, p.ci_high) for p in points] if series.key.kind == "ratio" else None
    return detect(values, kind=series.key.kind, ci=ci, min_size=MIN_STEP.get(series.key.metric, 0.01))


def exact_changes(values: Sequence[float], gate: Gate) -> list[ChangePoint]:
    """Every night where a metric without noise changed past ``gate`` since the night before,
    decided as ``check`` decides it (``compare_deterministic`` at the gate's threshold for the
    night before's value: the larger of its relative and absolute amounts, strictly exceeded): the change is the value itself, its interval a point. A night after a zero or
    missing value starts a new level without a change (no ratio to give)."""
    from perfguard.history.changepoints import ChangePoint
    from perfguard.stats import compare_deterministic

    found = []
    for i in range(1, len(values)):
        before, after = values[i - 1], values[i]
        if not (math.isfinite(before) and math.isfinite(after) and before > 0 and after >= 0):
            continue
        if compare_deterministic(before, after, gate.threshold(before)).decision == "different":
            ratio = after / before
            found.append(ChangePoint(i, before, after, ratio, ratio, ratio,
                                     "regression" if ratio > 1 else "improvement"))
    return found
