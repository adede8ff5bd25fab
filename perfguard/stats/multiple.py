"""Multiple-comparison control across a whole check: suite cases x runners, one family per noisy
metric (``perfguard.compare.check.FAMILIES``: latency, compile time; see ``perfguard.compare.check``).

A check that compares 200 (case, metric) pairs at alpha = 0.05 would report about ten false
regressions per run if each were tested alone. Benjamini-Hochberg controls the *false discovery
rate*: among the comparisons it flags, the expected fraction of false ones is at most ``q``
(for independent or positively dependent p-values, which benchmark cases sharing a machine are).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def bh_adjust(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values ("q-values"), in the input order.

    ``adjusted[(i)] = min over j >= i of min(1, m * p[(j)] / j)`` for the ascending order
    ``p[(1)] <= ... <= p[(m)]``; a hypothesis is rejected at FDR level q exactly when its adjusted
    p-value is <= q. Tied p-values get equal adjusted values.

    NaN (a comparison that produced no test, e.g. too few workers) counts as a hypothesis in m -
    it was asked, so leaving it out would make the others easier to reject - is ranked last as if
    it were 1, and its adjusted value is NaN. Values outside [0, 1] raise ``ValueError``.
    """
    p = _validate(p_values)
    m = p.size
    if m == 0:
        return []
    missing = np.isnan(p)
    filled = np.where(missing, 1.0, p)
    order = np.argsort(filled, kind="stable")
    ranked = filled[order] * m / np.arange(1, m + 1)
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(ranked, 1.0)
    adjusted[missing] = math.nan
    return [float(x) for x in adjusted]


def benjamini_hochberg(p_values: Sequence[float], q: float = 0.05) -> list[bool]:
    """Which hypotheses the Benjamini-Hochberg step-up procedure rejects at FDR level ``q``.

    Procedure: sort the m p-values ascending, find the largest k with ``p[(k)] <= k * q / m`` and
    reject the k smallest (all of them, even one above its own line: that is the step-up).
    Equivalent to ``bh_adjust(p) <= q``. Ties: all members of a tie are rejected or kept together.
    NaN is never rejected and counts in m (see :func:`bh_adjust`).

    Assumption: independent or positively regression-dependent p-values (Benjamini-Yekutieli
    2001); for arbitrary dependence divide ``q`` by ``sum(1/i, i=1..m)``.
    """
    if not (isinstance(q, (int, float)) and 0.0 < q <= 1.0):
        raise ValueError(f"FDR level q must be in (0, 1], got {q!r}")
    return [(not math.isnan(a)) and a <= q for a in bh_adjust(p_values)]


def _validate(p_values: Sequence[float]) -> np.ndarray:
    try:
        p = np.asarray(list(p_values), dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"p-values must be numbers, got {p_values!r:.80}") from exc
    bad = ~np.isnan(p) & ((p < 0) | (p > 1))
    if bad.any():
        raise ValueError(f"p-values must lie in [0, 1] (or be NaN for no test), got {float(p[bad][0])!r}")
    return p
