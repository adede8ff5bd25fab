"""The ``inductor`` backend: real ``torch.compile`` compiles of tiny zoo models on the CPU, the
checked pipeline options, user FX passes that Inductor's caches must never serve stale, the cuda
runner's refusal on a machine without a GPU, and a check that flags a deliberately slower pipeline.

Skipped with the reason when torch is not installed (``pip install 'perfguard[torch]'``); under
CI=true that fails instead, since .ci/run installs the extra. Compiles are few and shared: one
module-scoped compile of the default pipeline; a compile takes 10-40 s on a loaded 2-core machine.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest

from perfguard.backends import get_backend
from perfguard.errors import RunnerUnavailable, UserError
from perfguard.exit_codes import ExitCode
from perfguard.models.inputs import input_specs, make_feeds
from perfguard.models.zoo import build_model
from perfguard.runners import get_runner
from perfguard.suite import PipelineSpec

from .conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
TINY = {"depth": 1, "width": 4, "image_size": 16, "num_classes": 4}
#: One residual block but wide, large images: the convolutions' time dominates Python's overhead, so
#: the float64 pipeline is ~3x slower (measured 2026-12-05: 2.96 ms vs 8.81 ms) while a compile
#: costs what a tiny model's does (compile time follows the graph, not the tensor sizes).
WIDE = {"depth": 1, "width": 32, "image_size": 128, "num_classes": 10}


@functools.cache
def _torch_missing() -> str:
    try:
        import torch._inductor  # noqa: F401
    except ImportError as exc:
        return f"torch is not installed ({str(exc)[:80]}); pip install 'perfguard[torch]'"
    return ""


@pytest.fixture(scope="module", autouse=True)
def _torch_installed() -> None:
    missing = _torch_missing()
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI=true but {missing}; .ci/run must install it (pip install torch==2.13.0 -e '.[...,torch]')")
    if missing:
        pytest.skip(missing)


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> None:
    # The compile workers run with OMP_NUM_THREADS=threads; Inductor's C++ code depends on the count.
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("inductor-model") / "tiny.onnx"
    onnx.save(build_model("resnet", TINY), str(path))
    return path


@pytest.fixture(scope="module")
def default_compile(tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("inductor-default")
    return get_backend("inductor").compile(tiny, PipelineSpec("default", "inductor", (), {}), out / "a")


# -- no compile ------------------------------------------------------------------------------------


def test_a_config_typo_names_the_close_keys():
    backend = get_backend("inductor")
    with pytest.raises(UserError, match=r"no inductor config key 'max_autotun'.*did you mean 'max_autotune'"):
        backend.check_pipeline(PipelineSpec("p", "inductor", (), {"inductor": {"max_autotun": True}}))
    with pytest.raises(UserError, match=r"no dynamo config key 'cache_size_limt'"):
        backend.check_pipeline(PipelineSpec("p", "inductor", (), {"dynamo": {"cache_size_limt": 8}}))
    with pytest.raises(UserError, match=r"options.mode 'max-autotune-no-cudagraph'.*did you mean"):
        backend.check_pipeline(PipelineSpec("p", "inductor", (), {"mode": "max-autotune-no-cudagraph"}))
    with pytest.raises(UserError, match="must be bool"):
        backend.check_pipeline(PipelineSpec("p", "inductor", (), {"inductor": {"epilogue_fusion": 1}}))
    with pytest.raises(UserError, match="perfguard's to set"):
        backend.check_pipeline(PipelineSpec("p", "inductor", (), {"inductor": {"fx_graph_cache": False}}))
    with pytest.raises(UserError, match="package.module:function"):
        backend.check_pipeline(PipelineSpec("p", "inductor", ("relu_as_clamp",), {}))
    with pytest.raises(UserError, match=r"hooks.joint_pos: no such Inductor hook.*did you mean 'joint_post'"):
        backend.check_pipeline(PipelineSpec("p", "inductor", (), {"hooks": {"joint_pos": ["m:f"]}}))
    with pytest.raises(UserError, match=r"options.hooks.pre_grad: pass 'look'"):
        backend.check_pipeline(PipelineSpec("p", "inductor", (), {"hooks": {"pre_grad": ["look"]}}))


def test_a_config_typo_in_a_suite_exits_2_with_one_line(write_suite):
    suite = write_suite("""
        [suite]
        backend = "inductor"
        [models.r]
        arch = "resnet"
        params = { depth = 1, width = 4, image_size = 16, num_classes = 4 }
        [pipelines.p]
        passes = []
        options = { inductor = { "cpp.simdln" = 1 } }
        """)
    proc = run_cli("validate", str(suite))
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert "did you mean 'cpp.simdlen'" in proc.stderr and "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.startswith("perfguard:")]) == 1


def test_passes_lists_the_config_keys_a_pipeline_may_pin():
    proc = run_cli("passes", "--backend", "inductor")
    assert proc.returncode == 0, proc.stderr
    for key in ("max_autotune", "freezing", "cpp.simdlen", "recompile_limit"):
        assert key in proc.stdout
    assert "post_grad_custom_post_pass" not in proc.stdout  # passes fill it, not config
    assert "(torch.fx.Graph -> None" in proc.stdout


def test_importing_the_backend_does_not_import_torch_and_missing_torch_is_one_hint():
    probe = ("import sys; import perfguard.backends.inductor; print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr
    blocked = ("import sys; sys.modules['torch'] = None; from perfguard.cli import main; "
               "sys.exit(main(['validate', sys.argv[1]]))")
    proc = subprocess.run([sys.executable, "-c", blocked, str(ROOT / "suites" / "inductor-cpu.toml")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == ExitCode.USAGE
    assert "pip install 'perfguard[torch]'" in proc.stderr and "Traceback" not in proc.stderr


def test_the_cuda_runner_says_why_not_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RunnerUnavailable, match=r"torch.cuda.is_available\(\) is False"):
        get_backend("inductor").check_runner(get_runner("cuda"))
    proc = run_cli("validate", str(ROOT / "suites" / "inductor-gpu.toml"), cwd=ROOT)
    assert proc.returncode != 0 and "cannot run 'inductor' cases here" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_prepared_gpu_script_stops_at_the_runner_check_without_a_gpu(tmp_path):
    """``benchmarks/inductor_gpu.sh`` (the GPU row's one-shot run) says why not and runs nothing more."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    env = {**os.environ, "PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "inductor_gpu.sh"), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == ExitCode.USAGE, proc.stdout + proc.stderr
    assert "cannot serve inductor cases here" in proc.stderr and "Traceback" not in proc.stderr
    assert "torch.cuda.is_available() is False" in proc.stdout.replace("\n", " ")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["runners.json"]


def test_a_model_the_backend_cannot_build_is_one_clear_line(tmp_path):
    from perfguard.backends.inductor.torch_modules import build_module
    from perfguard.errors import BackendError

    path = tmp_path / "legacy.onnx"
    onnx.save(build_model("legacy_cnn", {}), str(path))
    with pytest.raises(BackendError, match=r"builds zoo models \(resnet, bert, yolo\).*architecture 'legacy_cnn'"):
        build_module(path)


def test_tuning_moves_flip_each_switch_from_the_pipelines_value():
    moves = get_backend("inductor").tuning_moves({"freezing": True, "inductor": {"epilogue_fusion": False}})
    described = {m.describe: dict(m.options) for m in moves}
    assert described["freezing True -> False"]["freezing"] is False
    assert described["epilogue_fusion False -> True"]["inductor"] == {"epilogue_fusion": True}
    for move in moves:  # every neighbour is a pipeline the backend accepts
        get_backend("inductor").check_pipeline(PipelineSpec("t", "inductor", (), move.options))


def test_tuning_moves_cover_the_listed_config_keys_modes_and_enums():
    from perfguard.backends.inductor.pipeline_config import TUNING_KEYS, tuning_keys

    moves = [m.describe for m in get_backend("inductor").tuning_moves({})]
    assert set(tuning_keys()) == set(TUNING_KEYS)  # torch 2.13 has every listed key, of the listed kinds
    assert "mode default -> max-autotune-no-cudagraphs" in moves and "mode default -> reduce-overhead" not in moves
    assert {"cpp.enable_floating_point_contract_flag off -> on",
            "cpp.enable_floating_point_contract_flag off -> fast"} <= set(moves)
    gpu = [m.describe for m in get_backend("inductor").tuning_moves({"device": "cuda", "mode": "max-autotune"})]
    assert "mode max-autotune -> reduce-overhead" in gpu and "mode max-autotune -> default" in gpu


def test_tuning_moves_leave_out_keys_the_installed_torch_lacks_or_types_otherwise(monkeypatch):
    from perfguard.backends.inductor import pipeline_config

    real = pipeline_config.config_defaults

    def older_torch():
        inductor, dynamo = real()
        del inductor["layout_optimization"]
        inductor["cpp.enable_floating_point_contract_flag"] = False  # a bool in this imagined torch
        return inductor, dynamo

    monkeypatch.setattr(pipeline_config, "config_defaults", older_torch)
    moves = " ".join(m.describe for m in get_backend("inductor").tuning_moves({}))
    assert "layout_optimization" not in moves and "contract_flag" not in moves and "epilogue_fusion" in moves


def test_a_measuring_worker_imports_each_artifacts_pass_from_its_own_checkout(tmp_path, monkeypatch):
    """``check --base-ref`` and bisection load the artifacts of two checkouts in one worker; their
    passes share module names, and the first checkout's cached module must not stand in for the
    second's (the load then refuses: the pass's source differs from the artifact's)."""
    from perfguard.backends.inductor.pipeline_config import import_from as _import_from, load_pass

    monkeypatch.setattr(sys, "path", list(sys.path))
    roots = []
    for label in ("base", "head"):
        root = tmp_path / label
        root.mkdir()
        (root / "checkout_pass.py").write_text(f"LABEL = {label!r}\ndef run(graph):\n    pass\n")
        roots.append(str(root))
    digests = []
    for root in roots:
        _import_from(root, "checkout_pass")
        digests.append(load_pass("checkout_pass:run")[1])
        assert sys.modules["checkout_pass"].LABEL == Path(root).name
    assert digests[0] != digests[1]
    sys.modules.pop("checkout_pass", None)


# -- real compiles ---------------------------------------------------------------------------------


def _suite_toml(compiler: str, params: dict[str, int], pipelines: dict[str, list[str]],
                measure: tuple[str, ...] = ()) -> str:
    """An inductor suite of one ResNet ``m``: one thread, one compile per pipeline, no memory probes;
    ``measure`` lines follow the ``[measure]`` table's (a ``[check]`` table may start among them)."""
    lines = ["[suite]", 'name = "inductor-test"', 'backend = "inductor"', "[compiler]", compiler, "[measure]",
             'timeout = "300s"', 'compile_timeout = "600s"', "compile_repeats = 1", "memory_probes = 0", "threads = 1",
             *measure, "[models.m]", 'arch = "resnet"',
             "params = { " + ", ".join(f"{k} = {v}" for k, v in params.items()) + " }"]
    for name, passes in pipelines.items():
        lines += [f"[pipelines.{name}]", f"passes = {json.dumps(passes)}"]
    return "\n".join(lines) + "\n"



def test_compiled_module_matches_onnx_runtime_and_traces_inductor(tiny, default_compile):
    import onnxruntime

    model = onnx.load(str(tiny))
    feeds = make_feeds(input_specs(model), 3)
    executable = get_backend("inductor").load(default_compile.artifact, get_runner("cpu"), 1)
    got = executable.run(feeds)
    reference = onnxruntime.InferenceSession(str(tiny), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(got[0], reference[0], rtol=1e-4, atol=1e-5)
    trace = default_compile.trace
    assert trace.kernels > 0 and trace.graphs == 1 and trace.fx_graph_cache_hits == 0
    assert trace.phase_times["inductor"] > 0 and trace.phase_times["dynamo"] >= trace.phase_times["inductor"]
    assert trace.eager_max_abs_error is not None and trace.eager_max_abs_error < 1e-4
    code = (Path(default_compile.artifact.path).parent / "output_code" / "graph0.py").read_text()
    assert "cpp_fused" in code


def test_a_profiled_load_times_each_kernel_and_library_call(tiny, default_compile, tmp_path):
    """``load_profiled`` runs the artifact's own code (the load's code check passed) with its kernels
    and ``extern_kernels`` calls timed: one event per call inside each run, as ORT's profiler writes."""
    from perfguard.backends.inductor.kernel_profile import kernel_op
    from perfguard.workers.trace import aggregate, read_trace

    executable = get_backend("inductor").load_profiled(default_compile.artifact, get_runner("cpu"), 1,
                                                       str(tmp_path / "p"))
    feeds = make_feeds(input_specs(onnx.load(str(tiny))), 0)
    for _ in range(4):
        executable.run(feeds)
    run = aggregate(read_trace(executable.end_profiling()), skip_runs=1)
    by_provider = {o.provider: 0.0 for o in run.ops}
    for op in run.ops:
        by_provider[op.provider] += op.kernels
    # every kernel and library call of the generated code, once per run (TINY: 4 kernels, 3 convolutions)
    assert by_provider == {"Inductor": default_compile.trace.kernels, "Library": default_compile.trace.library_calls}
    (library,) = [o for o in run.ops if o.provider == "Library"]
    assert (library.op_type, library.nodes) == ("Conv", 3)  # each call site of extern_kernels.convolution
    assert all(k <= m for k, m in zip(run.kernel_sum_us, run.model_run_us, strict=True)) and run.overhead_us >= 0
    assert [kernel_op(n) for n in ("cpp_fused_add_relu_3", "cpp_fused__to_copy_convolution_1", "cpp_fused_convolution_0",
                                   "triton_per_fused_native_layer_norm_2", "cpp_fused_cat_4")] == \
        ["Relu", "Cast", "Copy", "LayerNormalization", "Concat"]


def _pass_module(folder: Path, body: str) -> None:
    (folder / "user_fx.py").write_text(textwrap.dedent("""
        import torch
        aten = torch.ops.aten

        def rewrite(graph):
        """) + textwrap.indent(textwrap.dedent(body), "    "))


def test_a_changed_pass_is_never_served_from_the_cache(tiny, tmp_path, monkeypatch):
    """The pitfall of 2026-12-04: a plain-function post-grad pass is not in the FX graph cache's key.
    Here one cache folder serves three compiles: the pass changed in place (same module, same
    function name) must miss it; the same pass again must hit it."""
    from perfguard.backends.inductor.pipeline_config import inductor_settings
    from perfguard.backends.inductor.torch_compile import compile_model

    monkeypatch.syspath_prepend(str(tmp_path))
    settings = inductor_settings({}, "test")
    cache = tmp_path / "shared-cache"

    def compile_with(body: str):
        _pass_module(tmp_path, body)
        sys.modules.pop("user_fx", None)
        return compile_model(tiny, settings, (("user_fx:rewrite", str(tmp_path)),), cache, "cpu", check_eager=True)

    noop = compile_with("pass\n")
    clamp = compile_with("""
        for node in list(graph.nodes):
            if node.op == "call_function" and node.target == aten.relu.default:
                with graph.inserting_before(node):
                    new = graph.call_function(aten.clamp_min.default, (node.args[0], 0.0))
                new.meta.update(node.meta)
                node.replace_all_uses_with(new)
                graph.erase_node(node)
        """)
    assert clamp.cache_hits == 0, "the changed pass was served from the cache"
    assert clamp.code_sha256 != noop.code_sha256
    assert [s.name for s in clamp.steps] == ["user_fx:rewrite"] and clamp.steps[0].hash_after != clamp.steps[0].hash_before
    assert not noop.steps[0].hash_after != noop.steps[0].hash_before
    assert clamp.pass_sources[0][1] != noop.pass_sources[0][1]
    assert clamp.eager_max_abs_error is not None and clamp.eager_max_abs_error < 1e-4
    again = compile_with("pass\n")
    assert again.cache_hits >= 1 and again.code_sha256 == noop.code_sha256  # the cache is on, and keyed


def test_a_pass_that_changes_code_changes_the_identity(tiny, tmp_path, default_compile):
    sys.path.insert(0, str(ROOT / "suites" / "inductor_passes"))
    try:
        out = get_backend("inductor").compile(tiny, PipelineSpec("clamp", "inductor", ("fx_passes:relu_as_clamp",), {}),
                                              tmp_path / "clamp")
    finally:
        sys.path.remove(str(ROOT / "suites" / "inductor_passes"))
    assert out.artifact.sha256 != default_compile.artifact.sha256
    assert out.trace.passes[0].name == "fx_passes:relu_as_clamp" and out.trace.passes[0].changed
    assert out.trace.fx_graph_cache_hits == 0
    recipe = json.loads(Path(out.artifact.path).read_text())
    assert recipe["passes"][0]["root"] == str(ROOT / "suites" / "inductor_passes")


def test_the_output_code_hash_leaves_out_the_compiling_processs_addresses():
    from perfguard.backends.inductor.torch_compile import without_addresses

    def code(address: str, function: str) -> str:
        return (f"# AOT ID: ['{address[-1]}_inference']\n"
                f"_frozen_param52 = None  # device(type='cpu') torch.float32 (4, 3, 7, 7) (1, 0, 0, 0) {address}\n"
                f'assert_size_stride(buf3, (1, 4), (4, 1), "partial(<function fn at 0x{function}>, Match(...))")\n'
                "float bits = 0x7f800000;\n")

    assert without_addresses(code("7ff1dc953700", "7f7ca5bc2160")) == without_addresses(code("7ff1dc7c3110", "7f65c9b32160"))
    assert "0x7f800000" in without_addresses(code("7ff1dc953700", "7f7ca5bc2160"))  # C++ constants stay


@pytest.mark.slow
def test_a_frozen_artifact_loads_in_another_process(tiny, tmp_path, default_compile):
    """``freezing`` compiles are not served from the FX graph cache, and their code holds addresses
    and the process's compile count; the measuring worker's compile must still be recognised as the
    artifact's (before: never, so every frozen pipeline failed), here after another compile in the
    compiling process and twice in the loading one."""
    out = get_backend("inductor").compile(tiny, PipelineSpec("frozen", "inductor", (), {"freezing": True}), tmp_path / "a")
    (tmp_path / "artifact.json").write_text(json.dumps(out.artifact.to_json()))
    probe = textwrap.dedent("""
        import json, sys
        import torch
        from perfguard.backends import get_backend
        from perfguard.backends.base import Artifact
        from perfguard.runners import get_runner
        torch.set_num_threads(1)
        artifact = Artifact.from_json(json.load(open(sys.argv[1])))
        for _ in range(2):  # a measuring worker loads several artifacts: the second compile's AOT ID is 1
            get_backend("inductor").load(artifact, get_runner("cpu"), 1)
        print("loaded")
        """)
    proc = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "artifact.json")], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.stdout.strip() == "loaded", proc.stderr[-2000:]


def test_hook_passes_run_at_their_hooks_and_are_pinned(tiny, tmp_path, default_compile, monkeypatch):
    """``options.hooks``: a pass at the pre-grad hook sees Dynamo's Torch-IR graph, one at the joint
    hook rewrites ATen; both are in the trace, the identity and the measuring worker's replay."""
    (tmp_path / "hooked.py").write_text("def look(graph):\n    assert any(n.op == 'call_module' or "
                                        "n.op == 'call_function' for n in graph.nodes)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT / "suites" / "inductor_passes"))
    options = {"hooks": {"pre_grad": ["hooked:look"], "joint_post": ["fx_passes:relu_as_clamp"]}}
    backend = get_backend("inductor")
    out = backend.compile(tiny, PipelineSpec("hooked", "inductor", (), options), tmp_path / "hooked-artifact")
    hooks = out.trace.hooks
    assert set(hooks) == {"pre_grad", "joint_post"}, hooks
    ((pre,), (joint,)) = hooks["pre_grad"], hooks["joint_post"]
    assert pre["name"] == "hooked:look" and pre["steps"] and not pre["steps"][0]["changed"]
    assert joint["name"] == "fx_passes:relu_as_clamp" and joint["steps"][0]["changed"]
    assert out.artifact.sha256 != default_compile.artifact.sha256 and out.trace.passes == []
    assert out.trace.eager_max_abs_error is not None and out.trace.eager_max_abs_error < 1e-4
    recipe = json.loads(Path(out.artifact.path).read_text())
    assert [e["root"] for e in recipe["hooks"]["pre_grad"]] == [str(tmp_path)]
    backend.load(out.artifact, get_runner("cpu"), 1)  # the replay generates the artifact's code


@pytest.mark.slow
@pytest.mark.timing
def test_check_against_default_flags_the_float64_pipeline(tmp_path):
    suite = tmp_path / "inductor.toml"
    suite.write_text(_suite_toml(f'path = "{ROOT / "suites" / "inductor_passes"}"', WIDE, {
        "default": [], "upcast_float64": ["fx_passes:upcast_float64"]}, measure=(
        'workers = 6', 'rounds = 3', 'warmup = 2', 'min_time = "20ms"', '[check]', 'workers = 6', 'step_workers = 2',
        'max_workers = 10')))
    out = tmp_path / "check.json"
    proc = run_cli("check", str(suite), "--against-pipeline", "default", "--json", str(out), "--quiet", timeout=900)
    assert proc.returncode == ExitCode.REGRESSION, proc.stdout + proc.stderr
    rows = [r for r in json.loads(out.read_text())["verdicts"] if r["metric"] == "latency"]
    (row,) = rows
    assert row["case"] == "m/upcast_float64/cpu", rows
    if row["decision"] == "unknown":  # a loaded machine left too few workers to decide: it must lean slower
        assert row["comparison"]["ratio"] > 1.5, row
        return
    assert (row["decision"], row["direction"]) == ("different", "regression"), rows


# -- bisection over a git history of user FX passes ------------------------------------------------

#: The user's pass module at each commit: ``extra_work`` is the suite's ``convolve_twice`` behind a
#: switch that one commit turns on (three more convolutions on TINY, which Inductor keeps: 7 -> 10
#: kernels and library calls), and ``relu_as_clamp`` runs after it unchanged.
USER_PASSES = (ROOT / "suites" / "inductor_passes" / "fx_passes.py").read_text() + """

EXTRA = {extra}


def extra_work(graph: torch.fx.Graph) -> None:
    if EXTRA:
        convolve_twice(graph)
"""


@pytest.mark.slow
def test_bisect_on_kernel_count_names_the_commit_and_the_pass(tmp_path):
    """``bisect commits --metric node_count`` (Inductor's generated kernel count) on a real git
    history of a user's FX passes: one compile per probed version, then the pass search inside the
    culprit, whose hybrid compile takes the culprit's ``extra_work`` and the parent's ``relu_as_clamp``,
    the same module name imported from two checkouts."""
    from .factories import make_compiler_repo

    repo, shas = make_compiler_repo(tmp_path / "cc", [
        ("initial passes", {"user_fx.py": USER_PASSES.format(extra=False)}),
        ("compute each convolution twice", {"user_fx.py": USER_PASSES.format(extra=True)}),
        ("notes", {"NOTES.txt": "a commit that changes no pass\n"})])
    suite = tmp_path / "suite.toml"
    suite.write_text(_suite_toml(f'repo = "{repo}"\npath = "{repo}"', TINY,
                                 {"mine": ["user_fx:extra_work", "user_fx:relu_as_clamp"]}))
    out = tmp_path / "bisect.json"
    proc = run_cli("bisect", "commits", "--suite", str(suite), "--case", "m/mine/cpu", "--good", shas[0],
                   "--bad", shas[2], "--metric", "node_count", "--no-explain", "--json", str(out), cwd=tmp_path,
                   timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(out.read_text())
    assert (document["status"], document["metric"], document["commits"]) == ("found", "node_count", 2)
    (culprit,) = document["culprits"]
    assert culprit["commit"]["sha"] == shas[1] and culprit["pass"]["name"] == "user_fx:extra_work", culprit
    before, after = (document["probes"][0]["values"][s[:10]] for s in (shas[0], shas[2]))
    assert after == before + 3, document["probes"]  # TINY's three convolutions, each called twice
    search = culprit["pass_search"]
    assert search["first_divergence"]["name"] == "user_fx:extra_work" and search["probes"] == 1, search
    assert f"commit {shas[1][:10]}" in proc.stdout and "pass 'user_fx:extra_work'" in proc.stdout
