"""Compare a baseline (A) with a candidate (B) measured in worker processes.

Input layout: one inner sequence of timings (seconds, or any positive quantity) per fresh worker
process. :func:`compare_paired` is for the default same-job A/B protocol, where worker ``i`` of A
and worker ``i`` of B ran in the *same* process, interleaved in random order; it cancels process
and drift effects. :func:`compare_unpaired` is for a stored baseline from another run; it can
only treat whole runs as samples of processes and is deliberately conservative.

Both return a :class:`~perfguard.stats.verdict.Comparison` and apply the three-way rule
documented in :mod:`perfguard.stats.verdict`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from perfguard.stats.bootstrap import percentile_interval, resample_units
from perfguard.stats.estimators import FloatArray, apply_statistic, trimmed_mean
from perfguard.stats.options import ComparisonOptions
from perfguard.stats.rank_tests import min_pairs_for, rank_sum_test, signed_rank_test
from perfguard.stats.thresholds import ACROSS_RUNS_FLOOR
from perfguard.stats.verdict import Comparison, decide, minimum_detectable_effect

Groups = Sequence[Sequence[float]]

#: Default practical floor of :func:`compare_unpaired`: the across-runs floor (see
#: :data:`perfguard.stats.thresholds.ACROSS_RUNS_FLOOR`).
UNPAIRED_REL_FLOOR = ACROSS_RUNS_FLOOR


def compare_paired(
    a_groups: Groups,
    b_groups: Groups,
    options: ComparisonOptions | None = None,
) -> Comparison:
    """Paired comparison of candidate ``b_groups`` against baseline ``a_groups``, worker by worker.

    ``options`` (:class:`~perfguard.stats.options.ComparisonOptions`, its defaults when None) names
    the floors, levels, bootstrap and ``statistic`` below.

    Estimate: per worker ``i`` one log ratio ``r_i`` (:func:`worker_log_ratios`: for the median
    the median of the worker's per-round log ratios, else ``log(stat(b_i) / stat(a_i))`` with
    ``stat`` the ``statistic``); the ratio is ``exp(trimmed_mean_20%(r))``. Taking the ratio inside each process
    cancels the process's own offset and the machine drift of its time window (A and B are
    interleaved); the 20 % trimmed mean is robust to a worker whose ratio a drift burst bent, at
    94 % of the mean's efficiency (see :mod:`perfguard.stats.estimators`).

    Test: exact Wilcoxon signed-rank on the ``r_i`` (two-sided, Pratt zeros, mid-ranks). Workers,
    not timings, are the unit, so process-level effects (an A/A difference of 1-2 % that depends
    on which session was created first) are part of the noise instead of a false signal. Needs at
    least 6 workers for ``alpha = 0.05`` (the smallest attainable p is ``2 / 2**n``).

    Interval: bootstrap over workers (``n_boot`` resamples, ``seed``), expanded percentile
    (:mod:`perfguard.stats.bootstrap`) at ``confidence``, exponentiated to a ratio.

    Decision: :func:`perfguard.stats.verdict.decide` with ``floor = max(rel_floor, abs_floor /
    stat(all baseline values))``; ``mde`` from :func:`perfguard.stats.verdict.minimum_detectable_effect`.

    Assumptions: groups are paired by process (same index = same process) and A/B order inside a
    process was randomized, so under "no change" each ``r_i`` is symmetric about 0; workers are
    independent. Values must be positive and finite.

    Degenerate inputs: one worker gives an unbounded interval and ``unknown``; identical values
    give ratio 1, a zero-width interval and ``same``; empty or unequal groups, or non-positive
    values, raise ``ValueError`` (``TypeError`` for groups that are not lists of numbers): the
    callers validate the user's settings, so a bad call here is a programming error.
    """
    options = options if options is not None else ComparisonOptions()
    a = _as_matrix(a_groups, "baseline")
    b = _as_matrix(b_groups, "candidate")
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"paired comparison needs one candidate group per baseline group (same worker process); "
            f"got {a.shape[0]} baseline and {b.shape[0]} candidate groups"
        )
    n = a.shape[0]
    log_ratios = worker_log_ratios(a, b, options.statistic)
    estimate = float(trimmed_mean(log_ratios))
    p_value = signed_rank_test(log_ratios)
    if n >= 2:
        rng = np.random.default_rng(options.seed)
        boot = trimmed_mean(log_ratios[resample_units(n, options.n_boot, rng)], axis=1)
        low, high = percentile_interval(boot, n, options.confidence)
    else:
        low, high = -math.inf, math.inf
    # Quantiles of a discrete bootstrap distribution can round past the estimate; keep it inside.
    low, high = min(low, estimate), max(high, estimate)
    detectable = n >= min_pairs_for(options.alpha)
    return _finish(
        a,
        b,
        options,
        ratio=math.exp(estimate),
        ci=(math.exp(low), math.exp(high)),
        p_value=p_value,
        n=n,
        detectable=detectable,
        method="paired-wilcoxon",
    )


def compare_unpaired(
    a_groups: Groups,
    b_groups: Groups,
    options: ComparisonOptions | None = None,
) -> Comparison:
    """Unpaired comparison of a candidate run with a stored baseline run (different processes).

    ``options`` as for :func:`compare_paired`; when None, the defaults with ``rel_floor =``
    :data:`UNPAIRED_REL_FLOOR` (options passed in carry their own floor).

    Estimate: ratio of the medians (or ``statistic``) of all values of each side.

    Test: exact Mann-Whitney U (Wilcoxon rank-sum) on the *per-worker* medians, two-sided. Timings
    inside one process are correlated, so a test on pooled timings would count every value as
    independent evidence and flag process-level noise; one value per process keeps the size of the
    test at ``alpha`` within a run. With 3 + 3 workers p cannot go below 0.1; 4 + 4 reaches 0.029.

    Interval: cluster bootstrap: resample whole workers with replacement on each side
    independently, pool their values, take the ratio of the statistics; expanded percentile with
    ``n = min(n_a, n_b)`` at ``confidence``.

    Conservative by design: nothing inside one run can measure how far two runs drift apart (a
    different hour, machine state, thermal or frequency regime), so the default floor is 10 %
    (:data:`UNPAIRED_REL_FLOOR`) instead of the paired 2 %. Lower it only for baselines measured
    on the same machine within minutes. Prefer :func:`compare_paired` whenever both sides can be
    measured in the same job.

    Assumptions: workers independent within each side; values positive and finite. A flat list
    of timings can be passed as ``[[v] for v in values]`` only if each value came from its own
    process.
    """
    options = options if options is not None else ComparisonOptions(rel_floor=UNPAIRED_REL_FLOOR)
    statistic = options.statistic
    a = _as_matrix(a_groups, "baseline")
    b = _as_matrix(b_groups, "candidate")
    n_a, n_b = a.shape[0], b.shape[0]
    p_value = rank_sum_test(apply_statistic(a, statistic, axis=1), apply_statistic(b, statistic, axis=1))
    estimate = math.log(_pooled(b, statistic)) - math.log(_pooled(a, statistic))
    n = min(n_a, n_b)
    if n >= 2:
        rng = np.random.default_rng(options.seed)
        boot_a = _pooled_rows(a[resample_units(n_a, options.n_boot, rng)], statistic)
        boot_b = _pooled_rows(b[resample_units(n_b, options.n_boot, rng)], statistic)
        low, high = percentile_interval(np.log(boot_b) - np.log(boot_a), n, options.confidence)
    else:
        low, high = -math.inf, math.inf
    low, high = min(low, estimate), max(high, estimate)
    smallest_p = 2.0 / math.comb(n_a + n_b, n_a)
    return _finish(
        a,
        b,
        options,
        ratio=math.exp(estimate),
        ci=(math.exp(low), math.exp(high)),
        p_value=p_value,
        n=n,
        detectable=smallest_p <= options.alpha,
        method="unpaired-mann-whitney",
    )


def worker_log_ratios(a: FloatArray, b: FloatArray, statistic: str = "median") -> FloatArray:
    """One log ratio per worker (rows of ``a`` and ``b``, NaN-padded).

    For the median, when both sides timed the same rounds (equal row lengths, the same padding),
    the worker's ratio is the median of its *per-round* log ratios ``log(b_ir / a_ir)``: within a
    round the variants ran interleaved run by run in random order, so a round's ratio cancels the
    drift of that moment, which the ratio of the two medians only averages over the whole worker.
    On the 2-core machine's real timings of a 95 ms model (an A/A of one model under two node
    namings, 20 workers of 10 rounds, ``benchmarks/check_cost.py``'s ``aa_renamed``) the spread
    of the per-worker log ratios fell from 1.97 % to 1.27 %: the same precision from 0.4x the
    workers (``tests/test_stats_sim.py`` simulates the wander). Under no change each round's
    order is random, so every round's log ratio, and their median, is symmetric about 0 as the
    signed-rank test assumes. Other statistics (a percentile, the mean, min, max) describe the spread of a
    worker's timings, not a shift, and keep ``log(stat(b_i) / stat(a_i))``.
    """
    if statistic in ("median", "p50") and a.shape == b.shape and np.array_equal(np.isnan(a), np.isnan(b)):
        return np.asarray(apply_statistic(np.log(b) - np.log(a), "median", axis=1), dtype=np.float64)
    return np.log(apply_statistic(b, statistic, axis=1)) - np.log(apply_statistic(a, statistic, axis=1))


def _finish(
    a: FloatArray,
    b: FloatArray,
    options: ComparisonOptions,
    *,
    ratio: float,
    ci: tuple[float, float],
    p_value: float,
    n: int,
    detectable: bool,
    method: str,
) -> Comparison:
    alpha, confidence, statistic = options.alpha, options.confidence, options.statistic
    floor = max(options.rel_floor, options.abs_floor / _pooled(a, statistic))
    decision, direction, reason = decide(
        ratio=ratio,
        ci_low=ci[0],
        ci_high=ci[1],
        p_value=p_value,
        floor=floor,
        alpha=alpha,
        higher_is_worse=options.higher_is_worse,
        detectable=detectable,
        confidence=confidence,
    )
    if not detectable:
        reason += f" ({n} worker{'s' if n != 1 else ''}; {_needed(method, alpha)})"
    mde = minimum_detectable_effect(
        ci_low=ci[0],
        ci_high=ci[1],
        n=n,
        floor=floor,
        alpha=alpha,
        confidence=confidence,
        detectable=detectable,
    )
    return Comparison(
        decision=decision,
        direction=direction,
        ratio=ratio,
        ci_low=ci[0],
        ci_high=ci[1],
        p_value=p_value,
        mde=mde,
        n_pairs=n,
        baseline_median=_pooled(a, "median"),
        candidate_median=_pooled(b, "median"),
        floor=floor,
        reason=reason,
        method=method,
        statistic=statistic,
        alpha=alpha,
        confidence=confidence,
    )


def _needed(method: str, alpha: float) -> str:
    if method == "paired-wilcoxon":
        return f"p <= {alpha:g} needs >= {min_pairs_for(alpha)} paired workers"
    return f"p <= {alpha:g} needs more workers on each side"


def _pooled(matrix: FloatArray, statistic: str) -> float:
    """Statistic of all (non-padding) values of one side."""
    values = matrix[~np.isnan(matrix)]
    return float(apply_statistic(values, statistic))


def _pooled_rows(resampled: FloatArray, statistic: str) -> FloatArray:
    """Statistic of the pooled values of each bootstrap resample, shape (n_boot, workers, m)."""
    flat = resampled.reshape(resampled.shape[0], -1)
    return apply_statistic(flat, statistic, axis=1)


def _as_matrix(groups: Groups, side: str) -> FloatArray:
    """Validate worker groups and pack them into a (workers, max_len) array padded with NaN."""
    if isinstance(groups, np.ndarray) and groups.ndim == 2 and groups.dtype.kind in "fiu":
        rows: list[FloatArray] = list(groups.astype(np.float64))
    else:
        if isinstance(groups, (str, bytes)) or not isinstance(groups, Sequence | np.ndarray):
            raise TypeError(
                f"{side}: expected a list of worker groups (lists of numbers), got {groups!r:.80}"
            )
        rows = [_as_row(group, side, i) for i, group in enumerate(groups)]
    if not rows:
        raise ValueError(f"{side}: no worker groups (need at least one group with at least one value)")
    for i, row in enumerate(rows):
        if row.size == 0:
            raise ValueError(f"{side}: worker group {i} is empty")
        bad = ~np.isfinite(row) | (row <= 0)
        if bad.any():
            raise ValueError(
                f"{side}: worker group {i} has a non-positive or non-finite value {float(row[bad][0])!r}; "
                "expected positive timings (seconds) or sizes"
            )
    width = max(row.size for row in rows)
    if all(row.size == width for row in rows):
        return np.stack(rows)
    matrix = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        matrix[i, : row.size] = row
    return matrix


def _as_row(group: object, side: str, index: int) -> FloatArray:
    if isinstance(group, (str, bytes)) or not isinstance(group, Sequence | np.ndarray):
        raise TypeError(
            f"{side}: worker group {index} must be a list of numbers, got {group!r:.80} "
            "(pass one list per worker process, e.g. [[0.0051, 0.0050], [0.0052, 0.0049]])"
        )
    try:
        return np.asarray(group, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{side}: worker group {index} is not all numbers: {group!r:.80}") from exc
