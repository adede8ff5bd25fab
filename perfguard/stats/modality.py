"""Timing quality: is a case's latency sample one mode, at its backend's usual spread?

A confidence interval of a difference assumes the values scatter around one level. When a tenth of
the values sit 50x above the rest (issue 45: every Inductor case had a median of 0.53 ms and a p90
of 1-24 ms, cv 1.8-2.5, where ONNX Runtime's cases had cv 0.01-0.03), the interval only widens and
the check says ``unknown`` without saying why. :func:`timing_quality` names what it sees instead:

``multimodal``  the sorted values split into two groups with a gap of at least ``MODE_GAP`` (1.5x)
                between them, each group holding at least ``max(2, MIN_MODE_SHARE * n)`` values;
``high_cv``     one group, but a cv above ``CV_FACTOR`` (4x) the backend's usual level (``perfguard.backends.usual_cv``);
``ok``          neither; ``too_few`` under ``MIN_VALUES`` values (nothing is judged).

Why a gap between sorted values and not a dip test or a mixture fit: the failures it is for are
not subtle (a recompile, a fallback, a value of a few runs descheduled for a time slice: 3x to 50x
apart), a gap needs no SciPy in the report path and no iteration, and it stays quiet on a
unimodal sample however skewed: in a lognormal sample of 120 values with cv 0.3 the largest
gap between neighbours (each side holding three values or more) is about 1.1x
(``tests/test_timing_quality.py`` checks both sides with fixed seeds).

The likely cause follows from where the slow values are: mostly the first value of their worker,
a first-call path inside the timed rounds (issue 45: a Dynamo recompile in the first round of each
worker that did not calibrate); in some worker processes only, the process ran other code or state
(a recompilation after a guard failure, an eager fallback, a cache missed on load); in most of
them, the timed loop itself or the machine (a thread pool sleeping and waking, values too short
for the machine's time slices under load). Assumptions: values are positive durations in seconds, grouped by worker process.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: The usual cv of a backend that declares none (a plugin's, the mock's); the built-in backends
#: declare theirs (``perfguard.backends.usual_cv``).
DEFAULT_USUAL_CV = 0.05
#: The smallest ratio between neighbouring sorted values that splits two modes.
MODE_GAP = 1.5
#: The smallest share of the values (and never under two values) a mode must hold.
MIN_MODE_SHARE = 0.02
#: A cv this many times the backend's usual one is "far above" it.
CV_FACTOR = 4.0
#: Fewer values than this are not judged.
MIN_VALUES = 8
#: A slow mode found in at most this share of the worker processes is called per-process.
PER_PROCESS_SHARE = 0.5


@dataclass(frozen=True)
class TimingQuality:
    """What :func:`timing_quality` saw: ``verdict`` (``ok``, ``multimodal``, ``high_cv``,
    ``too_few``), the values' count and cv, the backend's usual cv, and for two modes the median
    of each (seconds), the slow mode's share of the values and how many of the ``workers`` hold
    slow values; ``cause`` is the likely cause in words ("" when nothing is flagged)."""

    verdict: str
    n: int
    cv: float
    usual_cv: float
    fast_median: float | None = None
    slow_median: float | None = None
    slow_share: float = 0.0
    slow_workers: int = 0
    workers: int = 0
    cause: str = ""

    @property
    def flagged(self) -> bool:
        return self.verdict in ("multimodal", "high_cv")

    def note(self) -> str:
        """One line for the run and check output ("" when nothing is flagged)."""
        if self.verdict == "multimodal" and self.fast_median and self.slow_median:
            return (f"two modes: {self.slow_share:.0%} of {self.n} values near {_ms(self.slow_median)}, "
                    f"the rest near {_ms(self.fast_median)} ({self.slow_median / self.fast_median:.1f}x), "
                    f"in {self.slow_workers} of {self.workers} workers, cv {self.cv:.2f} (usual {self.usual_cv:.2f}); "
                    f"{self.cause}")
        if self.verdict == "high_cv":
            return (f"cv {self.cv:.2f} is {self.cv / self.usual_cv:.0f}x the backend's usual {self.usual_cv:.2f} "
                    f"({self.n} values); {self.cause}")
        return ""


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _cv(values: Sequence[float]) -> float:
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if len(values) > 1 and mean > 0 else 0.0


def widest_gap(values: Sequence[float], min_side: int) -> tuple[float, float]:
    """The largest ratio between neighbouring sorted ``values`` with at least ``min_side``
    values on each side, and the value above which the upper side starts: ``(ratio, cut)``;
    ``(1.0, inf)`` when no split leaves ``min_side`` on both sides."""
    ordered = sorted(values)
    best, cut = 1.0, math.inf
    for index in range(min_side, len(ordered) - min_side + 1):
        low, high = ordered[index - 1], ordered[index]
        if low > 0 and high / low > best:
            best, cut = high / low, low
    return best, cut


def timing_quality(per_worker: Sequence[Sequence[float]], usual: float = DEFAULT_USUAL_CV) -> TimingQuality:
    """Judge a case's latency values (``per_worker``: each worker process's values) against one
    mode and the backend's ``usual`` cv: the module docstring says how and why."""
    values = [float(v) for worker in per_worker for v in worker]
    n = len(values)
    if n < MIN_VALUES:
        return TimingQuality("too_few", n, _cv(values) if values else 0.0, usual)
    cv = _cv(values)
    min_side = max(2, math.ceil(MIN_MODE_SHARE * n))
    ratio, cut = widest_gap(values, min_side)
    if ratio >= MODE_GAP:
        fast = [v for v in values if v <= cut]
        slow = [v for v in values if v > cut]
        workers = [w for w in per_worker if w]
        slow_workers = sum(1 for w in workers if any(v > cut for v in w))
        slow_first = sum(1 for w in workers if w[0] > cut)
        if slow_first * 2 >= len(slow):
            cause = ("slow values first in their workers: a first-call path inside the timed rounds (a compile, "
                     "a load or an allocation the warm-up did not cover)")
        elif slow_workers <= PER_PROCESS_SHARE * len(workers):
            cause = ("slow in some workers only: per-process state (a recompilation, an eager fallback, a cache "
                     "missed on load)")
        else:
            cause = ("slow in most workers: the timed loop or the machine (threads sleeping and waking, values "
                     "too short for a loaded machine's time slices)")
        return TimingQuality("multimodal", n, cv, usual, statistics.median(fast), statistics.median(slow), len(slow) / n, slow_workers,
                             len(workers), cause)
    if cv > CV_FACTOR * usual:
        return TimingQuality("high_cv", n, cv, usual, cause="one mode, widely spread: machine noise (load, "
                             "frequency) or values too short to average it (raise min_time)")
    return TimingQuality("ok", n, cv, usual)
