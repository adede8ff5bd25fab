"""The ``iree`` backend: option checks, trace parsing, and real compiles of small models.

Skipped with the reason when IREE is not installed (``pip install 'perfguard[iree]'``); under
CI=true that fails instead, since .ci/run installs the extra (``require_iree``). Every test uses a private artifact cache (``PERFGUARD_CACHE_DIR``), so none reads or fills the
user's.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from pathlib import Path

import onnx
import pytest

from perfguard.backends import get_backend, iree as iree_backend
from perfguard.backends.base import PassRecord
from perfguard.backends.iree import compile_flags, iree_settings
from perfguard.backends.iree.compiler_tools import first_error, tool_path
from perfguard.backends.iree.ir_trace import first_divergence, parse_timing, read_dump
from perfguard.errors import BackendError, UserError
from perfguard.measure.job import run_suite
from perfguard.models.inputs import input_specs, make_feeds
from perfguard.models.zoo import build_model
from perfguard.results import schema_errors
from perfguard.runners import get_runner
from perfguard.suite import PipelineSpec, load_suite

from .conftest import run_cli


@functools.cache
def _iree_missing() -> str:
    try:
        import iree.runtime  # noqa: F401

        tool_path("iree-compile")
        tool_path("iree-import-onnx")
        tool_path("iree-opt")
    except (ImportError, UserError) as exc:
        return f"IREE is not installed ({str(exc)[:80]}); pip install 'perfguard[iree]'"
    return ""


def require_iree() -> None:
    """Skip with the reason where IREE is not installed; under CI=true fail instead: .ci/run installs
    the ``iree`` extra, so a missing IREE there is a broken setup, not a reason to skip (as for
    Chromium, actionlint and PostgreSQL)."""
    missing = _iree_missing()
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI=true but {missing}; .ci/run must install it (pip install -e '.[dev,iree]')")
    if missing:
        pytest.skip(missing)


@pytest.fixture(scope="module", autouse=True)
def _iree_installed() -> None:
    """Before the module's other fixtures (its models) are built."""
    require_iree()

BERT_TINY = {"layers": 1, "hidden": 64, "heads": 2, "seq_len": 32, "vocab": 100}
RESNET_TINY = {"depth": 2, "width": 8, "image_size": 32, "num_classes": 10}
GENERALIZE = "iree-global-opt-generalize-linalg-named-ops"


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """One artifact cache per test session, never the user's; repeats start from a clean slate."""
    monkeypatch.setenv("PERFGUARD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "iree-cache"))
    monkeypatch.setattr(iree_backend, "_COMPILED_IN_THIS_PROCESS", set())


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    paths = {}
    for name, arch, params in (("bert", "bert", BERT_TINY), ("resnet", "resnet", RESNET_TINY)):
        paths[name] = folder / f"{name}.onnx"
        onnx.save(build_model(arch, params), str(paths[name]))
    return paths


def _pipeline(name: str = "p", passes: tuple[str, ...] = (), **options) -> PipelineSpec:
    return PipelineSpec(name, "iree", passes, options)


def _compile(model: Path, out: Path, passes: tuple[str, ...] = (), **options):
    return get_backend("iree").compile(model, _pipeline("p", passes, **options), out)


# -- settings: pure validation, no tool runs ----------------------------------------------------------


def test_defaults_pin_o0_host_cpu_single_threaded_driver_and_timing_trace():
    settings = iree_settings({}, (), "w")
    assert settings["opt_level"] == "O0" and settings["target"] == "llvm-cpu" and settings["target_cpu"] == "host"
    assert settings["driver"] == "local-sync" and settings["trace"] == "timing" and not settings["keep_ir"]
    args = compile_flags(settings)
    assert "--iree-llvmcpu-target-cpu=host" in args and "--iree-opt-level=O0" in args


def test_passes_become_an_ordered_util_func_preprocessing_pipeline():
    settings = iree_settings({}, ("iree-preprocessing-convert-conv-to-channels-last", "canonicalize"), "w")
    assert settings["preprocessing"] == (
        "builtin.module(util.func(iree-preprocessing-convert-conv-to-channels-last,canonicalize))")
    assert compile_flags(settings)[-1] == f"--iree-preprocessing-pass-pipeline={settings['preprocessing']}"


def test_target_is_a_setting_so_cuda_needs_no_code_change():
    settings = iree_settings({"target": "cuda", "target_chip": "sm_90"}, (), "w")
    args = compile_flags(settings)
    assert settings["driver"] == "cuda" and "--iree-hal-target-device=cuda" in args
    assert "--iree-cuda-target=sm_90" in args and not any("llvmcpu" in a for a in args)


@pytest.mark.parametrize(("options", "passes", "message"), [
    ({"optlevel": "O2"}, (), "unknown iree option 'optlevel' (did you mean 'opt_level'?)"),
    ({"opt_level": "O4"}, (), "unknown optimization level 'O4'"),
    ({"driver": "cuda"}, (), "unknown driver for target 'llvm-cpu' 'cuda'"),
    ({"flags": {"iree-opt-level": "O2"}}, (), "--iree-opt-level is managed by perfguard; set it with the pipeline's 'opt_level'"),
    ({"flags": {"mlir-timing": True}}, (), "--mlir-timing is managed by perfguard"),
    ({"flags": {"iree-opt-data-tiling": {"x": 1}}}, (), "flags.iree-opt-data-tiling: expected a boolean"),
    ({"preprocessing": "builtin.module(cse)"}, ("canonicalize",), "not both"),
    ({"target": "cuda", "target_cpu": "host"}, (), "target_cpu applies to target 'llvm-cpu' only"),
    ({"trace": "full"}, (), "unknown trace mode 'full'"),
    ({"ir_dump_limit": "lots"}, (), "expected a size like"),
])
def test_bad_options_are_user_errors_that_say_what_to_fix(options, passes, message):
    with pytest.raises(UserError) as info:
        iree_settings(options, passes, "pipeline 'p'")
    assert message in str(info.value) and str(info.value).startswith("pipeline 'p'")


# -- trace parsing on fixed inputs ----------------------------------------------------------------------


def test_timing_report_is_summed_per_pass_name_in_first_run_order_skipping_containers():
    report = [
        {"wall": {"duration": 0.5}, "name": "'builtin.module' Pipeline", "passes": [
            {"wall": {"duration": 0.2}, "name": "CanonicalizerPass", "passes": [{}]},
            {"wall": {"duration": 0.1}, "name": "(A) DominanceInfo", "passes": [{}]},
            {"wall": {"duration": 0.25}, "name": "mlir::iree_compiler::GeneralizeLinalgNamedOpsPass", "passes": [{}]},
            {"wall": {"duration": 0.05}, "name": "CanonicalizerPass", "passes": [{}]}, {}]},
        {"wall": {"duration": -0.1}, "name": "Rest"},
        {"wall": {"duration": 0.6}, "name": "Total"},
    ]
    stderr = "warning: something\n" + json.dumps(report, indent=1) + "\n"
    times, total = parse_timing(stderr)
    assert times == [("CanonicalizerPass", pytest.approx(0.25)), ("GeneralizeLinalgNamedOpsPass", 0.25)]
    assert total == 0.6
    assert parse_timing("no report here") == ([], 0.0)


def test_ir_dump_files_are_ordered_numerically_and_hashed_without_their_header(tmp_path):
    root = tmp_path / "builtin_module_no-symbol-name"
    nested = root / "util_func_main$async"
    nested.mkdir(parents=True)
    (root / "9_inline.mlir").write_text("// -----// IR Dump After InlinerPass: inline{x=1} //----- //\nmodule {}\n")
    body = "util.func @main() {\n  %0 = arith.constant 1 : i32\n  util.return\n}\n"
    (nested / "10_2_cse.mlir").write_text("// -----// IR Dump After CSEPass: cse //----- //\n" + body)
    (root / "10_canonicalize.mlir").write_text("// -----// IR Dump After CanonicalizerPass: canonicalize //----- //\nmodule {}\n")
    (nested / "10_1_cse.mlir").write_text("// -----// IR Dump After CSEPass: cse //----- //\n" + body)
    files = read_dump(tmp_path)
    assert [(f.scope, f.pass_name) for f in files] == [
        ("", "inline"), ("", "canonicalize"), ("util_func_main$async", "cse"), ("util_func_main$async", "cse")]
    assert files[0].ir_hash == files[1].ir_hash  # same IR, different headers
    assert files[0].class_name == "InlinerPass" and files[2].class_name == "CSEPass" and files[2].op_count == 3


def _records(*pairs: tuple[str, str]) -> list[PassRecord]:
    return [PassRecord(i, name, "iree-compile:util_func_main", 0.0, 0, 0, {}, digest, True)
            for i, (name, digest) in enumerate(pairs)]


def test_first_divergence_names_the_first_pass_whose_ir_differs():
    a = _records(("canonicalize", "h1"), ("generalize", "h2"), ("cse", "h3"))
    assert first_divergence(a, a) is None
    b = _records(("canonicalize", "h1"), ("generalize", "XX"), ("cse", "YY"))
    found = first_divergence(a, b)
    assert found is not None and found.index == 1 and found.pass_a == "util_func_main/generalize"
    assert "produced different IR" in found.describe()
    shorter = first_divergence(a, a[:2])
    assert shorter is not None and shorter.index == 2 and shorter.pass_b == "(end)"
    other = first_divergence(a, _records(("canonicalize", "h1"), ("fold", "h2")))
    assert other is not None and "different pass" in other.reason


def test_tool_errors_are_cut_to_the_telling_lines():
    stderr = ("<unknown>:0: error: \nfailed to add `canonicalize` with options `max-iterations=x`\n"
              "<stdin>:1:1: error: can't run 'util.func' pass manager on 'builtin.module' op\nmodule {}\n^\n")
    assert first_error(stderr) == ("failed to add `canonicalize` with options `max-iterations=x` / can't run "
                                   "'util.func' pass manager on 'builtin.module' op")


# -- checks that ask the compiler (each well under a second) ------------------------------------------


def test_flag_names_are_checked_against_the_compilers_own_list_with_close_names():
    with pytest.raises(UserError) as info:
        get_backend("iree").check_pipeline(_pipeline(flags={"iree-opt-data-tilin": True}))
    assert "has no option 'iree-opt-data-tilin' (did you mean 'iree-opt-data-tiling'" in str(info.value)


def test_flag_values_are_checked_by_the_compilers_parser():
    with pytest.raises(UserError) as info:
        get_backend("iree").check_pipeline(_pipeline(flags={"iree-opt-data-tiling": "maybe"}))
    assert "rejects the pipeline's flags" in str(info.value) and "'maybe'" in str(info.value)


def test_bad_preprocessing_pass_name_and_text_are_user_errors():
    backend = get_backend("iree")
    with pytest.raises(UserError) as info:
        backend.check_pipeline(_pipeline(passes=("iree-preprocessing-convert-conv-to-channel-last",)))
    assert "is not a registered pass (did you mean 'iree-preprocessing-convert-conv-to-channels-last'?)" in str(
        info.value)
    with pytest.raises(UserError, match="unbalanced parentheses"):
        backend.check_pipeline(_pipeline(preprocessing="builtin.module(util.func(cse)"))
    with pytest.raises(UserError, match="can't run 'util.func' pass manager"):
        backend.check_pipeline(_pipeline(preprocessing="util.func(cse)"))
    backend.check_pipeline(_pipeline(passes=("iree-preprocessing-convert-conv-to-channels-last", "cse")))


def test_missing_tools_give_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGUARD_IREE_BIN", str(tmp_path))
    with pytest.raises(UserError, match="iree-compile not found in PERFGUARD_IREE_BIN"):
        get_backend("iree").check_pipeline(_pipeline())
    monkeypatch.delenv("PERFGUARD_IREE_BIN")
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match=r"pip install 'perfguard\[iree\]'"):
        tool_path("iree-import-onnx")


def test_passes_cli_lists_what_a_pipeline_may_name():
    names = {p.name for p in get_backend("iree").list_passes()}
    assert {"iree-preprocessing-convert-conv-to-channels-last", "canonicalize", GENERALIZE} <= names
    proc = run_cli("passes", "--backend", "iree")
    assert proc.returncode == 0 and "iree-preprocessing-convert-conv-to-channels-last" in proc.stdout


def test_shipped_suite_validates():
    proc = run_cli("validate", "suites/iree-cpu.toml")
    assert proc.returncode == 0, proc.stderr


# -- real compiles ----------------------------------------------------------------------------------------


def test_compile_traces_pass_times_and_runs_correctly(models, tmp_path):
    output = _compile(models["bert"], tmp_path / "o0")
    trace, artifact = output.trace, output.artifact
    names = [p.name for p in trace.passes]
    assert names[0] == "iree-import-onnx" and "GeneralizeLinalgNamedOpsPass" in names
    assert all(p.time_s >= 0 for p in trace.passes) and sum(p.time_s for p in trace.passes) > 0
    assert trace.mode == "timing" and not trace.cache_hit and trace.total_time_s > 0
    assert artifact.settings == {"target": "llvm-cpu", "driver": "local-sync", "entry": "bert",
                                 "inputs": ["input_ids", "attention_mask"], "target_cpu": "host"}
    assert artifact.node_count and artifact.node_count > 0  # dispatches
    model = onnx.load(str(models["bert"]))
    feeds = make_feeds(input_specs(model), 7)
    outputs = get_backend("iree").load(artifact, get_runner("cpu"), 1).run(feeds)
    assert [o.shape for o in outputs] == [(1, 32, 64)]
    assert sorted(os.listdir(tmp_path / "o0")) == ["module.vmfb"]  # no dumps, no MLIR left behind


def test_module_bytes_do_not_depend_on_the_model_path_and_are_cached(models, tmp_path, monkeypatch):
    copy = tmp_path / "elsewhere" / "renamed.onnx"
    copy.parent.mkdir()
    copy.write_bytes(models["resnet"].read_bytes())
    first = _compile(models["resnet"], tmp_path / "a")
    monkeypatch.setattr(iree_backend, "_COMPILED_IN_THIS_PROCESS", set())
    hit = _compile(copy, tmp_path / "b")  # same bytes, another path: served from the cache
    assert hit.trace.cache_hit and hit.artifact.sha256 == first.artifact.sha256
    assert hit.trace.total_time_s == first.trace.total_time_s and "artifact cache" in hit.trace.note
    repeat = _compile(copy, tmp_path / "c")  # a repeat in one process measures a real compile
    assert not repeat.trace.cache_hit and repeat.artifact.sha256 == first.artifact.sha256


@pytest.mark.slow
def test_ir_divergence_between_o0_and_o2_names_the_generalize_pass(models, tmp_path):
    o0 = _compile(models["bert"], tmp_path / "o0", opt_level="O0", trace="ir")
    o2 = _compile(models["bert"], tmp_path / "o2", opt_level="O2", trace="ir")
    assert o0.trace.mode == "ir" and len(o0.trace.passes) > 100
    assert all(p.ir_hash and p.changed for p in o0.trace.passes)
    assert any(t["name"] == "GeneralizeLinalgNamedOpsPass" for t in o0.trace.pass_times)
    found = first_divergence(o0.trace.passes, o2.trace.passes)
    assert found is not None and found.pass_a == found.pass_b and found.pass_a.endswith("/" + GENERALIZE)
    assert sorted(os.listdir(tmp_path / "o0")) == ["module.vmfb"]  # the temporary dump is gone
    timing_only = _compile(models["bert"], tmp_path / "t", opt_level="O0")
    assert timing_only.artifact.sha256 == o0.artifact.sha256  # tracing does not change the module


def test_ir_dump_is_bounded_and_kept_only_when_asked(models, tmp_path):
    with pytest.raises(BackendError, match="ir_dump_limit"):
        _compile(models["resnet"], tmp_path / "small", trace="ir", ir_dump_limit=1000)
    assert not any(p.name.startswith(".ir-") for p in (tmp_path / "small").iterdir())
    kept = _compile(models["resnet"], tmp_path / "kept", trace="ir", keep_ir=True)
    assert (tmp_path / "kept" / "ir").is_dir() and "dump kept in" in kept.trace.note


def _crashing_compiler(folder: Path) -> Path:
    """A tool folder whose iree-compile dies of SIGSEGV on compiles with --iree-opt-const-eval=false."""
    folder.mkdir()
    for tool in ("iree-opt", "iree-import-onnx"):
        (folder / tool).symlink_to(tool_path(tool))
    script = folder / "iree-compile"
    script.write_text(f"""#!/bin/sh
crash=no; compiling=no
for arg in "$@"; do
  [ "$arg" = "--iree-opt-const-eval=false" ] && crash=yes
  [ "$arg" = "--mlir-timing" ] && compiling=yes
done
[ "$crash$compiling" = "yesyes" ] && kill -SEGV $$
exec {tool_path("iree-compile")} "$@"
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.mark.slow
def test_a_compiler_crash_fails_its_case_and_the_run_goes_on(write_suite, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGUARD_IREE_BIN", str(_crashing_compiler(tmp_path / "bin")))
    suite = load_suite(write_suite(f"""
[suite]
backend = "iree"
[measure]
workers = 1
rounds = 3
warmup = 1
min_time = "2ms"
compile_repeats = 1
[models.resnet_t]
arch = "resnet"
params = {json.dumps(RESNET_TINY).replace('"', "").replace(":", " =")}
[pipelines.default]
passes = []
[pipelines.channels_last]
passes = ["iree-preprocessing-convert-conv-to-channels-last", "canonicalize", "cse"]
[pipelines.crashes]
passes = []
options = {{ flags = {{ "iree-opt-const-eval" = false }} }}
"""))
    document = run_suite(suite, list(suite.cases)).to_json()
    assert schema_errors(document) == []
    cases = {c["pipeline"]: c for c in document["cases"]}
    assert cases["crashes"]["status"] == "failed" and cases["crashes"]["error"]["stage"] == "compile"
    assert "iree-compile crashed (SIGSEGV)" in cases["crashes"]["error"]["message"]
    for name in ("default", "channels_last"):
        case = cases[name]
        assert case["status"] == "ok" and case["correctness"]["passed"], case["error"]
        assert case["metrics"]["latency_s"]["n"] == 3 and case["trace"]["passes"]
    assert cases["default"]["artifact"]["sha256"] != cases["channels_last"]["artifact"]["sha256"]
