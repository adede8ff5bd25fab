"""``CaseId``: a suite case's id is made and taken apart in one place; ids of other tools'
benchmarks, which may hold ``/``, are not taken for case ids."""

from __future__ import annotations

from perfguard.names import CaseId, name_problem
from perfguard.store.extract import SeriesKey


def test_a_case_id_round_trips_through_its_text():
    case = CaseId("resnet_s", "fold[x]", "npu:cpu")
    assert str(case) == "resnet_s/fold[x]/npu:cpu"
    assert CaseId.parse(str(case)) == case
    assert case.with_pipeline("none") == CaseId("resnet_s", "none", "npu:cpu")


def test_text_that_is_not_three_names_is_not_a_case_id():
    for text in ("a/b", "a/b/c/d", "a//c", "/b/c", "tests/x/y/test.py::t", ""):
        assert CaseId.parse(text) is None, text
    assert name_problem("a/b") is not None  # why three parts are unambiguous for a suite's cases


def test_a_series_of_another_tools_benchmark_has_no_case_id_even_with_two_slashes():
    imported = SeriesKey("s", "tests/x.py::test[a/b]", "", "", "pytest-benchmark", "m", "latency", "absolute")
    assert imported.case_id is None and imported.pipeline == ""
    ours = SeriesKey("s", "m/p/cpu", "ab" * 32, "cd" * 32, "ort 1.32", "cpu", "latency", "ratio")
    assert ours.case_id == CaseId("m", "p", "cpu") and ours.pipeline == "p"
