"""The ``tvm`` backend: ONNX -> TVM Relax (``relax.frontend.onnx``) -> a pinned, ordered list of
Relax passes -> TIR pipeline + LLVM -> an exported library (``model.so``) run by the Relax VM.
Install with ``pip install 'perfguard[tvm]'`` (TVM 0.27; see docs/reference/backends.md, "The `tvm` backend").

A pipeline pins (all hashed into the case key):

``passes``
    Relax passes in order, each a name from ``tvm.relax.transform`` / ``tvm.relax.backend`` with
    optional keyword arguments: ``"FuseOps(fuse_opt_level=2)"`` (``perfguard passes --backend tvm``
    lists them). Nothing else runs at the Relax level: the list is compiled with
    ``tvm.compile(..., relax_pipeline=None)``, which only adds VM codegen. A list must lower to
    the VM itself (end with TVM's finalize passes: ``CPU_DEFAULT`` below is the CPU default).
``options.target``
    A target table (0.27 rejects CLI strings), default ``{ kind = "llvm", mcpu = "host" }``;
    ``mcpu = "host"`` becomes this machine's CPU (``llvm_get_system_cpu``), since plain ``llvm``
    builds for generic x86-64.
``options.opt_level``
    The ``PassContext`` opt level (default 3). ``options.config``: ``PassContext`` config
    (``{ "tirx.disable_vectorize" = true }``), names checked against TVM's own list.
``options.tir_pipeline``
    ``tvm.compile``'s TIR pipeline name (default ``"default"``).
``options.database``
    A MetaSchedule database directory (``database_workload.json`` + ``database_tuning_record.json``,
    written by ``perfguard tvm-tune``), relative to the working directory. The pipeline's
    ``MetaScheduleApplyDatabase`` pass (after ``FuseTIR``) applies it; without that pass the
    database is unused (the untuned variant of the same options).
    The database's digest is part of the artifact's settings and so of its execution identity.

Why a database matters: untuned TIR is naive loops (no tiling, no parallelism), ~100x slower than
ONNX Runtime, and every pass order measured within +-2 %: an untuned comparison measures the
naive kernels, not the passes (docs/measured.md, TVM). With a database every variant gets real
schedules, so compare pipelines on one shared database (``tvm-tune`` tunes the union of their tasks).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfguard.backends.base import (
    Artifact,
    Backend,
    Capabilities,
    CompileOutput,
    CountWording,
    DatabaseUse,
    OptionEdit,
    PassInfo,
    PassRecord,
    UploadedInputs,
    file_sha256,
    setting_strs,
)
from perfguard.backends.counting_hooks import counted, counting_compile
from perfguard.backends.settings import check_option_keys
from perfguard.backends.tvm.relax_trace import (
    COUNTED_STEPS,
    PassSpec,
    TvmTrace,
    make_instrument,
    parse_pass,
    prim_func_histogram,
    structural_hash,
)
from perfguard.errors import (
    BackendError,
    CountedCompileDone,
    RunnerUnavailable,
    UserError,
    did_you_mean,
    first_line,
)
from perfguard.jsonfields import JsonDict, json_object

if TYPE_CHECKING:
    import numpy as np

    from perfguard.runners.base import Runner
    from perfguard.suite import PipelineSpec

INSTALL_HINT = "pip install 'perfguard[tvm]' (apache-tvm 0.27 with apache-tvm-ffi 0.1.14.post1)"
OPTION_KEYS = ("target", "opt_level", "config", "tir_pipeline", "database")
APPLY_DATABASE = "MetaScheduleApplyDatabase"
DATABASE_FILES = ("database_workload.json", "database_tuning_record.json")
#: Relax passes that tune inside a compile (minutes, xgboost): a pipeline applies a database instead.
EXCLUDED_PASSES = ("MetaScheduleTuneIRMod", "MetaScheduleTuneTIR")
BASE_CLASSES = ("FunctionPass", "DataflowBlockPass")
#: relax.backend.cpu_generic's default pipeline (library dispatch, legalize + fusion, dataflow
#: lowering, finalize), which ``tvm.compile`` does NOT run on CPU (it skips fusion there).
CPU_DEFAULT = ("DispatchSampling", "DispatchSortScan", "LegalizeOps", "AnnotateTIROpPattern", "FoldConstant",
               "FuseOps", "FuseTIR", "RewriteDataflowReshape", "ToNonDataflow", "RemovePurityChecking",
               "CallTIRRewrite", "StaticPlanBlockMemory", "LowerAllocTensor", "KillAfterLastUse",
               "LowerRuntimeBuiltin", "ComputePrimValue", "VMShapeLower", "AttachGlobalSymbol")
#: The first dataflow-lowering passes: ``tvm-tune`` extracts a pipeline's tasks before the first
#: of them when it does not apply a database itself.
LOWERING_PASSES = ("RewriteDataflowReshape", "ToNonDataflow", "RemovePurityChecking", "CallTIRRewrite")


def _tvm() -> Any:
    """``tvm``, imported without torch where torch is not loaded yet: ``tvm_ffi`` imports torch
    whenever it is installed, for DLPack exchange with torch tensors, which perfguard does not
    use; that import cost ~3 s per TVM process here, and about a minute under Valgrind. A later
    ``import torch`` (the inductor backend in the same process) works as usual."""
    blocked = "torch" not in sys.modules and "tvm_ffi" not in sys.modules
    if blocked:
        sys.modules["torch"] = None  # type: ignore[assignment]  # Python's documented way to fail an import
    try:
        import tvm
        import tvm.relax
        import tvm.relax.backend  # noqa: F401
    except ImportError as exc:
        raise UserError(f"backend 'tvm' needs TVM ({first_line(exc)}); {INSTALL_HINT}") from None
    finally:
        if blocked and "torch" in sys.modules and sys.modules["torch"] is None:
            del sys.modules["torch"]
    return tvm


@cache
def relax_passes() -> dict[str, Callable[..., Any]]:
    """Relax pass constructors by name: every public function of ``tvm.relax.transform`` and
    ``tvm.relax.backend`` whose name starts with a capital (TVM's convention for passes), and
    their pass classes (``DispatchSampling`` is a class decorated as a module pass)."""
    tvm = _tvm()
    found: dict[str, Callable[..., Any]] = {}
    for module in (tvm.relax.transform, tvm.relax.backend):
        for name in dir(module):
            value = getattr(module, name)
            is_pass_class = inspect.isclass(value) and issubclass(value, tvm.ir.transform.Pass)
            if (name[:1].isupper() and (inspect.isfunction(value) or is_pass_class)
                    and name not in EXCLUDED_PASSES and name not in BASE_CLASSES):
                found.setdefault(name, value)
    return dict(sorted(found.items()))


#: Passes whose TVM docstring describes another pass (0.27: AttachExternModules's is a copy of a
#: variable-bounds pass's), in our words from their source.
PASS_SUMMARIES = {
    "AttachExternModules": "Attach the given external modules (ExternModule, e.g. hand-written or vendor "
                           "kernels) to the IRModule's \"external_mods\" attribute, so that the build links them "
                           "into the library.",
}


def pass_summary(doc: str | None) -> str:
    """A pass's description: the first paragraph of its docstring, its lines joined, whole (a
    summary cut at its first line ended mid-sentence for most Relax passes)."""
    paragraph = []
    for line in (doc or "").strip().splitlines():
        if not line.strip():
            break
        paragraph.append(line.strip())
    return " ".join(paragraph)


@dataclass(frozen=True)
class TvmSettings:
    """A pipeline's options in canonical form (``tvm_settings``)."""

    target: Mapping[str, object]
    opt_level: int
    config: Mapping[str, object]
    tir_pipeline: str
    database: str


def tvm_settings(options: Mapping[str, object], where: str) -> TvmSettings:
    """Validate a pipeline's options (TVM not needed) and return them in canonical form."""
    check_option_keys(options, OPTION_KEYS, "tvm", where)
    target = options.get("target", {"kind": "llvm", "mcpu": "host"})
    if not isinstance(target, Mapping) or "kind" not in target:
        raise UserError(f"{where}: target: expected a table with 'kind' (TVM 0.27 rejects target strings), "
                        "e.g. target = { kind = \"llvm\", mcpu = \"host\" }")
    opt_level = options.get("opt_level", 3)
    if not isinstance(opt_level, int) or isinstance(opt_level, bool) or not 0 <= opt_level <= 4:
        raise UserError(f"{where}: opt_level: expected an integer 0-4, found {opt_level!r}")
    config = options.get("config", {})
    if not isinstance(config, Mapping):
        raise UserError(f"{where}: config: expected a table of PassContext options, "
                        "e.g. config = { \"tirx.disable_vectorize\" = true }")
    tir_pipeline = options.get("tir_pipeline", "default")
    if not isinstance(tir_pipeline, str):
        raise UserError(f"{where}: tir_pipeline: expected a pipeline name such as \"default\"")
    database = options.get("database", "")
    if not isinstance(database, str):
        raise UserError(f"{where}: database: expected the path of a MetaSchedule database directory")
    return TvmSettings(dict(sorted(target.items())), opt_level, dict(sorted(config.items())), tir_pipeline, database)


def pass_specs(passes: tuple[str, ...] | list[str], where: str) -> list[PassSpec]:
    """Parse and check a pass list against this TVM's passes and their signatures."""
    known = relax_passes()
    specs = []
    for text in passes:
        spec = parse_pass(text, where)
        if spec.name not in known:
            hint = " (tuning inside a compile is not pinned: apply a database)" if spec.name in EXCLUDED_PASSES else ""
            raise UserError(f"{where}: unknown Relax pass {spec.name!r}{did_you_mean(spec.name, known)}{hint}; "
                            "`perfguard passes --backend tvm` lists them")
        try:
            inspect.signature(known[spec.name]).bind(**dict(spec.kwargs))
        except TypeError as exc:
            raise UserError(f"{where}: pass {text!r}: {exc}; its signature is {spec.name}"
                            f"{inspect.signature(known[spec.name])}") from None
        specs.append(spec)
    return specs


def resolve_target(target: Mapping[str, object]) -> dict[str, object]:
    """The target table with ``mcpu = "host"`` replaced by this machine's CPU name."""
    tvm = _tvm()
    resolved = dict(target)
    if resolved.get("mcpu") == "host":
        resolved["mcpu"] = str(tvm.target.codegen.llvm_get_system_cpu())
    return resolved


def database_digest(path: str) -> str:
    """sha256 of a database directory's two JSON files; ``UserError`` when they are missing."""
    folder = Path(path)
    missing = [name for name in DATABASE_FILES if not (folder / name).is_file()]
    if missing:
        raise UserError(f"database {path!r} has no {', '.join(missing)}; build it first with "
                        "`perfguard tvm-tune SUITE --case CASE --trials N --out DIR`")
    digest = hashlib.sha256()
    for name in DATABASE_FILES:
        digest.update((folder / name).read_bytes())
    return digest.hexdigest()


def build_pass(spec: PassSpec, settings: TvmSettings) -> Any:
    kwargs = dict(spec.kwargs)
    if spec.name == APPLY_DATABASE and "work_dir" not in kwargs:
        kwargs["work_dir"] = settings.database
    return relax_passes()[spec.name](**kwargs)


def import_onnx(model_path: Path) -> Any:
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    try:
        return from_onnx(onnx.load(str(model_path)), keep_params_in_input=False)
    except Exception as exc:
        raise BackendError(f"TVM's ONNX frontend cannot import {model_path.name}: {first_line(exc)}") from None


def run_passes(mod: Any, specs: list[PassSpec], settings: TvmSettings, target: Any,
               instruments: list[Any] | None = None) -> Any:
    """Run ``specs`` in order on ``mod`` under the pipeline's PassContext; ``BackendError``
    names the failing pass."""
    tvm = _tvm()
    with target, tvm.transform.PassContext(opt_level=settings.opt_level, config=dict(settings.config),
                                           instruments=instruments or []):
        for index, spec in enumerate(specs):
            try:
                mod = build_pass(spec, settings)(mod)
            except Exception as exc:
                raise BackendError(f"Relax pass #{index + 1} {spec.name!r} failed: {first_line(exc)}") from None
    return mod


class TvmExecutable:
    """The Relax VM's ``main`` on one device; inputs are copied to TVM tensors once per array object."""

    def __init__(self, vm: Any, device: Any, inputs: list[str], keepalive: Any) -> None:
        import numpy as np
        import tvm.runtime

        self.vm = vm
        self.device = device
        self.inputs = inputs
        self._keepalive = keepalive
        self._arguments = UploadedInputs(inputs, lambda array: tvm.runtime.tensor(np.ascontiguousarray(array), device))

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        import numpy as np

        result = self.vm["main"](*self._arguments.arguments(feeds))
        outputs = list(result) if isinstance(result, (list, tuple)) or type(result).__name__ == "Array" else [result]
        return [np.asarray(o.numpy()) for o in outputs]


class TvmBackend(Backend):
    """TVM Relax pass lists. Explanations come from the PrimFunc counts and per-pass compile times
    of the trace; ``--counts`` counts an inference (the Relax VM runs it in the calling thread,
    TVM's pool pinned to one thread) and the compile pass by pass (each Relax pass is applied from
    Python, in the calling thread)."""

    name = "tvm"
    capabilities = Capabilities(counts=True, compile_counts=True)

    def versions(self) -> dict[str, str]:
        from perfguard.runners.fingerprint import library_versions

        return library_versions(("apache-tvm", "apache-tvm-ffi"))

    def list_passes(self) -> list[PassInfo]:
        infos = []
        for name, function in relax_passes().items():
            source = ".".join(function.__module__.split(".")[1:3])  # relax.transform, relax.backend
            infos.append(PassInfo(name, source, PASS_SUMMARIES.get(name) or pass_summary(function.__doc__)))
        return infos

    def check_pipeline(self, pipeline: PipelineSpec) -> None:
        where = f"pipeline {pipeline.name!r}"
        settings = tvm_settings(pipeline.options, where)
        specs = pass_specs(pipeline.passes, where)
        tvm = _tvm()
        known = set(tvm.transform.PassContext.list_configs())
        for key in settings.config:
            if key not in known:
                raise UserError(f"{where}: config: TVM has no PassContext option {key!r}{did_you_mean(key, known)}")
        try:
            tvm.target.Target(resolve_target(settings.target))
        except Exception as exc:
            raise UserError(f"{where}: target {dict(settings.target)!r}: {first_line(exc)}") from None
        # A database without the pass is allowed: the same options with the pass dropped is the
        # untuned variant, and `bisect passes` can name that drop.
        if any(spec.name == APPLY_DATABASE for spec in specs) and not settings.database:
            raise UserError(f"{where}: pass {APPLY_DATABASE!r} needs options.database (a directory written by "
                            "`perfguard tvm-tune`)")

    def missing_input(self, pipeline: PipelineSpec, *, suite: str, case: str) -> str | None:
        """The pipeline's database when its files are not there yet, with the command that builds it."""
        database = pipeline.options.get("database", "")
        if not isinstance(database, str) or not database:
            return None
        if all((Path(database) / name).is_file() for name in DATABASE_FILES):
            return None
        return (f"database {database!r} is not built: build it with `perfguard tvm-tune {shlex.quote(suite)} "
                f"--case {shlex.quote(case)} --trials 8 --out {shlex.quote(database)}` (once per model, into one "
                "directory)")

    def tuning_moves(self, options: Mapping[str, object]) -> list[OptionEdit]:
        """Every other PassContext opt level (passes above it are skipped by TVM's Sequential)."""
        level = options.get("opt_level", 3)
        return [OptionEdit(f"opt_level {level} -> {other}", {**options, "opt_level": other})
                for other in range(4) if other != level]

    def compile(self, model_path: Path, pipeline: PipelineSpec, out_dir: Path) -> CompileOutput:
        where = f"pipeline {pipeline.name!r}"
        settings = tvm_settings(pipeline.options, where)
        specs = pass_specs(pipeline.passes, where)
        digest = database_digest(settings.database) if settings.database else ""
        tvm = _tvm()
        target_table = resolve_target(settings.target)
        target = tvm.target.Target(target_table)
        start = time.perf_counter()
        with counted(f"step|{COUNTED_STEPS[0]}"):
            mod = import_onnx(model_path)
        import_time = time.perf_counter() - start
        before = prim_func_histogram(mod)
        input_hash = structural_hash(mod)
        log = make_instrument()
        mod = run_passes(mod, specs, settings, target, [log])
        if counting_compile():
            raise CountedCompileDone  # the build is not counted, and a counted compile's artifact is discarded
        start = time.perf_counter()
        out_dir.mkdir(parents=True, exist_ok=True)
        library = out_dir / "model.so"
        try:
            with tvm.transform.PassContext(opt_level=settings.opt_level, config=dict(settings.config)):
                executable = tvm.compile(mod, target=target, relax_pipeline=None, tir_pipeline=settings.tir_pipeline)
            executable.export_library(str(library))
        except Exception as exc:
            raise BackendError(f"TVM cannot build the lowered module (TIR pipeline + codegen): {first_line(exc)}; "
                               "does the pass list lower to the VM (end with the finalize passes)?") from None
        build_time = time.perf_counter() - start
        records, previous_hash, previous_count = [], input_hash, sum(before.values())
        for index, (name, seconds, ir_hash, count, histogram) in enumerate(log.rows):
            records.append(PassRecord(index=index, name=specs[index].name if index < len(specs) else name,
                                      source="relax", time_s=seconds, nodes_before=previous_count, nodes_after=count,
                                      op_histogram=histogram, ir_hash=ir_hash, changed=ir_hash != previous_hash))
            previous_hash, previous_count = ir_hash, count
        pass_time = sum(r.time_s for r in records)
        use = _database_use(specs, settings, log)
        trace = TvmTrace(passes=records, input_hash=input_hash, final_hash=previous_hash,
                         total_time_s=import_time + pass_time + build_time, exact=len(records) == len(specs),
                         note="tvm: per listed Relax pass: wall time, tvm_ffi.structural_hash, PrimFunc count "
                              "(node count); import and build (TIR + LLVM + export) timed separately",
                         import_time_s=import_time, build_time_s=build_time, prim_funcs=previous_count,
                         nested_passes=log.nested, database_use=use)
        runtime: JsonDict = {"target": json_object(target_table, f"{where} target"), "opt_level": settings.opt_level, "entry": "main",
                   "inputs": _graph_inputs(model_path), "database_sha256": digest}
        artifact = Artifact(backend=self.name, path=str(library), settings=runtime, sha256=file_sha256(library),
                            size_bytes=library.stat().st_size, node_count=previous_count)
        return CompileOutput(artifact=artifact, trace=trace, work_time_s=trace.total_time_s)

    def load(self, artifact: Artifact, runner: Runner, threads: int) -> TvmExecutable:
        if not runner.host_cpu:
            raise BackendError(f"a tvm llvm library runs on runner 'cpu', not {runner.name!r}")
        # TVM's thread pool reads TVM_NUM_THREADS once, when it starts: the worker's environment
        # sets it (perfguard.workers.launch); a process that imports TVM later gets it here.
        os.environ.setdefault("TVM_NUM_THREADS", str(threads))
        tvm = _tvm()
        try:
            library = tvm.runtime.load_module(artifact.path)
            device = tvm.cpu()
            vm = tvm.relax.VirtualMachine(library, device)
        except Exception as exc:
            raise BackendError(f"the Relax VM cannot load {artifact.path}: {first_line(exc)}") from None
        inputs = setting_strs(artifact.settings, "inputs", f"tvm artifact {artifact.path}")
        return TvmExecutable(vm, device, inputs, library)

    def count_wording(self) -> CountWording:
        """The PrimFunc count after the last Relax pass (``node_count``): each a kernel the
        Relax VM calls."""
        return CountWording("PrimFunc", "PrimFuncs", "TVM's lowered module (PrimFunc count after the last Relax pass)",
                            "TVM's Relax VM", "primfuncs")

    def thread_env(self, threads: int) -> dict[str, str]:
        """TVM's thread pool reads ``TVM_NUM_THREADS`` once, when TVM is imported."""
        return {"TVM_NUM_THREADS": str(threads)}

    def count_blocker(self, artifact: Artifact) -> str | None:
        """A library built for an AVX-512 target (``mcpu = "host"`` on an AVX-512 machine) cannot
        run under Valgrind, which has no AVX-512: pin an AVX2 CPU to count it."""
        return avx512_blocker(artifact.settings.get("target"))

    def check_runner(self, runner: Runner) -> None:
        """The Relax VM runs llvm libraries on the CPU; no ONNX Runtime provider is involved."""
        if not runner.host_cpu:
            raise RunnerUnavailable(f"the tvm backend builds llvm libraries for runner 'cpu' only, not {runner.name!r}")
        _tvm()

    def artifact_key(self, pipeline: PipelineSpec) -> str:
        """The architecture, this CPU for ``mcpu = "host"``, and the database's digest: the
        pipeline names the database by path, its records decide the schedules."""
        settings = tvm_settings(pipeline.options, f"pipeline {pipeline.name!r}")
        host = settings.target.get("mcpu") == "host"
        try:
            digest = database_digest(settings.database) if settings.database else ""
        except UserError:  # no database yet: the compile itself says so
            digest = "missing"
        part = {"machine": super().artifact_key(pipeline), "host": resolve_target(settings.target) if host else {},
                "database": digest}
        return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:32]


def avx512_blocker(target: object) -> str | None:
    """Why a library built for ``target`` (the resolved target table of an artifact) cannot be
    counted: its CPU has AVX-512, which Valgrind 3.19 cannot run; None when it has not."""
    if not isinstance(target, Mapping) or target.get("kind") != "llvm":
        return None
    tvm = _tvm()
    try:
        avx512 = bool(tvm.target.codegen.target_has_features("avx512f", tvm.target.Target(dict(target))))
    except Exception:  # a target this TVM cannot read back: let the counted run say what fails
        return None
    if not avx512:
        return None
    return (f"the library is built for {target.get('mcpu', 'this CPU')!r}, which has AVX-512, and Valgrind cannot "
            "run AVX-512 instructions: pin an AVX2 CPU to count it (target = { kind = \"llvm\", mcpu = \"haswell\" })")


def _database_use(specs: list[PassSpec], settings: TvmSettings, log: Any) -> DatabaseUse | None:
    """What the database pass scheduled: its PrimFuncs with a record, of those it saw."""
    index = next((i for i, spec in enumerate(specs) if spec.name == APPLY_DATABASE), None)
    if index is None or not settings.database or index >= len(log.rows):
        return None
    return DatabaseUse(settings.database, log.scheduled[index], log.rows[index][3])


def _graph_inputs(model_path: Path) -> list[str]:
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    return [i.name for i in graph.input if i.name not in initializers]
