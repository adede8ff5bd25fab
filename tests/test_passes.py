"""Pass resolution, perfguard's own passes, user passes and the per-pass trace (in process)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from perfguard.backends.ort.folding import fold_constants
from perfguard.backends.ort.onnx_passes import (
    apply_pipeline,
    check_pass_names,
    graph_hash,
    list_onnx_passes,
    run_pipeline,
)
from perfguard.errors import BackendError, UserError
from perfguard.models.inputs import input_specs, make_feeds
from perfguard.models.zoo import build_model


def _run(model: onnx.ModelProto, feeds):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.fixture(scope="module")
def resnet() -> onnx.ModelProto:
    return build_model("resnet", {"depth": 2, "width": 8, "image_size": 32, "num_classes": 10})


def test_pass_names_resolve_or_fail_with_close_names():
    check_pass_names(["fuse_bn_into_conv", "constant_folding", "mypkg.passes:fuse"], "pipeline 'p'")
    with pytest.raises(UserError, match=r"unknown pass 'fuse_bn_into_cov' \(did you mean 'fuse_bn_into_conv'"):
        check_pass_names(["fuse_bn_into_cov"], "pipeline 'p'")
    with pytest.raises(UserError, match="must look like package.module:function"):
        check_pass_names(["not a:valid name"], "pipeline 'p'")
    sources = {info.source for info in list_onnx_passes()}
    assert sources == {"perfguard", "onnxoptimizer"}


def test_bn_fusion_without_folding_leaves_arithmetic_and_folding_removes_it(resnet):
    fused, trace = apply_pipeline(resnet, ["fuse_bn_into_conv"])
    assert "BatchNormalization" in {n.op_type for n in resnet.graph.node}
    assert "BatchNormalization" not in {n.op_type for n in fused.graph.node}
    assert len(fused.graph.node) > len(resnet.graph.node)  # weight arithmetic became nodes
    folded, trace2 = apply_pipeline(resnet, ["fuse_bn_into_conv", "constant_folding"])
    assert len(folded.graph.node) < len(resnet.graph.node)
    assert [p.name for p in trace2.passes] == ["fuse_bn_into_conv", "constant_folding"]
    assert [p.source for p in trace2.passes] == ["onnxoptimizer", "perfguard"]
    assert all(p.changed for p in trace2.passes)
    assert trace2.passes[1].nodes_before == len(fused.graph.node)
    assert trace2.passes[1].nodes_after == len(folded.graph.node)
    assert trace2.final_hash == graph_hash(folded) == trace2.passes[-1].ir_hash
    assert trace2.passes[0].op_histogram.get("Conv") == sum(n.op_type == "Conv" for n in resnet.graph.node)
    feeds = make_feeds(input_specs(resnet), 7)
    reference = _run(resnet, feeds)[0]
    for model in (fused, folded):
        np.testing.assert_allclose(_run(model, feeds)[0], reference, rtol=1e-3, atol=1e-4)


def test_trace_is_deterministic_and_marks_no_op_passes(resnet):
    _, first = apply_pipeline(resnet, ["eliminate_identity", "fuse_bn_into_conv", "constant_folding"])
    _, second = apply_pipeline(resnet, ["eliminate_identity", "fuse_bn_into_conv", "constant_folding"])
    assert [p.ir_hash for p in first.passes] == [p.ir_hash for p in second.passes]
    assert first.passes[0].changed is False  # there is no Identity to remove
    assert first.exact is True


def test_order_of_the_same_passes_changes_the_graph(resnet):
    a, _ = apply_pipeline(resnet, ["eliminate_nop_cast", "fuse_bn_into_conv"])
    b, _ = apply_pipeline(resnet, ["fuse_bn_into_conv", "eliminate_nop_cast"])
    assert graph_hash(a) != graph_hash(b)


def test_constant_folding_handles_legacy_weights_computed_by_nodes():
    legacy = build_model("legacy_cnn", {})
    ops = {n.op_type for n in legacy.graph.node}
    assert "ConstantOfShape" in ops
    folded = fold_constants(legacy)
    assert "ConstantOfShape" not in {n.op_type for n in folded.graph.node}
    onnx.checker.check_model(folded)
    feeds = make_feeds(input_specs(legacy), 3)
    np.testing.assert_allclose(_run(folded, feeds)[0], _run(legacy, feeds)[0], rtol=1e-4, atol=1e-6)


USER_PASSES = '''
import onnx
from onnx import numpy_helper

def scale_first_weight(model):
    out = onnx.ModelProto(); out.CopyFrom(model)
    init = out.graph.initializer[0]
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * 2, init.name))
    return out

def explode(model):
    raise ValueError("boom in user pass")

def break_graph(model):
    out = onnx.ModelProto(); out.CopyFrom(model)
    out.graph.node[0].input[0] = "no_such_value"
    return out

def not_a_model(model):
    return 42
'''


@pytest.fixture
def user_passes(tmp_path, monkeypatch):
    (tmp_path / "mycompiler_passes.py").write_text(USER_PASSES)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "mycompiler_passes"


def test_user_pass_runs_in_order_and_is_traced(resnet, user_passes):
    out, trace = apply_pipeline(resnet, ["fuse_bn_into_conv", f"{user_passes}:scale_first_weight"])
    assert [p.source for p in trace.passes] == ["onnxoptimizer", "user"]
    assert trace.passes[1].changed


def test_untraced_pipeline_does_the_same_work(resnet, user_passes):
    """A compile-time repeat runs ``run_pipeline``: the same graph as the traced compile, from an
    onnxoptimizer group, a perfguard pass and a user pass."""
    names = ["fuse_bn_into_conv", "eliminate_identity", "constant_folding", f"{user_passes}:scale_first_weight"]
    traced, trace = apply_pipeline(resnet, names)
    assert graph_hash(run_pipeline(resnet, names)) == graph_hash(traced) == trace.final_hash


@pytest.mark.parametrize(
    ("func", "message"),
    [
        ("explode", r"pass #2 'mycompiler_passes:explode' raised ValueError: boom in user pass"),
        ("break_graph", r"pass #2 'mycompiler_passes:break_graph' produced an invalid model"),
        ("not_a_model", r"returned int, expected onnx.ModelProto"),
        ("missing", r"module mycompiler_passes has no function 'missing'"),
    ],
)
def test_failing_user_pass_is_named(resnet, user_passes, func, message):
    with pytest.raises(BackendError, match=message):
        apply_pipeline(resnet, ["constant_folding", f"{user_passes}:{func}"])


def test_unimportable_user_module_is_a_backend_error(resnet):
    with pytest.raises(BackendError, match="cannot import no_such_compiler_pkg"):
        apply_pipeline(resnet, ["no_such_compiler_pkg.passes:fuse"])
