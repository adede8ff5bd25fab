"""Summary statistics by name, and the robust location estimator used across worker processes.

Two levels of summary appear in every comparison:

* **Within one worker process** a group of timings is reduced to one number by a *named*
  statistic: ``median`` (the default), ``mean``, ``min``, ``max`` or a percentile ``pN``
  (``p1`` .. ``p99``, linear interpolation between order statistics). The names are the ones a
  threshold such as ``p90:0.5ms`` may carry (see :mod:`perfguard.stats.thresholds`).
* **Across worker processes** the per-worker log ratios are combined by a 20 % trimmed mean
  (:func:`trimmed_mean`). Why not the plain median: at normal noise the median of n values has
  an efficiency of about 0.64, which costs a third of the workers; the 20 % trimmed mean keeps
  about 0.94 of the mean's efficiency and still ignores the two most extreme workers out of ten
  (a drift burst that starts in the middle of one process can bias that one worker's ratio by
  10 % or more; see the simulations in ``tests/test_stats_sim.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from perfguard.errors import UserError, unknown_name_message

#: Fraction trimmed from *each* end by :func:`trimmed_mean` (Wilcox's recommended 20 %).
TRIM = 0.2

_NAMED = ("median", "mean", "min", "max")
# Each named statistic as (reducer, NaN-skipping reducer).
_REDUCERS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "median": (np.median, np.nanmedian), "mean": (np.mean, np.nanmean),
    "min": (np.min, np.nanmin), "max": (np.max, np.nanmax),
}
_PERCENTILE = re.compile(r"^p([1-9][0-9]?)$")

FloatArray = npt.NDArray[np.float64]


def _special() -> ModuleType:
    """``scipy.special``, imported on first use: 0.34 s on the 2-core machine, where all of
    ``scipy.stats`` (which the functions below once came from, and which calls the same special
    functions) took 1.4 s. ``perfguard check`` imports it in a thread while its compiles run
    (``perfguard.flows.check.compile_while_importing``), so a lighter import takes less
    of the cores the compiles use."""
    import importlib

    return importlib.import_module("scipy.special")


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``scipy.stats.t.ppf``)."""
    return float(_special().stdtrit(df, p))


def normal_cdf(z: float) -> float:
    """The standard normal distribution function (``scipy.stats.norm.cdf``)."""
    return float(_special().ndtr(z))


def average_ranks(values: FloatArray) -> FloatArray:
    """Ranks 1..n of ``values``, ties sharing the mean of their ranks (``scipy.stats.rankdata``
    with its default ``method="average"``)."""
    data = np.asarray(values, dtype=np.float64).ravel()
    order = np.argsort(data, kind="mergesort")
    ordered = data[order]
    # Start of each run of equal values in sorted order, and the run each value belongs to.
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], data.size]
    mean_rank = (starts + ends + 1) / 2.0  # mean of the 1-based ranks start+1 .. end
    ranks = np.empty(data.size, dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def check_statistic(name: str) -> str:
    """Return ``name`` if it names a statistic, else raise ``UserError`` listing the valid ones."""
    if name in _NAMED or _PERCENTILE.match(name):
        return name
    raise UserError(
        unknown_name_message("statistic", name, (*_NAMED, "p50", "p90", "p95", "p99"))
        + " (any pN with N in 1..99)"
    )


def apply_statistic(values: FloatArray, name: str, axis: int = -1) -> FloatArray:
    """Reduce ``values`` along ``axis`` by the statistic called ``name``.

    ``pN`` is the N-th percentile with linear interpolation (numpy's default), so ``p50`` equals
    ``median``. NaN entries are ignored (``nan``-variants of the reductions); this lets ragged
    groups be padded with NaN and reduced in one vectorized call.
    """
    check_statistic(name)
    padded = bool(np.isnan(values).any())  # the NaN-skipping variants cost more: only when needed
    if name in _REDUCERS:
        reduce = _REDUCERS[name][padded]
        return np.asarray(reduce(values, axis=axis), dtype=np.float64)
    percentile = np.nanpercentile if padded else np.percentile
    return np.asarray(percentile(values, float(name[1:]), axis=axis), dtype=np.float64)


def trimmed_count(n: int, trim: float = TRIM) -> int:
    """How many values :func:`trimmed_mean` drops from each end of ``n`` values."""
    return int(np.floor(trim * n))


def trimmed_mean(x: FloatArray, axis: int = -1, trim: float = TRIM) -> FloatArray:
    """Mean after dropping ``floor(trim * n)`` values from each end along ``axis``.

    With the default 20 %: n <= 4 is the plain mean, n = 5..9 drops one value per end,
    n = 10..14 drops two, n = 20 drops four. Vectorized over the other axes (used on a
    bootstrap matrix of shape ``(n_boot, n)``).
    """
    data = np.sort(np.asarray(x, dtype=np.float64), axis=axis)
    n = data.shape[axis]
    g = trimmed_count(n, trim)
    kept = np.take(data, np.arange(g, n - g), axis=axis)
    return np.asarray(np.mean(kept, axis=axis), dtype=np.float64)
