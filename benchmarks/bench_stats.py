"""How long do the statistics of one comparison take? (pytest-benchmark; not part of the test run)

    .venv/bin/python -m pytest benchmarks/bench_stats.py --benchmark-only -p no:cacheprovider

A check compares every case and metric at every look, so the paired comparison (bootstrap over
workers, exact signed-rank test) must stay cheap next to the seconds of measurement behind it.
"""

from __future__ import annotations

import numpy as np
import pytest

from perfguard.stats import bh_adjust, compare_paired, compare_unpaired


def _groups(workers: int, values: int, shift: float, seed: int) -> tuple[list[list[float]], list[list[float]]]:
    rng = np.random.default_rng(seed)
    offsets = 1 + 0.015 * rng.standard_normal(workers)
    a = [list(o * 1e-3 * (1 + 0.03 * rng.standard_normal(values))) for o in offsets]
    b = [list(o * 1e-3 * (1 + shift) * (1 + 0.03 * rng.standard_normal(values))) for o in offsets]
    return a, b


@pytest.mark.parametrize("workers", [8, 20])
def test_paired_comparison(benchmark, workers):
    a, b = _groups(workers, 10, 0.05, 1)
    result = benchmark(compare_paired, a, b)
    assert result.decision == "different"


def test_unpaired_comparison(benchmark):
    a, b = _groups(10, 10, 0.0, 2)
    result = benchmark(compare_unpaired, a, b)
    assert result.decision != "different"


def test_benjamini_hochberg_over_a_large_check(benchmark):
    p_values = list(np.random.default_rng(3).uniform(size=500))
    adjusted = benchmark(bh_adjust, p_values)
    assert len(adjusted) == 500
