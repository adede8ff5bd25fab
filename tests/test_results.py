"""The result document: schema, atomic writes, version handling, corrupt files."""

from __future__ import annotations

import json
import math

import pytest

from perfguard.errors import StorageError
from perfguard.results import RESULT_VERSION, Latency, load_result, schema_errors, write_json_atomic


def test_latency_summary_known_values():
    stats = Latency.from_values([[1.0, 2.0], [3.0, 4.0, 100.0]])
    assert stats.median == 3.0 and stats.min == 1.0 and stats.max == 100.0 and stats.n == 5
    assert stats.mean == pytest.approx(22.0)
    assert stats.p90 == pytest.approx(61.6)
    assert stats.per_worker == ((1.0, 2.0), (3.0, 4.0, 100.0))
    assert Latency.from_values([[2.0]]).stdev == 0.0
    with pytest.raises(ValueError, match="at least one value"):
        Latency.from_values([[]])


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "r.json"
    write_json_atomic(path, {"b": 1, "a": 2})
    assert path.read_text().index('"a"') < path.read_text().index('"b"')  # sorted keys
    with pytest.raises(ValueError):
        write_json_atomic(path, {"value": math.nan})
    assert json.loads(path.read_text()) == {"a": 2, "b": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left behind


def test_load_refuses_newer_corrupt_and_foreign_files(tmp_path):
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"version": RESULT_VERSION + 1}))
    with pytest.raises(StorageError, match="newer than this perfguard reads .*upgrade perfguard"):
        load_result(newer)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"version": 1, "cases": [')
    with pytest.raises(StorageError, match="corrupt result file \\(not JSON"):
        load_result(corrupt)
    foreign = tmp_path / "foreign.json"
    foreign.write_text("[1, 2]")
    with pytest.raises(StorageError, match="not a perfguard result"):
        load_result(foreign)
    incomplete = tmp_path / "incomplete.json"
    incomplete.write_text(json.dumps({"version": 1, "cases": []}))
    with pytest.raises(StorageError, match="corrupt result file: .*required property"):
        load_result(incomplete)
    with pytest.raises(StorageError, match="not found"):
        load_result(tmp_path / "missing.json")


def test_schema_rejects_a_case_without_trace_or_with_bad_values():
    case = {"id": "m/p/cpu", "model": "m", "pipeline": "p", "runner": "cpu", "status": "ok", "error": None,
            "key": {"model": {"name": "m", "sha256": "x", "source": {}},
                    "pipeline": {"name": "p", "passes": [], "options": {}, "sha256": "y"},
                    "backend": {"name": "ort", "versions": {}}, "runner": {"name": "cpu", "fingerprint_sha256": "z"},
                    "measure": {}},
            "key_hash": "k", "trace": None, "correctness": None, "metrics": {}, "measurement": None,
            "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:01Z"}
    document = {"version": 2, "tool": {"name": "perfguard", "version": "0"},
                "suite": {"name": "s", "path": "s.toml", "sha256": ""}, "started_at": "2026-01-01T00:00:00Z",
                "finished_at": "2026-01-01T00:00:01Z", "environment": {}, "models": {}, "cases": [case]}
    errors = schema_errors(document)
    assert any("trace" in e for e in errors)
    case["status"] = "failed"
    case["error"] = {"stage": "compile", "message": "boom"}
    assert schema_errors(document) == []
    case["started_at"] = "yesterday"
    assert schema_errors(document)


def test_an_ok_case_needs_latency_unless_it_says_why_it_was_not_measured():
    from pathlib import Path

    document = json.loads((Path(__file__).parent / "golden" / "v1" / "result-run.json").read_text())
    document["version"] = 2
    case = document["cases"][0]
    del case["metrics"]["latency_s"]
    assert any("latency_s" in e for e in schema_errors(document))
    case["not_measured"] = "identical artifact to its pair in m/p/cpu"
    assert schema_errors(document) == []


def test_a_tvm_trace_reads_its_own_fields_typed_and_writes_them_back_as_they_were():
    """TVM's trace fields (``TvmStages``, its ``TraceExtension``) are typed and validated like IREE's, not kept untyped in
    ``extra``; a trace of another backend (every older document's) reads without them."""
    from perfguard.backends.tvm.relax_trace import TvmStages
    from perfguard.errors import FieldError
    from perfguard.results.result import Trace

    common = {"passes": [], "input_hash": "a", "final_hash": "b", "total_time_s": 1.5, "exact": True, "note": ""}
    data = {**common, "import_time_s": 0.25, "build_time_s": 1.0, "prim_funcs": 7, "nested_passes": 40,
            "by_a_plugin": {"k": 1}}
    trace = Trace.from_json(data)
    assert trace.extension == TvmStages(0.25, 1.0, 7, 40) and trace.extra == {"by_a_plugin": {"k": 1}}
    assert trace.to_json() == data
    assert Trace.from_json(common).extension is None and Trace.from_json(common).to_json() == common
    with pytest.raises(FieldError, match="prim_funcs"):
        Trace.from_json({**data, "prim_funcs": -1})
    without = dict(data)
    del without["build_time_s"]
    with pytest.raises(FieldError, match="build_time_s"):
        Trace.from_json(without)
