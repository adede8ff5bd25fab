"""The ``iree`` backend: ONNX -> ``iree-import-onnx`` -> ``iree-compile`` -> a ``.vmfb`` run by
``iree.runtime``. Install with ``pip install 'perfguard[iree]'``; see docs/reference/backends.md, "The `iree` backend".

A pipeline pins what IREE lets a compiler engineer pin (all hashed into the case key):

``passes``
    An ordered list of passes run before IREE's own pipeline, on every ``util.func``: perfguard
    joins them into ``--iree-preprocessing-pass-pipeline="builtin.module(util.func(a,b,...))"``.
    A pass may carry options in MLIR syntax (``"canonicalize{max-iterations=4}"``).
``options.preprocessing``
    The same as one textual pipeline with its own anchors, for passes that do not run on
    functions; give this or ``passes``, not both.
``options.opt_level``
    ``O0`` (IREE 3.13's default, passed explicitly so a new default cannot move a baseline),
    ``O1``, ``O2`` or ``O3``.
``options.flags``
    Named ``iree-compile`` options, ``{ "iree-opt-data-tiling" = true }``; names are checked
    against the compiler's own ``--help-hidden`` list (close names on a typo) and values by the
    compiler's option parser, both before any work.
``options.target``
    ``llvm-cpu`` (default), ``vmvx`` or ``cuda``; with ``target_cpu`` (llvm-cpu; default ``host``,
    since generic x86-64 code is 6-16x slower) or ``target_chip`` (cuda, e.g. ``sm_89``: IREE 3.13 has no
    Hopper target, and its sm_89 PTX JIT-compiles on an H100/H200).
``options.driver``
    Runtime HAL driver: ``local-sync`` (default for CPU targets: single-threaded, the low-noise
    choice), ``local-task`` (a thread pool sized by the case's ``threads``) or ``cuda``.
``options.trace``
    ``timing`` (default: per-pass times from ``--mlir-timing``) or ``ir`` (also an IR dump per
    pass, hashed, so the first pass where two builds diverge can be named). ``ir_dump_limit``
    (default ``"1GiB"``) stops a compile whose dump grows past it; ``keep_ir = true`` keeps the
    dump in the artifact folder (``perfguard run --keep-artifacts DIR``) instead of deleting it.

The MLIR is fed to ``iree-compile`` on standard input, because the module bytes depend on the
input file's path; compiled modules are cached by (model bytes, pinned settings, compiler version,
host CPU), so an unchanged case is not recompiled (see ``compiler_tools``). A cache hit is marked in the
trace (``cache_hit``; ``total_time_s`` stays the original compile's), and a repeated compile of the
same case in one process (``[measure] compile_repeats``) compiles for real, so that compile-time
numbers stay compile times.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
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
    OptionEdit,
    PassInfo,
    PassRecord,
    UploadedInputs,
    file_sha256,
    setting_str,
    setting_str_map,
    setting_strs,
)
from perfguard.backends.counting_hooks import counted_process, counting_compile
from perfguard.backends.iree.compiler_tools import (
    INSTALL_HINT,
    ArtifactCache,
    compiler_flags,
    compiler_version,
    first_error,
    host_cpu_id,
    popen,
    registered_passes,
    run_tool,
    tool_path,
)
from perfguard.backends.iree.ir_trace import (
    IreeTrace,
    dump_size,
    ir_records,
    parse_timing,
    read_dump,
    timing_records,
)
from perfguard.backends.iree.valgrind_runtime import count_blocker, keep_off_io_uring
from perfguard.backends.settings import check_option_keys, option_choice
from perfguard.errors import (
    BackendError,
    CountedCompileDone,
    RunnerUnavailable,
    UserError,
    did_you_mean,
    first_line,
    unknown_name_message,
)
from perfguard.jsonfields import JsonDict
from perfguard.units import parse_size

if TYPE_CHECKING:
    import numpy as np

    from perfguard.runners.base import Runner
    from perfguard.suite import PipelineSpec

OPTION_KEYS = ("opt_level", "flags", "preprocessing", "target", "target_cpu", "target_chip", "driver", "trace",
               "ir_dump_limit", "keep_ir")
OPT_LEVELS = ("O0", "O1", "O2", "O3")
TRACE_MODES = ("timing", "ir")


@dataclass(frozen=True)
class IreeTarget:
    """An IREE target: the iree-compile flags that select it, its HAL drivers (the first is the
    default) and the runner kind its modules run on."""

    flags: tuple[str, ...]
    drivers: tuple[str, ...]
    runner: str


TARGETS = {
    "llvm-cpu": IreeTarget(("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu"),
                           ("local-sync", "local-task"), "cpu"),
    "vmvx": IreeTarget(("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=vmvx"),
                       ("local-sync", "local-task"), "cpu"),
    "cuda": IreeTarget(("--iree-hal-target-device=cuda",), ("cuda",), "cuda"),
}
# Flags perfguard sets itself from other options or for tracing; naming them in `flags` is an error.
MANAGED_FLAGS = {
    "iree-opt-level": "opt_level", "iree-hal-target-device": "target", "iree-hal-target-backends": "target",
    "iree-hal-local-target-device-backends": "target", "iree-llvmcpu-target-cpu": "target_cpu",
    "iree-cuda-target": "target_chip", "iree-preprocessing-pass-pipeline": "passes or preprocessing",
    "compile-to": "", "compile-from": "", "compile-mode": "", "output-format": "", "o": "",
    "iree-scheduling-dump-statistics-format": "", "iree-scheduling-dump-statistics-file": "",
}
TRACE_FORMAT = 1  # bump when the cached trace layout changes
#: Boolean iree-compile flags that toggle whole rewrites, which ``perfguard tune`` toggles where
#: this iree-compile knows them (measured on IREE 3.13: data tiling -25..-29 %, generalize-matmul
#: behind O2's +23..31 % on BERT). Every other opt level is a move too (O2 = O3 for these models).
TUNABLE_FLAGS = ("iree-opt-data-tiling", "iree-opt-generalize-matmul", "iree-opt-aggressively-propagate-transposes",
                 "iree-dispatch-creation-enable-aggressive-fusion")
_COMPILED_IN_THIS_PROCESS: set[str] = set()


def _flag_value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, (str, int)) for v in value):
        return ",".join(str(v) for v in value)
    raise UserError(f"{where}: expected a boolean, number, string or list of strings, found {value!r}")


def iree_settings(options: Mapping[str, Any], passes: tuple[str, ...] | list[str], where: str) -> JsonDict:
    """Validate a pipeline's options (no tool is run) and return them in canonical form."""
    check_option_keys(options, OPTION_KEYS, "iree", where)
    opt_level = option_choice(options, "opt_level", "O0", OPT_LEVELS, "optimization level", where)
    target = option_choice(options, "target", "llvm-cpu", TARGETS, "target", where)
    drivers = TARGETS[target].drivers
    driver = option_choice(options, "driver", drivers[0], drivers, f"driver for target {target!r}", where)
    if "target_cpu" in options and target != "llvm-cpu":
        raise UserError(f"{where}: target_cpu applies to target 'llvm-cpu' only (use target_chip for 'cuda')")
    if "target_chip" in options and target != "cuda":
        raise UserError(f"{where}: target_chip applies to target 'cuda' only (use target_cpu for 'llvm-cpu')")
    target_cpu = str(options.get("target_cpu", "host")) if target == "llvm-cpu" else ""
    target_chip = str(options.get("target_chip", "")) if target == "cuda" else ""
    raw_flags = options.get("flags", {})
    if not isinstance(raw_flags, Mapping):
        raise UserError(f"{where}: flags: expected a table of iree-compile options, e.g. "
                        "flags = { \"iree-opt-data-tiling\" = true }")
    flags: dict[str, str] = {}
    for name, value in raw_flags.items():
        bare = str(name).lstrip("-")
        if bare in MANAGED_FLAGS or bare.startswith("mlir-"):
            instead = MANAGED_FLAGS.get(bare, "")
            hint = f"; set it with the pipeline's {instead!r} instead" if instead else (
                "; perfguard sets tracing and output flags itself (see option 'trace')")
            raise UserError(f"{where}: flags: --{bare} is managed by perfguard{hint}")
        flags[bare] = _flag_value(value, f"{where}: flags.{bare}")
    preprocessing = options.get("preprocessing", "")
    if not isinstance(preprocessing, str):
        raise UserError(f"{where}: preprocessing: expected a textual pass pipeline such as "
                        "\"builtin.module(util.func(canonicalize,cse))\"")
    if preprocessing and passes:
        raise UserError(f"{where}: give the preprocessing passes either as 'passes' (run on every util.func) "
                        "or as options.preprocessing (a full textual pipeline), not both")
    if passes:
        preprocessing = f"builtin.module(util.func({','.join(p.strip() for p in passes)}))"
    trace = option_choice(options, "trace", "timing", TRACE_MODES, "trace mode", where)
    keep_ir = options.get("keep_ir", False)
    if not isinstance(keep_ir, bool):
        raise UserError(f"{where}: keep_ir: expected true or false, found {keep_ir!r}")
    return {"opt_level": opt_level, "target": target, "target_cpu": target_cpu, "target_chip": target_chip,
            "driver": driver, "flags": dict(sorted(flags.items())), "preprocessing": preprocessing.strip(),
            "trace": trace, "ir_dump_limit": parse_size(options.get("ir_dump_limit", "1GiB"), f"{where}: ir_dump_limit"),
            "keep_ir": keep_ir}


def compile_flags(settings: Mapping[str, Any]) -> list[str]:
    """The ``iree-compile`` arguments a pipeline's settings pin (no tracing, no output)."""
    args = list(TARGETS[setting_str(settings, "target", "iree settings")].flags)
    if settings["target_cpu"]:
        args.append(f"--iree-llvmcpu-target-cpu={settings['target_cpu']}")
    if settings["target_chip"]:
        args.append(f"--iree-cuda-target={settings['target_chip']}")
    args.append(f"--iree-opt-level={settings['opt_level']}")
    args += [f"--{name}={value}" for name, value in setting_str_map(settings, "flags", "iree settings").items()]
    if settings["preprocessing"]:
        args.append(f"--iree-preprocessing-pass-pipeline={settings['preprocessing']}")
    return args


@cache
def _check_flags(flags: tuple[tuple[str, str], ...], base: tuple[str, ...], where: str) -> None:
    known = compiler_flags()
    for name, _ in flags:
        if name not in known:
            raise UserError(f"{where}: flags: iree-compile {compiler_version()} has no option {name!r}"
                            f"{did_you_mean(name, known)}; "
                            "`iree-compile --help-hidden` lists them")
    # The compiler's own parser checks values (booleans, enums) on an empty module in ~0.1 s.
    result = run_tool([tool_path("iree-compile"), "-", *base, "--compile-to=input", "-o", os.devnull],
                      stdin=b"module {}\n")
    if result.returncode != 0:
        raise UserError(f"{where}: iree-compile rejects the pipeline's flags: "
                        f"{first_error(result.stderr.decode(errors='replace'))}")


@cache
def _check_preprocessing(text: str, where: str) -> None:
    if text.count("(") != text.count(")") or text.count("{") != text.count("}"):
        raise UserError(f"{where}: bad preprocessing pipeline {text!r}: unbalanced parentheses or braces")
    result = run_tool([tool_path("iree-opt"), f"--pass-pipeline={text}", "-o", os.devnull], stdin=b"module {}\n")
    if result.returncode == 0:
        return
    known = registered_passes()
    hints = []
    for token in sorted(set(_pass_tokens(text))):
        if token not in known:
            hints.append(f"{token!r} is not a registered pass{did_you_mean(token, known, most=1)}")
    detail = "; ".join(hints) or first_error(result.stderr.decode(errors="replace"))
    raise UserError(f"{where}: bad preprocessing pipeline {text!r}: {detail}; `perfguard passes --backend iree` "
                    "lists the passes")


def _pass_tokens(text: str) -> list[str]:
    """Pass names in a textual pipeline: words not followed by ``(`` (anchors), outside ``{...}``."""
    names, depth, word = [], 0, ""
    for char in text + ",":
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif depth == 0 and (char in ",()" or char.isspace()):
            if word and char != "(":
                names.append(word)
            word = ""
        elif depth == 0:
            word += char
    return names


class IreeExecutable:
    """A loaded module's entry function; inputs are uploaded once per distinct array object."""

    def __init__(self, device: Any, function: Any, inputs: list[str], keepalive: tuple[Any, ...]) -> None:
        import iree.runtime as rt

        self.device = device
        self.function = function
        self.inputs = inputs
        self._keepalive = keepalive
        self._arguments = UploadedInputs(inputs, lambda array: rt.asdevicearray(device, array))

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        import numpy as np

        result = self.function(*self._arguments.arguments(feeds))
        outputs = result if isinstance(result, (list, tuple)) else [result]
        return [np.asarray(o.to_host()) if hasattr(o, "to_host") else np.asarray(o) for o in outputs]


def import_iree_runtime() -> Any:
    """Import ``iree.runtime`` (the hardware boundary of ``runner_drivers_reason``: tests pass a fake)."""
    import iree.runtime as rt

    return rt


def runner_drivers_reason(runner_kind: str, loader: Callable[[], Any] | None = None) -> str:
    """Why IREE cannot run modules on runner kind ``runner_kind`` here ("" when it can): no IREE
    target for it, ``iree.runtime`` not importable, its HAL driver not compiled in
    (``query_available_drivers``), or a device driver that cannot start or sees no device (the
    ``cuda`` driver loads ``libcuda``: no NVIDIA driver, no device)."""
    drivers = [d for spec in TARGETS.values() if spec.runner == runner_kind for d in spec.drivers]
    if not drivers:
        kinds = sorted({spec.runner for spec in TARGETS.values()})
        return f"IREE has no target for runner {runner_kind!r} (its targets run on: {', '.join(kinds)})"
    try:
        rt = (loader or import_iree_runtime)()
    except ImportError as exc:
        return f"the IREE runtime is not importable ({exc}); {INSTALL_HINT}"
    have = list(rt.query_available_drivers())
    usable = [d for d in drivers if d in have]
    if not usable:
        return (f"IREE's {' or '.join(drivers)} driver is not in this iree-base-runtime build (it has "
                f"{', '.join(have)})")
    if all(d.startswith("local-") for d in usable):  # the host's own threads: no device to find
        return ""
    try:
        devices = list(rt.get_driver(usable[0]).query_available_devices())
    except Exception as exc:
        return f"IREE's {usable[0]} driver cannot start: {_runtime_error(exc)}"
    if not devices:
        return f"IREE's {usable[0]} driver sees no device"
    return ""


def _runtime_error(exc: BaseException) -> str:
    """The message of an ``iree.runtime`` error without its C source location prefix."""
    text = first_line(exc).removeprefix("Error creating driver: ")
    return text.split(": ", 1)[-1] if text.startswith("c/runtime/") else text


class IreeBackend(Backend):
    """IREE's compiler and runtime. ``--counts`` counts an inference of a module run by the
    ``local-sync`` driver (its dispatches run in the calling thread; ``valgrind_runtime``), and its
    compile as two steps: ``iree-import-onnx`` and ``iree-compile`` run as subprocesses, outside
    the calling thread's windows, so a counted compile runs each whole under Valgrind
    (``backends.counting_hooks.counted_process``): ``step|iree-import-onnx``, ``step|iree-compile``. IREE's
    own passes are not counted one by one (they run inside ``iree-compile``)."""

    name = "iree"
    capabilities = Capabilities(counts=True, compile_counts=True)

    def count_wording(self) -> CountWording:
        """The dispatch count of IREE's scheduling statistics (``node_count``)."""
        return CountWording("dispatch", "dispatches", "IREE's scheduling statistics (stream-aggregate dispatch-count)",
                            "IREE", "dispatches")

    def check_runner(self, runner: Runner) -> None:
        """IREE's HAL driver for the runner (``cuda`` on the cuda runner, ``local-*`` on cpu),
        never an ONNX Runtime provider."""
        reason = runner_drivers_reason(runner.kind)
        if reason:
            raise RunnerUnavailable(reason)

    def count_blocker(self, artifact: Artifact) -> str | None:
        """A module that is not run by ``local-sync`` on the CPU, or built for an AVX-512 host."""
        return count_blocker(dict(artifact.settings))

    def versions(self) -> dict[str, str]:
        from perfguard.runners.fingerprint import library_versions

        found = library_versions(("iree-base-compiler", "iree-base-runtime"))
        try:
            found["iree-compile"] = compiler_version()
        except UserError:
            found["iree-compile"] = "not found"
        return found

    def list_passes(self) -> list[PassInfo]:
        return [PassInfo(name, "iree-opt", summary) for name, summary in registered_passes().items()]

    def tuning_moves(self, options: Mapping[str, Any]) -> list[OptionEdit]:
        """Every other opt level, and each of ``TUNABLE_FLAGS`` this iree-compile knows toggled."""
        return option_edits(options, tuple(compiler_flags()))

    def check_pipeline(self, pipeline: PipelineSpec) -> None:
        where = f"pipeline {pipeline.name!r}"
        settings = iree_settings(pipeline.options, pipeline.passes, where)
        for tool in ("iree-compile", "iree-opt", "iree-import-onnx"):
            tool_path(tool)
        base = [flag for flag in compile_flags(settings) if not flag.startswith("--iree-preprocessing-pass-pipeline")]
        _check_flags(tuple(setting_str_map(settings, "flags", where).items()), tuple(base), where)
        if settings["preprocessing"]:
            _check_preprocessing(settings["preprocessing"], where)

    def compile(self, model_path: Path, pipeline: PipelineSpec, out_dir: Path) -> CompileOutput:
        import onnx

        settings = iree_settings(pipeline.options, pipeline.passes, f"pipeline {pipeline.name!r}")
        graph = onnx.load(str(model_path), load_external_data=False).graph
        initializers = {t.name for t in graph.initializer}
        runtime = {"target": settings["target"], "driver": settings["driver"], "entry": graph.name,
                   "inputs": [i.name for i in graph.input if i.name not in initializers],
                   **({"target_cpu": settings["target_cpu"]} if settings["target_cpu"] else {})}
        out_dir.mkdir(parents=True, exist_ok=True)
        vmfb = out_dir / "module.vmfb"
        if counting_compile():  # the tools run whole under Valgrind; not cached, not kept
            keep_off_io_uring()  # inherited by the tools: iree-compile starts IREE's proactor too
            self._compile(model_path, settings, out_dir, vmfb)
            raise CountedCompileDone
        key = self._cache_key(model_path, settings)
        cache_store = ArtifactCache()
        # A second compile of one key in one process is a deliberate repeat (compile-time
        # measurement, `compile_repeats`): it compiles for real instead of reading the cache.
        repeat = key in _COMPILED_IN_THIS_PROCESS
        _COMPILED_IN_THIS_PROCESS.add(key)
        entry = None if settings["keep_ir"] or repeat else cache_store.lookup(key)
        if entry is not None:
            shutil.copyfile(entry / "module.vmfb", vmfb)
            data = json.loads((entry / "trace.json").read_text())
            node_count = data.pop("dispatch_count", None)
            trace = IreeTrace(**{**data, "passes": [PassRecord(**rec) for rec in data["passes"]], "cache_hit": True})
            trace.note += " Taken from the artifact cache (same model, settings and compiler): not recompiled."
        else:
            trace, node_count = self._compile(model_path, settings, out_dir, vmfb)
            cache_store.store(key, vmfb, {**trace.to_json(), "dispatch_count": node_count})
        artifact = Artifact(backend=self.name, path=str(vmfb), settings=runtime, sha256=file_sha256(vmfb),
                            size_bytes=vmfb.stat().st_size, node_count=node_count)
        return CompileOutput(artifact=artifact, trace=trace)

    def artifact_key(self, pipeline: PipelineSpec) -> str:
        """The architecture, the ``iree-compile`` binary (version, path, size, mtime: a local build
        is not in ``versions``) and, for ``target_cpu = "host"`` (the default), this CPU."""
        settings = iree_settings(pipeline.options, pipeline.passes, f"pipeline {pipeline.name!r}")
        try:
            compiler = Path(tool_path("iree-compile")).resolve()
            stat = compiler.stat()
            binary = [compiler_version(), str(compiler), stat.st_size, stat.st_mtime_ns]
        except (OSError, UserError, subprocess.TimeoutExpired):  # no compiler: the compile itself says so
            binary = []
        part = {"machine": super().artifact_key(pipeline), "compiler": binary,
                "host": host_cpu_id() if settings["target_cpu"] == "host" else ""}
        return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:32]

    def _cache_key(self, model_path: Path, settings: Mapping[str, Any]) -> str:
        compiler = Path(tool_path("iree-compile")).resolve()
        stat = compiler.stat()
        part = {"model": file_sha256(model_path), "settings": {k: v for k, v in settings.items() if k != "keep_ir"},
                "compiler": [compiler_version(), str(compiler), stat.st_size, stat.st_mtime_ns],
                "host": host_cpu_id() if settings["target_cpu"] == "host" else "", "trace_format": TRACE_FORMAT}
        return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:32]

    def _compile(self, model_path: Path, settings: Mapping[str, Any], out_dir: Path,
                 vmfb: Path) -> tuple[IreeTrace, int | None]:
        start = time.perf_counter()
        imported = run_tool(counted_process("step|iree-import-onnx",
                                            [tool_path("iree-import-onnx"), str(model_path), "-o", "-"]), timeout=3600)
        import_time = time.perf_counter() - start
        if imported.returncode != 0:
            raise BackendError(f"iree-import-onnx cannot import the model: "
                               f"{first_error(imported.stderr.decode(errors='replace'))}")
        mlir = imported.stdout
        stats = out_dir / "scheduling-stats.json"
        args = [tool_path("iree-compile"), "-", *compile_flags(settings), "--mlir-timing",
                "--mlir-timing-display=tree", "--mlir-output-format=json", "--mlir-disable-threading",
                "--iree-scheduling-dump-statistics-format=json", f"--iree-scheduling-dump-statistics-file={stats}",
                "-o", str(vmfb)]
        dump_dir: Path | None = None
        if settings["trace"] == "ir":
            dump_dir = out_dir / "ir" if settings["keep_ir"] else Path(tempfile.mkdtemp(prefix=".ir-", dir=out_dir))
            shutil.rmtree(dump_dir, ignore_errors=True)
            args += ["--mlir-print-ir-after-all", "--mlir-print-ir-after-change", f"--mlir-print-ir-tree-dir={dump_dir}",
                     "--mlir-elide-elementsattrs-if-larger=16", "--mlir-elide-resource-strings-if-larger=16"]
        try:
            stderr, compile_time = self._run_compiler(counted_process("step|iree-compile", args), mlir, out_dir,
                                                      dump_dir, settings["ir_dump_limit"])
            timing, _ = parse_timing(stderr)
            times = [("iree-import-onnx", import_time), *timing]
            node_count = _dispatch_count(stats)
            trace = IreeTrace(input_hash=hashlib.sha256(mlir).hexdigest()[:16], final_hash=file_sha256(vmfb)[:16],
                              total_time_s=import_time + compile_time, exact=True, mode=settings["trace"])
            if dump_dir is None:
                trace.passes = timing_records(times)
                trace.note = ("iree timing: wall time per pass name from --mlir-timing (threading off), summed over "
                              "its runs; a pass that runs a nested pipeline includes it. trace = \"ir\" adds IR hashes.")
            else:
                trace.passes = ir_records(read_dump(dump_dir))
                trace.pass_times = [{"name": n, "time_s": t} for n, t in times]
                trace.note = (f"iree ir: {len(trace.passes)} IR dumps of passes that changed the IR, ordered by pass "
                              "index; per-pass times are in pass_times" +
                              (f"; dump kept in {dump_dir}" if settings["keep_ir"] else ""))
        finally:
            if dump_dir is not None and not settings["keep_ir"]:
                shutil.rmtree(dump_dir, ignore_errors=True)
            stats.unlink(missing_ok=True)
        return trace, node_count

    def _run_compiler(self, args: list[str], mlir: bytes, out_dir: Path, dump_dir: Path | None,
                      dump_limit: int) -> tuple[str, float]:
        """Run iree-compile with the MLIR on stdin (module bytes depend on an input path otherwise)."""
        with tempfile.TemporaryFile(dir=out_dir) as source, tempfile.TemporaryFile(dir=out_dir) as errors:
            source.write(mlir)
            source.seek(0)
            start = time.perf_counter()
            proc = popen(args, stdin=source, stdout=subprocess.DEVNULL, stderr=errors)
            oversize = False
            while True:
                try:
                    proc.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    if dump_dir is not None and dump_size(dump_dir) > dump_limit:
                        proc.kill()
                        proc.wait()
                        oversize = True
                        break
            elapsed = time.perf_counter() - start
            errors.seek(0)
            stderr = errors.read().decode(errors="replace")
        if oversize:
            raise BackendError(f"the IR dump grew past ir_dump_limit ({dump_limit / (1 << 20):.0f} MiB) and "
                               "iree-compile was stopped; raise ir_dump_limit or use trace = \"timing\"")
        if proc.returncode < 0:
            import signal

            try:
                name = signal.Signals(-proc.returncode).name
            except ValueError:
                name = f"signal {-proc.returncode}"
            raise BackendError(f"iree-compile crashed ({name}): {first_error(stderr)}")
        if proc.returncode != 0:
            raise BackendError(f"iree-compile failed (exit {proc.returncode}): {first_error(stderr)}")
        return stderr, elapsed

    def load(self, artifact: Artifact, runner: Runner, threads: int) -> IreeExecutable:
        settings, where = artifact.settings, f"iree artifact {artifact.path}"
        target, driver = setting_str(settings, "target", where), setting_str(settings, "driver", where)
        if target not in TARGETS:
            raise BackendError(f"{where}: " + unknown_name_message("target", target, TARGETS))
        wanted = TARGETS[target].runner
        if runner.kind != wanted:
            raise BackendError(f"an iree {target!r} module runs on runner {wanted!r}, not {runner.name!r}")
        keep_off_io_uring()  # under Valgrind only (a counted worker): see valgrind_runtime
        try:
            import iree.runtime as rt
        except ImportError:
            raise UserError(f"backend 'iree' needs the IREE runtime (iree.runtime); {INSTALL_HINT}") from None
        try:
            if driver == "local-task":
                rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
            config = _runtime_config(rt, driver, runner.device_id)
            module = rt.VmModule.mmap(config.vm_instance, artifact.path)
            context = rt.SystemContext(config=config)
            context.add_vm_module(module)
        except Exception as exc:
            raise BackendError(f"iree.runtime cannot load {artifact.path} with driver {driver!r}: "
                               f"{first_line(exc)}") from None
        names = [n for n in module.function_names if n != "__init" and not n.endswith("$async")]
        wanted_entry = setting_str(settings, "entry", where)
        entry = wanted_entry if wanted_entry in names else (names[0] if len(names) == 1 else None)
        if entry is None:
            raise BackendError(f"{artifact.path}: no entry function {wanted_entry!r}; the module has {names}")
        function = context.modules[module.name][entry]
        return IreeExecutable(config.device, function, setting_strs(settings, "inputs", where), (config, context, module))


def _runtime_config(rt: Any, driver: str, device_id: int | None) -> Any:
    """An ``iree.runtime.Config`` on ``driver``; for a device driver (``cuda``) the runner's
    ``device_id``-th device that driver enumerates (the CUDA order, ``CUDA_VISIBLE_DEVICES``
    applied), 0 being the driver's default device."""
    if not device_id:
        return rt.Config(driver)
    hal_driver = rt.get_driver(driver)
    devices = list(hal_driver.query_available_devices())
    if device_id >= len(devices):
        raise BackendError(f"IREE's {driver} driver sees {len(devices)} device(s); there is no device_id {device_id}")
    return rt.Config(device=hal_driver.create_device(devices[device_id]))


def _dispatch_count(stats: Path) -> int | None:
    """Dispatches per run, from --iree-scheduling-dump-statistics (IREE's own op count)."""
    try:
        data = json.loads(stats.read_text())
        return int(data["stream-aggregate"]["execution"]["dispatch-count"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def option_edits(options: Mapping[str, Any], known_flags: tuple[str, ...] | list[str]) -> list[OptionEdit]:
    """``IreeBackend.tuning_moves`` given the flags an iree-compile accepts (``known_flags``;
    the pipeline's own flags are always known): every other opt level, then each boolean flag of
    the pipeline and of ``TUNABLE_FLAGS`` toggled (a flag with a non-boolean value is left alone)."""
    edits = []
    level = str(options.get("opt_level", "O0"))
    for other in OPT_LEVELS:
        if other != level:
            edits.append(OptionEdit(f"opt_level {level} -> {other}", {**options, "opt_level": other}))
    flags = dict(options.get("flags") or {})
    for flag in dict.fromkeys([*flags, *TUNABLE_FLAGS]):
        if flag not in flags and flag not in known_flags:
            continue
        value = flags.get(flag, False)
        if not isinstance(value, bool):
            continue
        edits.append(OptionEdit(f"{flag} -> {str(not value).lower()}", {**options, "flags": {**flags, flag: not value}}))
    return edits
