"""Per-model input settings: symbolic dims and input shapes from the suite, never a silent 1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from perfguard.errors import UserError
from perfguard.models.inputs import input_specs
from perfguard.results import schema_errors
from perfguard.suite import InputSetting, InputSettings, load_suite

from .conftest import run_cli, smallest_measure
from .factories import result_json

VOCAB = 50


def dynamic_model(unnamed: bool = False) -> onnx.ModelProto:
    """A BERT-like embedding + projection with symbolic ``batch`` and ``seq`` axes (an exporter's
    dynamic axes), plus a float ``bias`` input whose first axis is dynamic with no name when
    ``unnamed``."""
    rng = np.random.default_rng(0)
    emb = numpy_helper.from_array(rng.standard_normal((VOCAB, 8)).astype(np.float32), "emb")
    weight = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    bias = helper.make_tensor_value_info("bias", TensorProto.FLOAT, [None if unnamed else 1, 4])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "seq", 4])
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["h"]),
             helper.make_node("MatMul", ["h", "w"], ["p"]),
             helper.make_node("Add", ["p", "bias"], ["out"])]
    graph = helper.make_graph(nodes, "dyn", [ids, bias], [out], [emb, weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _shapes(specs):
    return {s.name: s.shape for s in specs}


def test_symbolic_dims_take_the_suite_values_and_are_recorded():
    specs = input_specs(dynamic_model(), InputSettings(dims={"batch": 2, "seq": 16}))
    assert _shapes(specs) == {"input_ids": (2, 16), "bias": (1, 4)}
    ids = next(s for s in specs if s.name == "input_ids")
    assert ids.shape_from == "suite" and dict(ids.dims) == {"batch": 2, "seq": 16}
    assert (ids.low, ids.high) == (0, VOCAB)  # the embedding table bound still applies
    bias = next(s for s in specs if s.name == "bias")
    assert bias.shape_from == "model" and not bias.dims
    assert ids.to_json()["shape_from"] == "suite" and ids.to_json()["dims"] == {"batch": 2, "seq": 16}


def test_a_dynamic_dim_without_a_value_is_refused_naming_input_and_dim():
    with pytest.raises(UserError) as info:
        input_specs(dynamic_model(), InputSettings(dims={"batch": 2}, where="s.toml: [models.m]"))
    message = str(info.value)
    assert "\n" not in message
    assert "s.toml: [models.m]" in message and "'input_ids'" in message and "'seq'" in message
    assert "dims = { seq = N }" in message
    with pytest.raises(UserError, match="'batch'"):  # no settings at all: refused too, never 1
        input_specs(dynamic_model())


def test_unnamed_dynamic_axis_needs_a_shape_and_shape_wins():
    with pytest.raises(UserError, match="input 'bias' axis 0 is dynamic with no name"):
        input_specs(dynamic_model(unnamed=True), InputSettings(dims={"batch": 1, "seq": 4}))
    settings = InputSettings(dims={"batch": 1, "seq": 4}, inputs={"bias": InputSetting(shape=(3, 4))})
    assert _shapes(input_specs(dynamic_model(unnamed=True), settings))["bias"] == (3, 4)
    # A full shape alone resolves the symbolic axes of that input.
    settings = InputSettings(inputs={"input_ids": InputSetting(shape=(8, 128), low=0, high=7)})
    ids = next(s for s in input_specs(dynamic_model(), settings) if s.name == "input_ids")
    assert ids.shape == (8, 128) and (ids.low, ids.high) == (0, 7) and dict(ids.dims) == {"batch": 8, "seq": 128}


@pytest.mark.parametrize(("settings", "fragment"), [
    (InputSettings(dims={"batch": 1, "sequ": 4}), "dims.sequ: the model has no symbolic dim 'sequ' (did you mean 'seq'?)"),
    (InputSettings(dims={"batch": 1, "seq": 4}, inputs={"input_id": InputSetting(low=0, high=2)}),
     "inputs.input_id: the model has no input 'input_id' (did you mean 'input_ids'?)"),
    (InputSettings(inputs={"input_ids": InputSetting(shape=(8,))}), "has 2 axes, found 1"),
    (InputSettings(dims={"batch": 1, "seq": 4}, inputs={"bias": InputSetting(shape=(2, 4))}),
     "axis 0 of input 'bias' is fixed at 1 in the model, found 2"),
    (InputSettings(dims={"batch": 2, "seq": 4}, inputs={"input_ids": InputSetting(shape=(3, 4))}),
     "which dims sets to 2; found 3"),
    (InputSettings(dims={"batch": 1, "seq": 4}, inputs={"bias": InputSetting(low=0, high=3)}),
     "low/high apply to integer inputs"),
])
def test_settings_that_do_not_fit_the_model_are_refused(settings, fragment):
    with pytest.raises(UserError) as info:
        input_specs(dynamic_model(), settings)
    assert fragment in str(info.value)


def _write(tmp_path: Path, models: str, *, unnamed: bool = False) -> Path:
    onnx.save(dynamic_model(unnamed), str(tmp_path / "dyn.onnx"))
    path = tmp_path / "suite.toml"
    path.write_text(models + smallest_measure(workers=1) + """
[pipelines.none]
passes = []
""")
    return path


def test_suite_reads_dims_and_inputs_and_refuses_bad_forms(tmp_path):
    path = _write(tmp_path, """
[models.dyn]
path = "dyn.onnx"
dims = { batch = 2, seq = 16 }
inputs.input_ids = { low = 0, high = 30 }
""")
    settings = load_suite(path).models["dyn"].input_settings
    assert dict(settings.dims) == {"batch": 2, "seq": 16}
    assert settings.inputs["input_ids"] == InputSetting(None, 0, 30)
    assert load_suite(path).models["dyn"].source()["input_settings"]["dims"] == {"batch": 2, "seq": 16}
    for text, fragment in [
        ('dims = { seq = 0 }', "[models.dyn] dims.seq: expected an integer >= 1, found an integer 0"),
        ('inputs.input_ids = { shape = "8x128" }', "[models.dyn] inputs.input_ids.shape: expected a list of integers"),
        ('inputs.input_ids = { shap = [8, 128] }', "unknown key (did you mean 'shape'?)"),
        ('inputs.input_ids = { low = 0 }', "give both 'low' and 'high'"),
        ('inputs.input_ids = { low = 5, high = 5 }', "expected an integer > low (5)"),
    ]:
        bad = _write(tmp_path, f'[models.dyn]\npath = "dyn.onnx"\n{text}\n')
        with pytest.raises(UserError) as info:
            load_suite(bad)
        assert str(bad) in str(info.value) and fragment in str(info.value), str(info.value)
    zoo = _write(tmp_path, '[models.z]\narch = "resnet"\ndims = { batch = 2 }\n')
    with pytest.raises(UserError, match="zoo models have fixed input shapes"):
        load_suite(zoo)


def test_validate_refuses_a_model_file_whose_dynamic_dims_are_not_given(tmp_path):
    path = _write(tmp_path, '[models.dyn]\npath = "dyn.onnx"\ndims = { batch = 2 }\n')
    proc = run_cli("validate", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("perfguard: error: ") and "'input_ids'" in line and "'seq'" in line, proc.stderr


@pytest.mark.slow
def test_run_measures_the_shapes_the_suite_gives_and_records_them(tmp_path):
    refused = _write(tmp_path, '[models.dyn]\npath = "dyn.onnx"\n')
    out = tmp_path / "never.json"
    proc = run_cli("run", str(refused), "--out", str(out), "--quiet")
    assert proc.returncode == 2 and "symbolic dim 'batch'" in proc.stderr and not out.exists(), proc.stderr
    path = _write(tmp_path, '[models.dyn]\npath = "dyn.onnx"\ndims = { batch = 2, seq = 16 }\n')
    out = tmp_path / "r.json"
    proc = run_cli("run", str(path), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = result_json(out)
    assert not schema_errors(document)
    inputs = {s["name"]: s for s in document["models"]["dyn"]["inputs"]}
    assert inputs["input_ids"]["shape"] == [2, 16] and inputs["input_ids"]["shape_from"] == "suite"
    assert inputs["input_ids"]["dims"] == {"batch": 2, "seq": 16}
    assert inputs["bias"]["shape_from"] == "model"
    case = document["cases"][0]
    assert case["status"] == "ok" and case["correctness"]["status"] == "verified"
    assert case["key"]["model"]["source"]["input_settings"]["dims"] == {"batch": 2, "seq": 16}
