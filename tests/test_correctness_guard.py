"""The correctness guard says when it is blind: reference outputs that do not depend on the inputs
(weights all one constant, as in stripped test exports) cannot tell a wrong pass from a right one."""

from __future__ import annotations

import copy
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from perfguard.models.inputs import InputSpec, make_feeds
from perfguard.report import parse_document, write_report
from perfguard.results import schema_errors
from perfguard.workers.worker import blindness, probe_inputs

from .conftest import run_cli, smallest_measure
from .factories import result_json

SWAP_PASS = '''
import onnx


def relu_to_sigmoid(model):
    """A wrong "optimization": Relu becomes Sigmoid."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for node in out.graph.node:
        if node.op_type == "Relu":
            node.op_type = "Sigmoid"
    return out
'''


def relu_model(weight: np.ndarray) -> onnx.ModelProto:
    """x -> Relu -> MatMul(weight) -> Add(bias): with an all-zero weight the output is the bias,
    whatever x is (and whatever the Relu became)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    inits = [numpy_helper.from_array(weight.astype(np.float32), "w"),
             numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "b")]
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["y"])]
    graph = helper.make_graph(nodes, "relu", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_probe_inputs_differ_and_blindness_uses_the_tolerance():
    specs = [InputSpec("x", "float32", (1, 4))]
    feeds = make_feeds(specs, 1234)
    seed, other = probe_inputs(specs, 1234, feeds)
    assert seed == 1235 and not np.array_equal(feeds["x"], other["x"])
    # Inputs that cannot vary (a mask of width 1 is all ones): no probe, the check covers them all.
    mask = [InputSpec("mask", "int64", (1, 1), 0, 2, "mask")]
    assert probe_inputs(mask, 0, make_feeds(mask, 0)) is None
    same = [np.array([1.0, 2.0])]
    assert blindness(same, [np.array([1.0, 2.0 + 1e-7])], rtol=1e-3, atol=1e-4)
    assert not blindness(same, [np.array([1.0, 2.5])], rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_a_constant_output_model_is_blind_not_correct_in_result_table_and_report(tmp_path):
    rng = np.random.default_rng(0)
    onnx.save(relu_model(np.zeros((4, 3))), str(tmp_path / "blind.onnx"))
    onnx.save(relu_model(rng.standard_normal((4, 3))), str(tmp_path / "live.onnx"))
    compiler = tmp_path / "compiler"
    compiler.mkdir()
    (compiler / "swaps.py").write_text(SWAP_PASS)
    suite = tmp_path / "suite.toml"
    suite.write_text(smallest_measure(workers=1) + textwrap.dedent("""
        [compiler]
        path = "compiler"
        [models.blind]
        path = "blind.onnx"
        [models.live]
        path = "live.onnx"
        [pipelines.none]
        passes = []
        [pipelines.swap]
        passes = ["swaps:relu_to_sigmoid"]
        """))
    out = tmp_path / "r.json"
    proc = run_cli("run", str(suite), "--out", str(out), "--quiet")
    assert proc.returncode == 4, proc.stdout + proc.stderr  # live/swap is a wrong answer
    document = result_json(out)
    assert not schema_errors(document)
    cases = {c["id"]: c for c in document["cases"]}
    for case_id in ("blind/none/cpu", "blind/swap/cpu"):
        case = cases[case_id]
        assert case["status"] == "ok", case["error"]
        assert case["correctness"]["status"] == "blind" and case["correctness"]["passed"] is True
        assert "do not depend on the inputs" in case["correctness"]["reason"]
        assert case["correctness"]["probe_seed"] == case["correctness"]["seed"] + 1
    assert cases["live/none/cpu"]["correctness"]["status"] == "verified"
    live_swap = cases["live/swap/cpu"]
    assert live_swap["status"] == "failed" and live_swap["error"]["stage"] == "correctness"
    assert live_swap["correctness"]["status"] == "failed"
    # The run table and its summary line never show a blind case as plainly "ok".
    blind_rows = [line for line in proc.stdout.splitlines() if "blind/" in line]
    assert blind_rows and all("ok (blind)" in line for line in blind_rows), proc.stdout
    assert "correctness not verified for 2 (blind" in proc.stdout
    # The HTML and Markdown reports say so too.
    written = write_report([parse_document(document)], tmp_path / "report")
    html = written["html"].read_text()
    assert "correctness not verified (blind)" in html and 'class="badge unknown"' in html
    summary = written["summary"].read_text()
    assert "⚠️ ok, correctness blind" in summary
    assert "correctness not verified for 2 cases" in summary
    verified_only = copy.deepcopy(document)
    verified_only["cases"] = [cases["live/none/cpu"]]
    written = write_report([parse_document(verified_only)], tmp_path / "report2")
    assert "blind" not in written["summary"].read_text()
