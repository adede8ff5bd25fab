"""Tests for the seeded model zoo: valid, runnable, deterministic graphs with the patterns passes target."""

from __future__ import annotations

import collections
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from perfguard.errors import UserError
from perfguard.models import zoo

# Small configurations: each builds in milliseconds and runs in well under a millisecond.
SMALL: dict[str, dict[str, object]] = {
    "resnet": {"depth": 2, "width": 8, "image_size": 32, "num_classes": 10},
    "bert": {"layers": 1, "hidden": 32, "heads": 2, "seq_len": 16, "vocab": 100},
    "yolo": {"width": 4, "image_size": 64, "num_classes": 3},
    "legacy_cnn": {},
}

EXPECTED_SHAPES: dict[str, list[tuple[int, ...]]] = {
    "resnet": [(1, 10)],
    "bert": [(1, 16, 32)],
    "yolo": [(1, 3 * (8 * 8 + 4 * 4 + 2 * 2), 8)],
    "legacy_cnn": [(1, 10)],
}


def _random_feeds(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded random inputs of the declared shapes; integer inputs stay in the recorded ranges."""
    rng = np.random.default_rng(seed)
    meta = {prop.key: prop.value for prop in model.metadata_props}
    ranges = json.loads(meta.get("perfguard.input_ranges", "{}"))
    feeds: dict[str, np.ndarray] = {}
    for value in model.graph.input:
        shape = [dim.dim_value for dim in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            low, high = ranges[value.name]
            array = rng.integers(low, high, size=shape, dtype=np.int64)
            if value.name == "attention_mask":  # a padded batch: real tokens, then padding
                array = np.ones(shape, np.int64)
                array[..., shape[-1] * 3 // 4 :] = 0
            feeds[value.name] = array
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return [np.asarray(out) for out in session.run(None, feeds or _random_feeds(model))]


def _ops(model: onnx.ModelProto) -> collections.Counter[str]:
    return collections.Counter(node.op_type for node in model.graph.node)


def _small(arch: str, **overrides: object) -> onnx.ModelProto:
    return zoo.build_model(arch, {**SMALL[arch], **overrides})


def _bytes(model: onnx.ModelProto) -> bytes:
    return model.SerializeToString(deterministic=True)


# -- validity ----------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_small_model_passes_full_check_and_runs_finite(arch: str) -> None:
    model = _small(arch)
    onnx.checker.check_model(model, full_check=True)
    outputs = _run(model)
    assert [out.shape for out in outputs] == EXPECTED_SHAPES[arch]
    for out in outputs:
        assert np.isfinite(out).all()
        assert out.std() > 1e-3, "outputs are (nearly) constant"


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_declared_output_shape_matches_run(arch: str) -> None:
    model = _small(arch)
    declared = [tuple(dim.dim_value for dim in out.type.tensor_type.shape.dim) for out in model.graph.output]
    assert declared == [out.shape for out in _run(model)]


@pytest.mark.parametrize(
    ("arch", "opset", "ir_version"),
    [("resnet", 17, 8), ("bert", 17, 8), ("yolo", 17, 8), ("legacy_cnn", 9, 8)],
)
def test_defaults_name_opset_and_ir_version(arch: str, opset: int, ir_version: int) -> None:
    model = _small(arch)
    assert model.graph.name == arch
    assert [(o.domain, o.version) for o in model.opset_import] == [("", opset)]
    assert model.ir_version == ir_version
    for value in model.graph.input:
        assert all(dim.dim_value > 0 for dim in value.type.tensor_type.shape.dim), "shapes must be fixed"


@pytest.mark.parametrize(
    ("arch", "opset"),
    [("resnet", 11), ("bert", 11), ("bert", 13), ("bert", 18), ("bert", 21), ("yolo", 11), ("yolo", 12)]
    + [("yolo", 13), ("yolo", 19), ("legacy_cnn", 10), ("legacy_cnn", 11), ("legacy_cnn", 12)],
)
def test_other_opsets_pass_check_and_run(arch: str, opset: int) -> None:
    model = _small(arch, opset=opset)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == opset
    assert model.ir_version >= 8
    assert all(np.isfinite(out).all() for out in _run(model))


def test_batch_parameter_sets_leading_dimension() -> None:
    assert _run(_small("resnet", batch=2))[0].shape == (2, 10)
    assert _run(_small("bert", batch=3))[0].shape == (3, 16, 32)
    assert _run(_small("yolo", batch=2))[0].shape == (2, 252, 8)


def test_bert_mask_hides_padded_tokens() -> None:
    # Changing token ids under mask=0 must not change the hidden states of unmasked tokens.
    model = _small("bert")
    feeds = _random_feeds(model)
    changed = {**feeds, "input_ids": feeds["input_ids"].copy()}
    changed["input_ids"][..., 12:] = (changed["input_ids"][..., 12:] + 1) % 100
    before, after = _run(model, feeds)[0], _run(model, changed)[0]
    np.testing.assert_allclose(before[:, :12], after[:, :12], rtol=1e-5, atol=1e-5)
    assert not np.allclose(before[:, 12:], after[:, 12:])


# -- determinism -------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_same_seed_gives_identical_bytes(arch: str) -> None:
    assert _bytes(_small(arch, seed=7)) == _bytes(_small(arch, seed=7))


@pytest.mark.parametrize("arch", sorted(SMALL))
def test_different_seed_gives_different_weights(arch: str) -> None:
    first, second = _small(arch, seed=1), _small(arch, seed=2)
    assert _bytes(first) != _bytes(second)
    assert [n.op_type for n in first.graph.node] == [n.op_type for n in second.graph.node]


def test_build_model_matches_direct_call_and_records_params() -> None:
    model = zoo.build_model("bert", SMALL["bert"])
    assert _bytes(model) == _bytes(zoo.build_bert(**SMALL["bert"]))  # type: ignore[arg-type]
    meta = {prop.key: prop.value for prop in model.metadata_props}
    assert meta["perfguard.arch"] == "bert"
    params = json.loads(meta["perfguard.params"])
    assert params["ffn"] == 4 * 32 and params["seed"] == 0 and params["opset"] == 17
    assert json.loads(meta["perfguard.input_ranges"]) == {"attention_mask": [0, 2], "input_ids": [0, 100]}


# -- the patterns compiler passes look for -------------------------------------------------------


def test_resnet_keeps_batchnorm_separate_and_has_residual_adds() -> None:
    ops = _ops(_small("resnet", depth=4))
    assert ops["BatchNormalization"] == ops["Conv"] > 0
    assert ops["Add"] == 4
    assert {"Relu", "MaxPool", "GlobalAveragePool", "Flatten", "Gemm"} <= set(ops)


def test_bert_spells_out_layernorm_gelu_and_mask() -> None:
    layers = 2
    ops = _ops(_small("bert", layers=layers))
    norms = 1 + 2 * layers
    assert ops["ReduceMean"] == 2 * norms and ops["Pow"] == ops["Sqrt"] == norms
    assert ops["Erf"] == layers and ops["Softmax"] == layers
    assert {"Gather", "MatMul", "Reshape", "Transpose", "Cast", "Unsqueeze", "Sub"} <= set(ops)
    assert "LayerNormalization" not in ops and "Gelu" not in ops


def test_yolo_has_pyramid_silu_and_three_heads() -> None:
    model = _small("yolo")
    ops = _ops(model)
    assert ops["Resize"] == 2
    assert ops["Concat"] == 3  # two pyramid merges and the output
    assert ops["Sigmoid"] == ops["BatchNormalization"] + 3  # one per SiLU plus one per head
    resize = next(n for n in model.graph.node if n.op_type == "Resize")
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in resize.attribute}
    assert attributes["mode"] == b"nearest"


def test_legacy_cnn_is_old_opset_with_runtime_weight() -> None:
    model = zoo.build_legacy_cnn()
    assert model.opset_import[0].version < 13
    ops = _ops(model)
    assert {"ConstantOfShape", "Sum", "LRN", "Dropout", "Conv", "Relu", "MaxPool", "Gemm"} <= set(ops)
    producers = {out: node for node in model.graph.node for out in node.output}
    conv_weights = [producers.get(n.input[1]) for n in model.graph.node if n.op_type == "Conv"]
    computed = [node for node in conv_weights if node is not None]
    assert len(computed) == 1 and computed[0].op_type == "Add"
    assert producers[computed[0].input[0]].op_type == "ConstantOfShape"


# -- size parameters --------------------------------------------------------------------------


def test_resnet_stage_layout() -> None:
    assert zoo.resnet_stage_layout(1) == (1,)
    assert zoo.resnet_stage_layout(3) == (1, 1, 1)
    assert zoo.resnet_stage_layout(8) == (2, 2, 2, 2)
    assert zoo.resnet_stage_layout(16) == (3, 4, 6, 3)
    assert zoo.resnet_stage_layout(18) == (4, 5, 5, 4)
    assert all(sum(zoo.resnet_stage_layout(depth)) == depth for depth in range(1, 40))


def test_resnet_depth_adds_seven_nodes_per_block() -> None:
    counts = {depth: len(_small("resnet", depth=depth).graph.node) for depth in (4, 5, 6)}
    assert counts[5] - counts[4] == counts[6] - counts[5] == 7  # Conv BN Relu Conv BN Add Relu


def test_bert_layers_add_a_fixed_number_of_nodes() -> None:
    counts = [len(_small("bert", layers=layers).graph.node) for layers in (1, 2, 3)]
    assert counts[1] - counts[0] == counts[2] - counts[1] > 40


def test_width_scales_parameters_not_nodes() -> None:
    narrow, wide = _small("resnet", width=8), _small("resnet", width=16)
    assert len(narrow.graph.node) == len(wide.graph.node)
    assert 3 < zoo.parameter_count(wide) / zoo.parameter_count(narrow) < 4.5
    thin, thick = _small("yolo", width=4), _small("yolo", width=8)
    assert len(thin.graph.node) == len(thick.graph.node)
    assert zoo.parameter_count(thick) > 3 * zoo.parameter_count(thin)


# -- registry and validation -----------------------------------------------------------------


def test_registry_and_defaults() -> None:
    assert set(zoo.ARCHITECTURES) == {"resnet", "bert", "yolo", "legacy_cnn"}
    assert zoo.architecture_params("resnet") == {
        "depth": 18,
        "width": 64,
        "image_size": 224,
        "num_classes": 1000,
        "batch": 1,
        "seed": 0,
        "opset": 17,
    }
    assert zoo.architecture_params("bert")["ffn"] is None
    assert zoo.architecture_params("legacy_cnn") == {"seed": 0, "opset": 9}


def test_unknown_architecture_lists_names_with_hint() -> None:
    with pytest.raises(UserError) as info:
        zoo.build_model("resnt", {})
    message = str(info.value)
    assert "unknown architecture 'resnt'" in message
    assert "did you mean 'resnet'" in message
    assert "valid: bert, legacy_cnn, resnet, yolo" in message
    with pytest.raises(UserError, match="unknown architecture 'gpt'"):
        zoo.architecture_params("gpt")
    with pytest.raises(UserError, match="unknown architecture"):
        zoo.build_model(["resnet"], {})  # type: ignore[arg-type]


def test_unknown_parameter_lists_valid_parameters() -> None:
    with pytest.raises(UserError) as info:
        zoo.build_model("resnet", {"dept": 2})
    message = str(info.value)
    assert "unknown parameter 'dept'" in message and "did you mean 'depth'" in message
    assert "valid: batch, depth, image_size, num_classes, opset, seed, width" in message


@pytest.mark.parametrize(
    ("arch", "params", "expected"),
    [
        ("resnet", {"depth": "18"}, "'depth' must be an integer, got str '18'"),
        ("resnet", {"width": True}, "'width' must be an integer, got bool True"),
        ("yolo", {"image_size": 256.0}, "'image_size' must be an integer, got float 256.0"),
        ("bert", {"ffn": "wide"}, "'ffn' must be an integer or null, got str 'wide'"),
        ("resnet", {"depth": 0}, "'depth' must be a positive integer, got 0"),
        ("bert", {"heads": -2}, "'heads' must be a positive integer, got -2"),
        ("bert", {"ffn": 0}, "'ffn' must be a positive integer, got 0"),
        ("yolo", {"seed": -1}, "'seed' must be an integer >= 0, got -1"),
        ("resnet", {"opset": 7}, "opset 7 is not supported"),
        ("legacy_cnn", {"opset": 17}, "opset 17 is not supported; use 9..12"),
        ("bert", {"hidden": 30, "heads": 4}, "hidden (30) must be divisible by heads (4)"),
        ("yolo", {"image_size": 100}, "image_size must be a multiple of 32"),
    ],
)
def test_bad_values_raise_user_error(arch: str, params: dict[str, object], expected: str) -> None:
    with pytest.raises(UserError) as info:
        zoo.build_model(arch, params)
    assert expected in str(info.value)


def test_direct_builder_calls_are_validated_too() -> None:
    with pytest.raises(UserError, match="'width' must be a positive integer"):
        zoo.build_resnet(width=0)


def test_optional_ffn_accepts_null_and_integer() -> None:
    default = zoo.build_model("bert", {**SMALL["bert"], "ffn": None})
    explicit = zoo.build_model("bert", {**SMALL["bert"], "ffn": 128})
    assert _bytes(default) == _bytes(explicit)
