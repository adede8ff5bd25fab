"""A latency verdict is never trusted when the device throttled or its clocks moved (fakes the
telemetry records a GPU worker would return; no GPU needed)."""

from __future__ import annotations

import numpy as np

from perfguard.compare.check import Pair, compare_pair
from perfguard.compare.verdicts import Verdict
from perfguard.results import CaseEntry
from perfguard.runners.telemetry import summarize_telemetry
from perfguard.suite.gates import ThresholdSet

from .factories import case_entry


def _record(sm_clock: float, throttle: int) -> dict:
    n = 20
    return {"columns": {"t": list(range(n)), "sm_clock_mhz": [sm_clock] * n, "mem_clock_mhz": [2619.0] * n,
                        "throttle_reasons": [throttle] * n}, "sources": ["nvml"], "errors": [],
            "clock_tolerance": 0.02}


def _entry(scale: float, records: list[dict] | None, seed: int) -> CaseEntry:
    rng = np.random.default_rng(seed)
    per_worker = [list(scale * 1e-3 * (1 + 0.01 * rng.standard_normal(8))) for _ in range(10)]
    telemetry = {"summary": summarize_telemetry(records), "per_worker": records} if records else None
    return case_entry(per_worker, case="m/p/cuda", telemetry=telemetry)


def _latency(base: CaseEntry, cand: CaseEntry) -> Verdict:
    rows = compare_pair(Pair("m/p/cuda", base, cand, True, "base", "head"), ThresholdSet(), alpha=0.05,
                        confidence=0.95)
    return next(r for r in rows if r.metric == "latency")


def test_clean_gpu_telemetry_keeps_the_verdict():
    clean = [_record(1980.0, 0)] * 10
    row = _latency(_entry(1.0, clean, 1), _entry(1.3, clean, 2))
    assert row.decision == "different" and row.direction == "regression"


def test_throttled_candidate_makes_the_verdict_unknown_with_the_reason():
    clean = [_record(1980.0, 0)] * 10
    throttled = [_record(1980.0, 0x20)] * 10  # sw_thermal_slowdown
    row = _latency(_entry(1.0, clean, 1), _entry(1.3, throttled, 2))
    assert row.decision == "unknown"
    assert "device state flagged" in row.comparison.reason and "candidate" in row.comparison.reason


def test_clocks_that_differ_from_the_baseline_make_the_verdict_unknown():
    row = _latency(_entry(1.0, [_record(1980.0, 0)] * 10, 1), _entry(1.3, [_record(1410.0, 0)] * 10, 2))
    assert row.decision == "unknown" and "clock" in row.comparison.reason


def test_cpu_results_without_telemetry_are_untouched():
    row = _latency(_entry(1.0, None, 1), _entry(1.3, None, 2))
    assert row.decision == "different"
