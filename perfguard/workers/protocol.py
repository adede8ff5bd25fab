"""The worker protocol: one typed request and one typed response per kind of worker, and the
status lines a worker prints while it works.

The parent writes a request to a JSON file, starts ``python -m perfguard.workers.worker REQUEST
RESPONSE`` and reads the response back from the second file (see ``perfguard.workers.launch``).
Five kinds, named by the request's ``mode``:

``compile`` (``CompileRequest`` -> ``CompileResponse``)
    compile one case, run the reference and check the artifact's outputs against it;
``measure`` (``MeasureRequest`` -> ``MeasureResponse``)
    load every variant of a group and time them interleaved;
``memory`` (``MemoryRequest`` -> ``MemoryResponse``)
    peak memory of a fresh process that loads one artifact;
``verify`` (``VerifyRequest`` -> ``VerifyResponse``)
    run an artifact compiled elsewhere once and compare it with the shipped reference outputs;
``profile`` (``ProfileRequest`` -> ``ProfileResponse``)
    load the variants of a comparison with the runtime's profiler on, run them interleaved, return
    the per-op aggregates (``perfguard.profile``). Never a timed run: profiles are measured apart
    from timing.

Wire format: the request is its fields plus ``"mode"``. The response is its fields, plus
``"error": {"stage", "message"[, "detail"]}`` when the worker failed; a response of ``"error"``
alone carries no body (the worker failed before it had one). A compile whose artifact gives a wrong
answer sends both: the body (artifact, trace, correctness) and the error. The parent and the worker
are the same perfguard, so a malformed document is a bug, refused with ``ProtocolError``.

While it works the worker prints status lines on stderr (``perfguard-worker: loading head:m/p/cpu``):
the last one tells the parent which stage, or which variant, a crash or a hang happened in.

This module imports nothing heavy (no backends, runners, onnx or numpy), so the parent can import it
freely; ``InputSpec`` and ``Artifact`` are imported when a document is decoded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from perfguard import jsonfields as f
from perfguard.errors import ProtocolError
from perfguard.jsonfields import (
    JsonDict,
    array as _list,
    field as _get,
    int_map as _int_map,
    integer as _int,
    number as _float,
    obj as _object,
    opt_integer as _opt_int,
    opt_number as _opt_float,
    opt_obj as _opt_object,
    opt_string as _opt_str,
    string as _str,
)
from perfguard.workers.status import (
    STATUS_PREFIX,
    VARIANT_VERBS,
    split_stderr,
    status_line,
    status_variant,
    variant_status,
)

if TYPE_CHECKING:
    # The result document's type (results/ sits below workers/), imported where a response is parsed:
    # results pulls numpy, which the parent's import of the protocol leaves out.
    from perfguard.backends.base import Artifact
    from perfguard.models.inputs import InputSpec
    from perfguard.results.result import CorrectnessCheck
    from perfguard.workers.trace import ProfileRun

__all__ = [
    "REQUEST_TYPES", "STATUS_PREFIX", "VARIANT_VERBS", "CheckTolerance", "CompilePipeline", "CompileRequest",
    "CompileResponse", "MeasureRequest", "MeasureResponse", "MeasureVariant", "MemoryRequest",
    "MemoryResponse", "ProfileRequest", "ProfileResponse", "ProtocolError", "Request", "VerifyRequest", "VerifyResponse", "WorkerError", "WorkerRequest",
    "WorkerResponse", "decode_response", "encode_response", "request_from_json", "split_stderr", "status_line",
    "status_variant", "variant_id", "variant_status",
]


def _artifact(data: Mapping[str, object], key: str, kind: str) -> Artifact:
    from perfguard.backends.base import Artifact

    value = _object(data, key, kind)
    try:
        return Artifact.from_json(value)
    except TypeError as exc:
        raise ProtocolError(f"{kind}: field {key!r} is not an artifact: {exc}") from None


def _correctness(data: Mapping[str, object], kind: str) -> CorrectnessCheck:
    from perfguard.results.result import CorrectnessCheck  # see the import under TYPE_CHECKING

    return CorrectnessCheck.from_json(_object(data, "correctness", kind))


def _input_specs(data: Mapping[str, object], kind: str) -> tuple[InputSpec, ...]:
    from perfguard.models.inputs import InputSpec

    try:
        return tuple(InputSpec.from_json(s) for s in f.objects(data, "input_specs", kind))
    except (KeyError, TypeError) as exc:
        raise ProtocolError(f"{kind}: field 'input_specs' holds an entry that is not an input spec: {exc}") from None


def _specs_json(specs: Sequence[InputSpec]) -> list[JsonDict]:
    return [s.to_json() for s in specs]


def _options(value: JsonDict | None) -> JsonDict | None:
    return None if value is None else dict(value)


def _read_options(data: Mapping[str, object], kind: str) -> JsonDict | None:
    """A request's ``runner_options``: the suite's JSON, as read."""
    value = _opt_object(data, "runner_options", kind)
    return None if value is None else f.json_object(value, f"{kind} runner_options")


def variant_id(side: str, case_id: str) -> str:
    """The id of one variant in a job, unique across sides: ``side:model/pipeline/runner``."""
    return f"{side}:{case_id}"


# ----------------------------------------------------------------------------------------------
# Shared parts
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WorkerError:
    """Why a worker produced no (usable) result: the stage it failed in and one line about it;
    ``detail`` is the last traceback line of an unexpected exception."""

    stage: str
    message: str
    detail: str | None = None

    def to_json(self) -> JsonDict:
        data: JsonDict = {"stage": self.stage, "message": self.message}
        if self.detail is not None:
            data["detail"] = self.detail
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> WorkerError:
        kind = "worker error"
        return cls(_str(data, "stage", kind), _str(data, "message", kind), _opt_str(data, "detail", kind))


@dataclass(frozen=True)
class CheckTolerance:
    """The correctness check's tolerance and input seed (the suite's ``[correctness]``)."""

    rtol: float
    atol: float
    seed: int

    def to_json(self) -> JsonDict:
        return {"rtol": self.rtol, "atol": self.atol, "seed": self.seed}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CheckTolerance:
        kind = "correctness tolerance"
        return cls(_float(data, "rtol", kind), _float(data, "atol", kind), _int(data, "seed", kind))


# ----------------------------------------------------------------------------------------------
# Responses
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompileResponse:
    """A compiled artifact, its pass trace, the compile times and the correctness check.

    ``trace`` is free-form: the backend's ``PassTrace.to_json()``, which backends extend (IREE
    adds ``mode``, ``pass_times``, ``cache_hit``); the parent copies it into the case entry."""

    artifact: Artifact
    trace: Mapping[str, object]
    compile_time_s: float
    compile_times_s: tuple[float, ...]
    correctness: CorrectnessCheck

    def to_json(self) -> JsonDict:
        return {"artifact": self.artifact.to_json(), "trace": f.json_object(self.trace, "trace"), "compile_time_s": self.compile_time_s,
                "compile_times_s": list(self.compile_times_s), "correctness": self.correctness.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CompileResponse:
        kind = "compile response"
        times = f.number_list(data, "compile_times_s", kind)
        return cls(_artifact(data, "artifact", kind), _object(data, "trace", kind), _float(data, "compile_time_s", kind),
                   tuple(float(t) for t in times), _correctness(data, kind))


@dataclass(frozen=True)
class MeasureResponse:
    """One measurement worker's values: per variant id, one value (seconds per loop) per round.

    ``telemetry`` is free-form: the runner's device telemetry record of the timed rounds
    (``perfguard.runners.telemetry``; None when the runner has none)."""

    values: Mapping[str, tuple[float, ...]]
    loops: Mapping[str, int]
    rss_delta_bytes: Mapping[str, int]
    peak_rss_bytes: int
    load_order: tuple[str, ...]
    pid: int
    telemetry: Mapping[str, object] | None = None
    #: The process's peak resident memory once the first variant of ``load_order`` was loaded and
    #: warmed up, before any other was loaded: that variant's memory sample, taken exactly as a
    #: memory probe takes it (see ``perfguard.workers.worker.load_warm``).
    first_peak_rss_bytes: int | None = None

    def to_json(self) -> JsonDict:
        return {"values": {k: list(v) for k, v in self.values.items()}, "loops": dict(self.loops),
                "rss_delta_bytes": dict(self.rss_delta_bytes), "peak_rss_bytes": self.peak_rss_bytes,
                "load_order": list(self.load_order), "pid": self.pid,
                "telemetry": None if self.telemetry is None else f.json_object(self.telemetry, "telemetry"),
                "first_peak_rss_bytes": self.first_peak_rss_bytes}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> MeasureResponse:
        kind = "measure response"
        raw = _object(data, "values", kind)
        values = {k: f.number_list(raw, k, f"{kind} values") for k in raw}
        order = _list(data, "load_order", kind)
        return cls({k: tuple(float(x) for x in v) for k, v in values.items()}, _int_map(data, "loops", kind),
                   _int_map(data, "rss_delta_bytes", kind), _int(data, "peak_rss_bytes", kind),
                   tuple(str(v) for v in order), _int(data, "pid", kind), _opt_object(data, "telemetry", kind),
                   _opt_int(data, "first_peak_rss_bytes", kind))


@dataclass(frozen=True)
class MemoryResponse:
    """Peak RSS of the probe process, and the growth of its RSS while loading the session."""

    peak_rss_bytes: int
    session_rss_bytes: int

    def to_json(self) -> JsonDict:
        return {"peak_rss_bytes": self.peak_rss_bytes, "session_rss_bytes": self.session_rss_bytes}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> MemoryResponse:
        kind = "memory response"
        return cls(_int(data, "peak_rss_bytes", kind), _int(data, "session_rss_bytes", kind))


@dataclass(frozen=True)
class VerifyResponse:
    """The artifact's outputs on this runner compared with the build machine's reference."""

    correctness: CorrectnessCheck

    def to_json(self) -> JsonDict:
        return {"correctness": self.correctness.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> VerifyResponse:
        return cls(_correctness(data, "verify response"))


@dataclass(frozen=True)
class ProfileResponse:
    """One profiling worker: per variant id, the aggregates of its profile and where its raw
    trace was kept (absent: not asked for); the worker's pid."""

    profiles: Mapping[str, ProfileRun]
    trace_paths: Mapping[str, str]
    pid: int

    def to_json(self) -> JsonDict:
        return {"profiles": {k: v.to_json() for k, v in self.profiles.items()}, "trace_paths": dict(self.trace_paths),
                "pid": self.pid}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ProfileResponse:
        from perfguard.workers.trace import ProfileRun

        kind = "profile response"
        paths = f.str_map(data, "trace_paths", kind)
        return cls({k: ProfileRun.from_json(v) for k, v in f.obj_map(data, "profiles", kind).items()}, paths,
                   _int(data, "pid", kind))


WorkerResponse = CompileResponse | MeasureResponse | MemoryResponse | VerifyResponse | ProfileResponse
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


def encode_response(body: WorkerResponse | None, error: WorkerError | None = None) -> JsonDict:
    """The response document: the body's fields, plus ``error`` when the worker failed."""
    data = body.to_json() if body is not None else {}
    if error is not None:
        data["error"] = error.to_json()
    if not data:
        raise ValueError("a response needs a body or an error")
    return data


def decode_response(data: object, parse: Callable[[Mapping[str, object]], R]) -> tuple[R | None, WorkerError | None]:
    """The (body, error) of response document ``data``; the body is None for an error alone."""
    if not isinstance(data, dict):
        raise ProtocolError(f"response: expected a JSON object, found {type(data).__name__}")
    error = WorkerError.from_json(_object(data, "error", "response")) if data.get("error") else None
    rest = {k: v for k, v in data.items() if k != "error"}
    if error is not None and not rest:
        return None, error
    return parse(rest), error


# ----------------------------------------------------------------------------------------------
# Requests
# ----------------------------------------------------------------------------------------------

class Request(Protocol[R_co]):
    """What every request has: its ``mode``, its ``threads`` (the parent sizes the worker's
    thread pools by it), the backends whose artifacts it compiles or loads (each sets its own
    thread environment, ``Backend.thread_env``), its JSON form, and the parser of its response
    body."""

    mode: ClassVar[str]

    @property
    def threads(self) -> int: ...

    @property
    def backends(self) -> tuple[str, ...]: ...

    def to_json(self) -> JsonDict: ...

    def parse_response(self, data: Mapping[str, object]) -> R_co: ...


@dataclass(frozen=True)
class CompilePipeline:
    """The pipeline a compile request applies: ordered pass names plus the backend's pinned
    settings; ``options`` is free-form (each backend reads its own keys)."""

    name: str
    backend: str
    passes: tuple[str, ...]
    options: Mapping[str, object]

    def to_json(self) -> JsonDict:
        return {"name": self.name, "backend": self.backend, "passes": list(self.passes), "options": f.json_object(self.options, "options")}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CompilePipeline:
        kind = "compile pipeline"
        passes = f.string_list(data, "passes", kind)
        return cls(_str(data, "name", kind), _str(data, "backend", kind), passes, _object(data, "options", kind))


@dataclass(frozen=True)
class CompileRequest:
    """Compile ``model_path`` with ``pipeline`` into ``out_dir`` (``compile_repeats`` times, each
    timed), with the user passes of ``compiler_path`` importable, then check the artifact on
    ``runner`` against the reference (cached in ``reference_cache``).

    ``runner_options`` is free-form: the suite's ``RunnerOptions.to_json()`` for ``runner``."""

    mode: ClassVar[str] = "compile"
    backend: str
    model_path: str
    pipeline: CompilePipeline
    out_dir: str
    compiler_path: str | None
    runner: str
    runner_options: JsonDict | None
    threads: int
    compile_repeats: int
    correctness: CheckTolerance
    input_specs: tuple[InputSpec, ...]
    reference_cache: str | None

    @property
    def backends(self) -> tuple[str, ...]:
        return (self.backend,)

    def to_json(self) -> JsonDict:
        return {"mode": self.mode, "backend": self.backend, "model_path": self.model_path,
                "pipeline": self.pipeline.to_json(), "out_dir": self.out_dir, "compiler_path": self.compiler_path,
                "runner": self.runner, "threads": self.threads, "compile_repeats": self.compile_repeats,
                "runner_options": _options(self.runner_options), "correctness": self.correctness.to_json(),
                "input_specs": _specs_json(self.input_specs), "reference_cache": self.reference_cache}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CompileRequest:
        kind = "compile request"
        return cls(_str(data, "backend", kind), _str(data, "model_path", kind),
                   CompilePipeline.from_json(_object(data, "pipeline", kind)), _str(data, "out_dir", kind),
                   _opt_str(data, "compiler_path", kind), _str(data, "runner", kind),
                   _read_options(data, kind), _int(data, "threads", kind),
                   _int(data, "compile_repeats", kind), CheckTolerance.from_json(_object(data, "correctness", kind)),
                   _input_specs(data, kind), _opt_str(data, "reference_cache", kind))

    def parse_response(self, data: Mapping[str, object]) -> CompileResponse:
        return CompileResponse.from_json(data)

    def hybrid_stages(self, prefix_len: int, prefix_compiler_path: str | None) -> tuple[CompileRequest, CompileRequest]:
        """The two stages of a hybrid (pass-bisection) compile: the first ``prefix_len`` passes with
        the prefix compiler, no backend options, compiled once into ``out_dir-prefix``; then the
        remaining passes from the stage-1 model (``model_path`` is filled in with ``with_model``)."""
        passes = self.pipeline.passes
        first = replace(self, pipeline=replace(self.pipeline, passes=passes[:prefix_len], options={}),
                        compiler_path=prefix_compiler_path, out_dir=self.out_dir + "-prefix", compile_repeats=1)
        rest = replace(self, pipeline=replace(self.pipeline, passes=passes[prefix_len:]))
        return first, rest

    def with_model(self, model_path: str) -> CompileRequest:
        return replace(self, model_path=model_path)


@dataclass(frozen=True)
class MeasureVariant:
    """One variant of a measurement group: its id (``variant_id``) and its artifact."""

    id: str
    artifact: Artifact

    def to_json(self) -> JsonDict:
        return {"id": self.id, "artifact": self.artifact.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> MeasureVariant:
        kind = "measure variant"
        return cls(_str(data, "id", kind), _artifact(data, "artifact", kind))


@dataclass(frozen=True)
class MeasureRequest:
    """Load ``variants``, warm each up, then time ``rounds`` interleaved rounds, or stop early
    once the timed rounds lasted ``max_time`` seconds and ``min_rounds`` were timed (0: never;
    see ``perfguard.workers.launch``). ``loops`` per variant id come from the first worker's
    calibration (None: calibrate so one value lasts ``min_time`` seconds); ``worker_index``
    seeds the inputs and the shuffles and rotates the load order.

    ``runner_options`` is free-form: the suite's ``RunnerOptions.to_json()`` for ``runner``."""

    mode: ClassVar[str] = "measure"
    variants: tuple[MeasureVariant, ...]
    runner: str
    runner_options: JsonDict | None
    threads: int
    warmup: int
    rounds: int
    min_time: float
    seed: int
    worker_index: int
    input_specs: tuple[InputSpec, ...]
    loops: Mapping[str, int] | None = None
    min_rounds: int = 0
    max_time: float = 0.0

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.artifact.backend for v in self.variants))

    def to_json(self) -> JsonDict:
        return {"mode": self.mode, "variants": [v.to_json() for v in self.variants], "runner": self.runner,
                "runner_options": _options(self.runner_options), "threads": self.threads, "warmup": self.warmup,
                "rounds": self.rounds, "min_time": self.min_time, "seed": self.seed,
                "worker_index": self.worker_index, "input_specs": _specs_json(self.input_specs),
                "loops": None if self.loops is None else dict(self.loops), "min_rounds": self.min_rounds,
                "max_time": self.max_time}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> MeasureRequest:
        kind = "measure request"
        return cls(tuple(MeasureVariant.from_json(v) for v in f.objects(data, "variants", kind)), _str(data, "runner", kind),
                   _read_options(data, kind), _int(data, "threads", kind), _int(data, "warmup", kind),
                   _int(data, "rounds", kind), _float(data, "min_time", kind), _int(data, "seed", kind),
                   _int(data, "worker_index", kind), _input_specs(data, kind),
                   _int_map(data, "loops", kind) if data.get("loops") else None,
                   _opt_int(data, "min_rounds", kind) or 0, _opt_float(data, "max_time", kind) or 0.0)

    def parse_response(self, data: Mapping[str, object]) -> MeasureResponse:
        return MeasureResponse.from_json(data)

    def for_worker(self, worker_index: int, variants: Sequence[MeasureVariant],
                   loops: Mapping[str, int]) -> MeasureRequest:
        """This request for worker ``worker_index`` on the ``variants`` still measured; ``loops``
        are reused only when they cover every one of them."""
        known = bool(loops) and all(v.id in loops for v in variants)
        return replace(self, worker_index=worker_index, variants=tuple(variants), loops=dict(loops) if known else None)


@dataclass(frozen=True)
class MemoryRequest:
    """Load ``artifact`` in a fresh process, warm it up as a measurement worker does (``warmup``
    runs, fewer once they lasted ``warmup * min_time``) on inputs seeded with ``seed``, report the
    peak RSS.

    ``runner_options`` is free-form: the suite's ``RunnerOptions.to_json()`` for ``runner``."""

    mode: ClassVar[str] = "memory"
    artifact: Artifact
    runner: str
    runner_options: JsonDict | None
    threads: int
    warmup: int
    min_time: float
    seed: int
    input_specs: tuple[InputSpec, ...]

    @property
    def backends(self) -> tuple[str, ...]:
        return (self.artifact.backend,)

    def to_json(self) -> JsonDict:
        return {"mode": self.mode, "artifact": self.artifact.to_json(), "runner": self.runner,
                "runner_options": _options(self.runner_options), "threads": self.threads, "warmup": self.warmup,
                "min_time": self.min_time, "seed": self.seed, "input_specs": _specs_json(self.input_specs)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> MemoryRequest:
        kind = "memory request"
        return cls(_artifact(data, "artifact", kind), _str(data, "runner", kind), _read_options(data, kind),
                   _int(data, "threads", kind), _int(data, "warmup", kind), _float(data, "min_time", kind),
                   _int(data, "seed", kind), _input_specs(data, kind))

    def parse_response(self, data: Mapping[str, object]) -> MemoryResponse:
        return MemoryResponse.from_json(data)


@dataclass(frozen=True)
class VerifyRequest:
    """Run ``artifact`` (compiled on another machine) once on ``runner`` and compare its outputs
    with the reference outputs in ``reference`` (an ``.npz`` file).

    ``runner_options`` is free-form: the suite's ``RunnerOptions.to_json()`` for ``runner``."""

    mode: ClassVar[str] = "verify"
    artifact: Artifact
    runner: str
    runner_options: JsonDict | None
    threads: int
    input_specs: tuple[InputSpec, ...]
    correctness: CheckTolerance
    reference: str

    @property
    def backends(self) -> tuple[str, ...]:
        return (self.artifact.backend,)

    def to_json(self) -> JsonDict:
        return {"mode": self.mode, "artifact": self.artifact.to_json(), "runner": self.runner,
                "runner_options": _options(self.runner_options), "threads": self.threads,
                "input_specs": _specs_json(self.input_specs), "correctness": self.correctness.to_json(),
                "reference": self.reference}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> VerifyRequest:
        kind = "verify request"
        return cls(_artifact(data, "artifact", kind), _str(data, "runner", kind), _read_options(data, kind),
                   _int(data, "threads", kind), _input_specs(data, kind),
                   CheckTolerance.from_json(_object(data, "correctness", kind)), _str(data, "reference", kind))

    def parse_response(self, data: Mapping[str, object]) -> VerifyResponse:
        return VerifyResponse.from_json(data)


@dataclass(frozen=True)
class ProfileRequest:
    """Load every variant in a fresh process with the runtime's profiler on (the pipelines' pinned
    settings otherwise unchanged; load order rotated by ``worker_index``), run each ``warmup``
    times, then ``runs`` rounds in which every variant runs once in a fresh random order (the
    sides of a comparison share the process and its time window, as timed workers do), on inputs
    seeded with ``seed``; aggregate each profile without the warm-up. ``trace_dir``: where to keep
    the raw trace files (None: they are deleted).

    ``runner_options`` is free-form: the suite's ``RunnerOptions.to_json()`` for ``runner``."""

    mode: ClassVar[str] = "profile"
    variants: tuple[MeasureVariant, ...]
    runner: str
    runner_options: JsonDict | None
    threads: int
    warmup: int
    runs: int
    seed: int
    worker_index: int
    input_specs: tuple[InputSpec, ...]
    trace_dir: str | None = None

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.artifact.backend for v in self.variants))

    def to_json(self) -> JsonDict:
        return {"mode": self.mode, "variants": [v.to_json() for v in self.variants], "runner": self.runner,
                "runner_options": _options(self.runner_options), "threads": self.threads, "warmup": self.warmup,
                "runs": self.runs, "seed": self.seed, "worker_index": self.worker_index,
                "input_specs": _specs_json(self.input_specs), "trace_dir": self.trace_dir}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ProfileRequest:
        kind = "profile request"
        return cls(tuple(MeasureVariant.from_json(v) for v in f.objects(data, "variants", kind)), _str(data, "runner", kind),
                   _read_options(data, kind), _int(data, "threads", kind), _int(data, "warmup", kind),
                   _int(data, "runs", kind), _int(data, "seed", kind), _int(data, "worker_index", kind),
                   _input_specs(data, kind), _opt_str(data, "trace_dir", kind))

    def parse_response(self, data: Mapping[str, object]) -> ProfileResponse:
        return ProfileResponse.from_json(data)


WorkerRequest = CompileRequest | MeasureRequest | MemoryRequest | VerifyRequest | ProfileRequest
REQUEST_TYPES: dict[str, type[CompileRequest] | type[MeasureRequest] | type[MemoryRequest] | type[VerifyRequest]
                    | type[ProfileRequest]] = {
    t.mode: t for t in (CompileRequest, MeasureRequest, MemoryRequest, VerifyRequest, ProfileRequest)}


def request_from_json(data: Any) -> WorkerRequest:
    """The typed request of document ``data``, by its ``mode``; an unknown mode or a missing
    field raises ``ProtocolError`` naming it."""
    mode = _get(data, "mode", "worker request")
    if mode not in REQUEST_TYPES:
        raise ProtocolError(f"worker request: unknown mode {mode!r}; expected one of {', '.join(REQUEST_TYPES)}")
    return REQUEST_TYPES[mode].from_json(data)
