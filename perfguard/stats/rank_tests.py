"""Exact rank tests: Wilcoxon signed-rank (paired) and Mann-Whitney U / Wilcoxon rank-sum.

Both compute the *exact conditional* null distribution given the observed ranks, by dynamic
programming over (doubled) mid-ranks, so ties and zero differences are handled exactly instead
of falling back to a normal approximation. Above 100 pairs (60 values for the rank-sum test) the normal
approximation with tie correction is used; there it is accurate.

Why our own implementation: ``scipy.stats.wilcoxon(method="exact")`` does not handle ties or
zeros (it switches method and warns), and identical timings from a coarse clock are exactly the
tied, zero-difference case a CI tool meets.
"""

from __future__ import annotations

import math

import numpy as np

from perfguard.stats.estimators import FloatArray, average_ranks, normal_cdf

_EXACT_MAX_PAIRS = 100
_EXACT_MAX_TOTAL = 60
_REL_EPS = 1e-9


def min_pairs_for(alpha: float) -> int:
    """Smallest number of non-zero pairs whose exact two-sided signed-rank p can reach ``alpha``.

    With n pairs the smallest attainable two-sided p is ``2 / 2**n`` (all differences of one
    sign), so alpha = 0.05 needs n >= 6, alpha = 0.0125 (0.05 over 4 looks) needs n >= 8.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return max(1, math.ceil(math.log2(2.0 / alpha) - 1e-12))


def signed_rank_test(differences: FloatArray) -> float:
    """Two-sided exact Wilcoxon signed-rank p-value for "the differences are centred on 0".

    Test: Wilcoxon signed-rank, Pratt's treatment of zeros (zeros take part in the ranking of
    |d| but carry no sign), mid-ranks for ties; the p-value is exact for the conditional
    distribution given those ranks (enumerated by dynamic programming) up to 100 pairs, normal
    approximation with tie correction above.

    Assumption: under the null hypothesis each difference is symmetric about 0 and the pairs are
    independent. For perfguard's paired design (A and B in the same process, interleaved in
    random order, creation order randomized) this holds for an A/A comparison by construction.

    Returns 1.0 when every difference is zero.
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.size == 0:
        return 1.0
    ranks = average_ranks(np.abs(d))
    nonzero = d != 0
    if not nonzero.any():
        return 1.0
    doubled = np.rint(2.0 * ranks[nonzero]).astype(np.int64)
    positive = d[nonzero] > 0
    observed = int(doubled[positive].sum())
    total = int(doubled.sum())
    center = total / 2.0
    if doubled.size > _EXACT_MAX_PAIRS:
        variance = float(np.sum(doubled.astype(np.float64) ** 2)) / 4.0
        z = abs(observed - center) / math.sqrt(variance)
        return float(min(1.0, 2.0 * normal_cdf(-z)))
    # dist[s] = P(sum of doubled ranks carrying a + sign == s) under random signs.
    dist = np.zeros(total + 1, dtype=np.float64)
    dist[0] = 1.0
    for r in doubled:
        shifted = np.zeros_like(dist)
        shifted[r:] = dist[: total + 1 - r]
        dist = 0.5 * (dist + shifted)
    distance = np.abs(np.arange(total + 1) - center)
    extreme = distance >= abs(observed - center) - _REL_EPS * max(1.0, center)
    return float(min(1.0, dist[extreme].sum()))


def rank_sum_test(x: FloatArray, y: FloatArray) -> float:
    """Two-sided exact Mann-Whitney U (Wilcoxon rank-sum) p-value for "x and y have one distribution".

    Test: rank-sum of ``x`` in the pooled sample with mid-ranks for ties; exact conditional null
    distribution (all ``C(n, n_x)`` splits of the observed ranks, by dynamic programming) up to
    60 values in total, normal approximation with tie correction above.

    Assumption: the values are independent and, under the null hypothesis, exchangeable between
    the two samples. perfguard passes one value per *worker process* (the worker's median), never
    the raw timings, because timings inside one process are not independent.
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    n_x, n_y = a.size, b.size
    if n_x == 0 or n_y == 0:
        return 1.0
    n = n_x + n_y
    ranks = average_ranks(np.concatenate([a, b]))
    doubled = np.rint(2.0 * ranks).astype(np.int64)
    observed = int(doubled[:n_x].sum())
    center = n_x * (n + 1)  # doubled expected rank sum
    if n > _EXACT_MAX_TOTAL:
        _, counts = np.unique(doubled, return_counts=True)
        tie = float(np.sum(counts.astype(np.float64) ** 3 - counts))
        variance = 4.0 * n_x * n_y / 12.0 * ((n + 1) - tie / (n * (n - 1)))
        if variance <= 0:
            return 1.0
        z = abs(observed - center) / math.sqrt(variance)
        return float(min(1.0, 2.0 * normal_cdf(-z)))
    top = int(doubled.sum())
    # ways[k, s] = number of k-subsets of the ranks seen so far whose doubled sum is s.
    ways = np.zeros((n_x + 1, top + 1), dtype=np.float64)
    ways[0, 0] = 1.0
    for r in doubled:
        ways[1:, r:] += ways[:-1, : top + 1 - r].copy()
    dist = ways[n_x] / ways[n_x].sum()
    distance = np.abs(np.arange(top + 1) - center)
    extreme = distance >= abs(observed - center) - _REL_EPS * max(1.0, float(center))
    return float(min(1.0, dist[extreme].sum()))
