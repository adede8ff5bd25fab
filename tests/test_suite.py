"""Suite parsing: typed objects from TOML, and errors that name file, key, found and expected."""

from __future__ import annotations

import pytest

from perfguard.errors import UserError
from perfguard.suite import MeasureSettings, builtin_suite_path, load_suite

BASE = """
[suite]
name = "t"

[models.m]
arch = "resnet"
params = { depth = 2 }

[pipelines.a]
passes = []

[pipelines.b]
passes = ["fuse_bn_into_conv", "constant_folding"]
"""


def test_smoke_suite_loads_into_typed_cases():
    suite = load_suite(builtin_suite_path("smoke"))
    assert suite.name == "smoke"
    ids = [c.id for c in suite.cases]
    assert "resnet_s/none/cpu" in ids and "bert_s/ort_all/cpu" in ids
    assert "bert_s/bn_fused_unfolded/cpu" not in ids
    case = suite.cases[0]
    assert case.measure.workers == 3 and case.measure.min_time == pytest.approx(0.01)
    assert case.pipeline.backend == "ort"


def test_defaults_cases_overrides_and_selection(write_suite):
    path = write_suite(BASE + """
[measure]
rounds = 4
min_rounds = 2
max_time = "500ms"

[thresholds]
across_runs = "3%"

[[cases]]
model = "m"
[cases.measure]
workers = 7

[[overrides]]
match = "m/b/*"
measure = { rounds = 9 }
correctness = { atol = 0.01 }
""")
    suite = load_suite(path)
    by_id = {c.id: c for c in suite.cases}
    assert set(by_id) == {"m/a/cpu", "m/b/cpu"}
    assert by_id["m/a/cpu"].measure.rounds == 4 and by_id["m/a/cpu"].measure.workers == 7
    assert by_id["m/b/cpu"].measure.rounds == 9 and by_id["m/b/cpu"].tolerance.atol == 0.01
    assert by_id["m/a/cpu"].measure.threads == MeasureSettings().threads == 1
    assert suite.thresholds.across_runs == pytest.approx(0.03)
    assert by_id["m/a/cpu"].measure.min_rounds == 2 and by_id["m/a/cpu"].measure.max_time == pytest.approx(0.5)
    # run --rounds N: N rounds in every worker, no early stop before them.
    assert by_id["m/a/cpu"].measure.overridden(None, 12).min_rounds == 12
    assert [c.id for c in suite.select("*/b/*")] == ["m/b/cpu"]
    with pytest.raises(UserError, match="matches no case"):
        suite.select("nothing")


def test_pipeline_hash_depends_on_order_and_options(write_suite):
    suite = load_suite(write_suite(BASE + """
[pipelines.c]
passes = ["constant_folding", "fuse_bn_into_conv"]
[pipelines.d]
passes = ["fuse_bn_into_conv", "constant_folding"]
options = { graph_optimization_level = "all" }
"""))
    hashes = {name: p.sha256 for name, p in suite.pipelines.items()}
    assert len(set(hashes.values())) == 4
    assert load_suite(write_suite(BASE, "again.toml")).pipelines["b"].sha256 == hashes["b"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[measure]\nworker = 3\n", r"\[measure\]\.worker: unknown key \(did you mean 'workers'\?\)"),
        ("[measure]\nworkers = 0\n", r"\[measure\]\.workers: expected an integer >= 1, found an integer 0"),
        ("[measure]\nworkers = \"five\"\n", r"expected an integer >= 1, found a string \"five\""),
        ("[measure]\nmin_time = 0.02\n", r"min_time: expected a duration with a unit"),
        ("[measure]\ntimeout = \"10 parsecs\"\n", r"cannot read duration '10 parsecs'"),
        ("[[cases]]\nmodel = \"mm\"\n", r"unknown model 'mm' \(did you mean 'm'\?\); defined: m"),
        ("[[cases]]\nmodel = \"m\"\npipelines = [\"bb\"]\n", r"unknown pipeline 'bb'"),
        ("[models.x]\narch = \"resnet\"\npath = \"x.onnx\"\n", r"give exactly one of 'arch'"),
        ("[pipelines.e]\npass = []\n", r"unknown key \(did you mean 'passes'\?\)"),
        ("[pipelines.e]\npasses = \"fuse_bn_into_conv\"\n", r"expected a list of strings"),
        ("[correctness]\nrtol = -1\n", r"rtol: expected a number >= 0"),
        ("[thresholds]\nacross_runs = 0.1\n", r"across_runs: expected a percentage such as \"2%\""),
        ("[suit]\nname = 1\n", r"suit: unknown key \(did you mean 'suite'\?\)"),
    ],
)
def test_errors_name_file_key_and_expectation(write_suite, extra, message):
    path = write_suite(BASE + extra)
    with pytest.raises(UserError, match=message) as info:
        load_suite(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_malformed_toml_and_missing_file(write_suite, tmp_path):
    path = write_suite("[suite\nname = 1\n")
    with pytest.raises(UserError, match=r"malformed TOML: .*line 1"):
        load_suite(path)
    with pytest.raises(UserError, match="suite file not found"):
        load_suite(tmp_path / "missing.toml")
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match="not a UTF-8 text file"):
        load_suite(binary)


def test_model_paths_resolve_relative_to_the_suite(write_suite, tmp_path):
    path = write_suite(BASE + "[models.f]\npath = \"models/f.onnx\"\n")
    assert load_suite(path).models["f"].path == (tmp_path / "models" / "f.onnx").resolve()
