"""The HTML report's "why it got slower" section: the view model built from a typed explanation
(bars per op type, largest change first, shares, node counts, overhead, dimension), and the report
that renders it for a verdicts document and for a bisection, "unclear" included."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from perfguard.profile.diff import diff_profiles
from perfguard.profile.dimension import classify
from perfguard.profile.explain import unavailable
from perfguard.report.html import render_html
from perfguard.report.why import why_view
from perfguard.results.explanation import Explanation, UnreadableExplanation, read_explanation

from .test_profile import BASE, _side
from .test_report import browser, build_report, make_bisect, make_verdicts, write_report

__all__ = ["browser"]  # the headless Chromium fixture of the report tests

#: Inserted layout transposes: Transpose appears (0 -> 4 nodes), Conv slows a little, Relu speeds up.
AFTER = {**BASE, "Conv": (6, 330.0), "Relu": (5, 15.0), "Transpose": (4, 200.0)}


def _explanation(case: str, after: dict[str, tuple[int, float]] = AFTER, **kwargs: float) -> dict[str, Any]:
    diff = diff_profiles(_side(BASE), _side(after, **kwargs))
    explanation = Explanation(case, "plain", "transposed", classify(diff), diff)
    return json.loads(json.dumps(explanation.to_json()))


def test_view_has_one_bar_per_op_type_largest_change_first_with_shares_and_nodes() -> None:
    view = why_view(Explanation.from_json(_explanation("r/transposed/cpu", overhead=30.0)), "why-1")
    assert (view.case, view.baseline, view.candidate, view.dimension) == ("r/transposed/cpu", "plain", "transposed",
                                                                          "memory")
    assert [r.name for r in view.ops] == ["Transpose", "Conv", "Relu", "Add", "Gemm"]
    transpose, conv, relu = view.ops[:3]
    assert transpose.change.startswith("+200") and transpose.nodes == "0 → 4 (+4)" and transpose.nodes_changed
    assert conv.nodes == "6" and not conv.nodes_changed
    assert relu.change.startswith("-5") and 'class="fill improvement"' in relu.chart
    assert 'class="fill regression"' in transpose.chart and 'class="chart delta"' in transpose.chart
    # The shares of the op types and of the framework overhead sum to the whole change.
    total = 200 + 30 - 5 + 10
    assert transpose.share == f"{200 / total * 100:.0f}%" and view.overhead is not None
    assert view.overhead.change.startswith("+10") and view.overhead.share == f"{10 / total * 100:.0f}%"
    assert "model_run" in view.run and view.workers == "3 + 3 profiled workers"
    assert any("Transpose" in line for line in view.evidence) and not view.unclear


def test_view_of_an_unavailable_or_diffless_explanation_still_names_the_dimension() -> None:
    view = why_view(unavailable("r/p/cpu", ("a", "b"), "b: pass x failed"), "why-1")
    assert view.unclear and view.ops == [] and view.overhead is None
    assert view.headline == "explanation unavailable: b: pass x failed"
    with pytest.raises(ValueError, match="dimension"):
        Explanation.from_json({"case": "x"})
    # In a document it is kept as found, with the reason, rather than failing the document.
    kept = read_explanation({"case": "x"})
    assert isinstance(kept, UnreadableExplanation) and kept.to_json() == {"case": "x"} and "dimension" in kept.problem
    # Cut to its dimension (hand-written), it still reads: the rest takes its defaults.
    cut = Explanation.from_json({"dimension": unavailable("r", ("a", "b"), "gone").dimension.to_json()})
    assert why_view(cut, "why-1").headline == "explanation unavailable: gone" and cut.failures == ()


def _why_section(html: str, anchor: str) -> str:
    match = re.search(rf'<div class="why" id="{anchor}".*?</table>', html, flags=re.S)
    assert match, anchor
    return match.group(0)


def test_report_renders_a_why_section_per_explained_case() -> None:
    verdicts = make_verdicts()
    case = verdicts["verdicts"][0]["case"]
    unclear = _explanation("m/q/cpu", {**BASE, "Conv": (6, 400.0), "Transpose": (1, 80.0), "Resize": (1, 90.0)},
                           overhead=60.0)
    verdicts["explanations"] = [_explanation(case), unclear]
    html = render_html(build_report([verdicts]))
    assert '<a href="#why">Why</a>' in html and "Why it got slower" in html
    first = _why_section(html, "why-1")
    assert 'data-dimension="memory"' in first and '<span class="badge dimension memory">memory</span>' in first
    rows = re.findall(r'<tr class="op"><td class="mono">(\w+)</td>', first)
    assert rows == ["Transpose", "Conv", "Relu", "Add", "Gemm"]
    assert first.count('<svg class="chart delta"') == len(rows) + 1  # the op types and the framework overhead
    assert "0 → 4 (+4)" in first and "framework overhead" in first
    second = _why_section(html, "why-2")
    assert 'data-dimension="unclear"' in second and "the dimension is <strong>unclear</strong>" in second
    assert "&lt;script&gt;" in first or "script" not in case  # the hostile case name arrives escaped


def test_a_broken_explanation_is_a_warning_not_a_failed_report() -> None:
    verdicts = make_verdicts()
    verdicts["explanations"] = [{"case": "m/p/cpu", "dimension": {"label": "fast"}}]
    report = build_report([verdicts])
    assert report.explanations == [] and any("explanation of m/p/cpu does not read" in w for w in report.warnings)


def test_bisection_shows_the_culprits_why_section() -> None:
    bisect = make_bisect()
    bisect["explanations"] = [_explanation("resnet_t/mycc/cpu")]
    report = build_report([copy.deepcopy(bisect)])
    (view,) = report.bisections[0].explanations
    assert view.dimension == "memory"
    html = render_html(report)
    section = _why_section(html, "bisect-1-why-1")
    assert re.findall(r'<tr class="op"><td class="mono">(\w+)</td>', section)[0] == "Transpose"
    assert html.index('id="bisection"') < html.index('id="bisect-1-why-1"')


def test_why_section_in_headless_chromium(browser, tmp_path) -> None:  # noqa: F811 (the fixture)
    verdicts = make_verdicts()
    verdicts["explanations"] = [_explanation(verdicts["verdicts"][0]["case"])]
    written = write_report([verdicts], tmp_path / "report")
    url = written["html"].resolve().as_uri()
    browser.open_page(url)
    assert browser.problems(url) == []
    bars = browser.evaluate("""Array.from(document.querySelectorAll('#why-1 tr.op')).map(r => ({
        op: r.cells[0].innerText, bar: r.querySelector('svg .fill').getBoundingClientRect().width}))""")
    assert [b["op"] for b in bars] == ["Transpose", "Conv", "Relu", "Add", "Gemm"]
    assert bars[0]["bar"] > bars[1]["bar"] > 1 and bars[0]["bar"] > 100  # drawn to scale: the largest change widest
