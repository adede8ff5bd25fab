"""The timing-quality guard (``perfguard.stats.modality``) on simulated values with fixed seeds, and
its one-line note in the run output (``perfguard.report.quality``)."""

from __future__ import annotations

import numpy as np
import pytest

from perfguard.backends import usual_cv
from perfguard.stats.modality import (
    DEFAULT_USUAL_CV,
    MODE_GAP,
    timing_quality,
    widest_gap,
)


def _workers(values: np.ndarray, workers: int) -> list[list[float]]:
    return [list(map(float, chunk)) for chunk in np.array_split(values, workers)]


def _lognormal(seed: int, n: int, median: float, sigma: float) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(median), sigma, n)


def test_issue_45s_bimodal_values_are_flagged_with_both_modes_and_where_they_are():
    """Issue 45's shape: 120 values, a median of 0.53 ms and a tenth of them about 50x slower,
    spread over every worker (values of a few runs caught by the machine's time slices)."""
    rng = np.random.default_rng(45)
    values = np.where(rng.random(120) < 0.12, rng.uniform(5e-3, 28e-3, 120), _lognormal(1, 120, 0.53e-3, 0.03))
    quality = timing_quality(_workers(values, 6), usual_cv("inductor"))
    assert quality.verdict == "multimodal" and quality.flagged
    assert quality.fast_median == pytest.approx(0.53e-3, rel=0.05) and quality.slow_median > 10 * quality.fast_median
    assert 0.05 < quality.slow_share < 0.2 and quality.slow_workers == quality.workers == 6
    note = quality.note()
    assert note.startswith("two modes: ") and "ms" in note and "in 6 of 6 workers" in note and "the machine" in note
    assert "\n" not in note


def test_issue_45s_measured_values_point_at_a_first_call_path_in_the_timed_rounds():
    """``resnet/max_autotune/cpu`` before the fix (``docs/measured.md``, 2026-12-07, ms): 4 runs a
    value, and the first value of the two workers that did not calibrate held a Dynamo recompile."""
    measured = [[3.34, 0.98, 2.09, 1.95, 1.97, 1.95], [74.07, 2.01, 1.41, 1.94, 1.9], [50.48, 0.97, 0.98, 1.99, 0.97, 2.49]]
    quality = timing_quality([[v / 1e3 for v in worker] for worker in measured], usual_cv("inductor"))
    assert (quality.verdict, quality.slow_workers, quality.workers) == ("multimodal", 2, 3)
    assert quality.slow_median == pytest.approx(62.3e-3, rel=1e-3) and quality.cv > 2
    assert quality.cause.startswith("slow values first in their workers: a first-call path inside the timed rounds")


def test_slow_values_in_some_workers_only_point_at_per_process_state():
    fast = [list(map(float, _lognormal(seed, 20, 1e-3, 0.02))) for seed in range(4)]
    slow = [list(map(float, _lognormal(seed, 20, 3e-3, 0.02))) for seed in range(4, 6)]
    quality = timing_quality(fast + slow, usual_cv("ort"))
    assert quality.verdict == "multimodal" and (quality.slow_workers, quality.workers) == (2, 6)
    assert "some workers only" in quality.cause and "recompilation" in quality.cause


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("sigma", [0.01, 0.03, 0.1, 0.3])
def test_unimodal_values_are_never_called_multimodal(seed, sigma):
    """Lognormal, up to a cv of 0.3 (ten times ORT's usual): the widest gap stays under 1.3x."""
    values = _lognormal(seed, 120, 5e-4, sigma)
    assert widest_gap(list(values), 3)[0] < MODE_GAP
    quality = timing_quality(_workers(values, 6), DEFAULT_USUAL_CV)
    assert quality.verdict != "multimodal"
    assert quality.flagged == (sigma >= 0.3) and quality.note() == ("" if sigma < 0.3 else quality.note())


def test_a_cv_far_above_the_backends_usual_one_is_flagged_and_its_usual_level_is_not():
    values = _workers(_lognormal(7, 120, 1e-3, 0.2), 6)
    loud = timing_quality(values, usual_cv("ort"))  # cv 0.17 against 0.03
    assert loud.verdict == "high_cv" and loud.note().startswith("cv 0.17 is 6x the backend's usual 0.03")
    assert timing_quality(values, 0.1).verdict == "ok"  # 2x a backend's usual level is not "far above"
    assert usual_cv("a-plugin") == DEFAULT_USUAL_CV


def test_one_outlier_is_not_a_mode_and_too_few_values_are_not_judged():
    values = list(map(float, _lognormal(3, 60, 1e-3, 0.01)))
    quality = timing_quality([values + [0.05]], 0.03)  # one 50x value: not a mode (it makes the cv high)
    assert quality.verdict == "high_cv"
    assert timing_quality([[1e-3, 1e-3, 9e-3]], 0.03).verdict == "too_few"
    assert timing_quality([], 0.03).verdict == "too_few"


def test_the_run_output_carries_one_note_per_flagged_case_and_fits_a_log(capsys, monkeypatch):
    from types import SimpleNamespace

    from perfguard.cli.run import print_table

    from .factories import case_entry

    monkeypatch.delenv("COLUMNS", raising=False)
    rng = np.random.default_rng(0)
    bimodal = _workers(np.concatenate([_lognormal(1, 100, 1e-3, 0.02), rng.uniform(20e-3, 30e-3, 20)]), 6)
    document = SimpleNamespace(suite=SimpleNamespace(name="s"), cases=[
        case_entry(bimodal, case="m/a/cpu"), case_entry(_workers(_lognormal(2, 120, 1e-3, 0.02), 6), case="m/b/cpu")])
    print_table(document)  # type: ignore[arg-type]
    lines = capsys.readouterr().out.splitlines()
    notes = [index for index, line in enumerate(lines) if line.startswith("timing quality:")]
    assert len(notes) == 1, lines  # m/b/cpu is one mode at the usual spread: no note
    wrapped = [lines[notes[0]]] + [line for line in lines[notes[0] + 1:] if line.startswith("    ")]
    note = " ".join(line.strip() for line in wrapped)
    # the slow values are all in the last worker's: per-process state, said in words
    assert note.startswith("timing quality: m/a/cpu: two modes: 17% of 120 values near 25.8 ms, the rest near 1 ms "
                           "(25.7x), in 1 of 6 workers, cv 1.82 (usual 0.05); slow in some workers only"), note
    assert len(wrapped) > 1 and all(len(line) <= 120 for line in wrapped)  # wrapped for a CI log
