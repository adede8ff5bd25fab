"""Change points in a nightly history series: robust binary segmentation, then a local test and merge.

Two kinds of series (``kind``):

* ``"absolute"`` - one value per night (median latency in seconds, ...) from one stable machine.
  A change is a level shift. Method, on ``log(value)`` so that sizes are relative:

  1. Noise scale: ``sigma = 1.4826 * MAD(first differences) / sqrt(2)``. Differences cancel steps
     and slow drift; the MAD ignores outlier nights.
  2. Candidates: binary segmentation (Vostrikova 1981) with the standardized L2 CUSUM on the
     series clipped to a running median (5 nights) +- 3 sigma, so that one outlier night cannot
     pull a split. A segment is split while its CUSUM maximum exceeds ``Z_SPLIT`` sigma; that is
     deliberately loose: it over-segments and lets step 3 decide (Otava's "split/merge").
  3. Merge: each candidate is tested on the nights next to it - up to ``WINDOW`` nights on each
     side, never past the neighbouring candidates - by the difference of the two medians in units
     of its standard error (``sqrt(pi / 2) * sigma * sqrt(1/n1 + 1/n2)``). A candidate fails if
     ``|z| < Z_KEEP``, if the step is smaller than ``min_size``, if a side has fewer than
     ``MIN_RUN`` nights, or if the Moses 95 % interval of the two windows (their own scatter, not
     sigma) includes no change; the failing candidate with the smallest ``|z|`` is dropped and its
     neighbours are re-tested, until every candidate passes. Because the test is local, a slow
     drift (+3 % a year moves a 30-night median by 0.25 %) is not a step, where a global
     piecewise-constant fit turns it into a staircase.
  4. Each kept cut moves by up to 2 nights to where two medians fit its window best (L1), and the
     merge runs again (a cut that moved may leave a side shorter than ``MIN_RUN``).

  ``before``/``after`` are the medians of those local windows (not of the whole segment, which
  drift would bias) and the interval is the Moses (Mann-Whitney based) 95 % interval of the
  Hodges-Lehmann shift between them, as a ratio.

* ``"ratio"`` - each night's *paired* head/base ratio against the previous night's commit. On the
  chained index (:func:`chained_index`) a regression is a step; but the chained index is a random
  walk of the nightly noise (sd 1 % a night is sd 19 % after a year), so fitting its *levels*
  cannot work: asv's Potts fit of the chained index explains the walk by correlated noise and
  returns one segment (0-5 % of the steps found). The step of the chained index at night k is its
  increment, the paired log ratio of that night, so each night is tested on its own: a change when
  ``|log r - median| >= Z_RATIO * sigma`` (``sigma`` = 1.4826 MAD of the log ratios), ``|r - 1| >=
  min_size`` and, when the night's paired interval is given, that interval excludes 1 (a noisy
  check is no evidence). ``before``/``after`` are the chained index at the previous night and at
  that night, so ``ratio`` is the night's own ratio and ``ci_low``/``ci_high`` its paired interval
  (``r * exp(+-1.96 sigma)`` where none is given).

Why this and not asv (``asv.step_detect``, already a dependency): asv's L1 Potts solver with
automatic gamma takes 25-40 ms per 365-night series on this 2-core machine (5-7 ms at 60 nights, so
even a 60-night window of 1,500 series takes 9 s of the store's 10 s), it misses recent steps, it
turns drift into steps, and it is weak on short series. Simulated with known truth, fixed seeds,
min_size 1 %, a hit = the right direction within +-2 nights (``.venv/bin/python
benchmarks/changepoint_sim.py``; 300 series per row, asv 40)::

    365 nights (60 nights)                     perfguard            asv detect_steps
    hit +2 % / +5 % / +10 % at cv 1 %          88 / 100 / 100 %     85 / 100 / 100 %
      same at 60 nights                        83 / 100 / 100 %     33 / 90 / 100 %
    hit -5 % (improvement) at cv 1 %           100 %                100 %
    hit +5 % at cv 3 %                         65 % (50 %)          70 % (10 %)
    hit +5 % four nights before the end        100 % (100 %)        18 % (50 %)
    hit +5 % then -5 %, two steps              100 % (100 %)        100 % (10 %)
    hit +5 % on drift + outliers + bimodal     95 % (93 %)          90 % (70 %)
    false alarms / 100 nights, A/A cv 1-3 %    0.00 (0.01-0.02)     0.00 (0.00)
      outliers 1 in 30 nights +20 %            0.02 (0.02)          0.00 (0.08)
      bimodal nights, 3 % apart, p 0.3         0.00 (0.02)          0.00 (0.00)
      drift +3 % a year                        0.01 (0.02)          0.31 (0.00)
      drift +10 % a year                       0.42 (0.21)          0.69 (0.04)
    mean |position error| of hits              0.0-0.6 nights       0.0-0.8 nights
    ms per series (varies with load)           0.2-1.2 (2.4 worst)  25-42
    ratio series, one night's step: +5 % at sd 0.5 % / 1 %: 100 / 80 %; +10 % at sd 1.5 %: 99 %;
      +2 % at sd 0.5 %: 44 %; false alarms 0.01-0.02 per 100 nights (0.03-0.07 at 60 nights); the
      nights' intervals halve the false alarms from outlier nights (0.04 -> 0.02; 0.08 -> 0.03)
    one store pass, 1,500 series x 365 nights: 0.8-0.9 s

Parameters (module constants; ``--sweep`` prints the trade-off): ``WINDOW`` = 30 nights,
``MIN_RUN`` = 3 nights, ``Z_SPLIT`` = 3, ``Z_KEEP`` = 4 (3 gains +5 % at cv 3 % from 70 to 81 %
but drift +10 % a year from 0.40 to 1.06 false alarms per 100 nights), ``Z_RATIO`` = 4 (about 1
false alarm per 10,000 nights; 3.5 finds +2 % at sd 0.5 % 67 % of the time instead of 43 %, with
seven times the false alarms).

Limits:

* An absolute change is reported once it has lasted ``MIN_RUN`` nights (one or two high nights are
  outliers until they repeat), so its ``index`` is at most ``len - MIN_RUN``; changes closer than
  ``MIN_RUN`` nights are one change, and a level that holds for ``MIN_RUN`` nights and goes back
  is two changes (rarely three outliers in a row do that: see the outlier rows).
* Power depends on noise: a +5 % step at cv 3 % is found 65 % of the time. Noise is taken as
  stationary and independent between nights (one sigma per series); a series whose noise grows
  after some night has more false alarms there.
* A ratio series' change must happen in one night: a regression that creeps in over several nights
  (+0.5 % each) is not seen, nor is a slow drift (by design). The first night of a ratio series
  has no previous night in the series and is never a change.
* Missing nights (NaN) are *skipped*: the other nights are analysed as if adjacent, and every
  ``index`` refers to the input positions. Non-positive or infinite values raise ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: The kinds of series :func:`detect` knows.
KINDS = ("absolute", "ratio")
#: Shorter series (after dropping NaN) have no change points.
MIN_POINTS = 4
#: Most nights on each side of a change that its test and its levels use.
WINDOW = 30
#: Fewest nights on each side of an absolute change (one or two high nights are outliers).
MIN_RUN = 3
#: Loose CUSUM threshold (in sigma) that makes the candidates of an absolute series.
Z_SPLIT = 3.0
#: Median-difference z a candidate of an absolute series needs to be kept.
Z_KEEP = 4.0
#: Robust z a ratio-series night needs to be a change.
Z_RATIO = 4.0
#: Two-sided 95 % normal quantile, for the intervals.
CI_Z = 1.959963984540054

_MAD_TO_SD = 1.482602218505602
_MEDIAN_SE = math.sqrt(math.pi / 2.0)  # sd of a median / sd of a mean, normal data
_SIGMA_FLOOR = 1e-9  # a constant series (exact metric) still has a finite z
_CLIP_WIDTH = 5  # running-median width for clipping before the CUSUM
_CLIP_SIGMAS = 3.0
_REFINE = 2  # nights a cut may move in the L1 refinement


@dataclass(frozen=True)
class ChangePoint:
    """One change of level in a series.

    ``index`` is the position (in the input) of the first night after the change, so
    ``0 < index < len(values)``. ``before`` and ``after`` are the levels on either side in the
    series' units (for ratio series: the chained index), ``ratio = after / before`` (1.05 is
    +5 %), ``ci_low``/``ci_high`` a 95 % interval for it. ``direction`` is ``"regression"``
    (the value got larger), ``"improvement"`` or ``"none"`` when the interval includes 1
    (:func:`detect` keeps only changes whose interval excludes 1, so it never says ``"none"``).
    """

    index: int
    before: float
    after: float
    ratio: float
    ci_low: float
    ci_high: float
    direction: str


def chained_index(ratios: Sequence[float]) -> list[float]:
    """Cumulative product of nightly ratios, starting at ``ratios[0]``.

    A NaN ratio (a night without a check) is NaN in the result and the product carries on across
    it, as if that night's ratio were 1. Non-positive or infinite ratios raise ``ValueError``.
    """
    arr = np.asarray(ratios, dtype=np.float64)
    missing = np.isnan(arr)
    _check_positive(arr[~missing])
    out = np.cumprod(np.where(missing, 1.0, arr))
    out[missing] = np.nan
    return [float(v) for v in out]


def detect(
    values: Sequence[float],
    *,
    kind: str = "absolute",
    ci: Sequence[tuple[float | None, float | None]] | None = None,
    min_size: float = 0.01,
) -> list[ChangePoint]:
    """Change points of one nightly series, oldest first (see the module docstring for the method).

    ``kind`` is ``"absolute"`` (a value per night) or ``"ratio"`` (a paired head/base ratio per
    night; detection runs on its chained index). ``ci`` gives each night's paired interval
    ``(low, high)`` (either may be ``None``) and is used for ratio series only: an absolute
    series' test uses the scatter between nights, which already contains the scatter within one.
    Steps smaller than ``min_size`` (relative: 0.01 is 1 %, in either direction, ``|ratio - 1|``)
    are not reported. NaN nights are skipped; fewer than ``MIN_POINTS`` others give ``[]``.

    Raises ``ValueError`` for an unknown kind, a negative ``min_size``, a ``ci`` of the wrong
    length, or a non-positive or infinite value.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown series kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    if not min_size >= 0.0:
        raise ValueError(f"min_size must be a relative size >= 0 (0.01 is 1 %), got {min_size!r}")
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if ci is not None and len(ci) != len(arr):
        raise ValueError(f"ci has {len(ci)} entries for {len(arr)} values")
    keep = np.flatnonzero(~np.isnan(arr))
    y = arr[keep]
    _check_positive(y)
    if len(y) < MIN_POINTS:
        return []
    if kind == "ratio":
        return _detect_ratio(y, keep, ci, min_size)
    return _detect_absolute(y, keep, min_size)


# --------------------------------------------------------------------------------------------
# absolute series


def _detect_absolute(
    values: FloatArray, positions: npt.NDArray[np.intp], min_size: float
) -> list[ChangePoint]:
    y = np.log(values)
    sigma = _diff_sigma(y)
    cuts = _merge(y, _candidates(_clip_outliers(y, sigma), sigma), sigma, min_size)
    refined = _refine(y, cuts)
    if refined != cuts:  # a moved cut may now fail (a side shorter than MIN_RUN): test again
        cuts = _merge(y, refined, sigma, min_size)
    found = []
    for i, cut in enumerate(cuts):
        lo, hi = _window(cuts, i, len(y))
        before, after = float(np.median(values[lo:cut])), float(np.median(values[cut:hi]))
        ratio = after / before
        if abs(ratio - 1.0) < min_size:
            continue  # the log-median step passed, the reported (arithmetic-median) one did not
        low, high = _moses_interval(y[lo:cut], y[cut:hi])
        found.append(_change(int(positions[cut]), before, after, low, high))
    return found


def _diff_sigma(y: FloatArray) -> float:
    """Robust sd of one night's noise from the first differences (steps and drift cancel)."""
    d = np.diff(y)
    dev = np.abs(d - np.median(d))
    sd = _MAD_TO_SD * float(np.median(dev))
    if sd == 0.0:  # quantized values, most differences 0: mean |deviation| is sd * sqrt(2 / pi)
        sd = float(np.mean(dev)) * _MEDIAN_SE
    return max(sd / math.sqrt(2.0), _SIGMA_FLOOR)


def _clip_outliers(y: FloatArray, sigma: float) -> FloatArray:
    """``y`` clipped to its running median (``_CLIP_WIDTH`` nights) +- ``_CLIP_SIGMAS`` sigma."""
    half = _CLIP_WIDTH // 2
    padded = np.pad(y, half, mode="edge")
    level = np.median(np.lib.stride_tricks.sliding_window_view(padded, _CLIP_WIDTH), axis=1)
    return np.clip(y, level - _CLIP_SIGMAS * sigma, level + _CLIP_SIGMAS * sigma)


def _candidates(y: FloatArray, sigma: float) -> list[int]:
    """Binary segmentation by the standardized CUSUM; cuts at least ``MIN_RUN`` apart."""
    cuts = []
    stack = [(0, len(y))]
    while stack:
        a, b = stack.pop()
        m = b - a
        if m < 2 * MIN_RUN:
            continue
        seg = y[a:b]
        t = np.arange(MIN_RUN, m - MIN_RUN + 1)
        partial = np.cumsum(seg - seg.mean())[t - 1]
        stat = np.abs(partial) / np.sqrt(t * (m - t) / m)
        j = int(np.argmax(stat))
        if stat[j] < Z_SPLIT * sigma:
            continue
        cut = a + int(t[j])
        cuts.append(cut)
        stack += [(a, cut), (cut, b)]
    return sorted(cuts)


def _merge(y: FloatArray, cuts: list[int], sigma: float, min_size: float) -> list[int]:
    """Drop the weakest failing candidate until every one passes its local test."""
    cuts = list(cuts)
    scores = [_local_test(y, cuts, i, sigma, min_size) for i in range(len(cuts))]
    while cuts:
        failing = [i for i, (_, ok) in enumerate(scores) if not ok]
        if not failing:
            break
        worst = min(failing, key=lambda i: scores[i][0])
        del cuts[worst], scores[worst]
        for i in (worst - 1, worst):
            if 0 <= i < len(cuts):
                scores[i] = _local_test(y, cuts, i, sigma, min_size)
    return cuts


def _local_test(y: FloatArray, cuts: list[int], i: int, sigma: float, min_size: float) -> tuple[float, bool]:
    """(|z|, passes) of candidate ``i`` against its neighbours.

    Passes: the median-difference z is at least ``Z_KEEP``, the step at least ``min_size``, both
    sides have ``MIN_RUN`` nights, and the Moses interval of the two windows excludes no change
    (a second opinion from the windows' own scatter instead of the series' sigma).
    """
    cut = cuts[i]
    lo, hi = _window(cuts, i, len(y))
    n1, n2 = cut - lo, hi - cut
    step = float(np.median(y[cut:hi]) - np.median(y[lo:cut]))
    z = abs(step) / (_MEDIAN_SE * sigma * math.sqrt(1.0 / n1 + 1.0 / n2))
    ok = z >= Z_KEEP and abs(math.expm1(step)) >= min_size and min(n1, n2) >= MIN_RUN
    if ok:
        low, high = _moses_interval(y[lo:cut], y[cut:hi])
        ok = not low <= 1.0 <= high
    return z, ok


def _window(cuts: list[int], i: int, n: int) -> tuple[int, int]:
    """The nights ``[lo, hi)`` that test cut ``i``: up to ``WINDOW`` each side, not past its neighbours."""
    lo = max(cuts[i - 1] if i > 0 else 0, cuts[i] - WINDOW)
    hi = min(cuts[i + 1] if i + 1 < len(cuts) else n, cuts[i] + WINDOW)
    return lo, hi


def _refine(y: FloatArray, cuts: list[int]) -> list[int]:
    """Move each cut by up to ``_REFINE`` nights to where two medians fit its window best (L1).

    The CUSUM places a cut where the *clipped* series splits best over its whole segment, and
    the merge test tolerates one misplaced night in a short window; the L1 fit of the window
    puts it on the night the level changed.
    """
    out = list(cuts)
    for i, cut in enumerate(cuts):
        lo, hi = _window(out, i, len(y))
        best, best_cost = cut, math.inf
        for c in range(max(lo + 1, cut - _REFINE), min(hi - 1, cut + _REFINE) + 1):
            left, right = y[lo:c], y[c:hi]
            cost = float(np.abs(left - np.median(left)).sum() + np.abs(right - np.median(right)).sum())
            if cost < best_cost - 1e-12 * abs(cost):
                best, best_cost = c, cost
        out[i] = best
    return out


def _moses_interval(left: FloatArray, right: FloatArray) -> tuple[float, float]:
    """95 % Moses interval of the Hodges-Lehmann shift ``right - left`` (logs), as ratios.

    Distribution-free for a pure shift (Hollander & Wolfe, ch. 4): the k-th smallest and
    largest of the ``n1 * n2`` pairwise differences, k from the normal approximation of the
    Mann-Whitney U null distribution; at least the extreme differences.
    """
    n1, n2 = len(left), len(right)
    diffs = np.sort((right[:, None] - left[None, :]).ravel())
    k = int(math.floor(n1 * n2 / 2.0 - CI_Z * math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12.0)))
    k = min(max(k, 0), (len(diffs) - 1) // 2)
    return math.exp(float(diffs[k])), math.exp(float(diffs[-1 - k]))


# --------------------------------------------------------------------------------------------
# ratio series


def _detect_ratio(
    ratios: FloatArray,
    positions: npt.NDArray[np.intp],
    ci: Sequence[tuple[float | None, float | None]] | None,
    min_size: float,
) -> list[ChangePoint]:
    lr = np.log(ratios)
    centre = float(np.median(lr))
    sigma = max(_MAD_TO_SD * float(np.median(np.abs(lr - centre))), _SIGMA_FLOOR)
    given = [(None, None)] * len(ratios) if ci is None else [ci[int(p)] for p in positions]
    z = np.abs(lr - centre) / sigma
    level = np.cumprod(ratios)
    found = []
    for j in (int(k) for k in np.flatnonzero((z >= Z_RATIO) & (np.abs(ratios - 1.0) >= min_size))):
        if positions[j] == 0:
            continue  # the first night's ratio is against a commit the series does not hold
        low, high = given[j]
        low = float(ratios[j] * math.exp(-CI_Z * sigma)) if low is None else float(low)
        high = float(ratios[j] * math.exp(CI_Z * sigma)) if high is None else float(high)
        if low <= 1.0 <= high:
            continue  # the night's own paired check did not see a change (a noisy night)
        before = float(level[j - 1]) if j > 0 else 1.0
        found.append(_change(int(positions[j]), before, float(level[j]), low, high))
    return found


# --------------------------------------------------------------------------------------------


def _change(index: int, before: float, after: float, low: float, high: float) -> ChangePoint:
    ratio = after / before
    if low <= 1.0 <= high:
        direction = "none"
    else:
        direction = "regression" if ratio > 1.0 else "improvement"
    return ChangePoint(index, before, after, ratio, low, high, direction)


def _check_positive(arr: FloatArray) -> None:
    bad = ~(np.isfinite(arr) & (arr > 0.0))
    if bad.any():
        raise ValueError(f"values must be positive and finite (NaN is skipped), found {arr[bad][0]!r}")
