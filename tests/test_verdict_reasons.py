"""Every verdict explained where it is read (issue 43): a REGRESSION row carries its reason
(before -> after, the floor in plain words) in the terminal, the pull-request comment and the
workflow annotations; a compile that got cheaper because a pass stopped changing the graph says
so; a latency verdict that cannot reach its floor says what would decide it.

The documents are ``tests/test_report``'s hand-built check (fixed numbers), changed where a test
needs another shape."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from perfguard.report import build_report, parse_document
from perfguard.report.markdown import pr_comment, workflow_annotations
from perfguard.report.reasons import floor_words, latency_out_of_reach

from .test_report import HOSTILE_MODEL, _pass, _row, make_verdicts

CASE = f"{HOSTILE_MODEL}/fast|`x`/cpu"


def _report(document: dict[str, Any]) -> Any:
    return build_report([parse_document(document)])


def test_an_exact_regression_says_its_floor_in_words_not_median() -> None:
    verdicts = make_verdicts()
    node_count = next(r for r in verdicts["verdicts"] if r["metric"] == "node_count")
    node_count["gate"] = "median:5%"
    lines = workflow_annotations(_report(verdicts))
    line = next(line for line in lines if "node_count regression" in line)
    assert line.endswith("20 -> 26 (+6, +30.00 %25), floor 5 %25")  # %25: the workflow command's escape
    assert "median" not in line and "exceeds" not in line
    assert (floor_words("median:5%", "nodes"), floor_words("max:0", "nodes"), floor_words("max:3", "nodes"),
            floor_words("p90:0.5ms", "s")) == ("floor 5 %", "any change", "floor 3 nodes", "floor 500 us")


def test_every_regression_in_the_comment_and_the_terminal_carries_its_reason(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from perfguard.cli._verdicts import print_verdicts

    verdicts = make_verdicts()
    comment = pr_comment(_report(verdicts))
    assert "/cpu node_count: 20 -&gt; 26 (+6, +30.00 %), floor 2 %" in comment
    assert "/cpu latency: 1 ms -&gt; 1.25 ms: regression +25.00%" in comment
    monkeypatch.setenv("COLUMNS", "200")
    print_verdicts(parse_document(verdicts))  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert f"{CASE} node_count: 20 -> 26 (+6, +30.00 %), floor 2 %" in out
    assert f"{CASE} latency: 1 ms -> 1.25 ms: regression +25.00%" in out


def _stopped_pass_check() -> dict[str, Any]:
    """compile_instructions -92.3 % because fuse_bn_into_conv no longer fires on the head side."""
    verdicts = make_verdicts()
    head = verdicts["results"]["candidate"]["cases"][0]
    head["trace"]["passes"] = [_pass(0, "fuse_bn_into_conv", 0.0001, 40, 40, "aaaa1111"),
                               _pass(1, "constant_folding", 0.031, 40, 26, "cccc3333")]
    verdicts["verdicts"].append(_row(CASE, "compile_instructions", "different", "improvement", 0.077, unit="instr",
                                     noisy=False, base=1.3e9, cand=1.0e8,
                                     reason="improvement: 1.3e+09 -> 1e+08 exceeds 0.5%"))
    verdicts["verdicts"][-1]["gate"] = "median:0.5%"
    return verdicts


def test_a_pass_that_stopped_changing_the_graph_is_not_a_plain_improvement(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from perfguard.cli._verdicts import print_verdicts

    report = _report(_stopped_pass_check())
    row = next(r for r in report.verdict_rows if r.metric == "compile_instructions")
    assert row.state == "improvement"
    assert row.reason == ("1.3 G -> 100 M (-1.2 G, -92.31 %), floor 0.5 %; not a plain improvement: pass "
                          "fuse_bn_into_conv (40 -> 30 nodes before, now unchanged) stopped changing the graph")
    monkeypatch.setenv("COLUMNS", "300")
    print_verdicts(parse_document(_stopped_pass_check()))  # type: ignore[arg-type]
    assert "pass fuse_bn_into_conv (40 -> 30 nodes before, now unchanged) stopped changing the graph" in (
        capsys.readouterr().out)
    plain = next(r for r in _report(make_verdicts()).verdict_rows if r.metric == "latency" and r.state == "improvement")
    assert "stopped" not in plain.reason  # a time that improved with the same passes firing stays one


def _undecided_latency(mde: float) -> dict[str, Any]:
    """Every latency row undecided: the ~100 us model of the issue on a loaded 2-core runner."""
    verdicts = make_verdicts()
    for row in verdicts["verdicts"]:
        if row["metric"] == "latency":
            row["decision"] = row["comparison"]["decision"] = "unknown"
            row["direction"] = row["comparison"]["direction"] = "none"
            row["comparison"]["mde"] = mde
            row["comparison"]["reason"] = "+17.00% [-10.10%, +310.30%]: p=0.4 > 0.05"
    return verdicts


def test_latency_that_cannot_reach_its_floor_says_so_with_the_way_out(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from perfguard.cli._verdicts import print_verdicts

    line = latency_out_of_reach(parse_document(_undecided_latency(0.41)))  # type: ignore[arg-type]
    assert line is not None
    assert line.startswith("latency undecided in 3 of 3 cases: this runner cannot resolve the 2 % floor "
                           "(smallest detectable 41 %, measured noise (cv) ")
    assert "--counts" in line and "--workers" in line and "quieter runner" in line
    far = latency_out_of_reach(parse_document(_undecided_latency(1507.95)))  # type: ignore[arg-type]
    assert far is not None and "(smallest detectable over 100%, far beyond what 4 samples resolve, " in far
    assert latency_out_of_reach(parse_document(make_verdicts())) is None  # type: ignore[arg-type]
    decidable = copy.deepcopy(_undecided_latency(0.015))  # undecided, but within reach: nothing to say
    assert latency_out_of_reach(parse_document(decidable)) is None  # type: ignore[arg-type]
    monkeypatch.delenv("COLUMNS", raising=False)
    print_verdicts(parse_document(_undecided_latency(0.41)))  # type: ignore[arg-type]
    printed = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("latency undecided in 3 of 3 cases") for line in printed) == 1
    assert all(len(line) <= 120 for line in printed)
    comment = pr_comment(_report(_undecided_latency(0.41)))  # the PR comment says it too, once
    assert comment.count("> 🟡 latency undecided in 3 of 3 cases: this runner cannot resolve the 2 % floor") == 1
    assert "latency undecided" not in pr_comment(_report(make_verdicts()))


def _exact_only() -> dict[str, Any]:
    """The node count regressed, nothing else: latency same, no failed case, no undecided row."""
    verdicts = make_verdicts()
    verdicts["verdicts"] = [r for r in verdicts["verdicts"] if r["metric"] in ("node_count", "latency")
                            and r["case"] != "resnet_t/fold/cpu"]
    for row in verdicts["verdicts"]:
        if row["metric"] == "latency":
            row["decision"] = row["comparison"]["decision"] = "same"
            row["direction"] = row["comparison"]["direction"] = "none"
    return verdicts


def _explain(document: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """``check --explain``'s output of a finished check (the command's own reporting step)."""
    import argparse

    from perfguard.cli.check import _report

    args = argparse.Namespace(verbose=False, json=None, report=None, annotations=False, fail_on_unknown=False,
                              explain=True)
    _report(parse_document(document), args)  # type: ignore[arg-type]
    return capsys.readouterr().out.splitlines()


def test_explain_with_only_exact_regressions_shows_the_pass_trace_and_the_op_types(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    lines = _explain(_exact_only(), capsys)
    at = lines.index(f"why, exactly, {CASE} (node_count): the pass traces of both sides")
    assert lines[at + 1:at + 3] == [
        "  the graphs differ from pass #1 constant_folding: 30 -> 20 nodes before, 30 -> 26 nodes now",
        "  op types in the final graph: Conv 20 -> 26"]
    comment = pr_comment(_report(_exact_only()))  # the PR comment shows the same
    assert "the graphs differ from pass #\u200b1 constant\\_folding: 30 -&gt; 20 nodes before" in comment


def test_explain_says_in_one_line_why_it_cannot_explain_or_that_nothing_regressed(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    untraced = _exact_only()
    for side in ("baseline", "candidate"):  # a backend that compiles in one step records no pass
        untraced["results"][side]["cases"][0]["trace"]["passes"] = []
    lines = _explain(untraced, capsys)
    assert f"--explain: {CASE}: neither side recorded a pass (no passes, or a backend that compiles in one step), " \
           "so nothing to compare pass by pass" in " ".join(line.strip() for line in lines)
    nothing = _exact_only()
    nothing["verdicts"] = [r for r in nothing["verdicts"] if r["metric"] == "latency"]
    assert _explain(nothing, capsys)[-1] == "--explain: no regression to explain"


def test_a_pipeline_edit_is_named_in_the_trace_lines() -> None:
    from perfguard.report.exact_why import ExactWhyView, exact_why

    verdicts = make_verdicts()
    head = verdicts["results"]["candidate"]["cases"][0]
    head["trace"]["passes"] = [_pass(0, "constant_folding", 0.01, 40, 40, "dddd4444"),
                               _pass(1, "fuse_bn_into_conv", 0.004, 40, 34, "eeee5555")]
    document = parse_document(verdicts)
    base, cand = (side.cases[0] for side in (document.results.baseline, document.results.candidate))  # type: ignore[union-attr]
    view = exact_why(CASE, ("node_count",), base, cand)
    assert isinstance(view, ExactWhyView)
    assert view.passes[0] == "the pipeline changed: fuse_bn_into_conv, constant_folding -> constant_folding, " \
                             "fuse_bn_into_conv"
    assert view.passes[1].startswith("the graphs differ from pass #0: fuse_bn_into_conv (40 -> 30 nodes) before, "
                                     "constant_folding (40 -> 40 nodes) now")
    assert "stopped changing the graph: constant_folding (30 -> 20 nodes before, now unchanged)" in view.passes


def test_a_pipeline_without_passes_has_no_op_types_to_compare() -> None:
    """Against ``--against-pipeline none`` the baseline ran no pass: its graph is the model as
    loaded, whose op types no trace records, so no op-type diff (not "Conv 0 -> 6")."""
    from perfguard.report.exact_why import ExactWhyView, exact_why

    verdicts = make_verdicts()
    verdicts["results"]["baseline"]["cases"][0]["trace"]["passes"] = []
    document = parse_document(verdicts)
    base, cand = (side.cases[0] for side in (document.results.baseline, document.results.candidate))  # type: ignore[union-attr]
    view = exact_why(CASE, ("node_count",), base, cand)
    assert isinstance(view, ExactWhyView) and view.ops == ()
    assert view.passes == ("the pipeline changed: (no passes) -> fuse_bn_into_conv, constant_folding",
                           "added pass #0 fuse_bn_into_conv: 40 -> 30 nodes",
                           "added pass #1 constant_folding: 30 -> 26 nodes")
