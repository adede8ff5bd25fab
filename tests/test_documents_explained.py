"""Documents with explanations: the explanations load typed, once, with their document, and the
document is written back byte for byte (a verdicts file of version 1 as its migration to 2).

``tests/golden/explained`` holds files written by perfguard itself (commit 57a320e, before the
explanations were typed) on the ``why`` suite of ``tests/test_profile.py`` (a pass that inserts
layout transposes, explained as memory): ``verdicts-check-explain.json`` from ``perfguard check
--against-pipeline plain --case r/transposed/cpu --explain --json``, and
``bisect-passes-pipelines-explain.json`` from ``perfguard bisect passes --good-pipeline plain
--bad-pipeline transposed --json`` (the culprit explained).
"""

from __future__ import annotations

import json
from pathlib import Path

from perfguard.atomic import write_json_atomic
from perfguard.bisect.document import BisectResult, load_bisect
from perfguard.compare.verdicts import VerdictsDocument, load_verdicts, migrate_to_2
from perfguard.report import build_report, load_document
from perfguard.report.html import render_html
from perfguard.results.explanation import Explanation, ProfileDiff, UnreadableExplanation

GOLDEN = Path(__file__).parent / "golden" / "explained"
VERDICTS = GOLDEN / "verdicts-check-explain.json"
BISECT = GOLDEN / "bisect-passes-pipelines-explain.json"


def _written(document: VerdictsDocument | BisectResult, tmp_path: Path) -> bytes:
    out = tmp_path / "written.json"
    write_json_atomic(out, document.to_json())
    return out.read_bytes()


def _memory(explanation: object) -> Explanation:
    assert isinstance(explanation, Explanation)
    assert isinstance(explanation.diff, ProfileDiff) and explanation.dimension.label == "memory"
    transpose = next(op for op in explanation.diff.ops if op.op_type == "Transpose")
    assert (transpose.nodes_before, transpose.nodes_after) == (0, 24)
    return explanation


def test_verdicts_with_explanations_load_typed_and_round_trip_byte_for_byte(tmp_path: Path):
    document = load_verdicts(VERDICTS)
    (explanation,) = document.explanations
    assert _memory(explanation).case == "r/transposed/cpu" and explanation.baseline == "plain"
    assert explanation.compile is not None and explanation.compile.before_s > 0
    # A verdicts file of version 1: written back as its migration to version 2 (``results`` by side).
    migrated = tmp_path / "migrated.json"
    write_json_atomic(migrated, migrate_to_2(json.loads(VERDICTS.read_text())))
    assert _written(document, tmp_path) == migrated.read_bytes()
    assert json.loads(VERDICTS.read_text())["results"]["head"] == document.to_json()["results"]["candidate"]
    assert VerdictsDocument.from_json(document.to_json()) == document


def test_bisect_with_explanations_loads_typed_and_round_trips_byte_for_byte(tmp_path: Path):
    result = load_bisect(BISECT)
    assert result.mode == "pipelines" and result.found
    (explanation,) = result.explanations
    assert _memory(explanation).candidate == "transposed"
    assert _written(result, tmp_path) == BISECT.read_bytes()
    assert BisectResult.from_json(result.to_json()) == result


def test_both_render_their_why_sections_in_one_report():
    documents = [load_document(VERDICTS), load_document(BISECT)]
    report = build_report(documents, [VERDICTS.name, BISECT.name])
    assert [v.dimension for v in report.explanations] == ["memory"]
    assert [v.dimension for v in report.bisections[0].explanations] == ["memory"]
    assert report.why == [("r/transposed/cpu", _memory(documents[0].explanations[0]).dimension.headline)]
    html = render_html(report)
    assert 'id="why-1"' in html and 'id="bisect-1-why-1"' in html


def test_an_explanation_that_does_not_read_is_kept_as_found_and_warned_about(tmp_path: Path):
    """A hand-edited explanation does not fail its document: it is kept, written back unchanged,
    and the report says why it is not shown."""
    for golden, load in ((VERDICTS, load_verdicts), (BISECT, load_bisect)):
        data = json.loads(golden.read_text())
        data["explanations"].append({"case": "r/other/cpu", "dimension": {"label": "fast"}})
        path = tmp_path / golden.name
        write_json_atomic(path, data)
        document = load(path)
        broken = document.explanations[1]
        assert isinstance(broken, UnreadableExplanation) and broken.case == "r/other/cpu"
        assert "label" in broken.problem and "fast" in broken.problem
        if golden == VERDICTS:  # a verdicts file of version 1: written back as its migration
            write_json_atomic(path, migrate_to_2(data))
        assert _written(document, tmp_path) == path.read_bytes()
        report = build_report([document])
        assert any("the explanation of r/other/cpu does not read" in w for w in report.warnings)
