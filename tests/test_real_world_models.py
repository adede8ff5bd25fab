"""Model files as they are found in the wild, through the real ``perfguard`` command line.

* IR-version-3 exports (the older model-zoo style): every initializer is also listed in
  ``graph.input`` and some weights are computed by ``ConstantOfShape`` / ``Constant`` nodes. ONNX
  Runtime treats those initializers as constants, so perfguard must too: folding and BN fusion fire,
  and the artifact still passes ``onnx.checker``.
* External data (``model.onnx`` + ``model.onnx.data``): loads, hashes the data, compiles, and the
  artifact keeps its data file when it is copied with ``compile --out`` / ``run --artifacts``.
* Pass traces of user passes that edit the ``ModelProto`` they are given in place.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from .conftest import run_cli, smallest_measure
from .factories import result_json

pytestmark = pytest.mark.slow

# The smallest sampling the suite allows: measurement is not what these tests check.
MEASURE = smallest_measure(workers=2)

PIPELINES = """
[pipelines.none]
passes = []
[pipelines.folded]
passes = ["fuse_bn_into_conv", "constant_folding"]
[pipelines.fold_only]
passes = ["constant_folding"]
"""


def _tensor(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array, name)


def ir3_model() -> onnx.ModelProto:
    """Two Conv+BN blocks in the old style: initializers repeated in ``graph.input``; the second
    block's conv weights come from ``ConstantOfShape`` (+ an initializer), the Reshape's shape from a
    ``Constant`` node."""
    rng = np.random.default_rng(3)
    channels = 8
    inits = [
        _tensor("w1", rng.standard_normal((channels, 3, 3, 3)).astype(np.float32) * 0.3),
        _tensor("w2_shape", np.array([channels, channels, 3, 3], dtype=np.int64)),
        _tensor("w2_delta", rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) * 0.1),
    ]
    for block in (1, 2):
        inits += [
            _tensor(f"bn{block}_scale", rng.uniform(0.5, 1.5, channels).astype(np.float32)),
            _tensor(f"bn{block}_bias", rng.standard_normal(channels).astype(np.float32) * 0.1),
            _tensor(f"bn{block}_mean", rng.standard_normal(channels).astype(np.float32) * 0.1),
            _tensor(f"bn{block}_var", rng.uniform(0.5, 2.0, channels).astype(np.float32)),
        ]
    fill = numpy_helper.from_array(np.array([0.05], dtype=np.float32))
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1_scale", "bn1_bias", "bn1_mean", "bn1_var"], ["b1"]),
        helper.make_node("Relu", ["b1"], ["r1"]),
        helper.make_node("ConstantOfShape", ["w2_shape"], ["w2_base"], value=fill),
        helper.make_node("Add", ["w2_base", "w2_delta"], ["w2"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "bn2_scale", "bn2_bias", "bn2_mean", "bn2_var"], ["b2"]),
        helper.make_node("Relu", ["b2"], ["r2"]),
        helper.make_node("Constant", [], ["flat_shape"], value=_tensor("v", np.array([1, -1], dtype=np.int64))),
        helper.make_node("Reshape", ["r2", "flat_shape"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])]
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    graph = helper.make_graph(nodes, "ir3_cnn", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels * 256])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=3)
    onnx.checker.check_model(model)
    return model


def external_model() -> onnx.ModelProto:
    rng = np.random.default_rng(5)
    inits = [_tensor("w", rng.standard_normal((16, 3, 3, 3)).astype(np.float32)),
             _tensor("fc", rng.standard_normal((16 * 64, 10)).astype(np.float32) * 0.05)]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["y"])]
    graph = helper.make_graph(nodes, "external", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _suite(folder: Path, models: str, pipelines: str, extra: str = "") -> Path:
    path = folder / "suite.toml"
    path.write_text(models + MEASURE + pipelines + extra)
    return path


@pytest.fixture(scope="module")
def ir3_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    folder = tmp_path_factory.mktemp("ir3")
    onnx.save(ir3_model(), str(folder / "legacy.onnx"))
    suite = _suite(folder, '[models.legacy]\npath = "legacy.onnx"\n', PIPELINES)
    out = folder / "r.json"
    keep = folder / "kept"
    proc = run_cli("run", str(suite), "--out", str(out), "--keep-artifacts", str(keep), "--quiet")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return result_json(out), keep


def test_ir3_initializer_inputs_are_constants_so_fusion_and_folding_fire(ir3_run):
    document, keep = ir3_run
    cases = {c["pipeline"]: c for c in document["cases"]}
    assert all(c["status"] == "ok" for c in cases.values()), [c["error"] for c in cases.values()]
    none_nodes = cases["none"]["metrics"]["node_count"]
    folded = cases["folded"]
    assert none_nodes == 10
    # BN1 fused (its arithmetic folded), ConstantOfShape+Add and Constant folded: 10 -> 6 nodes.
    assert folded["metrics"]["node_count"] == 6, folded["trace"]
    assert folded["correctness"]["passed"] and cases["fold_only"]["correctness"]["passed"]
    records = folded["trace"]["passes"]
    assert [r["name"] for r in records] == ["fuse_bn_into_conv", "constant_folding"]
    assert all(r["changed"] for r in records), records
    assert records[-1]["op_histogram"] == {"BatchNormalization": 1, "Conv": 2, "Relu": 2, "Reshape": 1}
    # Folding alone: ConstantOfShape, Add and Constant become initializers, the model stays valid.
    assert cases["fold_only"]["metrics"]["node_count"] == 7
    assert cases["fold_only"]["trace"]["passes"][0]["changed"]


def test_ir3_artifacts_pass_the_checker_and_take_only_the_real_input(ir3_run):
    _, keep = ir3_run
    artifacts = sorted(keep.rglob("model.onnx"))
    assert artifacts
    for path in artifacts:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
        initializers = {t.name for t in model.graph.initializer}
        if model.ir_version < 4:
            assert initializers <= {i.name for i in model.graph.input}
        assert [i.name for i in model.graph.input if i.name not in initializers] == ["x"]


@pytest.fixture(scope="module")
def external_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("external")
    onnx.save(external_model(), str(folder / "model.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=256)
    assert (folder / "model.onnx.data").stat().st_size > 40_000
    return folder


EXTERNAL_PIPELINES = """
[pipelines.none]
passes = []
[pipelines.folded_basic]
passes = ["constant_folding", "eliminate_unused"]
options = { graph_optimization_level = "basic" }
"""


def test_external_data_model_runs_and_its_data_is_part_of_the_hash(external_folder, tmp_path):
    suite = _suite(external_folder, '[models.ext]\npath = "model.onnx"\n', EXTERNAL_PIPELINES)
    out = tmp_path / "r.json"
    proc = run_cli("run", str(suite), "--out", str(out), "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    document = result_json(out)
    assert all(c["status"] == "ok" and c["correctness"]["passed"] for c in document["cases"])
    # The data file belongs to the artifact: its size counts, and its bytes are in the artifact hash.
    for case in document["cases"]:
        assert case["metrics"]["artifact_size_bytes"] > 40_000
    first_hash = document["models"]["ext"]["sha256"]
    # Same graph file, other weights in the data file: another model hash.
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "model.onnx").write_bytes((external_folder / "model.onnx").read_bytes())
    data = bytearray((external_folder / "model.onnx.data").read_bytes())
    data[100:104] = np.float32(0.5).tobytes()
    (changed / "model.onnx.data").write_bytes(bytes(data))
    suite2 = _suite(changed, '[models.ext]\npath = "model.onnx"\n', "[pipelines.none]\npasses = []\n")
    out2 = tmp_path / "r2.json"
    proc = run_cli("run", str(suite2), "--out", str(out2), "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert result_json(out2)["models"]["ext"]["sha256"] != first_hash
    # A model copied without its data file: one line naming the missing file, nothing measured.
    (changed / "model.onnx.data").unlink()
    proc = run_cli("run", str(suite2), "--out", str(tmp_path / "r3.json"), "--quiet", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "external data file 'model.onnx.data' of model.onnx is missing" in proc.stderr, proc.stderr
    assert not (tmp_path / "r3.json").exists()


def test_external_data_artifacts_travel_with_their_data_file(external_folder, tmp_path):
    suite = _suite(external_folder, '[models.ext]\npath = "model.onnx"\n', EXTERNAL_PIPELINES)
    folder = tmp_path / "artifacts"
    proc = run_cli("compile", str(suite), "--out", str(folder), "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    manifest = json.loads((folder / "manifest.json").read_text())
    for entry in manifest["cases"]:
        artifact = folder / entry["artifact_file"]["path"]
        data = artifact.parent / "model.onnx.data"
        assert data.is_file(), sorted(p.name for p in artifact.parent.iterdir())
        assert entry["artifact_file"]["size_bytes"] == artifact.stat().st_size + data.stat().st_size
        onnx.checker.check_model(str(artifact))
    moved = tmp_path / "elsewhere"
    folder.rename(moved)
    out = tmp_path / "r.json"
    proc = run_cli("run", "--artifacts", str(moved), "--out", str(out), "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert all(c["correctness_on_runner"]["passed"] for c in result_json(out)["cases"])
    # A damaged data file is refused before any measurement, like a damaged model file.
    data = moved / Path(manifest["cases"][0]["artifact_file"]["path"]).parent / "model.onnx.data"
    data.write_bytes(data.read_bytes()[:-8] + b"\0" * 8)
    proc = run_cli("run", "--artifacts", str(moved), "--quiet", cwd=tmp_path)
    assert proc.returncode == 2 and "does not match its sha256" in proc.stderr, proc.stderr


INPLACE_PASSES = '''
from onnx import helper


def add_identities(model):
    """Edits the model it is given and returns the same object, as most graph passes do."""
    graph = model.graph
    output = graph.output[0].name
    for node in graph.node:
        for index, name in enumerate(node.output):
            if name == output:
                node.output[index] = output + "_pre0"
    for step in range(3):
        graph.node.append(helper.make_node("Identity", [f"{output}_pre{step}"],
                                           [output if step == 2 else f"{output}_pre{step + 1}"]))
    return model


def drop_identities(model):
    graph = model.graph
    output = graph.output[0].name
    kept = [node for node in graph.node if node.op_type != "Identity"]
    for node in kept:
        for index, name in enumerate(node.output):
            if name == output + "_pre0":
                node.output[index] = output
    del graph.node[:]
    graph.node.extend(kept)
    return model
'''


def test_trace_of_in_place_user_passes_records_the_state_before_each_pass(tmp_path, monkeypatch):
    from perfguard.backends.ort.onnx_passes import apply_pipeline, graph_hash

    (tmp_path / "inplace_passes.py").write_text(INPLACE_PASSES)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "inplace_passes", raising=False)
    model = external_model()
    start_hash = graph_hash(model)
    compiled, trace = apply_pipeline(model, ["inplace_passes:add_identities", "inplace_passes:drop_identities"])
    first, second = trace.passes
    assert (first.nodes_before, first.nodes_after) == (4, 7)
    assert (second.nodes_before, second.nodes_after) == (7, 4)
    assert first.changed and second.changed
    assert trace.input_hash == start_hash and first.ir_hash != start_hash
    assert second.ir_hash == graph_hash(compiled) == trace.final_hash
    assert first.op_histogram["Identity"] == 3 and "Identity" not in second.op_histogram


def test_first_line_of_an_exception_with_an_empty_message():
    from perfguard.errors import first_line

    assert first_line(RuntimeError("")) == "RuntimeError"
    assert first_line(ValueError("   \n  ")) == "ValueError"
    assert first_line(OSError("\n\nno such file\nmore detail")) == "no such file"


def test_ort_errors_with_empty_messages_still_fail_one_case(tmp_path, monkeypatch):
    from perfguard.backends import ort
    from perfguard.backends.base import Artifact
    from perfguard.errors import BackendError
    from perfguard.runners import get_runner

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("")

    monkeypatch.setattr(ort, "create_session", broken)
    artifact = Artifact("ort", str(tmp_path / "model.onnx"), {"graph_optimization_level": "basic",
                                                                "disabled_optimizers": []}, "", 0)

    with pytest.raises(BackendError, match=r"cannot load .*: RuntimeError$"):
        ort.OrtBackend().load(artifact, get_runner("cpu"), 1)
    with pytest.raises(BackendError, match=r"cannot load the compiled model: RuntimeError$"):
        ort.OrtBackend()._ort_node_count(tmp_path / "model.onnx", artifact.settings)


def test_perfguard_passes_on_an_unnormalized_ir3_model_fold_and_keep_it_valid():
    """The same rule without the loader: a user pass or another tool may hand over an IR-3 graph."""
    from perfguard.backends.ort.folding import fold_constants, remove_dead_nodes

    model = ir3_model()
    folded = fold_constants(model)
    onnx.checker.check_model(folded)
    assert folded.ir_version == 3
    assert [n.op_type for n in folded.graph.node] == ["Conv", "BatchNormalization", "Relu", "Conv",
                                                      "BatchNormalization", "Relu", "Reshape"]
    initializers = {t.name for t in folded.graph.initializer}
    assert {"w2", "flat_shape"} <= initializers and not {"w2_shape", "w2_delta"} & initializers
    assert initializers == {i.name for i in folded.graph.input} - {"x"}
    assert remove_dead_nodes(folded) is folded
