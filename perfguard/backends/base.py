"""The backend contract: compile a model under a pinned pipeline into an artifact, then load it.

A backend is the adapter to one compiler. It has three jobs:

``compile(model_path, pipeline, out_dir) -> CompileOutput``
    Apply the pipeline's ordered passes and pinned settings, write the artifact under ``out_dir``
    and return it with a ``PassTrace`` (per pass: time, node count, op histogram, IR hash, changed).
    Runs inside a compile worker process, so a compiler that crashes or hangs fails one case.

``load(artifact, runner, threads) -> Executable``
    Turn an artifact into something that runs on a runner. Runs inside measurement workers.

``list_passes()`` / ``check_pipeline(pipeline)``
    What a pipeline may name, and a check before any work that raises ``UserError`` listing the
    valid names for a typo.

Everything else a stage may ask of a backend is declared by the backend, with defaults that say
"cannot", so a third-party backend offers what it implements and nothing breaks for what it does
not: ``capabilities`` (profiling, hybrid compiles, user passes: ``Capabilities``),
``load_profiled`` (the profiler the profile worker runs), ``tuning_moves`` (the option edits
``perfguard tune`` may try), ``execution_identity`` (what makes two artifacts run the same
code), ``reference`` (what the correctness check compares against, for a model ONNX Runtime cannot
run: ``Capabilities.torch_models``) and ``check_runner`` (what its artifacts need from a runner beyond the device: ORT's
execution provider, IREE's HAL driver). Stages ask these, never the backend's name: a stage that tested ``backend == "ort"`` kept
a third-party backend from profiling or tuning however much it implemented.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from perfguard.errors import BackendError, RunnerUnavailable, UserError
from perfguard.jsonfields import JsonDict

# Defined with the model files (models/ sits below backends/ and hashes them too); re-exported
# because the plugin API names it for a backend's artifact hash.
from perfguard.models.onnx_files import file_sha256 as file_sha256

if TYPE_CHECKING:
    import numpy as np

    from perfguard.runners.base import Runner
    from perfguard.suite import PipelineSpec


@dataclass(frozen=True)
class PassInfo:
    """A pass name a pipeline may use, where it comes from, and one line about it."""

    name: str
    source: str
    summary: str = ""


@dataclass(frozen=True)
class PassRecord:
    """What one pass did: its time, the graph after it, and whether it changed anything."""

    index: int
    name: str
    source: str
    time_s: float
    nodes_before: int
    nodes_after: int
    op_histogram: dict[str, int]
    ir_hash: str
    changed: bool
    #: Callgrind's instructions of this pass (a counted compile, ``--counts``); None: not counted.
    instructions: int | None = None


@dataclass
class PassTrace:
    """Per-pass records of one compile, in pipeline order.

    ``exact`` is False when the per-pass records had to be replayed separately from the real
    compile (onnxoptimizer passes run as one call) and the replay did not reach the same graph;
    ``note`` then says why.
    """

    passes: list[PassRecord] = field(default_factory=list)
    input_hash: str = ""
    final_hash: str = ""
    total_time_s: float = 0.0
    exact: bool = True
    note: str = ""

    def to_json(self) -> JsonDict:
        return asdict(self)


#: The stage of a case that did not run because an input it needs is not built yet
#: (``Backend.missing_input``): not a compile failure.
NOT_BUILT = "not-built"


@dataclass(frozen=True)
class DatabaseUse:
    """How much of a compile a tuning database scheduled: of the ``functions`` (TVM PrimFuncs) its
    apply pass saw, ``tuned`` had a record. ``tuned == 0``: the database holds no record for this
    model, which then ran untuned under a tuned pipeline's name."""

    database: str
    tuned: int
    functions: int

    @property
    def warning(self) -> str | None:
        if self.functions == 0 or self.tuned > 0:
            return None
        return (f"database {self.database!r} holds no record for this model: its {self.functions} functions ran "
                f"untuned (tune it into the database with `perfguard tvm-tune`)")

    def to_json(self) -> JsonDict:
        return {"database": self.database, "tuned": self.tuned, "functions": self.functions}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> DatabaseUse:
        from perfguard import jsonfields as f

        kind = "database use"
        return cls(f.string(data, "database", kind), f.count(data, "tuned", kind), f.count(data, "functions", kind))


@dataclass
class Artifact:
    """A compiled model on disk plus the runtime settings its pipeline pinned."""

    backend: str
    path: str
    settings: JsonDict  # the backend's own settings: free-form JSON, read by the backend that wrote them
    sha256: str
    size_bytes: int
    node_count: int | None = None

    def to_json(self) -> JsonDict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Artifact:
        return cls(**dict(data))



# Readers of a backend's own settings (``Artifact.settings``, or the settings it validated):
# each returns the setting with its type, or a BackendError naming ``where`` and the setting.
def setting_str(settings: Mapping[str, object], key: str, where: str) -> str:
    value = settings.get(key)
    if not isinstance(value, str):
        raise BackendError(f"{where}: setting {key!r} must be a string, found {value!r}")
    return value


def setting_strs(settings: Mapping[str, object], key: str, where: str) -> list[str]:
    value = settings.get(key)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise BackendError(f"{where}: setting {key!r} must be a list of strings, found {value!r}")
    return [str(v) for v in value]


def setting_str_map(settings: Mapping[str, object], key: str, where: str) -> dict[str, str]:
    value = settings.get(key)
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise BackendError(f"{where}: setting {key!r} must be a table of strings, found {value!r}")
    return {str(k): str(v) for k, v in value.items()}


@dataclass
class CompileOutput:
    artifact: Artifact
    trace: PassTrace
    #: The compile's own seconds (reading the model, the passes' real work, writing the
    #: artifact), without what perfguard adds to trace it (hashes, histograms, validity checks);
    #: None: the backend does not separate them, and the whole call is timed.
    work_time_s: float | None = None


class Executable(Protocol):
    """A loaded artifact: ``run`` takes named input arrays and returns the outputs in order."""

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]: ...


class BindableExecutable(Executable, Protocol):
    """A loaded artifact that can bind its inputs and outputs once (``bind``) and then run one
    inference per call of the returned step, with nothing converted or allocated by the caller:
    what a counted window calls (``perfguard.counting.child``), so the count holds the
    model's work and not Python's per-call conversions, whose cost depends on where the heap put
    their objects (docs/guides/exact-evidence.md, "Exact on every model")."""

    def bind(self, feeds: Mapping[str, np.ndarray]) -> Callable[[], object]:
        """Bind ``feeds`` and run one first inference; return the step that runs one more."""
        ...


def bound_step(executable: Executable, feeds: Mapping[str, np.ndarray]) -> Callable[[], object]:
    """One inference per call: the executable's own bound step where it has one (``bind``, which
    runs a first inference to learn its outputs), else ``run(feeds)`` after one first inference
    here: either way one inference has run when this returns (a count's first warm-up)."""
    bind = getattr(executable, "bind", None)
    if callable(bind):
        step: Callable[[], object] = bind(feeds)
        return step
    executable.run(feeds)
    return functools.partial(executable.run, feeds)


class ProfiledExecutable(Executable, Protocol):
    """A loaded artifact with the profiler on (``Backend.load_profiled``)."""

    def end_profiling(self) -> str:
        """Stop profiling and return the path of the trace written: a JSON array of trace
        events (or ``{"traceEvents": [...]}``) in ONNX Runtime's profile format, which
        ``perfguard.workers.trace`` aggregates: per ``run()`` one ``cat: "Session"``,
        ``name: "model_run"`` event, and inside it one ``cat: "Node"`` event named
        ``<node>_kernel_time`` per node with ``args.op_name`` and ``args.provider`` (``ts`` and
        ``dur`` in µs). One format for every backend keeps the diff, the dimension and the
        Perfetto file backend-blind."""
        ...


#: Each ability of ``Capabilities``, as the error for a backend without it says it.
ABILITIES = {
    "profile": "profile its artifacts (perfguard profile, check --explain)",
    "hybrid_compile": "compile hybrids from another compiler's pass prefix (bisect passes)",
    "user_passes": "run user passes (package.module:function)",
    "counts": "be counted under Valgrind (--counts: its inferences do not run in the calling thread)",
    "compile_counts": "count its compile per pass under Valgrind (--counts: its compiler's work does not run in "
                      "the calling thread)",
    "torch_models": "compile a model given as a PyTorch callable ([models.NAME] torch)",
}


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond compile and load, declared by the backend
    (``Backend.capabilities``). Each default says "cannot", so a backend written before a
    capability existed keeps working without it.

    ``profile``
        ``Backend.load_profiled`` loads an artifact with a profiler on, and the trace it writes
        is in the format of ``ProfiledExecutable.end_profiling``. Without it, ``perfguard
        profile`` and ``check --explain`` explain a pair from its compile statistics.
    ``hybrid_compile``
        An artifact is a model that another compile of the same backend can start from (its
        ``path`` is a valid ``model_path``), so the first passes from one compiler and the rest
        from another make one artifact: the timing step of ``bisect passes`` between commits.
    ``user_passes``
        A pipeline may name passes of the compiler under test (``package.module:function``),
        imported from the suite's ``[compiler] path``: preflight imports them before any work.
    ``counts``
        An artifact loaded with ``threads=1`` runs each inference in the calling thread (no pool
        left spinning), so a window of Valgrind's callgrind around ``run`` counts that inference
        and nothing else: ``--counts`` (``perfguard.counting.child``). An artifact it cannot
        count all the same (built for instructions Valgrind cannot run) is ``Backend.count_blocker``.
    ``compile_counts``
        ``compile`` does its real work in the calling thread and opens a counted window around
        each piece of it (``backends.counting_hooks.counted``: a pass, or a step of the backend's own), so a
        counted compile gives instructions per pass and ``compile_instructions``. A compiler run
        as a subprocess, which no window of the calling thread sees, runs through
        ``backends.counting_hooks.counted_process`` and is counted whole as one step (IREE's
        ``iree-import-onnx`` and ``iree-compile``).
    ``torch_models``
        ``compile`` takes a model given as a PyTorch callable (``[models.NAME] torch``: the
        descriptor ``perfguard.models.torch_callable`` writes, its ``model_path``), and
        ``Backend.reference`` runs it eagerly for the correctness check; preflight refuses such a
        model for any other backend.

    The option edits ``perfguard tune`` may try are ``Backend.tuning_moves`` (none by default)
    and what makes two artifacts run the same code is ``Backend.execution_identity``.
    """

    profile: bool = False
    hybrid_compile: bool = False
    user_passes: bool = False
    counts: bool = False
    compile_counts: bool = False
    torch_models: bool = False

    def to_json(self) -> dict[str, bool]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Capabilities:
        """Read what ``to_json`` wrote; a key this version does not know is left out (a newer
        perfguard's ability), a missing one reads as "cannot"."""
        known = {name: bool(data[name]) for name in ABILITIES if name in data}
        return cls(**known)

    def missing(self, backend: str, ability: str) -> UserError | None:
        """The one-line error for ``backend`` lacking ``ability`` (a key of ``ABILITIES``), or
        None when it has it."""
        if getattr(self, ability):
            return None
        return UserError(f"backend {backend!r} cannot {ABILITIES[ability]}: its Capabilities.{ability} is False")


@dataclass(frozen=True)
class CountWording:
    """How a backend words the count an explanation reads when the backend has no runtime
    profiler (``Capabilities.profile`` False): ``Artifact.node_count``, the units of work its
    artifact runs, each a kernel launch with its own scheduling cost
    (:func:`perfguard.profile.dimension.classify_counts`).

    ``one`` and ``many`` name one unit and several (``dispatch``, ``dispatches``); ``source``
    says where the count comes from; ``runtime`` names what has no profiler here; ``rule`` is the
    word in the dimension's rule names (``more-<rule>``, ``same-<rule>``, ``fewer-<rule>``)."""

    one: str
    many: str
    source: str
    runtime: str
    rule: str


@dataclass(frozen=True)
class OptionEdit:
    """One edit of a pipeline's backend options that ``perfguard tune`` may try
    (``Backend.tuning_moves``): a line that says what changed, and the whole options after it."""

    describe: str
    options: Mapping[str, Any]

    def to_json(self) -> JsonDict:
        return {"describe": self.describe, "options": dict(self.options)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OptionEdit:
        return cls(str(data["describe"]), dict(data["options"]))


class UploadedInputs:
    """A model's inputs as device arguments, copied to the device once per distinct array object:
    timed runs reuse one feed dict, so only the first run of a feed pays the upload."""

    def __init__(self, inputs: list[str], upload: Callable[[np.ndarray], Any]) -> None:
        self.inputs = inputs
        self._upload = upload
        self._uploaded: dict[str, tuple[np.ndarray, Any]] = {}

    def arguments(self, feeds: Mapping[str, np.ndarray]) -> list[Any]:
        args = []
        for name in self.inputs:
            array = feeds[name]
            cached = self._uploaded.get(name)
            if cached is None or cached[0] is not array:
                cached = (array, self._upload(array))
                self._uploaded[name] = cached
            args.append(cached[1])
        return args


class Backend(ABC):
    """Base class of compiler adapters; register subclasses by name (see ``perfguard.backends``)."""

    name: ClassVar[str]
    #: What this backend can do beyond compile and load (``Capabilities``: nothing by default).
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: A backend for tests only (no compiler, no hardware): `perfguard runners` leaves it out
    #: unless asked for it by name.
    test_only: ClassVar[bool] = False
    #: What a user pass of this backend takes and returns (``capabilities.user_passes``), as
    #: ``perfguard passes`` states it.
    user_pass_signature: ClassVar[str] = "ModelProto -> ModelProto"

    @abstractmethod
    def versions(self) -> dict[str, str]:
        """Versions of the compiler and runtime packages this backend uses."""

    @abstractmethod
    def list_passes(self) -> list[PassInfo]:
        """Every pass name a pipeline of this backend may use (user passes aside)."""

    @abstractmethod
    def check_pipeline(self, pipeline: PipelineSpec) -> None:
        """Raise ``UserError`` for an unknown pass or option, before any work is done."""

    @abstractmethod
    def compile(self, model_path: Path, pipeline: PipelineSpec, out_dir: Path) -> CompileOutput:
        """Compile under the pinned pipeline; raise ``BackendError`` naming the failing pass."""

    def reference(self, model_path: Path) -> Executable | None:
        """What the correctness check runs for the expected outputs of the model at ``model_path``:
        None (the default) for ONNX Runtime with every optimization off on the ONNX file. A backend
        that compiles models ONNX Runtime cannot run (``Capabilities.torch_models``) returns their
        eager run here."""
        return None

    def recompile_time(self, model_path: Path, pipeline: PipelineSpec, out_dir: Path) -> float:
        """Compile again for the time only (a compile-time repeat, after :meth:`compile` succeeded
        on the same input), in seconds, timed as :meth:`compile` times ``work_time_s``. The
        default times a whole :meth:`compile`."""
        start = time.perf_counter()
        self.compile(model_path, pipeline, out_dir)
        return time.perf_counter() - start

    @abstractmethod
    def load(self, artifact: Artifact, runner: Runner, threads: int) -> Executable:
        """Load an artifact for timed runs on ``runner`` with ``threads`` threads."""

    def preload(self) -> None:
        """Import what :meth:`load` needs, once, in a counted process before it forks a child per
        count (``counting.child.do_count_batch``): every child then starts with the runtime
        imported, so its import is paid once per job, not once per count under Valgrind, and
        what the import allocates lies in one state for every child (an import in each child
        left each a heap of its own, and counts moved with it). Nothing that starts a thread or
        opens a device belongs here: a fork keeps neither. The default imports nothing."""

    def require(self, ability: str) -> None:
        """Raise the one-line ``UserError`` naming this backend and ``ability`` (a key of
        ``ABILITIES``) unless its ``capabilities`` declare it."""
        error = self.capabilities.missing(self.name, ability)
        if error is not None:
            raise error

    def load_profiled(self, artifact: Artifact, runner: Runner, threads: int, trace_prefix: str) -> ProfiledExecutable:
        """Load ``artifact`` as :meth:`load` does, with the profiler on, writing its trace to a
        file whose path starts with ``trace_prefix`` (the profile worker runs it, then
        ``end_profiling``). Nothing else may change: a profiled artifact must run the same code.
        Only for a backend whose ``capabilities.profile`` is True; the default refuses."""
        self.require("profile")
        raise NotImplementedError(f"backend {self.name!r} declares profile but has no load_profiled")

    def count_wording(self) -> CountWording:
        """How explanations word this backend's ``Artifact.node_count`` when it cannot profile
        (:class:`CountWording`). The default calls them nodes of the artifact; a backend whose
        count means more (IREE's dispatches, TVM's PrimFuncs) says so."""
        return CountWording("node", "nodes", f"the {self.name} artifact's node count", self.name, "nodes")

    def count_blocker(self, artifact: Artifact) -> str | None:
        """Why ``artifact`` cannot be counted under Valgrind although this backend's inferences
        can (``capabilities.counts``), in one line naming what to change; None (the default) when
        it can. Valgrind 3.19 runs no AVX-512 instruction (SIGILL), so a library compiled ahead of
        time for an AVX-512 CPU cannot run under it, while ONNX Runtime picks its kernels at run
        time from the CPUID Valgrind shows (AVX2)."""
        return None

    def rehearse_counted_compile(self, folder: Path) -> bool:
        """Run once, in the counted process with Valgrind's instrumentation on and nothing
        counted, what every counted compile of this backend runs (a fixed model, the same in
        every job), writing only under ``folder``; True when it did. Its counted compiles are then
        forked from that state and never switch the instrumentation (a switch discards every
        translation): they find the code translated. The default (False): no rehearsal, each
        counted compile switches the instrumentation on and off around each window, and what lies
        between its windows runs uninstrumented (a TVM or Inductor compile's Python)."""
        return False

    def check_runner(self, runner: Runner) -> None:
        """Raise ``RunnerUnavailable`` (one line: what is missing and how to get it) when this
        machine lacks what this backend's artifacts need from ``runner`` beyond its device (the
        device itself is ``Runner.check_device``; ``check_case_runner`` asks both). The default
        needs nothing beyond the device: a backend declares its own runtime's needs here (``ort``
        and ``mock``: an ONNX Runtime session on the runner's execution provider,
        ``perfguard.backends.ort.execution_providers.check_providers``; ``tvm``: the CPU and TVM's runtime)."""

    def thread_env(self, threads: int) -> dict[str, str]:
        """Environment variables that size this backend's runtime thread pools to ``threads`` in a
        worker process, set (unless the user set them) before the worker imports anything: a
        pool read once at start-up cannot be resized later. The default is none; the variables
        of OpenMP and the BLAS libraries are set for every worker
        (:mod:`perfguard.workers.launch`)."""
        return {}

    def missing_input(self, pipeline: PipelineSpec, *, suite: str, case: str) -> str | None:
        """One line naming what ``pipeline`` needs on this machine that is not built yet and how
        to build it (the ``tvm`` backend: its tuning database, with the ``perfguard tvm-tune``
        command for ``suite`` and ``case``); None when nothing is missing, the default. A case with
        one is not compiled: its error's stage is :data:`NOT_BUILT`, not ``compile``."""
        return None

    def tuning_moves(self, options: Mapping[str, Any]) -> list[OptionEdit]:
        """The option edits ``perfguard tune`` may try from a pipeline with ``options`` (each a
        neighbour one edit away, beside the pass-order moves every backend gets). None by
        default: a backend's options stay as the suite pinned them."""
        return []

    def execution_identity(self, artifact: Artifact) -> str:
        """A hash of everything that decides how ``artifact`` runs, the runner aside: its bytes
        (``sha256``, external data included), the runtime settings its pipeline pinned, and the
        versions of the runtime that loads it. Two artifacts with one identity on one runner
        run the same code, so ``perfguard check`` calls them SAME without timing them (LNT's
        ``ignore_same_hash``). A backend whose runtime depends on something else (a runtime
        library built from the compiler under test, say) must add it here."""
        part = {"backend": self.name, "sha256": artifact.sha256, "settings": artifact.settings,
                "runtime": self.versions()}
        return hashlib.sha256(json.dumps(part, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def artifact_key(self, pipeline: PipelineSpec) -> str:
        """What decides this backend's artifact of ``pipeline`` beyond the model, the pipeline's
        passes and options and :meth:`versions`: part of the artifact cache's key
        (``perfguard.compile.cache``), so an entry compiled on one machine is served on another
        only where it would compile the same. The default is the machine's architecture; a backend
        that compiles for the host CPU, or runs a compiler binary :meth:`versions` does not name,
        must add it here."""
        return platform.machine()


def check_case_runner(backend: Backend, runner: Runner) -> None:
    """Raise ``RunnerUnavailable`` with every reason ``runner`` cannot serve ``backend``'s cases on
    this machine, in one message: its device (``Runner.check_device``) and what the backend needs
    from it (``Backend.check_runner``)."""
    reasons = []
    for check in (runner.check_device, lambda: backend.check_runner(runner)):
        try:
            check()
        except RunnerUnavailable as exc:
            reasons.append(str(exc))
    if reasons:
        raise RunnerUnavailable(f"runner {runner.name!r} cannot run {backend.name!r} cases here: " + "; ".join(reasons))
