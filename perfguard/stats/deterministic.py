"""Comparison of deterministic metrics: node or op count, artifact size, IR size.

These metrics have no noise: compiling the same model under the same pipeline gives the same
number, so there is nothing to test and any change is real. The result still has the shape of a
:class:`~perfguard.stats.verdict.Comparison` so reports and gates treat every metric alike.
"""

from __future__ import annotations

import math

from perfguard.stats.thresholds import Threshold
from perfguard.stats.verdict import Comparison, direction_of


def compare_deterministic(
    baseline: float,
    candidate: float,
    threshold: Threshold | None = None,
    *,
    higher_is_worse: bool = True,
) -> Comparison:
    """Compare two exact values; report any change and gate it with ``threshold``.

    Test: none (no noise). ``p_value`` is 0.0 when the values differ and 1.0 when they are equal;
    the interval is the point (``ci_low == ci_high == ratio``); ``mde`` is 0 (any change is seen);
    ``n_pairs`` is 1.

    Threshold: the allowed change, strictly exceeded to fail: ``max:0`` (the default when
    ``threshold`` is None) makes any change ``different``; ``5`` of a count threshold allows five
    more nodes; ``2%`` allows 2 %. Its statistic is ignored (a single value has no spread).

    Decision: ``same`` when the change is within the threshold, else ``different``. Unlike the
    noisy comparisons, ``direction`` names the sign of *any* change, also within the threshold,
    so a report can show "node count 812 -> 809 (improvement, within max:5)".

    Assumptions: the values are finite and >= 0 (counts and sizes). A change from 0 has an
    infinite ratio and exceeds any relative threshold.
    """
    for name, value in (("baseline", baseline), ("candidate", candidate)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise ValueError(
                f"deterministic {name} must be a finite number >= 0 (a count or a size), got {value!r}"
            )
    gate = threshold if threshold is not None else Threshold("max", absolute=0.0)
    delta = float(candidate) - float(baseline)
    if baseline > 0:
        ratio = candidate / baseline
    else:
        ratio = 1.0 if candidate == 0 else math.inf
    if gate.relative is not None:
        allowed = gate.relative * baseline
        floor = gate.relative
        exceeds = abs(delta) > allowed if baseline > 0 else delta != 0
    else:
        allowed = gate.absolute if gate.absolute is not None else 0.0
        floor = allowed / baseline if baseline > 0 else (0.0 if allowed == 0 else math.inf)
        exceeds = abs(delta) > allowed
    direction = direction_of(delta, higher_is_worse)
    change = f"{baseline:g} -> {candidate:g} ({delta:+g}" + (
        f", {ratio - 1.0:+.2%})" if baseline > 0 else ")"
    )
    if delta == 0:
        reason = f"unchanged at {baseline:g}"
    elif exceeds:
        reason = f"{direction}: {change} exceeds {gate}"
    else:
        reason = f"{direction} within {gate}: {change}"
    return Comparison(
        decision="different" if exceeds else "same",
        direction=direction,
        ratio=ratio,
        ci_low=ratio,
        ci_high=ratio,
        p_value=0.0 if delta != 0 else 1.0,
        mde=0.0,
        n_pairs=1,
        baseline_median=float(baseline),
        candidate_median=float(candidate),
        floor=floor,
        reason=reason,
        method="deterministic",
        statistic="value",
        alpha=0.0,
        confidence=1.0,
    )
