"""The ort backend: pinned ORT settings are validated, applied, and change what runs."""

from __future__ import annotations

import pytest

from perfguard.backends import available_backends, get_backend
from perfguard.backends.ort import ort_settings
from perfguard.errors import UserError
from perfguard.models.zoo import build_model
from perfguard.runners import get_runner
from perfguard.suite import PipelineSpec


def test_registry_lists_backends_and_rejects_unknown():
    assert {"ort", "mock"} <= set(available_backends())
    with pytest.raises(UserError, match=r"unknown backend 'otr' \(did you mean 'ort'\?\); valid: "):
        get_backend("otr")


def test_ort_settings_are_validated_and_canonical():
    assert ort_settings({}, "p") == {"graph_optimization_level": "disabled", "disabled_optimizers": []}
    settings = ort_settings({"graph_optimization_level": "all",
                             "disabled_optimizers": ["NchwcTransformer", "ConvBNFusion", "NchwcTransformer"]}, "p")
    assert settings["disabled_optimizers"] == ["ConvBNFusion", "NchwcTransformer"]
    with pytest.raises(UserError, match=r"unknown ORT optimizer 'NchwcTransfomer' \(did you mean 'NchwcTransformer'"):
        ort_settings({"disabled_optimizers": ["NchwcTransfomer"]}, "p")
    # ORT's config-entry form splits on ';': a joined list must never pass as one name.
    with pytest.raises(UserError, match="unknown ORT optimizer 'ConvBNFusion;NchwcTransformer'"):
        ort_settings({"disabled_optimizers": ["ConvBNFusion;NchwcTransformer"]}, "p")
    with pytest.raises(UserError, match=r"unknown level 'full'"):
        ort_settings({"graph_optimization_level": "full"}, "p")
    with pytest.raises(UserError, match=r"unknown ort option 'threads'"):
        ort_settings({"threads": 2}, "p")


def test_disabled_optimizers_really_change_the_executed_graph(tmp_path):
    import onnx

    model_path = tmp_path / "resnet.onnx"
    onnx.save(build_model("resnet", {"depth": 2, "width": 8, "image_size": 32, "num_classes": 10}), str(model_path))
    backend = get_backend("ort")
    counts = {}
    for name, disabled in (("all", []), ("no_convbn", ["ConvBNFusion"])):
        pipe = PipelineSpec(name, "ort", (), {"graph_optimization_level": "extended", "disabled_optimizers": disabled})
        output = backend.compile(model_path, pipe, tmp_path / name)
        counts[name] = output.artifact.node_count
        executable = backend.load(output.artifact, get_runner("cpu"), 1)
        assert executable.session.get_providers()[0] == "CPUExecutionProvider"
    # With ConvBNFusion off, the BatchNormalization nodes survive ORT's optimizers.
    assert counts["no_convbn"] > counts["all"]


def test_a_compile_time_repeat_times_the_work_without_the_trace(tmp_path):
    import onnx

    model_path = tmp_path / "resnet.onnx"
    onnx.save(build_model("resnet", {"depth": 2, "width": 8, "image_size": 32, "num_classes": 10}), str(model_path))
    backend = get_backend("ort")
    pipe = PipelineSpec("p", "ort", ("fuse_bn_into_conv", "constant_folding"), {})
    output = backend.compile(model_path, pipe, tmp_path / "out")
    # work_time_s: reading, the passes' real work, writing; positive and inside the whole call's time.
    assert output.work_time_s is not None and 0 < output.work_time_s
    assert output.trace.total_time_s <= output.work_time_s
    repeat = backend.recompile_time(model_path, pipe, tmp_path / "repeat")
    assert repeat > 0
    written = onnx.load(str(tmp_path / "repeat" / "model.onnx"))
    assert len(written.graph.node) == output.artifact.node_count
