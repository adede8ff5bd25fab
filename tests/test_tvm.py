"""The ``tvm`` backend: pass-list checks, real compiles of tiny zoo models traced pass by pass,
a pinned MetaSchedule database built here, and check / bisect passes / tune on TVM cases.

Skipped with the reason when TVM is not installed (``pip install 'perfguard[tvm]'``); under
CI=true that fails instead, since .ci/run installs the extra (``require_tvm``).
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import textwrap
import time
from pathlib import Path

import onnx
import pytest

from perfguard.backends import get_backend
from perfguard.backends.tvm import CPU_DEFAULT, tvm_settings
from perfguard.backends.tvm.meta_schedule import tasks_prefix
from perfguard.backends.tvm.relax_trace import PassSpec, parse_pass
from perfguard.errors import UserError
from perfguard.exit_codes import ExitCode
from perfguard.models.inputs import input_specs, make_feeds
from perfguard.models.zoo import build_model
from perfguard.results import schema_errors
from perfguard.runners import get_runner
from perfguard.suite import PipelineSpec

from .conftest import run_cli


@functools.cache
def _tvm_missing() -> str:
    try:
        import tvm.relax  # noqa: F401
    except ImportError as exc:
        return f"TVM is not installed ({str(exc)[:80]}); pip install 'perfguard[tvm]'"
    return ""


def require_tvm() -> None:
    """Skip with the reason where TVM is not installed; under CI=true fail instead (.ci/run installs
    the ``tvm`` extra, so a missing TVM there is a broken setup)."""
    missing = _tvm_missing()
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI=true but {missing}; .ci/run must install it (pip install -e '.[dev,iree,tvm]')")
    if missing:
        pytest.skip(missing)


@pytest.fixture(scope="module", autouse=True)
def _tvm_installed() -> None:
    require_tvm()


TINY = {"depth": 1, "width": 4, "image_size": 16, "num_classes": 4}
#: Wide enough that real schedules beat naive loops by far more than a busy machine's noise.
CONV = {"depth": 1, "width": 16, "image_size": 32, "num_classes": 4}
FUSED = ("LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR")
LOWER = ("RewriteDataflowReshape", "ToNonDataflow", "RemovePurityChecking", "CallTIRRewrite", "StaticPlanBlockMemory",
         "LowerAllocTensor", "KillAfterLastUse", "LowerRuntimeBuiltin", "ComputePrimValue", "VMShapeLower",
         "AttachGlobalSymbol")
TUNED = (*FUSED, "MetaScheduleApplyDatabase", *LOWER)


def _toml_list(passes: tuple[str, ...]) -> str:
    return json.dumps(list(passes))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tvm-models")
    paths = {}
    for name, params in (("tiny", TINY), ("conv", CONV)):
        paths[name] = folder / f"{name}.onnx"
        onnx.save(build_model("resnet", params), str(paths[name]))
    return paths


def _compile(model: Path, out: Path, passes: tuple[str, ...] = CPU_DEFAULT, **options):
    return get_backend("tvm").compile(model, PipelineSpec("p", "tvm", passes, options), out)


def _median_run(artifact, feeds, runs: int = 15) -> float:
    executable = get_backend("tvm").load(artifact, get_runner("cpu"), 1)
    executable.run(feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        executable.run(feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# -- settings and pass specs: no compile --------------------------------------------------------------


def test_tvm_is_imported_without_torch_and_torch_still_imports_afterwards():
    """tvm_ffi imports torch whenever it is installed (~3 s a process, about a minute under
    Valgrind): the backend imports TVM without it, and a later ``import torch`` is torch."""
    import subprocess
    import sys

    code = ("import sys; from perfguard.backends.tvm import _tvm; _tvm(); print('torch' in sys.modules); "
            "import torch; print(torch.ones(2).sum().item())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "2.0"], proc.stdout


def test_pass_specs_take_literal_keyword_arguments_only():
    assert parse_pass("FuseOps", "w") == PassSpec("FuseOps")
    assert parse_pass("FuseOps(fuse_opt_level=2)", "w") == PassSpec("FuseOps", (("fuse_opt_level", 2),))
    for bad, message in (("FuseOps(2)", "by keyword"), ("FuseOps(x=os.system('id'))", "must be a literal"),
                         ("1Fuse", "bad pass")):
        with pytest.raises(UserError, match=message):
            parse_pass(bad, "w")


@pytest.mark.parametrize("hostile", [
    "FuseOps(fuse_opt_level={[1]:2})", "FuseOps(fuse_opt_level={[]})", "{[1]:2}",
    "FuseOps(fuse_opt_level=" + "-" * 100_000 + "1)", "FuseOps(fuse_opt_level=" + "-" * 500 + "1)",
    "FuseOps(fuse_opt_level=2), __import__('os').system('touch ran')", "FuseOps(a=1)(__import__('os'))"])
def test_hostile_pass_strings_are_exit_2_with_one_line_and_run_nothing(write_suite, tmp_path: Path,
                                                                       hostile: str) -> None:
    """Issue 32: unhashable dict keys, 100,000 unary minus signs (a MemoryError in Python's parser)
    and a call followed by a second expression were exit 70; none may run code."""
    proc = _validate_passes(write_suite, ("LegalizeOps", hostile), cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE, proc.stderr[-500:]
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert len(proc.stderr) < 400 and not (tmp_path / "ran").exists()


def test_defaults_pin_host_llvm_opt_level_3_and_targets_must_be_tables():
    settings = tvm_settings({}, "w")
    assert settings.target == {"kind": "llvm", "mcpu": "host"} and settings.opt_level == 3
    with pytest.raises(UserError, match="rejects target strings"):
        tvm_settings({"target": "llvm -mcpu=znver4"}, "w")
    with pytest.raises(UserError, match="unknown tvm option 'databse'.*did you mean 'database'"):
        tvm_settings({"databse": "db"}, "w")


def test_a_typo_in_a_pass_gets_close_names_and_exit_2(write_suite):
    backend = get_backend("tvm")
    with pytest.raises(UserError, match="unknown Relax pass 'FuseOp' .*did you mean 'FuseOps'"):
        backend.check_pipeline(PipelineSpec("p", "tvm", ("LegalizeOps", "FuseOp"), {}))
    with pytest.raises(UserError, match="unexpected keyword argument"):
        backend.check_pipeline(PipelineSpec("p", "tvm", ("FuseOps(level=2)",), {}))
    with pytest.raises(UserError, match="needs options.database"):
        backend.check_pipeline(PipelineSpec("p", "tvm", ("MetaScheduleApplyDatabase",), {}))
    proc = _validate_passes(write_suite, ("LegalizeOps", "FoldConstnt"))
    assert proc.returncode == ExitCode.USAGE and "did you mean 'FoldConstant'" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def _validate_passes(write_suite, passes: tuple[str, ...], cwd: Path | None = None):
    """``perfguard validate`` of a one-model tvm suite whose pipeline is ``passes``."""
    suite = write_suite(f"""
        [suite]
        backend = "tvm"
        [models.r]
        arch = "resnet"
        params = {{ depth = 1, width = 4, image_size = 16, num_classes = 4 }}
        [pipelines.p]
        passes = {_toml_list(passes)}
        """)
    return run_cli("validate", str(suite), cwd=cwd)


def test_passes_cli_lists_relax_passes():
    names = {p.name for p in get_backend("tvm").list_passes()}
    assert {"LegalizeOps", "FuseOps", "FuseTIR", "DispatchSampling", "MetaScheduleApplyDatabase"} <= names
    assert "MetaScheduleTuneIRMod" not in names  # tuning inside a compile is not pinned
    proc = run_cli("passes", "--backend", "tvm")
    assert proc.returncode == 0 and "FoldConstant" in proc.stdout and "ModelProto" not in proc.stdout


def test_shipped_suite_validates_and_tasks_come_from_before_the_database_pass():
    proc = run_cli("validate", "suites/tvm-cpu.toml")
    assert proc.returncode == 0, proc.stderr
    assert tasks_prefix(TUNED) == len(FUSED) and tasks_prefix(CPU_DEFAULT) == CPU_DEFAULT.index("RewriteDataflowReshape")


# -- real compiles ----------------------------------------------------------------------------------


def test_a_pass_list_compiles_traces_every_pass_and_runs_correctly(models, tmp_path):
    output = _compile(models["tiny"], tmp_path / "a")
    trace, artifact = output.trace, output.artifact
    assert [r.name for r in trace.passes] == list(CPU_DEFAULT) and trace.exact
    assert all(len(r.ir_hash) == 16 and r.time_s >= 0 for r in trace.passes)
    by_name = {r.name: r for r in trace.passes}
    assert by_name["LegalizeOps"].changed and by_name["LegalizeOps"].nodes_after > 0  # PrimFuncs appear
    assert by_name["FuseTIR"].nodes_after < by_name["FuseTIR"].nodes_before  # fusion merges PrimFuncs
    assert trace.final_hash == trace.passes[-1].ir_hash and trace.build_time_s > 0 and trace.import_time_s > 0
    assert artifact.node_count == trace.prim_funcs and sorted(os.listdir(tmp_path / "a")) == ["model.so"]
    assert artifact.settings["target"]["mcpu"] != "host" and artifact.settings["database_sha256"] == ""
    import onnxruntime as ort

    feeds = make_feeds(input_specs(onnx.load(str(models["tiny"]))), 3)
    got = get_backend("tvm").load(artifact, get_runner("cpu"), 1).run(feeds)
    want = ort.InferenceSession(str(models["tiny"]), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert [g.shape for g in got] == [w.shape for w in want]
    assert all(abs(g - w).max() < 1e-4 for g, w in zip(got, want, strict=True))
    # The same list again: the same library bytes and identity; another list: another hash trail.
    again = _compile(models["tiny"], tmp_path / "b")
    backend = get_backend("tvm")
    assert again.artifact.sha256 == artifact.sha256
    assert backend.execution_identity(again.artifact) == backend.execution_identity(artifact)
    assert [r.ir_hash for r in again.trace.passes] == [r.ir_hash for r in trace.passes]
    no_fuse = _compile(models["tiny"], tmp_path / "c", tuple(p for p in CPU_DEFAULT if p not in ("FuseOps", "FuseTIR")))
    assert no_fuse.trace.final_hash != trace.final_hash and no_fuse.artifact.node_count > artifact.node_count
    assert backend.execution_identity(no_fuse.artifact) != backend.execution_identity(artifact)


def test_a_missing_database_is_one_line_naming_the_command(models, tmp_path):
    with pytest.raises(UserError, match="build it first with `perfguard tvm-tune"):
        _compile(models["tiny"], tmp_path / "a", TUNED, database=str(tmp_path / "nowhere"))


# -- a pinned database, built here -------------------------------------------------------------------


def _db_suite(folder: Path, database: Path) -> Path:
    options = f'{{ database = "{database}" }}'
    untuned = tuple(p for p in TUNED if p != "MetaScheduleApplyDatabase")
    path = folder / "suite.toml"
    path.write_text(textwrap.dedent(f"""
        [suite]
        backend = "tvm"
        [measure]
        workers = 2
        rounds = 5
        warmup = 1
        min_time = "5ms"
        compile_repeats = 1
        [models.r]
        arch = "resnet"
        params = {{ depth = 1, width = 16, image_size = 32, num_classes = 4 }}
        [pipelines.tuned]
        passes = {_toml_list(TUNED)}
        options = {options}
        [pipelines.tuned_again]
        passes = {_toml_list(TUNED)}
        options = {options}
        [pipelines.untuned]
        passes = {_toml_list(untuned)}
        options = {options}
        """))
    return path


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> tuple[Path, Path]:
    """A database tuned by `perfguard tvm-tune` (2 trials per task) for the wide model's suite."""
    folder = tmp_path_factory.mktemp("tvm-db")
    suite = _db_suite(folder, folder / "db")
    proc = run_cli("tvm-tune", str(suite), "--case", "r/tuned/cpu", "--trials", "2", "--out", str(folder / "db"),
                   "--quiet", timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "records for" in proc.stdout and sorted(os.listdir(folder / "db")) == ["database_tuning_record.json",
                                                                               "database_workload.json"]
    return suite, folder / "db"


def test_a_database_changes_the_code_its_latency_and_the_identity(models, tuned, tmp_path):
    _, database = tuned
    backend = get_backend("tvm")
    with_db = _compile(models["conv"], tmp_path / "t", TUNED, database=str(database))
    without = _compile(models["conv"], tmp_path / "u", tuple(p for p in TUNED if p != "MetaScheduleApplyDatabase"),
                       database=str(database))
    assert with_db.artifact.sha256 != without.artifact.sha256
    assert len(with_db.artifact.settings["database_sha256"]) == 64
    feeds = make_feeds(input_specs(onnx.load(str(models["conv"]))), 1)
    # Naive loops against sampled tiled, vectorized schedules: far apart, not a tight timing.
    assert _median_run(with_db.artifact, feeds) < _median_run(without.artifact, feeds)
    # The database is part of the identity: the same library bytes with another database differ.
    edited = type(with_db.artifact)(**{**with_db.artifact.to_json(),
                                      "settings": {**with_db.artifact.settings, "database_sha256": "0" * 64}})
    assert backend.execution_identity(edited) != backend.execution_identity(with_db.artifact)


@pytest.mark.slow
def test_check_against_pipeline_on_tvm_cases(tuned, tmp_path):
    suite, _ = tuned
    out = tmp_path / "v.json"
    proc = run_cli("check", str(suite), "--against-pipeline", "tuned", "--json", str(out), "--quiet", timeout=1200)
    assert proc.returncode in (ExitCode.OK, ExitCode.REGRESSION, ExitCode.INCONCLUSIVE), proc.stderr[-2000:]
    document = json.loads(out.read_text())
    assert schema_errors(document, "verdicts") == []
    rows = {r["case"]: r for r in document["verdicts"] if r["metric"] == "latency"}
    # The same list twice: one identity, SAME without timing.
    assert rows["r/tuned_again/cpu"]["decision"] == "same"
    assert rows["r/tuned_again/cpu"]["comparison"]["method"] == "identity"
    assert rows["r/untuned/cpu"]["decision"] != "same"


@pytest.mark.slow
def test_bisect_passes_names_the_dropped_database_pass(tuned, tmp_path):
    suite, _ = tuned
    out = tmp_path / "b.json"
    proc = run_cli("bisect", "passes", "--suite", str(suite), "--case", "r/tuned/cpu", "--good-pipeline", "tuned",
                   "--bad-pipeline", "untuned", "--json", str(out), "--state", str(tmp_path / "s.json"),
                   "--no-explain", "--quiet", cwd=tmp_path, timeout=1200)
    report = json.loads(out.read_text())
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert [e["kind"] for e in report["minimal"]] == ["delete"]
    assert "MetaScheduleApplyDatabase" in report["minimal"][0]["describe"]


@pytest.mark.slow
def test_tune_tries_relax_pass_moves_and_opt_levels_on_a_tvm_case(models, write_suite, tmp_path):
    suite = write_suite(f"""
        [suite]
        backend = "tvm"
        [measure]
        workers = 1
        rounds = 3
        warmup = 1
        min_time = "2ms"
        compile_repeats = 1
        [models.r]
        arch = "resnet"
        params = {{ depth = 1, width = 4, image_size = 16, num_classes = 4 }}
        [pipelines.p]
        passes = {_toml_list(CPU_DEFAULT)}
        """)
    out = tmp_path / "tune.json"
    proc = run_cli("tune", str(suite), "--case", "r/p/cpu", "--passes", "FoldConstant", "--budget", "3",
                   "--no-proof", "--screen-workers", "2", "--batch", "2", "--json", str(out),
                   "--state", str(tmp_path / "state.json"), "--quiet", cwd=tmp_path, timeout=1200)
    assert proc.returncode == ExitCode.INCONCLUSIVE, proc.stdout[-2000:] + proc.stderr[-2000:]
    document = json.loads(out.read_text())
    assert len(document["points"]) >= 1


# -- databases that do not serve a case (issue 33) ------------------------------------------------------


def test_a_database_without_records_for_the_model_is_a_typed_warning(models, tuned, tmp_path):
    """The database was tuned for the wide model only: the tiny model's compile applies it, finds no
    record, runs untuned, and the trace says so (typed, through the result's JSON); the wide model's
    compile finds its records and warns of nothing."""
    from perfguard.backends.base import DatabaseUse
    from perfguard.results import Trace

    _, database = tuned
    other = _compile(models["tiny"], tmp_path / "tiny", TUNED, database=str(database))
    use = other.trace.database_use
    assert isinstance(use, DatabaseUse) and use.tuned == 0 and use.functions > 0
    assert use.warning is not None and "holds no record for this model" in use.warning
    assert Trace.from_json(json.loads(json.dumps(other.trace.to_json()))).database_use == use
    own = _compile(models["conv"], tmp_path / "conv", TUNED, database=str(database)).trace.database_use
    assert own is not None and own.tuned == own.functions > 0 and own.warning is None


def test_a_run_warns_of_an_unserved_database_and_names_how_to_build_a_missing_one(tuned, tmp_path):
    _, database = tuned
    suite = tmp_path / "suite.toml"
    suite.write_text(textwrap.dedent(f"""
        [suite]
        backend = "tvm"
        [measure]
        workers = 1
        rounds = 2
        warmup = 1
        min_time = "1ms"
        compile_repeats = 1
        memory_probes = 1
        [models.tiny]
        arch = "resnet"
        params = {json.dumps(TINY).replace(":", " =").replace('"', "")}
        [pipelines.served_elsewhere]
        passes = {_toml_list(TUNED)}
        options = {{ database = "{database}" }}
        [pipelines.not_built]
        passes = {_toml_list(TUNED)}
        options = {{ database = "{tmp_path / 'nowhere'}" }}
        """))
    out = tmp_path / "r.json"
    proc = run_cli("run", str(suite), "--out", str(out), cwd=tmp_path, timeout=900)
    said = proc.stdout + proc.stderr
    assert "warning: tiny/served_elsewhere/cpu: database" in said and "holds no record for this model" in said
    command = (f"perfguard tvm-tune {suite} --case tiny/not_built/cpu --trials 8 --out {tmp_path / 'nowhere'}")
    assert f"NOT RUN tiny/not_built/cpu: database '{tmp_path / 'nowhere'}' is not built: build it with `{command}`" \
        in " ".join(proc.stderr.split()), proc.stderr
    assert "failed (compile)" not in proc.stdout and "not run (not built)" in proc.stdout
    cases = {c["id"]: c for c in json.loads(out.read_text())["cases"]}
    assert cases["tiny/served_elsewhere/cpu"]["status"] == "ok"
    assert cases["tiny/served_elsewhere/cpu"]["trace"]["database_use"]["tuned"] == 0
    assert cases["tiny/not_built/cpu"]["error"]["stage"] == "not-built"


def test_pass_descriptions_are_whole_and_attach_extern_modules_has_its_own():
    infos = {p.name: p.summary for p in get_backend("tvm").list_passes()}
    assert infos["FuseOps"].endswith("function calls to the new grouped function.")  # its whole first paragraph
    assert "external" in infos["AttachExternModules"] and "variable bounds" not in infos["AttachExternModules"]
    assert all("\n" not in text for text in infos.values())
