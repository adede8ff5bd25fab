"""The worker protocol: every request and response kind survives its JSON file, malformed
documents are refused with the field named, and the parent can import it without the heavy stack."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from perfguard.backends.base import Artifact
from perfguard.models.inputs import InputSpec
from perfguard.results.result import CorrectnessCheck
from perfguard.workers import protocol
from perfguard.workers.protocol import (
    CheckTolerance,
    CompilePipeline,
    CompileRequest,
    CompileResponse,
    MeasureRequest,
    MeasureResponse,
    MeasureVariant,
    MemoryRequest,
    MemoryResponse,
    ProtocolError,
    VerifyRequest,
    VerifyResponse,
    WorkerError,
    decode_response,
    encode_response,
    request_from_json,
)

ARTIFACT = Artifact("mock", "/tmp/a/mock.json", {"latency": 0.001, "crash_worker": False}, "ab" * 32, 105, 1)
SPECS = (InputSpec("x", "float32", (1, 4)), InputSpec("ids", "int64", (1, 8), 0, 100, "index", "suite", {"seq": 8}))
TOLERANCE = CheckTolerance(rtol=1e-3, atol=0, seed=1234)
OPTIONS = {"provider_options": {}, "device_id": None, "clock_tolerance": 0.02, "telemetry_interval": 0.1}

REQUESTS = {
    "compile": CompileRequest(
        backend="ort", model_path="/m/model.onnx", pipeline=CompilePipeline("O2", "ort", ("fuse", "fold"), {"level": 2}),
        out_dir="/w/artifacts/head/000", compiler_path=None, runner="cpu", runner_options=OPTIONS, threads=1,
        compile_repeats=5, correctness=TOLERANCE, input_specs=SPECS, reference_cache="/w/refs/x-1234.npz"),
    "measure": MeasureRequest(
        variants=(MeasureVariant("head:m/O2/cpu", ARTIFACT), MeasureVariant("base:m/O2/cpu", ARTIFACT)), runner="cpu",
        runner_options=None, threads=2, warmup=3, rounds=10, min_time=0.02, seed=0, worker_index=4, input_specs=SPECS,
        loops={"head:m/O2/cpu": 8, "base:m/O2/cpu": 9}),
    "memory": MemoryRequest(artifact=ARTIFACT, runner="cpu", runner_options=OPTIONS, threads=1, warmup=3,
                            min_time=0.02, seed=2, input_specs=SPECS),
    "verify": VerifyRequest(artifact=ARTIFACT, runner="cuda", runner_options=OPTIONS, threads=1, input_specs=SPECS,
                            correctness=TOLERANCE, reference="/art/refs/x-1234.npz"),
}

# The request keys of the wire format before the protocol was typed: the files must not change.
WIRE_KEYS = {
    "compile": {"mode", "backend", "model_path", "pipeline", "out_dir", "compiler_path", "runner", "threads",
                "compile_repeats", "runner_options", "correctness", "input_specs", "reference_cache"},
    "measure": {"mode", "variants", "runner", "threads", "warmup", "rounds", "min_time", "seed", "worker_index",
                "input_specs", "loops", "runner_options", "min_rounds", "max_time"},
    # min_time since the warm-up is bounded by time (probe and measurement warm up alike).
    "memory": {"mode", "artifact", "runner", "runner_options", "threads", "warmup", "min_time", "seed", "input_specs"},
    "verify": {"mode", "artifact", "runner", "runner_options", "threads", "input_specs", "correctness", "reference"},
}

CHECK = CorrectnessCheck(passed=True, reason="", max_abs_error=1e-7, max_rel_error=2e-6, rtol=1e-3, atol=1e-4,
                         seed=1234, status="verified", probe_seed=1235)
RESPONSES = {
    "compile": CompileResponse(ARTIFACT, {"passes": [], "input_hash": "0" * 16, "final_hash": "", "total_time_s": 0.1,
                                          "exact": True, "note": "", "cache_hit": False}, 0.5, (0.5, 0.6, 0.4), CHECK),
    "measure": MeasureResponse({"v": (0.001, 0.0011)}, {"v": 4}, {"v": 4096}, 10_000_000, ("v",), 1234,
                               {"sources": ["nvml"], "columns": {"t": [0.0, 0.1]}}, 9_000_000),
    "memory": MemoryResponse(peak_rss_bytes=100_000_000, session_rss_bytes=20_000_000),
    "verify": VerifyResponse(CorrectnessCheck(False, "output 0 differs", 0.5, 0.25, 1e-3, 1e-4, 1234)),
}


def _through_file(document: dict) -> dict:
    return json.loads(json.dumps(document))


@pytest.mark.parametrize("mode", sorted(REQUESTS))
def test_each_request_kind_round_trips_through_its_json_file(mode):
    request = REQUESTS[mode]
    document = _through_file(request.to_json())
    assert document["mode"] == mode == request.mode
    assert set(document) == WIRE_KEYS[mode]
    assert request_from_json(document) == request
    assert type(request).from_json(document) == request


@pytest.mark.parametrize("mode", sorted(RESPONSES))
def test_each_response_kind_round_trips_and_parses_by_its_request(mode):
    response = RESPONSES[mode]
    document = _through_file(encode_response(response))
    assert "error" not in document
    assert type(response).from_json(document) == response
    assert decode_response(document, REQUESTS[mode].parse_response) == (response, None)


def test_correctness_check_keeps_the_entry_format():
    """``status`` and ``probe_seed`` are left out when absent (verify), as the result files have it."""
    verify = RESPONSES["verify"].correctness.to_json()  # type: ignore[union-attr]
    assert set(verify) == {"passed", "reason", "max_abs_error", "max_rel_error", "rtol", "atol", "seed"}
    assert CHECK.to_json()["status"] == "verified" and CHECK.to_json()["probe_seed"] == 1235
    assert json.dumps(TOLERANCE.to_json()) == '{"rtol": 0.001, "atol": 0, "seed": 1234}'  # an int stays an int


def test_an_error_travels_alone_or_with_the_body_of_a_wrong_answer():
    error = WorkerError("correctness", "wrong answer: output 0 differs")
    alone = _through_file(encode_response(None, WorkerError("measure", "RuntimeError: boom", "RuntimeError: boom")))
    assert alone == {"error": {"stage": "measure", "message": "RuntimeError: boom", "detail": "RuntimeError: boom"}}
    assert decode_response(alone, REQUESTS["measure"].parse_response) == (
        None, WorkerError("measure", "RuntimeError: boom", "RuntimeError: boom"))
    both = _through_file(encode_response(RESPONSES["compile"], error))
    assert both["error"] == {"stage": "correctness", "message": "wrong answer: output 0 differs"}
    assert decode_response(both, REQUESTS["compile"].parse_response) == (RESPONSES["compile"], error)
    with pytest.raises(ValueError, match="a body or an error"):
        encode_response(None)


def test_an_unknown_mode_is_refused_with_the_valid_modes():
    with pytest.raises(ProtocolError, match=r"unknown mode 'bogus'; expected one of compile, measure, memory, verify"):
        request_from_json({"mode": "bogus"})
    with pytest.raises(ProtocolError, match=r"worker request: missing field 'mode'"):
        request_from_json({"runner": "cpu"})


@pytest.mark.parametrize(("mode", "field"), [("compile", "out_dir"), ("measure", "worker_index"),
                                             ("memory", "artifact"), ("verify", "reference")])
def test_a_missing_field_is_refused_naming_the_kind_and_the_field(mode, field):
    document = REQUESTS[mode].to_json()
    del document[field]
    with pytest.raises(ProtocolError, match=rf"{mode} request: missing field '{field}' \(found: "):
        request_from_json(document)


def test_a_mistyped_or_malformed_field_is_refused():
    document = REQUESTS["measure"].to_json()
    document["rounds"] = "10"
    with pytest.raises(ProtocolError, match=r"measure request: field 'rounds' must be an integer, found '10'"):
        request_from_json(document)
    document = REQUESTS["compile"].to_json()
    del document["pipeline"]["passes"]
    with pytest.raises(ProtocolError, match=r"compile pipeline: missing field 'passes'"):
        request_from_json(document)
    document = REQUESTS["memory"].to_json()
    document["input_specs"] = [{"name": "x"}]
    with pytest.raises(ProtocolError, match=r"'input_specs' holds an entry that is not an input spec"):
        request_from_json(document)
    with pytest.raises(ProtocolError, match=r"memory response: missing field 'session_rss_bytes'"):
        decode_response({"peak_rss_bytes": 1}, REQUESTS["memory"].parse_response)


def test_measure_requests_per_worker_reuse_loops_only_when_they_cover_every_variant():
    request = REQUESTS["measure"]
    assert isinstance(request, MeasureRequest)
    head, base = request.variants
    second = request.for_worker(7, [head], {"head:m/O2/cpu": 8})
    assert second.worker_index == 7 and second.variants == (head,) and second.loops == {"head:m/O2/cpu": 8}
    assert request.for_worker(1, [head, base], {"head:m/O2/cpu": 8}).loops is None
    assert request.for_worker(0, [head], {}).loops is None


def test_hybrid_stages_split_the_passes_and_the_prefix_drops_backend_options():
    request = REQUESTS["compile"]
    assert isinstance(request, CompileRequest)
    first, rest = request.hybrid_stages(1, "/old/compiler")
    assert first.pipeline.passes == ("fuse",) and first.pipeline.options == {} and first.compile_repeats == 1
    assert first.compiler_path == "/old/compiler" and first.out_dir == "/w/artifacts/head/000-prefix"
    assert rest.pipeline.passes == ("fold",) and rest.pipeline.options == {"level": 2} and rest.compile_repeats == 5
    assert rest.with_model("/w/artifacts/head/000-prefix/model.onnx").model_path.endswith("-prefix/model.onnx")


def test_status_lines_name_the_variant_a_worker_was_busy_with():
    ids = [protocol.variant_id("head", "m/O2/cpu"), protocol.variant_id("base", "m/O2/cpu")]
    assert ids == ["head:m/O2/cpu", "base:m/O2/cpu"]
    text = "".join(protocol.status_line(m) for m in ("measuring", protocol.variant_status("running", ids[1])))
    statuses, others = protocol.split_stderr(text + "Traceback (most recent call last):\n\n  boom\n")
    assert statuses == ["measuring", "running base:m/O2/cpu"] and others == ["Traceback (most recent call last):",
                                                                               "  boom"]
    assert protocol.status_variant(statuses[-1], ids) == "base:m/O2/cpu"
    assert protocol.status_variant("loading head:m/O2/cpu", ids) == "head:m/O2/cpu"
    assert protocol.status_variant("running other:x", ids) is None and protocol.status_variant("compile", ids) is None
    with pytest.raises(ValueError, match="unknown status verb"):
        protocol.variant_status("timing", ids[0])


def test_the_worker_refuses_an_unknown_mode_in_its_response(tmp_path):
    from perfguard.workers import worker

    request, response = tmp_path / "request.json", tmp_path / "response.json"
    request.write_text(json.dumps({"mode": "bogus"}))
    assert worker.main([str(request), str(response)]) == 0
    error = json.loads(response.read_text())["error"]
    assert error["stage"] == "bogus" and "unknown mode 'bogus'" in error["message"]


def test_importing_the_protocol_leaves_backends_runners_onnx_and_numpy_out():
    heavy = ["numpy", "onnx", "onnxruntime", "scipy", "perfguard.backends", "perfguard.runners",
             "perfguard.models.inputs", "perfguard.suite", "perfguard.workers.worker", "perfguard.workers.launch"]
    code = ("import sys, perfguard.workers.protocol\n"
            f"print([m for m in {heavy!r} if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout
