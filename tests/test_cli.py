"""The command line as a user meets it: ``python -m perfguard``, exit codes, one-line errors."""

from __future__ import annotations

import json

import onnx
import pytest

from perfguard.models.zoo import build_model
from perfguard.results import schema_errors

from .conftest import FAST_MEASURE, TINY_MODELS, run_cli
from .factories import result_json

PIPELINES = """
[pipelines.none]
passes = []
[pipelines.folded]
passes = ["fuse_bn_into_conv", "constant_folding"]
"""


def _assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    assert errors == [lines[-1]] and lines[-1].startswith("perfguard: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[-1]


@pytest.mark.slow
def test_run_writes_a_valid_result_with_traces_and_prints_a_table(write_suite, tmp_path):
    suite = write_suite(TINY_MODELS + FAST_MEASURE + PIPELINES)
    out = tmp_path / "r.json"
    proc = run_cli("run", str(suite), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "resnet_t/folded/cpu" in proc.stdout and "median" in proc.stdout
    document = result_json(out)
    assert document["version"] == 2 and not schema_errors(document)
    assert all(case["trace"] is not None for case in document["cases"])
    assert [c["id"] for c in document["cases"]] == ["resnet_t/none/cpu", "resnet_t/folded/cpu"]
    selected = tmp_path / "one.json"
    proc = run_cli("run", str(suite), "--out", str(selected), "--case", "*/folded/*", "--quiet")
    assert proc.returncode == 0 and [c["id"] for c in json.loads(selected.read_text())["cases"]] == [
        "resnet_t/folded/cpu"]


def test_validate_accepts_the_shipped_suites():
    for name in ("smoke", "cpu"):
        proc = run_cli("validate", f"suites/{name}.toml")
        assert proc.returncode == 0, proc.stderr
        assert "ok:" in proc.stdout


def test_malformed_toml_is_exit_2_with_one_line(write_suite, tmp_path):
    path = write_suite("[suite\n")
    _assert_one_line_error(run_cli("validate", str(path)), str(path), "malformed TOML")
    out = tmp_path / "never.json"
    _assert_one_line_error(run_cli("run", str(path), "--out", str(out)), "malformed TOML")
    assert not out.exists()


def test_unknown_pass_is_exit_2_before_any_work(write_suite, tmp_path):
    path = write_suite(TINY_MODELS + "[pipelines.p]\npasses = [\"fuse_bn_into_cov\"]\n")
    out = tmp_path / "never.json"
    _assert_one_line_error(run_cli("run", str(path), "--out", str(out)), "pipeline 'p'",
                           "did you mean 'fuse_bn_into_conv'")
    assert not out.exists()


def test_non_onnx_model_file_is_exit_2(write_suite, tmp_path):
    (tmp_path / "notes.onnx").write_text("this is not a model")
    path = write_suite("[models.bad]\npath = \"notes.onnx\"\n[pipelines.p]\npasses = []\n")
    _assert_one_line_error(run_cli("run", str(path), "--out", str(tmp_path / "x.json")), "[models.bad]",
                           "not a readable ONNX model")


def test_unknown_backend_runner_and_bad_flags_are_exit_2(write_suite):
    _assert_one_line_error(run_cli("passes", "--backend", "tvmm"), "unknown backend 'tvmm'", "valid: ")
    path = write_suite(TINY_MODELS + "[suite]\nrunners = [\"cpuu\"]\n[pipelines.p]\npasses = []\n")
    _assert_one_line_error(run_cli("validate", str(path)), "unknown runner 'cpuu'", "did you mean 'cpu'")
    proc = run_cli("run", "--workers", "0", str(path))
    _assert_one_line_error(proc, "--workers must be from 1 to 1024")
    proc = run_cli("frobnicate")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_passes_lists_onnxoptimizer_and_perfguard_passes():
    proc = run_cli("passes")
    assert proc.returncode == 0
    assert "fuse_bn_into_conv" in proc.stdout and "constant_folding" in proc.stdout
    assert "package.module:function" in proc.stdout


USER_PASSES = '''
import onnx
from onnx import numpy_helper

def perturb(model):
    """Changes the answer: a 'fast wrong' optimization."""
    out = onnx.ModelProto(); out.CopyFrom(model)
    for init in out.graph.initializer:
        if init.name.endswith("weight") or len(init.dims) == 4:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * 1.5, init.name))
            break
    return out

def explode(model):
    raise RuntimeError("this pass is broken")
'''


@pytest.mark.slow
def test_per_case_faults_fail_cases_with_exit_4_and_the_rest_runs(write_suite, tmp_path):
    compiler = tmp_path / "compiler"
    compiler.mkdir()
    (compiler / "badpasses.py").write_text(USER_PASSES)
    path = write_suite(TINY_MODELS + FAST_MEASURE + """
[compiler]
path = "compiler"
[pipelines.none]
passes = []
[pipelines.wrong]
passes = ["badpasses:perturb"]
[pipelines.raises]
passes = ["constant_folding", "badpasses:explode"]
""")
    out = tmp_path / "r.json"
    proc = run_cli("run", str(path), "--out", str(out), "--quiet")
    assert proc.returncode == 4, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    cases = {c["pipeline"]: c for c in result_json(out)["cases"]}
    assert cases["none"]["status"] == "ok"
    assert cases["wrong"]["error"]["stage"] == "correctness"
    assert "wrong answer" in cases["wrong"]["error"]["message"]
    assert cases["raises"]["error"]["message"] == (
        "pass #2 'badpasses:explode' raised RuntimeError: this pass is broken")


@pytest.mark.slow
def test_legacy_model_file_with_old_opset_loads_and_runs(write_suite, tmp_path):
    onnx.save(build_model("legacy_cnn", {}), str(tmp_path / "legacy.onnx"))
    path = write_suite(FAST_MEASURE + """
[models.legacy]
path = "legacy.onnx"
[pipelines.none]
passes = []
[pipelines.cleaned]
passes = ["eliminate_nop_dropout", "constant_folding", "eliminate_deadend"]
""")
    out = tmp_path / "r.json"
    proc = run_cli("run", str(path), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    document = result_json(out)
    assert document["models"]["legacy"]["opset"] < 13
    cleaned = next(c for c in document["cases"] if c["pipeline"] == "cleaned")
    assert cleaned["metrics"]["node_count"] < document["models"]["legacy"]["nodes"]
