"""The rules of a comparison that decide without statistics: identical artifacts are SAME without
timing, and a compile-time comparison that cannot decide its floor is reported, not gated.

Entries are built in memory (``tests.factories.case_entry``: placeholder keys, real latency values);
the real checks that exercise the same rules end to end are in ``tests/test_check.py``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from perfguard.compare.check import Pair, compare_pair, same_execution, unmeasured_variants
from perfguard.compare.verdicts import Summary, Verdict
from perfguard.results import ArtifactInfo, CaseEntry
from perfguard.stats import Comparison
from perfguard.suite.gates import ThresholdSet

from .factories import case_entry


def _compiled(identity: str, compile_times: list[float], per_worker: list[list[float]] | None = None,
              case: str = "m/p/cpu") -> CaseEntry:
    entry = case_entry(per_worker, case=case, compile_times_s=compile_times, compile_time_s=compile_times[0],
                       artifact_size_bytes=1000, node_count=10)
    return dataclasses.replace(entry, artifact=ArtifactInfo("a" * 64, 1000, 10, {}, identity))


def _rows(pair: Pair) -> dict[str, Verdict]:
    return {r.metric: r for r in compare_pair(pair, ThresholdSet(), alpha=0.05, confidence=0.95)}


def test_identical_artifacts_are_same_for_latency_and_memory_without_values():
    a, b = _compiled("id1", [0.1, 0.11, 0.1]), _compiled("id1", [0.1, 0.1, 0.12])
    assert same_execution(a, b) and not same_execution(a, _compiled("id2", [0.1]))
    rows = _rows(Pair("m/p/cpu", a, b, True, "base", "head", frozenset({"base:x", "head:x"}), identical=True))
    for metric in ("latency", "memory"):
        assert rows[metric].decision == "same" and rows[metric].comparison.method == "identity"
        assert "identical artifact (execution identity id1)" in rows[metric].comparison.reason
    assert rows["node_count"].decision == "same" and rows["artifact_size"].decision == "same"
    # Without the identity (or with --measure-identical, which builds the pair with identical=False)
    # latency needs values: none here, so it is UNKNOWN, never SAME by assumption.
    rows = _rows(Pair("m/p/cpu", a, b, True, "base", "head"))
    assert rows["latency"].decision == "unknown" and rows["latency"].comparison.method == "none"


def test_a_failed_side_is_never_identical():
    a = _compiled("id1", [0.1])
    assert not same_execution(a, a.failed("measure", "boom"))
    assert not same_execution(dataclasses.replace(a, artifact=None), a)


def test_only_variants_whose_every_pair_is_identical_go_untimed():
    a, b, c = _compiled("same", [0.1]), _compiled("same", [0.1]), _compiled("other", [0.1])
    pairs = [Pair("m/b/cpu", a, b, True, "a", "b", frozenset({"head:a", "head:b"}), identical=True),
             Pair("m/c/cpu", a, c, True, "a", "c", frozenset({"head:a", "head:c"}), identical=False)]
    skip = unmeasured_variants(pairs)
    assert set(skip) == {"head:b"}  # a is still compared with c
    assert "identical artifact to its pair in m/b/cpu" in skip["head:b"]
    assert set(unmeasured_variants(pairs[:1])) == {"head:a", "head:b"}


def test_undecidable_compile_time_is_reported_not_gated_and_a_clear_change_is_gated():
    rng = np.random.default_rng(1)
    noisy_a = list(0.1 * np.exp(0.6 * rng.standard_normal(5)))
    noisy_b = list(0.1 * np.exp(0.6 * rng.standard_normal(5)))
    workers = [[1e-3] * 3 for _ in range(6)]
    rows = _rows(Pair("m/p/cpu", _compiled("x", noisy_a, workers), _compiled("y", noisy_b, workers), True,
                      "base", "head"))
    row = rows["compile_time"]
    assert row.decision == "unknown" and row.gated is False
    assert "not gated: 5 and 5 compiles cannot detect a change of the 25% floor" in row.comparison.reason
    # Ten times slower on every compile, little noise: decided, and gated like any regression.
    slow = [1.0 * (1 + 0.01 * i) for i in range(5)]
    fast = [0.1 * (1 + 0.01 * i) for i in range(5)]
    row = _rows(Pair("m/p/cpu", _compiled("x", fast, workers), _compiled("y", slow, workers), True,
                     "base", "head"))["compile_time"]
    assert row.is_regression and row.gated


def test_summary_counts_ungated_rows_apart_and_the_json_says_gated_false_only_when_false():
    rows = [Verdict("m/p/cpu", "compile_time", "s", True, "median:25%", "a", "b", False,
                    _undecided(), "unknown", "none", gated=False),
            Verdict("m/p/cpu", "latency", "s", True, "median:2%", "a", "b", True, _undecided(),
                    "unknown", "none")]
    summary = Summary.of(rows)
    assert summary.not_gated == 1 and summary.unknown == 1 and summary.unknown_latency == 1
    assert summary.to_json()["not_gated"] == 1 and "not_gated" not in Summary.of(rows[1:]).to_json()
    assert rows[0].to_json()["gated"] is False and "gated" not in rows[1].to_json()
    assert [Verdict.from_json(r.to_json()) for r in rows] == rows
    assert Summary.from_json(summary.to_json()) == summary


def _undecided() -> Comparison:
    return Comparison(decision="unknown", direction="none", ratio=1.1, ci_low=0.5, ci_high=2.0, p_value=0.4,
                      mde=3.0, n_pairs=5, baseline_median=0.1, candidate_median=0.11, floor=0.25, reason="wide")


def test_rows_that_are_not_gated_are_no_members_of_the_false_discovery_family():
    """Seven undecidable compile-time comparisons (p ~ 0.1) beside one clear one (p = 0.008):
    counted in BH they would demote the clear one (p_adj 0.064 > 0.05); left out, it stands."""
    from perfguard.compare.check import check_plan, control_false_discoveries
    from perfguard.suite.gates import CheckSettings

    def row(case: str, p: float, decision: str, gated: bool) -> Verdict:
        comparison = dataclasses.replace(_undecided(), p_value=p, decision=decision,  # type: ignore[arg-type]
                                         direction="regression" if decision == "different" else "none")
        return Verdict(case, "compile_time", "s", True, "median:25%", "a", "b", False, comparison, decision,
                       comparison.direction, gated=gated)

    rows = [row("m/clear/cpu", 0.008, "different", True)] + [row(f"m/p{i}/cpu", 0.095, "unknown", False)
                                                              for i in range(7)]
    plan = check_plan(CheckSettings(), adaptive=False)
    controlled = control_false_discoveries(rows, plan)
    assert controlled[0].decision == "different" and controlled[0].bh_adjusted_p == pytest.approx(0.008)
    assert all(r.bh_adjusted_p is None for r in controlled[1:])
    # Were they members, the clear one would be demoted: the reason the rule exists.
    gated = [dataclasses.replace(r, gated=True) for r in rows]
    assert control_false_discoveries(gated, plan)[0].decision == "unknown"


def test_across_separate_runs_the_latency_floor_is_never_below_the_across_runs_floor():
    """A stored baseline or two result files: unpaired, and two runs minutes apart differ by more
    than a same-job floor. A clear +5 % between runs is inside the default 10 % across-runs floor;
    a suite that knows its machine is stable lowers it (``[thresholds] across_runs``)."""
    rng = np.random.default_rng(7)

    def entry(scale: float) -> CaseEntry:
        per_worker = [list(1e-3 * scale * np.exp(0.003 * rng.standard_normal(5))) for _ in range(8)]
        return _compiled("x" if scale == 1.0 else "y", [0.1] * 5, per_worker)

    pair = Pair("m/p/cpu", entry(1.0), entry(1.05), False, "baseline", "head")
    default = compare_pair(pair, ThresholdSet(), alpha=0.05, confidence=0.95)
    latency = next(r for r in default if r.metric == "latency")
    assert latency.comparison.floor == pytest.approx(0.10) and latency.decision != "different"
    stable = next(r for r in compare_pair(pair, ThresholdSet(across_runs=0.02), alpha=0.05, confidence=0.95)
                  if r.metric == "latency")
    assert stable.comparison.floor == pytest.approx(0.02) and stable.is_regression
    # Same-job (paired) comparisons keep the suite's own floor.
    paired = dataclasses.replace(pair, paired=True)
    assert next(r for r in compare_pair(paired, ThresholdSet(), alpha=0.05, confidence=0.95)
                if r.metric == "latency").comparison.floor == pytest.approx(0.02)
