"""Bisection on an exact metric: node count, artifact size (and any metric without noise).

An exact metric has no noise: one value per version decides, so the search is git bisect's own,
with no repeated measurement and no confirmation round. Positions ``0..n`` are versions; 0 is the
good end (value ``good``), ``n`` the bad end (value ``bad``). A version has *moved* when its value
differs from the good end's by at least ``min_step`` (relative) in the direction of the bad end; the
culprit is the first moved version, found in ``ceil(log2 n)`` probes of the positions strictly
between the ends (each probed once). A version that cannot be probed (it does not build or
compile) is skipped: its nearest neighbours inside the interval are tried instead, and when only
skipped versions are left the culprit is the range they span (status ``inconclusive``).

Pure: ``value(position)`` does the probing (a compile, or a counted run) and returns the value, or a
string saying why there is none.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

#: ``value(position)``: the metric's value at a version, or why it has none (does not build...).
ValueFn = Callable[[int], "float | str"]


def moved(value: float, good: float, bad: float, min_step: float) -> bool:
    """Whether ``value`` has left the good level ``good`` toward ``bad`` by at least ``min_step``
    (relative to ``good``; any change at all when ``good`` is 0)."""
    if bad == good:
        return False
    step = (value - good) / abs(good) if good else value - good
    return step >= min_step if bad > good else -step >= min_step


def probes_needed(n: int) -> int:
    """Probes a search of ``n`` versions after the good one takes when nothing is skipped."""
    return math.ceil(math.log2(n)) if n > 1 else 0


@dataclass
class ExactSearch:
    """What an exact search found: the culprit position (None: none), the positions of the range
    it could not tell apart when skipped versions surround it, each probed value (a string: why it
    has none) and the probes in the order they were made."""

    culprit: int | None = None
    span: tuple[int, int] | None = None
    values: dict[int, float | str] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.culprit is None:
            return "no-regression"
        return "inconclusive" if self.span is not None else "found"


def _candidates(lo: int, hi: int) -> list[int]:
    """The positions strictly between ``lo`` and ``hi``, nearest the middle first."""
    mid = (lo + hi) // 2
    out = []
    for distance in range(hi - lo):
        for p in (mid - distance, mid + distance):
            if lo < p < hi and p not in out:
                out.append(p)
    return out


def search_exact(n: int, good: float, bad: float, value: ValueFn, min_step: float) -> ExactSearch:
    """The first version of ``1..n`` whose value moved from ``good`` toward ``bad`` (see the module
    docstring). Nothing is searched when the ends do not differ by ``min_step``."""
    result = ExactSearch()
    if n < 1 or not moved(bad, good, bad, min_step):
        return result
    lo, hi = 0, n
    while hi - lo > 1:
        for position in _candidates(lo, hi):
            if position not in result.values:  # each version is probed once
                result.values[position] = value(position)
                result.order.append(position)
            got = result.values[position]
            if isinstance(got, str):
                continue
            if moved(got, good, bad, min_step):
                hi = position
            else:
                lo = position
            break
        else:  # every version between the ends was skipped
            result.culprit, result.span = hi, (lo + 1, hi)
            return result
    result.culprit = hi
    return result
