"""The bisect documents: golden files of format version 1 load, round-trip byte for byte, render,
and a newer version is refused in one line.

The files under ``tests/golden/v1/`` were written by ``perfguard bisect`` itself (commit 9c28bc2,
before the documents were typed) on the toy compiler repositories of ``tests/test_bisect.py``;
the state files' pass traces lost their per-pass op histograms to keep them small."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfguard.bisect.document import BISECT_VERSION, BisectResult, load_bisect
from perfguard.bisect.state import BisectState, StateFile, StateHeader
from perfguard.errors import StorageError
from perfguard.report import build_report, load_document
from perfguard.report.html import render_html
from perfguard.report.markdown import job_summary

V1 = Path(__file__).parent / "golden" / "v1"
RESULTS = ["bisect-commits.json", "bisect-commits-no-regression.json", "bisect-commits-unbuildable.json",
           "bisect-passes.json", "bisect-pipelines.json"]
STATES = ["bisect-state.json", "bisect-commits-unbuildable-state.json", "bisect-passes-state.json"]


def _written(document: dict) -> str:
    """The bytes ``write_json_atomic`` writes for ``document``."""
    return json.dumps(document, sort_keys=True, indent=1, allow_nan=False) + "\n"


@pytest.mark.parametrize("name", RESULTS)
def test_version_1_results_load_and_round_trip_byte_for_byte(name):
    text = (V1 / name).read_text()
    result = load_bisect(V1 / name)
    assert isinstance(result, BisectResult) and result.version == BISECT_VERSION == 1
    assert result.to_json() == json.loads(text)
    assert _written(result.to_json()) == text
    assert BisectResult.from_json(result.to_json()) == result


@pytest.mark.parametrize("name", STATES)
def test_version_1_state_files_round_trip_and_resume(name, tmp_path):
    text = (V1 / name).read_text()
    state = StateFile.from_json(json.loads(text))
    assert _written(state.to_json()) == text
    path = tmp_path / "state.json"
    path.write_text(text)
    resumed = BisectState(path, state.key, state.header)
    assert resumed.probes == state.probes and resumed.order == state.order
    first = state.order[0]
    assert resumed.get(first) == state.probes[first] and resumed.resumed == 1
    resumed.record(first, state.probes[first])  # recording a known probe again rewrites the same file
    assert path.read_text() == text


def test_a_state_file_of_another_bisection_is_not_resumed(tmp_path):
    path = tmp_path / "state.json"
    path.write_text((V1 / "bisect-state.json").read_text())
    state = BisectState(path, "another-key", StateHeader(parts=["x"]))
    assert state.probes == {} and state.order == []


def test_a_newer_state_file_says_upgrade(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({**json.loads((V1 / "bisect-state.json").read_text()), "version": 2}))
    with pytest.raises(StorageError, match="newer than this perfguard reads .*upgrade perfguard, or delete it") as caught:
        BisectState(path, "k", StateHeader())
    assert "\n" not in str(caught.value)
    path.write_text('{"probes": {}}')
    with pytest.raises(StorageError, match="not a perfguard bisection state of version 1"):
        BisectState(path, "k", StateHeader())


def test_a_corrupt_state_file_is_one_line(tmp_path):
    path = tmp_path / "state.json"
    path.write_text('{"version": 1, "key": "k", "probes": {"p": {"status": 3}}}')
    with pytest.raises(StorageError, match="corrupt bisection state") as caught:
        BisectState(path, "k", StateHeader())
    assert "\n" not in str(caught.value) and "'status'" in str(caught.value)


@pytest.mark.parametrize("name", RESULTS)
def test_version_1_results_render(name):
    document = json.loads((V1 / name).read_text())
    report = build_report([load_document(V1 / name)])
    html = render_html(report)
    assert "Bisection" in html and document["case"] in html
    summary = job_summary(report)
    assert "Bisection" in summary
    if document["mode"] == "pipelines":
        assert "move constant\\_folding (position 2) before fuse\\_bn\\_into\\_conv" in summary
    elif document["status"] == "found":
        assert "extra_work" in html and document["culprits"][0]["commit"]["sha"][:10] in html


def test_a_newer_version_is_refused_in_one_line(tmp_path):
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**json.loads((V1 / "bisect-commits.json").read_text()), "version": 2}))
    for load in (load_bisect, load_document):
        with pytest.raises(StorageError, match="upgrade perfguard") as caught:
            load(newer)
        assert "\n" not in str(caught.value) and str(newer) in str(caught.value)


def test_a_value_of_the_wrong_type_is_one_line_naming_the_key(tmp_path):
    bad = tmp_path / "bad.json"
    document = json.loads((V1 / "bisect-passes.json").read_text())
    document["culprits"][0]["pass"]["position"] = "two"
    bad.write_text(json.dumps(document))
    for load in (load_bisect, load_document):
        with pytest.raises(StorageError, match="'position' must be an integer") as caught:
            load(bad)
        assert "\n" not in str(caught.value) and str(bad) in str(caught.value)
    with pytest.raises(StorageError, match="not a perfguard bisect document"):
        bad.write_text('{"version": 1}')
        load_bisect(bad)


def test_hand_written_documents_still_read():
    example = BisectResult.from_json(json.loads((V1.parent / "bisect-example.json").read_text()))
    assert example.mode == "commits" and example.good is not None and example.good.short == "v1.4.0"
    assert example.culprits[0].pass_ is not None and example.culprits[0].pass_.position == 3
    assert example.culprits[0].confirmed and len(example.probes) == 4


def test_the_summary_printed_by_the_command_is_unchanged(capsys):
    from perfguard.cli.bisect import _print_summary

    expected = {
        "bisect-commits.json": ["culprit: commit 06395aebe9 'commit 5' by Test Author <author@example.com>: "
                                "+59.7% [+52.9%, +83.6%]", "  pass #2 'mycc.passes:extra_work'",
                                "probes: 4, wall time 132.3 s"],
        "bisect-commits-unbuildable.json": ["culprit: range 453f617d85, 645173cbb2 by Test Author "
                                            "<author@example.com>: n/a [n/a, n/a] (not confirmed)",
                                            "probes: 4, wall time 74.9 s"],
        "bisect-passes.json": ["culprit: commit 751061658e '' by ?: +55.4% [+36.8%, +61.6%]",
                               "  pass #2 'mycc.passes:extra_work'", "probes: 2, wall time 61.5 s"],
        "bisect-pipelines.json": ["edit: move constant_folding (position 2) before fuse_bn_into_conv",
                                  "effect: +37.7% [+23.5%, +46.1%]", "probes: 3, wall time 71.2 s"],
        "bisect-commits-no-regression.json": ["no reproducible regression between good and bad: nothing to bisect",
                                              "probes: 1, wall time 22.9 s"],
    }
    for name, lines in expected.items():
        _print_summary(load_bisect(V1 / name))
        assert capsys.readouterr().out == "\n" + "\n".join(lines) + "\n", name


def test_a_culprit_that_cannot_be_profiled_is_recorded_unavailable_and_renders(monkeypatch):
    """Profiling the culprit never fails the bisection: the failure becomes an "unclear"
    explanation saying why, kept in the document (version 1, an optional key) and shown."""
    from types import SimpleNamespace

    import perfguard.profile.pairs
    from perfguard.errors import BackendError
    from perfguard.flows.bisection.culprit_explain import explain_pipelines
    from perfguard.progress import Progress

    def broken(*args, **kwargs):
        raise BackendError("no profiler for backend 'iree'\nsecond line")

    monkeypatch.setattr(perfguard.profile.pairs, "explain_versions", broken)
    suite, case = SimpleNamespace(compiler=SimpleNamespace(path=None)), SimpleNamespace(id="r/good/cpu")
    why = explain_pipelines(suite, case, ["a"], ["b"], ("good", "bad"), None, Progress())
    assert why.dimension.label == "unclear" and why.diff is None
    assert why.dimension.headline == "explanation unavailable: no profiler for backend 'iree'"
    document = json.loads((V1 / "bisect-pipelines.json").read_text())
    document["explanations"] = [why.to_json()]
    result = BisectResult.from_json(document)
    assert result.version == 1 and result.to_json() == document and result.explanations == [why]
    html = render_html(build_report([result]))
    assert "explanation unavailable: no profiler for backend &#39;iree&#39;" in html
    assert 'data-dimension="unclear"' in html
