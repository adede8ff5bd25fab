"""Unit tests for perfguard.stats: known numbers, parsing, degenerate inputs.

Simulated A/A false-positive rates, power and coverage live in tests/test_stats_sim.py.
"""

from __future__ import annotations

import itertools
import json
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from perfguard.compare.verdicts import Verdict
from perfguard.errors import UserError
from perfguard.results import CaseEntry
from perfguard.stats import (
    UNPAIRED_REL_FLOOR,
    Comparison,
    ComparisonOptions,
    Threshold,
    adaptive_compare,
    benjamini_hochberg,
    bh_adjust,
    compare_deterministic,
    compare_paired,
    compare_unpaired,
    parse_threshold,
    planned_looks,
)
from perfguard.stats.bootstrap import expanded_tail, percentile_interval
from perfguard.stats.estimators import apply_statistic, average_ranks, normal_cdf, t_quantile, trimmed_mean
from perfguard.stats.rank_tests import min_pairs_for, rank_sum_test, signed_rank_test
from perfguard.stats.verdict import decide, minimum_detectable_effect
from perfguard.suite.gates import CheckSettings

from .factories import case_entry
from .test_stats_sim import REALISTIC, simulate, simulated_check

# --------------------------------------------------------------------------------------------
# thresholds


@pytest.mark.parametrize(
    ("text", "statistic", "relative", "absolute"),
    [
        ("median:3%", "median", 0.03, None),
        ("p90:0.5ms", "p90", None, 0.0005),
        ("median:2%", "median", 0.02, None),
        ("mean:1.5%", "mean", 0.015, None),
        ("median:200us", "median", None, 200e-6),
        ("median:200\u00b5s", "median", None, 200e-6),
        ("median:200\u03bcs", "median", None, 200e-6),
        ("min:50ns", "min", None, 50e-9),
        ("p99:1s", "p99", None, 1.0),
        ("max:0", "max", None, 0.0),
        ("5%", "median", 0.05, None),
        ("0.5%", "median", 0.005, None),
        ("  p50 : 3 %  ", "p50", 0.03, None),
        ("Median:3%", "median", 0.03, None),
        ("median:10MB", "median", None, 10e6),
        ("max:2MiB", "max", None, 2 * 1024**2),
        ("max:512KiB", "max", None, 512 * 1024),
        ("max:64KB", "max", None, 64e3),
        ("max:100B", "max", None, 100.0),
        ("median:1e-1ms", "median", None, 1e-4),
    ],
)
def test_parse_threshold_accepts(
    text: str, statistic: str, relative: float | None, absolute: float | None
) -> None:
    threshold = parse_threshold(text)
    assert threshold.statistic == statistic
    if relative is None:
        assert threshold.relative is None
    else:
        assert threshold.relative == pytest.approx(relative, rel=1e-12)
    if absolute is None:
        assert threshold.absolute is None
    else:
        assert threshold.absolute == pytest.approx(absolute, rel=1e-12)


def test_percentage_is_a_fraction_never_confused() -> None:
    assert parse_threshold("3%").relative == pytest.approx(0.03)
    with pytest.raises(UserError, match=r"0\.03.*write 3% or 0\.5ms"):
        parse_threshold("median:0.03")
    with pytest.raises(UserError, match="write 3% or 0.5ms"):
        parse_threshold("3", kind="time")


@pytest.mark.parametrize(
    ("text", "kind", "fragment"),
    [
        ("median:3", None, "bare number 3 is ambiguous"),
        ("p90:0.5", "time", "write 3% or 0.5ms"),
        ("p90:5", "memory", "write 3% or 10MB"),
        ("median:-3%", None, ">= 0"),
        ("median:3ms", "memory", "unit 'ms' is not valid here"),
        ("max:10MB", "time", "unit 'MB' is not valid here"),
        ("max:3ms", "count", "write 3% or a count"),
        ("median:3 parsecs", None, "unit 'parsecs' is not valid"),
        ("median:3 light years", None, "cannot read the amount"),
        ("median:", None, "cannot read the amount"),
        ("mdian:3%", None, "did you mean 'median'"),
        ("p100:3%", None, "unknown statistic 'p100'"),
        ("p0:3%", None, "unknown statistic 'p0'"),
        ("median:3%%", None, "cannot read the amount"),
        ("median:nan%", None, "cannot read the amount"),
        ("median:3kms", None, "unit 'kms' is not valid"),
    ],
)
def test_parse_threshold_refuses(text: str, kind: str | None, fragment: str) -> None:
    with pytest.raises(UserError) as info:
        parse_threshold(text, kind=kind)  # type: ignore[arg-type]
    message = str(info.value)
    assert fragment in message
    assert repr(text) in message or text.strip() in message


def test_parse_threshold_counts_and_kinds() -> None:
    assert parse_threshold("max:5", kind="count") == Threshold("max", absolute=5.0)
    assert parse_threshold("max:2%", kind="count") == Threshold("max", relative=0.02)
    assert parse_threshold("max:0", kind="memory").absolute == 0.0
    with pytest.raises(UserError, match="unknown metric kind"):
        parse_threshold("3%", kind="energy")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="must be a string"):
        parse_threshold(0.03)  # type: ignore[arg-type]


def test_threshold_value_object() -> None:
    assert str(parse_threshold("median:3%")) == "median:3%"
    assert str(parse_threshold("p90:0.5ms")) == "p90:0.0005s"
    assert str(parse_threshold("max:2MiB")) == "max:2097152B"
    assert str(parse_threshold("max:3", kind="count")) == "max:3"
    for text in ("median:3%", "p90:0.5ms", "max:2MiB", "max:0", "p95:200us"):
        assert parse_threshold(str(parse_threshold(text))) == parse_threshold(text)
    # The gates of a check are read through perfguard.suite.gates.Gate; the old helper is gone.
    assert not hasattr(Threshold, "compare_kwargs")
    with pytest.raises(UserError, match="exactly one"):
        Threshold("median", relative=0.1, absolute=1.0)
    with pytest.raises(UserError, match="exactly one"):
        Threshold("median")
    with pytest.raises(UserError, match="unknown statistic"):
        Threshold("average", relative=0.1)


# --------------------------------------------------------------------------------------------
# estimators, rank tests, bootstrap


def test_statistics_by_name() -> None:
    values = np.array([[1.0, 2.0, 3.0, 4.0, 100.0]])
    assert apply_statistic(values, "median", axis=1)[0] == 3.0
    assert apply_statistic(values, "mean", axis=1)[0] == 22.0
    assert apply_statistic(values, "min", axis=1)[0] == 1.0
    assert apply_statistic(values, "max", axis=1)[0] == 100.0
    assert apply_statistic(values, "p50", axis=1)[0] == 3.0
    assert apply_statistic(values, "p75", axis=1)[0] == 4.0
    padded = np.array([[1.0, 2.0, 3.0, np.nan], [4.0, 5.0, 6.0, 7.0]])
    assert apply_statistic(padded, "median", axis=1).tolist() == [2.0, 5.5]


def test_trimmed_mean_known_values() -> None:
    assert trimmed_mean(np.array([1.0, 2.0, 3.0, 4.0])) == 2.5  # n < 5: plain mean
    assert trimmed_mean(np.array([-50.0, 1.0, 2.0, 3.0, 90.0])) == 2.0  # drops one per end
    ten = np.array([-9.0, -8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 70.0, 80.0])
    assert trimmed_mean(ten) == 3.5  # drops two per end
    rows = np.array([[1.0, 2.0, 3.0, 4.0, 100.0], [0.0, 0.0, 1.0, 1.0, 1.0]])
    assert trimmed_mean(rows, axis=1).tolist() == [3.0, 2.0 / 3.0]


def test_signed_rank_matches_scipy_without_ties() -> None:
    rng = np.random.default_rng(3)
    for n in (2, 5, 6, 9, 14, 25):
        d = rng.normal(0.4, 1.0, n)
        assert signed_rank_test(d) == pytest.approx(sps.wilcoxon(d, method="exact").pvalue, rel=1e-9)


def test_signed_rank_exact_with_ties_and_zeros_by_enumeration() -> None:
    d = np.array([0.5, -0.5, 1.0, 1.5, 0.0, 0.0, 2.0, -3.0, 2.0])
    ranks = sps.rankdata(np.abs(d))
    nonzero = d != 0
    total = ranks[nonzero].sum()
    observed = ranks[nonzero & (d > 0)].sum()
    hits = sum(
        abs(np.dot(ranks[nonzero], signs) - total / 2) >= abs(observed - total / 2) - 1e-9
        for signs in itertools.product((0, 1), repeat=int(nonzero.sum()))
    )
    assert signed_rank_test(d) == pytest.approx(hits / 2 ** int(nonzero.sum()))
    assert signed_rank_test(np.zeros(7)) == 1.0
    assert signed_rank_test(np.full(6, 0.01)) == pytest.approx(2 / 64)
    assert signed_rank_test(np.full(5, 0.01)) == pytest.approx(2 / 32)


def test_signed_rank_large_n_uses_normal_approximation() -> None:
    d = np.random.default_rng(4).normal(0.1, 1.0, 150)
    assert signed_rank_test(d) == pytest.approx(sps.wilcoxon(d, method="approx").pvalue, rel=0.02)


def test_min_pairs_for_alpha() -> None:
    assert min_pairs_for(0.05) == 6
    assert min_pairs_for(0.0625) == 5
    assert min_pairs_for(0.0125) == 8
    with pytest.raises(ValueError):
        min_pairs_for(0.0)


def test_rank_sum_matches_scipy_and_enumeration() -> None:
    rng = np.random.default_rng(5)
    for n_x, n_y in ((3, 4), (5, 5), (10, 12)):
        x, y = rng.normal(0, 1, n_x), rng.normal(0.7, 1, n_y)
        assert rank_sum_test(x, y) == pytest.approx(sps.mannwhitneyu(x, y, method="exact").pvalue, rel=1e-9)
    x, y = np.array([1.0, 1.0, 2.0, 2.0, 3.0]), np.array([2.0, 3.0, 3.0, 4.0, 4.0, 5.0])
    ranks = sps.rankdata(np.r_[x, y])
    center = 5 * 12 / 2
    observed = ranks[:5].sum()
    splits = list(itertools.combinations(range(11), 5))
    hits = sum(abs(ranks[list(s)].sum() - center) >= abs(observed - center) - 1e-9 for s in splits)
    assert rank_sum_test(x, y) == pytest.approx(hits / len(splits))


def test_rank_sum_large_samples_use_normal_approximation() -> None:
    rng = np.random.default_rng(6)
    x, y = rng.normal(0, 1, 40), np.round(rng.normal(0.5, 1, 35), 1)  # rounded: ties
    expected = sps.mannwhitneyu(x, y, method="asymptotic", use_continuity=False).pvalue
    assert rank_sum_test(x, y) == pytest.approx(expected, rel=1e-6)
    x, y = rng.normal(0, 1, 30), rng.normal(0.5, 1, 30)  # exact at the boundary
    assert rank_sum_test(x, y) == pytest.approx(sps.mannwhitneyu(x, y, method="exact").pvalue, rel=1e-9)


def test_expanded_percentile_tail() -> None:
    # Phi(-sqrt(10/9) * t_9(0.975)) = Phi(-2.384)
    assert expanded_tail(10, 0.95) == pytest.approx(sps.norm.cdf(-math.sqrt(10 / 9) * sps.t.ppf(0.975, 9)))
    assert expanded_tail(10, 0.95) == pytest.approx(0.00856, abs=1e-4)
    assert expanded_tail(1000, 0.95) == pytest.approx(0.025, abs=3e-4)
    assert math.isnan(expanded_tail(1, 0.95))
    assert percentile_interval(np.arange(5.0), 1, 0.95) == (-math.inf, math.inf)


# --------------------------------------------------------------------------------------------
# decision rule and MDE


def _decide(ratio: float, low: float, high: float, p: float, floor: float = 0.02) -> tuple[str, str]:
    decision, direction, _ = decide(
        ratio=ratio,
        ci_low=low,
        ci_high=high,
        p_value=p,
        floor=floor,
        alpha=0.05,
        higher_is_worse=True,
        detectable=True,
        confidence=0.95,
    )
    return decision, direction


def test_decision_rule_table() -> None:
    assert _decide(1.05, 1.03, 1.07, 0.01) == ("different", "regression")
    assert _decide(0.95, 0.93, 0.97, 0.01) == ("different", "improvement")
    assert _decide(1.025, 1.01, 1.04, 0.01) == ("different", "regression")  # estimate beyond the floor
    assert _decide(1.015, 1.01, 1.02, 0.01) == ("same", "none")  # real but negligible
    assert _decide(1.015, 1.005, 1.03, 0.01) == ("unknown", "none")  # significant, within floor, CI too wide
    assert _decide(1.05, 0.99, 1.11, 0.01) == ("unknown", "none")  # CI includes 1: no verdict
    assert _decide(1.05, 1.01, 1.09, 0.06) == ("unknown", "none")  # p above alpha
    assert _decide(1.0, 0.99, 1.01, 0.9) == ("same", "none")
    assert _decide(1.0, 1.0, 1.0, 1.0, floor=0.0) == ("same", "none")
    decision, direction, _ = decide(
        ratio=1.05, ci_low=1.03, ci_high=1.07, p_value=0.01, floor=0.02, alpha=0.05,
        higher_is_worse=False, detectable=True, confidence=0.95,
    )  # fmt: skip
    assert (decision, direction) == ("different", "improvement")


def test_mde_formula() -> None:
    t975, t80 = sps.t.ppf(0.975, 9), sps.t.ppf(0.8, 9)
    se = 0.01
    low, high = math.exp(-t975 * se), math.exp(t975 * se)
    got = minimum_detectable_effect(
        ci_low=low, ci_high=high, n=10, floor=0.0, alpha=0.05, confidence=0.95, detectable=True
    )
    assert got == pytest.approx(math.expm1((t975 + t80) * se))
    with_floor = minimum_detectable_effect(
        ci_low=low, ci_high=high, n=10, floor=0.05, alpha=0.05, confidence=0.95, detectable=True
    )
    assert with_floor == pytest.approx(math.expm1(math.log(1.05) + t80 * se))
    assert (
        minimum_detectable_effect(
            ci_low=low, ci_high=high, n=5, floor=0.0, alpha=0.05, confidence=0.95, detectable=False
        )
        == math.inf
    )


# --------------------------------------------------------------------------------------------
# compare_paired on fixed samples and degenerate inputs


def _groups(rng: np.random.Generator, workers: int, values: int, scale: float = 1.0) -> np.ndarray:
    process = np.exp(0.02 * rng.standard_normal((workers, 1)))
    return 5e-3 * scale * process * np.exp(0.03 * rng.standard_normal((workers, values)))


def test_paired_detects_a_clear_regression_and_improvement() -> None:
    rng = np.random.default_rng(11)
    a = _groups(rng, 10, 10)
    slower = compare_paired(a, a * 1.10 * np.exp(0.01 * rng.standard_normal(a.shape)))
    assert (slower.decision, slower.direction) == ("different", "regression")
    assert slower.is_regression
    assert slower.ci_low < slower.ratio < slower.ci_high
    assert slower.ci_low > 1.07 and slower.ci_high < 1.13
    assert slower.p_value == pytest.approx(2 / 2**10)
    assert slower.n_pairs == 10 and slower.floor == 0.02
    assert slower.mde < 0.05
    assert "regression" in slower.reason
    faster = compare_paired(a, a * 0.9)
    assert (faster.decision, faster.direction, faster.is_regression) == ("different", "improvement", False)
    throughput = compare_paired(a, a * 0.9, ComparisonOptions(higher_is_worse=False))
    assert throughput.direction == "regression"


def test_paired_accepts_lists_and_ragged_groups() -> None:
    rng = np.random.default_rng(12)
    a = [list(row[: 5 + i % 3]) for i, row in enumerate(_groups(rng, 8, 8))]
    b = [[v * 1.2 for v in row] for row in a]
    result = compare_paired(a, b)
    assert result.ratio == pytest.approx(1.2)
    assert result.decision == "different"
    assert result.baseline_median == pytest.approx(float(np.median(np.concatenate(a))))
    assert result.candidate_median == pytest.approx(1.2 * result.baseline_median)


def test_paired_is_deterministic_for_a_seed() -> None:
    rng = np.random.default_rng(13)
    a, b = _groups(rng, 10, 10), _groups(rng, 10, 10)
    assert compare_paired(a, b, ComparisonOptions(seed=3)) == compare_paired(a, b, ComparisonOptions(seed=3))


def test_paired_identical_values_are_same() -> None:
    a = [[0.005] * 5 for _ in range(4)]
    result = compare_paired(a, a)
    assert (result.decision, result.ratio, result.ci_low, result.ci_high) == ("same", 1.0, 1.0, 1.0)
    assert result.p_value == 1.0
    assert compare_paired(a, a, ComparisonOptions(rel_floor=0.0)).decision == "same"


def test_paired_zero_variance_shift() -> None:
    a = [[0.005] * 5 for _ in range(8)]
    b = [[0.0055] * 5 for _ in range(8)]
    result = compare_paired(a, b)
    assert result.decision == "different" and result.direction == "regression"
    assert result.ratio == pytest.approx(1.1) and result.ci_low == pytest.approx(1.1)
    few = compare_paired(a[:5], b[:5])
    assert few.decision == "unknown"
    assert "too few workers" in few.reason and ">= 6 paired workers" in few.reason
    assert few.mde == math.inf


def test_paired_one_worker_and_one_value_per_worker() -> None:
    one = compare_paired([[1.0, 1.1, 0.9]], [[2.0, 2.1, 1.9]])
    assert one.decision == "unknown" and one.n_pairs == 1
    assert one.ci_low == 0.0 and one.ci_high == math.inf and one.mde == math.inf
    assert one.ratio == pytest.approx(2.0)
    rng = np.random.default_rng(14)
    a = _groups(rng, 12, 1)
    single = compare_paired(a, a * 1.3)
    assert single.decision == "different" and single.ratio == pytest.approx(1.3)


def test_paired_absolute_floor_uses_the_baseline() -> None:
    a = [[1e-3] * 3 for _ in range(8)]
    b = [[1.01e-3] * 3 for _ in range(8)]
    # 1 % slower; an absolute floor of 50 us on a 1 ms case is a 5 % floor
    result = compare_paired(a, b, ComparisonOptions(rel_floor=0.0, abs_floor=50e-6))
    assert result.floor == pytest.approx(0.05)
    assert result.decision == "same"
    assert compare_paired(a, b, ComparisonOptions(rel_floor=0.0)).decision == "different"


def test_paired_other_statistic() -> None:
    rng = np.random.default_rng(15)
    a = _groups(rng, 10, 20)
    b = a.copy()
    b[:, -1] *= 3.0  # only the worst value of each worker gets slower
    assert compare_paired(a, b).decision == "same"
    assert compare_paired(a, b, ComparisonOptions(statistic="max")).decision == "different"
    assert compare_paired(a, b, ComparisonOptions(statistic="max")).statistic == "max"


@pytest.mark.parametrize(
    ("a", "b", "fragment"),
    [
        ([], [], "baseline: no worker groups"),
        ([[1.0]], [], "candidate: no worker groups"),
        ([[1.0], []], [[1.0], [1.0]], "baseline: worker group 1 is empty"),
        ([[1.0], [1.0]], [[1.0]], "one candidate group per baseline group"),
        ([[1.0, 0.0]], [[1.0, 1.0]], "non-positive"),
        ([[1.0, -2.0]], [[1.0, 1.0]], "non-positive"),
        ([[1.0]], [[float("nan")]], "non-finite"),
        ([[1.0]], [[float("inf")]], "non-finite"),
        ([1.0, 2.0], [1.0, 2.0], "must be a list of numbers"),
        ([["a"]], [[1.0]], "not all numbers"),
        ("1,2", [[1.0]], "expected a list of worker groups"),
    ],
)
def test_paired_refuses_bad_input(a: object, b: object, fragment: str) -> None:
    with pytest.raises((ValueError, TypeError), match=fragment):  # programming errors, not UserError
        compare_paired(a, b)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "value", "fragment"),
    [
        ("rel_floor", -0.01, "rel_floor"),
        ("abs_floor", -1.0, "abs_floor"),
        ("alpha", 0.0, "alpha"),
        ("confidence", 1.0, "confidence"),
        ("n_boot", 10, "n_boot"),
        ("statistic", "p100", "unknown statistic"),
    ],
)
def test_paired_refuses_bad_options(option: str, value: object, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        compare_paired([[1.0]], [[1.0]], ComparisonOptions(**{option: value}))  # type: ignore[arg-type]


def test_comparison_to_json_is_strict_json() -> None:
    one = compare_paired([[1.0]], [[2.0]])
    text = json.dumps(one.to_json(), allow_nan=False, sort_keys=True)
    assert json.loads(text)["ci_high"] is None
    assert set(one.to_json()) >= {
        "decision",
        "direction",
        "ratio",
        "ci_low",
        "ci_high",
        "p_value",
        "mde",
        "reason",
    }


def test_comparison_from_json_reads_its_json_back_and_names_a_bad_field() -> None:
    from perfguard.errors import FieldError
    from perfguard.stats.verdict import Comparison

    one = compare_paired([[1.0]], [[2.0]])  # a single pair: an infinite interval and mde, written as null
    back = Comparison.from_json(json.loads(json.dumps(one.to_json(), allow_nan=False)))
    assert back.decision == one.decision and back.ratio == one.ratio and back.n_pairs == one.n_pairs
    assert math.isnan(back.ci_high) and back.mde == math.inf
    defaults = {k: v for k, v in one.to_json().items() if k not in ("alpha", "confidence", "statistic")}
    assert Comparison.from_json(defaults).alpha == 0.05
    with pytest.raises(FieldError, match="'decision' must be same or different or unknown"):
        Comparison.from_json({**one.to_json(), "decision": "worse"})
    with pytest.raises(FieldError, match="missing field 'ratio'"):
        Comparison.from_json({k: v for k, v in one.to_json().items() if k != "ratio"})


# --------------------------------------------------------------------------------------------
# compare_unpaired


#: The options ``compare_unpaired`` defaults to (the across-runs floor), with fewer resamples.
ACROSS_RUNS_500 = ComparisonOptions(rel_floor=UNPAIRED_REL_FLOOR, n_boot=500)
ACROSS_RUNS_200 = ComparisonOptions(rel_floor=UNPAIRED_REL_FLOOR, n_boot=200)


def test_unpaired_detects_large_change_and_refuses_small_one() -> None:
    rng = np.random.default_rng(21)
    a, b = _groups(rng, 10, 10), _groups(rng, 10, 10, scale=1.25)
    result = compare_unpaired(a, b, ACROSS_RUNS_500)
    assert (result.decision, result.direction) == ("different", "regression")
    assert result.method == "unpaired-mann-whitney" and result.floor == 0.10
    assert result.ratio == pytest.approx(float(np.median(b) / np.median(a)))
    small = compare_unpaired(a, _groups(rng, 10, 10, scale=1.05), ACROSS_RUNS_500)
    assert small.decision != "different"  # 5 % between runs is inside the 10 % cross-run floor


def test_unpaired_degenerate_inputs() -> None:
    same = compare_unpaired([[1.0, 1.0]] * 4, [[1.0, 1.0]] * 5, ACROSS_RUNS_200)
    assert (same.decision, same.ratio, same.ci_low, same.ci_high) == ("same", 1.0, 1.0, 1.0)
    lone = compare_unpaired([[1.0, 1.1]], [[2.0, 2.1]], ACROSS_RUNS_200)
    assert lone.decision == "unknown" and lone.mde == math.inf
    tiny = compare_unpaired([[1.0]] * 3, [[2.0]] * 3, ACROSS_RUNS_200)  # smallest p is 0.1
    assert tiny.decision == "unknown" and "more workers" in tiny.reason
    with pytest.raises(ValueError, match="empty"):
        compare_unpaired([[1.0], []], [[1.0]])


# --------------------------------------------------------------------------------------------
# Benjamini-Hochberg


def test_bh_hand_computed_example() -> None:
    # m = 5, q = 0.05: lines k*q/m = 0.01, 0.02, 0.03, 0.04, 0.05.
    # sorted p: 0.005 <= 0.01 yes, 0.011 <= 0.02 yes, 0.039 > 0.03, 0.04 <= 0.04 yes -> k = 4.
    p = [0.04, 0.005, 0.2, 0.011, 0.039]
    assert benjamini_hochberg(p, q=0.05) == [True, True, False, True, True]
    # adjusted: 5p/rank = 0.025, 0.0275, 0.065, 0.05, 0.2 -> running min from the top
    # = 0.025, 0.0275, 0.05, 0.05, 0.2
    assert bh_adjust(p) == pytest.approx([0.05, 0.025, 0.2, 0.0275, 0.05])


def test_bh_step_up_rescues_a_p_value_above_its_line() -> None:
    # sorted 0.01, 0.03, 0.031: lines 0.0167, 0.0333, 0.05 -> k = 3; all rejected though 0.03 > 0.0167
    assert benjamini_hochberg([0.031, 0.01, 0.03], q=0.05) == [True, True, True]


def test_bh_ties_and_edges() -> None:
    p = [0.02, 0.02, 0.02, 0.5]
    # 4 * 0.02 / 3 = 0.0267 for all three tied values
    assert bh_adjust(p) == pytest.approx([0.08 / 3] * 3 + [0.5])
    assert benjamini_hochberg(p, q=0.03) == [True, True, True, False]
    assert benjamini_hochberg(p, q=0.02) == [False, False, False, False]
    assert benjamini_hochberg([], q=0.05) == []
    assert benjamini_hochberg([0.0, 1.0]) == [True, False]
    assert bh_adjust([1.0, 1.0]) == [1.0, 1.0]


def test_bh_nan_counts_in_m_and_is_never_rejected() -> None:
    with_nan = bh_adjust([0.01, float("nan"), 0.04])
    assert (
        with_nan[0] == pytest.approx(0.03) and math.isnan(with_nan[1]) and with_nan[2] == pytest.approx(0.06)
    )
    assert benjamini_hochberg([0.01, float("nan"), 0.04], q=0.05) == [True, False, False]
    assert benjamini_hochberg([0.01, 0.04], q=0.05) == [True, True]


def test_bh_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bh_adjust([0.5, 1.5])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bh_adjust([-0.1])
    with pytest.raises(TypeError, match="must be numbers"):
        bh_adjust(["x"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="FDR level"):
        benjamini_hochberg([0.1], q=0.0)


def test_bh_matches_scipy() -> None:
    p = np.random.default_rng(31).uniform(0, 0.2, 40) ** 2
    assert bh_adjust(p.tolist()) == pytest.approx(sps.false_discovery_control(p, method="bh").tolist())


# --------------------------------------------------------------------------------------------
# deterministic metrics


def test_deterministic_any_change_is_reported() -> None:
    grew = compare_deterministic(812, 815)
    assert (grew.decision, grew.direction) == ("different", "regression")
    assert grew.ratio == grew.ci_low == grew.ci_high == pytest.approx(815 / 812)
    assert grew.p_value == 0.0 and grew.mde == 0.0 and grew.method == "deterministic"
    assert "812 -> 815 (+3" in grew.reason
    shrank = compare_deterministic(812, 809)
    assert (shrank.decision, shrank.direction) == ("different", "improvement")
    same = compare_deterministic(812, 812)
    assert (same.decision, same.direction, same.p_value) == ("same", "none", 1.0)
    assert isinstance(same, Comparison)


def test_deterministic_gate_by_threshold() -> None:
    within = compare_deterministic(812, 815, parse_threshold("max:5", kind="count"))
    assert (within.decision, within.direction) == ("same", "regression")
    assert not within.is_regression and "within max:5" in within.reason
    assert compare_deterministic(812, 818, parse_threshold("max:5", kind="count")).is_regression
    assert compare_deterministic(1000, 1020, parse_threshold("max:2%", kind="count")).decision == "same"
    assert compare_deterministic(1000, 1021, parse_threshold("max:2%", kind="count")).decision == "different"
    size = compare_deterministic(10e6, 10.5e6, parse_threshold("max:1MiB", kind="memory"))
    assert size.decision == "same" and size.floor == pytest.approx(1024**2 / 10e6)
    assert compare_deterministic(100, 90, higher_is_worse=False).direction == "regression"


def test_deterministic_from_zero_and_bad_values() -> None:
    from_zero = compare_deterministic(0, 3, parse_threshold("max:50%", kind="count"))
    assert from_zero.ratio == math.inf and from_zero.decision == "different"
    assert compare_deterministic(0, 0).decision == "same"
    for bad in (-1, float("nan"), float("inf"), "3", True):
        with pytest.raises(ValueError, match="finite number >= 0"):
            compare_deterministic(bad, 1)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# adaptive sampling: mechanics (rates are in test_stats_sim.py)


class _Source:
    """A fake measurement: every call returns new paired groups with a fixed true ratio."""

    def __init__(self, ratio: float, seed: int = 0, values: int = 10) -> None:
        self.rng = np.random.default_rng(seed)
        self.ratio = ratio
        self.values = values
        self.calls: list[int] = []

    def __call__(self, n: int) -> tuple[list[list[float]], list[list[float]]]:
        self.calls.append(n)
        a = _groups(self.rng, n, self.values)
        b = a * self.ratio * np.exp(0.03 * self.rng.standard_normal(a.shape))
        return a.tolist(), b.tolist()


def test_planned_looks() -> None:
    assert planned_looks(8, 4, 20) == 4
    assert planned_looks(8, 4, 21) == 5
    assert planned_looks(10, 5, 10) == 1


def test_adaptive_stops_at_once_on_a_big_effect() -> None:
    source = _Source(1.3)
    result = adaptive_compare(source, ComparisonOptions(n_boot=500))
    assert result.looks == 1 and result.n_workers == 8 and source.calls == [8]
    assert result.comparison.is_regression and result.stopped_early
    # Half of alpha at the first look, the rest split over the three later ones; sums to alpha.
    assert result.alpha_by_look == pytest.approx((0.025, 0.025 / 3, 0.025 / 3, 0.025 / 3))
    assert result.confidence_by_look == pytest.approx(tuple(1 - a for a in result.alpha_by_look))
    assert result.comparison.alpha == pytest.approx(0.025)


def test_adaptive_grows_to_the_cap_when_undecided() -> None:
    source = _Source(1.02, seed=1, values=3)
    result = adaptive_compare(source, ComparisonOptions(rel_floor=0.02, n_boot=300), max_workers=18)
    assert source.calls[0] == 8 and all(n <= 4 for n in source.calls[1:])
    assert result.n_workers == sum(source.calls) <= 18
    assert result.looks == len(source.calls) <= result.max_looks == 4
    assert len(result.history) == result.looks


def test_adaptive_handles_short_batches_and_bad_callables() -> None:
    calls: list[int] = []

    def dwindling(n: int) -> tuple[list[list[float]], list[list[float]]]:
        calls.append(n)
        if len(calls) > 1:
            return [], []
        return [[1.0, 1.01]] * n, [[1.0, 1.02]] * n

    result = adaptive_compare(dwindling, ComparisonOptions(rel_floor=0.0, n_boot=200), initial_workers=6)
    assert result.n_workers == 6 and len(calls) == 2

    with pytest.raises(ValueError, match="must be paired"):
        adaptive_compare(lambda n: ([[1.0]] * n, [[1.0]] * (n - 1)))
    with pytest.raises(TypeError, match=r"must return \(a_groups, b_groups\)"):
        adaptive_compare(lambda n: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="max_workers"):
        adaptive_compare(lambda n: ([], []), initial_workers=10, max_workers=5)
    with pytest.raises(ValueError, match=">= 1"):
        adaptive_compare(lambda n: ([], []), step_workers=0)


# --------------------------------------------------------------------------------------------
# the production loop (perfguard.compare.check.adaptive_check): levels, families, first look


def _check(shifts: tuple[float, ...], seed: int = 5, **options: Any) -> tuple[list[Verdict], dict, dict[str, int]]:
    a, b = simulate(np.random.default_rng(seed), len(shifts), 20, 10, **REALISTIC)
    a, b = a.copy(), b.copy()
    for c, shift in enumerate(shifts):
        b[c] *= 1.0 + shift
    return simulated_check(a, b, **options)


@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_check_levels_come_from_the_settings(alpha: float) -> None:
    rows, info, _ = _check((0.0, 0.01), settings=CheckSettings(alpha=alpha))
    for row in rows:
        c = row.comparison
        if row.metric == "latency":  # the level of the look that decided it, never a fixed 0.05
            assert c.confidence == pytest.approx(1 - c.alpha)
        elif row.metric == "compile_time":  # measured once: one look at alpha
            assert c.alpha == pytest.approx(alpha) and c.confidence == pytest.approx(1 - alpha)
    from perfguard.stats.adaptive import SequentialPlan

    levels = list(info.alpha_by_look)
    assert len(levels) == info.looks_planned == 4
    assert sum(levels) == pytest.approx(alpha)
    assert levels == list(SequentialPlan(8, 4, 20, alpha).levels)
    assert list(info.confidence_by_look) == pytest.approx([1 - x for x in levels])
    assert all(r.comparison.alpha in levels for r in rows if r.metric == "latency")


@pytest.mark.parametrize("shifts", [(0.18, 0.18), (0.18, 0.0)])
def test_compile_time_does_not_dilute_a_first_look_regression(shifts: tuple[float, ...]) -> None:
    """Issue 10: two models, +18 %, 8 workers: the exact test's smallest p (2/256) must not be
    pushed over the first look's level by the compile-time p-values of the same check."""
    rows, info, workers = _check(shifts)
    latency = [r for r in rows if r.metric == "latency"]
    compile_rows = [r for r in rows if r.metric == "compile_time"]
    for row, shift in zip(latency, shifts, strict=True):
        if shift:
            assert row.decision == "different" and row.direction == "regression"
            assert workers[row.case] == 8 and row.comparison.n_pairs == 8
            assert row.comparison.p_value == pytest.approx(2 / 256)
    # Latency and compile time are separate families, each at alpha, over look-adjusted p-values.
    from perfguard.stats.adaptive import SequentialPlan

    plan = SequentialPlan(8, 4, 20, 0.05)
    sequential = [min(1.0, r.comparison.p_value * 0.05 / r.comparison.alpha) for r in latency]
    assert [r.bh_adjusted_p for r in latency] == pytest.approx(bh_adjust(sequential))
    assert [r.bh_adjusted_p for r in compile_rows] == pytest.approx(
        bh_adjust([r.comparison.p_value for r in compile_rows]))
    assert info.history[0].workers == 8
    assert plan.levels[0] >= 2 * (2 / 256)  # one regression among two models still decides at look 1


def test_adaptive_compare_and_the_check_share_one_schedule() -> None:
    _, info, _ = _check((0.0,))
    result = adaptive_compare(_Source(1.3), ComparisonOptions(n_boot=500))
    assert list(result.alpha_by_look) == list(info.alpha_by_look)
    assert list(result.confidence_by_look) == pytest.approx(list(info.confidence_by_look))


# --------------------------------------------------------------------------------------------
# calibrate: per-worker statistics paired by worker id, and too few workers


class _FakeJob:
    """Stands in for perfguard.measure.job.Job: the entries are already 'measured'."""

    def __init__(self, entries: dict[str, CaseEntry]) -> None:
        self.compiled = [SimpleNamespace(variant_id=k, entry=v) for k, v in entries.items()]

    def prepare(self) -> None:
        pass

    def compile(self, memory: bool = True) -> None:
        pass

    def measure(self, **_: Any) -> None:
        pass

    def close(self) -> None:
        pass


def _calibrate(monkeypatch: pytest.MonkeyPatch, ids_a: list[int], ids_b: list[int], workers: int = 8) -> dict:
    """The calibration as its ``--json`` object."""
    from perfguard.flows import calibrate as calibrate_flow
    from perfguard.suite.gates import ThresholdSet

    rng = np.random.default_rng(3)
    offsets = {i: 1e-3 * (1 + 0.2 * rng.random()) for i in range(20)}  # very different processes

    def entry(ids: list[int], scale: float) -> CaseEntry:
        per_worker = [list(offsets[i] * scale * (1 + 0.001 * np.arange(5))) for i in ids]
        return case_entry(per_worker, case="m/none/cpu", worker_ids=ids)

    job = _FakeJob({"a:m/none/cpu": entry(ids_a, 1.0), "b:m/none/cpu": entry(ids_b, 1.01)})
    monkeypatch.setattr(calibrate_flow, "Job", lambda *args, **kwargs: job)
    suite = SimpleNamespace(name="s", compiler=SimpleNamespace(path=None), thresholds=ThresholdSet())
    case = SimpleNamespace(id="m/none/cpu")
    return calibrate_flow.calibrate(suite, [case], CheckSettings(workers=workers), None).to_json()  # type: ignore[arg-type]


def test_calibrate_pairs_workers_by_id(monkeypatch: pytest.MonkeyPatch) -> None:
    # B's workers listed in another order: by id every worker's ratio is exactly 1.01 (no noise).
    row = _calibrate(monkeypatch, list(range(8)), list(reversed(range(8))))["cases"][0]
    assert row["status"] == "ok" and row["workers"] == 8
    assert row["noise_sd"] == pytest.approx(0.0, abs=1e-9)
    assert row["aa_ratio"] == pytest.approx(1.01)
    # A worker that crashed on one side only: the others are still paired.
    row = _calibrate(monkeypatch, list(range(8)), [0, 1, 2, 4, 5, 6, 7])["cases"][0]
    assert row["status"] == "ok" and row["workers"] == 7 and row["noise_sd"] == pytest.approx(0.0, abs=1e-9)


def test_calibrate_with_one_worker_is_a_clear_result(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError, match="at least 2 workers"):
        _calibrate(monkeypatch, [0], [0], workers=1)
    # Enough workers asked for, but only one measured both sides: UNKNOWN with the reason.
    calibration = _calibrate(monkeypatch, [0, 1, 2], [2, 3, 4])
    row = calibration["cases"][0]
    assert row["status"] == "unknown" and row["workers"] == 1
    assert "at least 2 workers" in row["reason"]
    assert calibration["false_positives"] == 0
    from perfguard.flows.calibrate import floors_toml

    assert "[[thresholds.overrides]]" not in floors_toml(_as_calibration(calibration))


def _as_calibration(data: dict) -> Any:
    from perfguard.flows.calibrate import Calibration, CalibrationRow

    rows = tuple(CalibrationRow(**{k: v for k, v in row.items() if k != "false_positive"}) for row in data["cases"])
    return Calibration(data["suite"], data["workers"], data["alpha"], rows)


def test_distribution_functions_agree_with_scipy_stats_exactly() -> None:
    """The verdicts read t quantiles, the normal distribution and average ranks from
    ``scipy.special`` and numpy (``scipy.stats`` cost a check 1.4 s of import): the same numbers
    to the last bit, ties and all."""
    rng = np.random.default_rng(7)
    for _ in range(500):
        n = int(rng.integers(1, 40))
        values = rng.integers(0, 6, n).astype(float) if rng.random() < 0.5 else rng.standard_normal(n)
        assert np.array_equal(average_ranks(values), sps.rankdata(values))
    assert average_ranks(np.array([])).size == 0
    for df in (1, 2, 5, 7, 11, 19, 99):
        for p in (0.6, 0.8, 0.975, 0.9958333):
            assert t_quantile(p, df) == sps.t.ppf(p, df)
    for z in (-4.0, -1.5, 0.0, 0.3, 2.5):
        assert normal_cdf(z) == sps.norm.cdf(z)
        assert normal_cdf(-z) == sps.norm.sf(z)
