"""A real change under the floor: the gate says ``same`` (unchanged), the output says what was
measured: ``+1.5%, under the 2% floor`` in the terminal table, the HTML report, the pull-request
comment and the nightly's history.

Known truth: simulated paired timings (fixed seeds, ``tests/test_stats_sim.simulate``) with a +1.5 %
shift and little noise, decided by the real ``compare_paired`` at the default 2 % floor.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from perfguard.compare.verdicts import CheckMode, Verdict, VerdictsDocument, VerdictsSettings
from perfguard.report import write_report
from perfguard.stats import Comparison, ComparisonOptions, compare_paired
from perfguard.stats.verdict import under_floor

from .test_stats_sim import simulate

CASE = "bert_t/mycc/cpu"


def _decided(shift: float, seed: int = 7) -> Comparison:
    a, b = simulate(np.random.default_rng(seed), 1, workers=12, values=20, shift=shift, within_cv=0.004,
                    process_cv=0.002)
    return compare_paired(a[0], b[0], ComparisonOptions(rel_floor=0.02, seed=seed))


@pytest.fixture(scope="module")
def small() -> Comparison:
    return _decided(0.015)


def test_a_real_change_under_the_floor_is_same_and_says_so(small: Comparison) -> None:
    assert small.decision == "same"  # the gate is unchanged
    assert small.p_value <= small.alpha and small.ci_low > 1.0 and small.ci_high <= 1.02  # real, inside the floor
    assert small.under_floor and math.isclose(small.ratio, 1.015, abs_tol=0.003)
    assert small.floor_note == f"{small.ratio - 1:+.1%}, under the 2% floor"


def test_no_change_and_a_change_beyond_the_floor_are_not_under_the_floor() -> None:
    nothing = [_decided(0.0, seed) for seed in range(20)]
    assert all(c.decision == "same" for c in nothing)
    # A/A: an interval that excludes 1 is a false positive of the test, at most alpha of the time
    assert sum(c.under_floor for c in nothing) <= 2
    big = _decided(0.04)
    assert big.decision == "different" and not big.under_floor and big.floor_note == ""
    exact = dataclasses.replace(big, decision="same", direction="none", ratio=1.01, ci_low=1.01, ci_high=1.01,
                                p_value=math.nan)
    assert under_floor(exact)  # a node count +1 % at a 2 % floor: exact, real, under it


def _document(comparison: Comparison) -> VerdictsDocument:
    row = Verdict(CASE, "latency", "s", True, "median:2%", "base", "head", True, comparison,  # type: ignore[arg-type]
                  comparison.decision, comparison.direction)
    return VerdictsDocument.of(CheckMode("base-ref", "base", "head"), [row], VerdictsSettings(0.05, 1), None, [])


def test_the_terminal_table_says_under_the_floor(small: Comparison, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from perfguard.cli._verdicts import print_verdicts

    monkeypatch.setenv("COLUMNS", "200")
    print_verdicts(_document(small))
    row = next(line for line in capsys.readouterr().out.splitlines() if CASE in line)
    assert f"same ({small.floor_note})" in row


def test_the_report_and_the_comment_say_under_the_floor(small: Comparison, tmp_path: pytest.TempPathFactory) -> None:
    written = write_report([_document(small)], tmp_path)  # type: ignore[arg-type]
    note = small.floor_note
    html = written["html"].read_text()
    assert f'<span class="floor-note">{note}</span>' in html
    comment = written["comment"].read_text()
    assert "Under the floor (real, too small to gate on):" in comment and f"same: {note}" in comment
    assert f"same: {note}" in written["summary"].read_text()


def test_history_show_says_a_same_night_with_a_real_change_is_under_the_floor(small: Comparison) -> None:
    from perfguard.cli.history import _decision_word
    from perfguard.store import Point

    night = Point(1, 1, "2026-12-05T00:00:00Z", "c" * 40, small.ratio, small.ci_low, small.ci_high, (), "b" * 40,
                  small.decision)
    assert _decision_word(night) == f"same ({small.ratio - 1:+.1%}, under the floor)"
    quiet = dataclasses.replace(night, value=1.001, ci_low=0.99, ci_high=1.01)
    assert _decision_word(quiet) == "same"
