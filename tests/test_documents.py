"""Typed documents: every version-1 file of today's format loads through its one loader and is
written back unchanged (but for the result format's version, now 2: a version-1 result is a valid
version-2 result, and the verdicts format's, now 2: its ``results`` keyed ``baseline`` and
``candidate``); newer versions are refused; the report renders each.

``tests/golden/v1`` holds files written by perfguard before the documents were typed (commit
9c28bc2): ``perfguard run`` (smoke suite, a suite with a failing pass, IREE with an IR trace, an
artifact folder measured with ``run --artifacts``), the verdicts of ``check --against-pipeline``,
``check --baseline`` and ``compare``, and the manifest of ``perfguard compile``. The IREE trace is
cut to its first six passes to keep the file small. ``tests/golden/v2`` holds the verdicts files
of ``tests/golden/v1`` as perfguard writes them at verdicts version 2 (loaded and written back by
the commit that made version 2); they round-trip exactly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from perfguard.compare.verdicts import VERDICTS_VERSION, Summary, VerdictsDocument, load_verdicts
from perfguard.errors import StorageError
from perfguard.report import build_report, load_document
from perfguard.report.html import render_html
from perfguard.results import RESULT_VERSION, CaseEntry, ResultDocument, load_result, schema_errors
from perfguard.results.artifacts import MANIFEST_VERSION, Manifest, load_manifest

GOLDEN = Path(__file__).parent / "golden" / "v1"
RESULTS = sorted(GOLDEN.glob("result-*.json"))
VERDICTS = sorted(GOLDEN.glob("verdicts-*.json"))
VERDICTS_V2 = sorted((GOLDEN.parent / "v2").glob("verdicts-*.json"))


def _raw(path: Path) -> dict:
    return json.loads(path.read_text())


def test_the_golden_set_covers_every_document_kind_and_optional_part():
    assert len(RESULTS) == 4 and len(VERDICTS) == 3 and (GOLDEN / "manifest.json").exists()
    entries = [c for p in RESULTS for c in _raw(p)["cases"]]
    assert any(c["status"] == "failed" for c in entries)
    assert any("correctness_on_runner" in c and "compiled_on" in c for c in entries)
    assert any((c["trace"] or {}).get("mode") == "ir" and (c["trace"] or {}).get("pass_times") for c in entries)
    assert any(c["measurement"] and c["metrics"].get("latency_s") for c in entries)
    assert {_raw(p)["mode"]["kind"] for p in VERDICTS} == {"pipeline", "baseline", "compare"}


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_result_files_load_typed_and_round_trip_exactly(path: Path):
    document = load_result(path)
    assert isinstance(document, ResultDocument) and all(isinstance(c, CaseEntry) for c in document.cases)
    assert _raw(path)["version"] == 1 and RESULT_VERSION == 2
    assert document.to_json() == {**_raw(path), "version": 2}
    assert ResultDocument.from_json(document.to_json()) == document
    for case in document.cases:  # the typed view agrees with the file
        raw = next(c for c in _raw(path)["cases"] if c["id"] == case.id)
        assert case.ok == (raw["status"] == "ok")
        if case.metrics.latency_s is not None:
            assert case.metrics.latency_s.median == raw["metrics"]["latency_s"]["median"]
            assert case.latency_by_worker() == dict(zip(raw["measurement"]["worker_ids"],
                                                        raw["metrics"]["latency_s"]["per_worker"], strict=True))
        assert case.key.hash() == raw["key_hash"]  # the key hash is recomputed the same way


#: The side labels of verdicts format 1, by mode, and the side each migrates to.
V1_SIDES = {"head": "candidate", "candidate": "candidate", "base": "baseline", "baseline": "baseline"}


@pytest.mark.parametrize("path", VERDICTS, ids=lambda p: p.name)
def test_version_1_verdict_files_load_typed_as_their_migration(path: Path):
    document = load_verdicts(path)
    raw = _raw(path)  # the result documents inside are migrated like result files
    assert raw["version"] == 1 and VERDICTS_VERSION == 2
    assert document.to_json() == {**raw, "version": 2,
                                  "results": {V1_SIDES[k]: {**r, "version": 2} for k, r in raw["results"].items()}}
    assert document.to_json() == _raw(GOLDEN.parent / "v2" / path.name)
    assert document.results is not None and document.mode.kind == raw["mode"]["kind"]
    assert (document.results.baseline is None) == (raw["mode"]["kind"] == "pipeline")  # one document, both sides


def test_a_version_1_check_against_a_ref_reads_base_as_baseline_and_head_as_candidate(tmp_path: Path):
    raw = _raw(GOLDEN / "verdicts-compare.json")
    raw["results"] = {"base": raw["results"]["baseline"], "head": raw["results"]["candidate"]}
    raw["mode"] = {"kind": "base-ref", "baseline": "main (0123456789)", "candidate": "head", "ref": "main",
                   "base_commit": "0123456789" * 4, "base_subject": "s", "head_commit": "f" * 40,
                   "base_pipelines": ["p"]}
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(raw))
    document = load_verdicts(path)
    assert document.results is not None and document.results.baseline is not None
    assert document.results.candidate.finished_at == raw["results"]["head"]["finished_at"]
    assert document.results.baseline.finished_at == raw["results"]["base"]["finished_at"]
    assert document.mode.base_commit == "0123456789" * 4 and document.mode.base_pipelines == ("p",)
    assert document.to_json()["mode"] == raw["mode"]


@pytest.mark.parametrize("path", VERDICTS_V2, ids=lambda p: p.name)
def test_verdict_files_load_typed_and_round_trip_exactly(path: Path):
    document = load_verdicts(path)
    assert not schema_errors(_raw(path), "verdicts")
    assert document.to_json() == _raw(path)
    assert VerdictsDocument.from_json(document.to_json()) == document
    # The summary is a function of the rows: recomputing it from the typed rows gives the file's.
    assert Summary.of(document.verdicts) == document.summary
    for row, raw in zip(document.verdicts, _raw(path)["verdicts"], strict=True):
        ratio = raw["comparison"]["ratio"]
        assert (math.isnan(row.comparison.ratio) if ratio is None else row.comparison.ratio == ratio)
        assert row.comparison.mde == (math.inf if raw["comparison"]["mde"] is None else raw["comparison"]["mde"])


def test_manifest_round_trips_and_names_its_artifacts():
    manifest = Manifest.from_json(_raw(GOLDEN / "manifest.json"))
    assert manifest.to_json() == _raw(GOLDEN / "manifest.json")
    assert all(c.artifact_file is not None and c.artifact_file.path.startswith("artifacts/")
               for c in manifest.cases if c.entry.ok)


def test_newer_versions_are_refused_with_one_line(tmp_path: Path):
    for name, version, load in (("result-run.json", RESULT_VERSION, load_result),
                                ("verdicts-pipeline.json", VERDICTS_VERSION, load_verdicts)):
        data = _raw(GOLDEN / name)
        data["version"] = version + 1
        path = tmp_path / name
        path.write_text(json.dumps(data))
        with pytest.raises(StorageError, match=r"version \d+ is newer than this perfguard reads .*upgrade perfguard"):
            load(path)
    folder = tmp_path / "art"
    folder.mkdir()
    data = _raw(GOLDEN / "manifest.json")
    data["version"] = MANIFEST_VERSION + 1
    (folder / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(StorageError, match=r"manifest format version 2 is newer than this perfguard reads \(1\); "
                                           "upgrade perfguard"):
        load_manifest(folder)


def test_a_schema_valid_file_with_a_field_of_the_wrong_type_is_one_line(tmp_path: Path):
    data = _raw(GOLDEN / "result-run.json")
    data["cases"][0]["measurement"]["loops"] = "many"  # the schema leaves measurement open
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(StorageError) as error:
        load_result(path)
    assert str(error.value) == f"{path}: corrupt result file: measurement: field 'loops' must be an integer, found 'many'"


def test_every_golden_file_renders_in_one_report():
    documents = [load_document(p) for p in [*RESULTS, *VERDICTS]]
    assert sum(isinstance(d, VerdictsDocument) for d in documents) == 3
    report = build_report(documents, [p.name for p in [*RESULTS, *VERDICTS]])
    html = render_html(report)
    assert len(report.comparisons) == 3 and report.run is not None
    assert "resnet_s/bn_fused_folded/cpu" in html and "tiny/broken/cpu" in html
    assert report.headline.cases_failed >= 1  # the failing pass of result-failed.json
