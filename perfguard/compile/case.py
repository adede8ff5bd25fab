"""The compile stage of one case: its key, a compile in its own worker process (the compiler under
test may crash or hang), hybrid (pass-bisection) compiles, and the memory probes of the artifact.

A compiled case carries the result-document entry that the measure stage fills in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from perfguard.backends import Artifact, get_backend
from perfguard.backends.base import NOT_BUILT
from perfguard.compile.cache import CacheKey, CompileCache, active_cache
from perfguard.jsonfields import JsonDict, json_object
from perfguard.models.loader import LoadedModel
from perfguard.progress import Progress
from perfguard.results import ArtifactInfo, CaseEntry, CaseKey, CompilerInfo, Trace, utc_now
from perfguard.runners.fingerprint import fingerprint_hash
from perfguard.suite import CaseSpec, PipelineSpec, Suite
from perfguard.workers.launch import run_worker
from perfguard.workers.protocol import CompileRequest, CompileResponse, variant_id as _variant_id
from perfguard.workers.requests import compile_request


@dataclass
class CompiledCase:
    case: CaseSpec
    model: LoadedModel
    entry: CaseEntry
    artifact: Artifact | None = None
    side: str = "head"
    #: The artifact cache's part (``perfguard.compile.cache``): "hit" (served, not compiled),
    #: "miss" (compiled and offered), "uncached" (not cacheable); None without a cache.
    cache: str | None = None
    #: The artifact cache's key of this compile (None: no cache, or not cacheable): what its
    #: counted compile is stored under (``perfguard.counting.served``).
    cache_key: CacheKey | None = None

    @property
    def variant_id(self) -> str:
        """Unique across sides: ``side:model/pipeline/runner``."""
        return _variant_id(self.side, self.case.id)


@dataclass(frozen=True)
class Side:
    """One version of the compiler under test measured in this job (``head``, ``base``, ``a``...)."""

    label: str
    compiler_path: Path | None
    commit: str | None = None
    subject: str = ""
    # Hybrid compiles (pass bisection): the first ``prefix_len`` passes come from the compiler at
    # ``prefix_path``, the rest from ``compiler_path``.
    prefix_path: Path | None = None
    prefix_len: int = 0
    # Pipelines this version defines differently from the suite (by name): a check against a base
    # ref compiles the base with the suite's pipelines as they were at that ref.
    pipelines: Mapping[str, PipelineSpec] | None = None

    def info(self) -> CompilerInfo:
        return CompilerInfo(self.label, self.commit, self.subject,
                            str(self.compiler_path) if self.compiler_path else None)


@dataclass(frozen=True)
class Variant:
    """One version of a case to compile: a compiler side and the pipeline's passes and options
    (None: the case's own). A bisection probe and the explanation of its culprit compile the same
    variants; ``perfguard tune`` confirms a candidate (passes and IREE options) as one."""

    label: str
    side: Side
    passes: tuple[str, ...] | None = None
    options: Mapping[str, object] | None = None

    def case_of(self, case: CaseSpec) -> CaseSpec:
        """``case`` under this variant's passes and options (a pipeline named by the label), or as it is."""
        if self.passes is None and self.options is None:
            return case
        pipeline = case.pipeline
        return replace(case, pipeline=PipelineSpec(
            name=self.label, backend=pipeline.backend,
            passes=tuple(pipeline.passes if self.passes is None else self.passes),
            options=pipeline.options if self.options is None else self.options))


@dataclass
class RunContext:
    suite: Suite
    cases: list[CaseSpec]
    workdir: Path
    progress: Progress = field(default_factory=Progress)
    environment: dict[str, JsonDict] = field(default_factory=dict)
    sides: list[Side] = field(default_factory=list)
    #: The artifact cache the compiles consult (default: the one of ``using_cache``, if any).
    cache: CompileCache | None = field(default_factory=active_cache)


def case_key(case: CaseSpec, model: LoadedModel, versions: dict[str, str], runner_hash: str,
             runner_options: JsonDict | None = None) -> CaseKey:
    return CaseKey(
        model={"name": model.spec.name, "sha256": model.sha256, "source": model.spec.source()},
        pipeline={"name": case.pipeline.name, "passes": list(case.pipeline.passes),
                  "options": json_object(case.pipeline.options, f"pipeline {case.pipeline.name} options"), "sha256": case.pipeline.sha256},
        backend={"name": case.pipeline.backend, "versions": versions},
        runner={"name": case.runner, "fingerprint_sha256": runner_hash, "options": runner_options},
        measure=case.measure.to_json(),
    )


def execution_identity(artifact: Artifact, key: CaseKey) -> str:
    """The artifact's execution identity on the case's runner: the backend's
    (``Backend.execution_identity``: bytes, pinned settings, runtime) and the runner (name,
    fingerprint, options)."""
    part = {"artifact": get_backend(artifact.backend).execution_identity(artifact), "runner": key.runner}
    return hashlib.sha256(json.dumps(part, sort_keys=True, default=str).encode()).hexdigest()[:16]


def compile_case(ctx: RunContext, case: CaseSpec, model: LoadedModel, index: int,
                 side: Side | None = None) -> CompiledCase:
    """Compile one case for one side in its own worker process (or serve it from the artifact
    cache). Its memory probes are the measurement's (:func:`perfguard.measure.memory.probe_memory`)."""
    side = side or Side("head", ctx.suite.compiler.path)
    if side.pipelines and case.pipeline.name in side.pipelines:
        case = replace(case, pipeline=side.pipelines[case.pipeline.name])
    runner_fp = ctx.environment[case.runner]
    versions = get_backend(case.pipeline.backend).versions()
    key = case_key(case, model, versions, fingerprint_hash(runner_fp),
                   ctx.suite.runner_options(case.runner).to_json())
    entry = CaseEntry(case.id, model.spec.name, case.pipeline.name, case.runner, key, key.hash(), utc_now())
    request = compile_request(ctx.suite, case, model.path, model.inputs, compiler_path=side.compiler_path,
                              out_dir=ctx.workdir / "artifacts" / side.label / f"{index:03d}",
                              reference_cache=ctx.workdir / "refs" / f"{model.sha256[:16]}-{case.tolerance.seed}.npz")
    (ctx.workdir / "refs").mkdir(parents=True, exist_ok=True)
    compiled = CompiledCase(case, model, entry, side=side.label)
    missing = get_backend(case.pipeline.backend).missing_input(case.pipeline, suite=str(ctx.suite.path), case=case.id)
    if missing is not None:  # not a compile failure: the case cannot run until it is built
        return mark_failed(compiled, NOT_BUILT, missing)
    cache_key, cached = _cached(ctx, request, model, versions, side, compiled)
    if cached is not None:  # compile times of another job stay out of the gate, as a backend cache's
        compiled.entry = _recorded(entry, key, cached, Trace.from_json(cached.trace), ())
        compiled.artifact = cached.artifact
        return compiled
    prefix_trace = None
    if side.prefix_len > 0:
        prefix_trace, request, failure = _compile_prefix(ctx, request, side, case.measure.compile_timeout)
        if failure:
            return mark_failed(compiled, "compile", failure)
    outcome = run_worker(request, case.measure.compile_timeout, ctx.workdir / "ipc")
    if outcome.failure:
        stage = outcome.last_status or "compile"
        detail = f": {outcome.stderr_tail.splitlines()[-1][:200]}" if outcome.stderr_tail else ""
        message = outcome.failure.replace("worker", "compile worker", 1) + f" during {stage}{detail}"
        return mark_failed(compiled, stage, message)
    response = outcome.response
    if response is not None:
        trace = Trace.from_json(response.trace)
        if prefix_trace is not None:
            trace = trace.after_prefix(prefix_trace, side.prefix_len)
        # A compile served from a backend's artifact cache timed a file copy: keep it out of the gate.
        compile_times = () if trace.cache_hit else tuple(response.compile_times_s)
        compiled.entry = _recorded(entry, key, response, trace, compile_times)
    if outcome.error is not None:
        return mark_failed(compiled, outcome.error.stage, outcome.error.message)
    assert response is not None  # a worker without an error always sends its body
    compiled.artifact = response.artifact
    if ctx.cache is not None and cache_key is not None and response.correctness.status in ("verified", "blind"):
        ctx.cache.put(cache_key, replace(response, trace=trace.to_json()), Path(request.out_dir))
    return compiled


def _recorded(entry: CaseEntry, key: CaseKey, response: CompileResponse, trace: Trace,
              compile_times: tuple[float, ...]) -> CaseEntry:
    """``entry`` with what a compile returned: trace, correctness, artifact and compile metrics."""
    artifact = response.artifact
    return replace(entry, trace=trace, correctness=response.correctness,
                   artifact=ArtifactInfo.of(artifact, execution_identity(artifact, key))).with_metrics(
        compile_time_s=response.compile_time_s, compile_times_s=compile_times,
        artifact_size_bytes=artifact.size_bytes, node_count=artifact.node_count)


def _cached(ctx: RunContext, request: CompileRequest, model: LoadedModel, versions: dict[str, str], side: Side,
            compiled: CompiledCase) -> tuple[CacheKey | None, CompileResponse | None]:
    """The artifact cache's key for ``request`` (None: no cache, or not cacheable) and what it
    holds under it (None: compile); notes the outcome on ``compiled``. A hit is the response of
    the compile that stored it, its artifact folder copied into the request's ``out_dir`` and its
    trace the whole (a hybrid's: both stages)."""
    cache = ctx.cache
    if cache is None:
        return None, None
    machine = get_backend(request.backend).artifact_key(compiled.case.pipeline)
    cache_key = cache.key(request, model.sha256, versions, machine=machine, prefix_len=side.prefix_len,
                          prefix_path=side.prefix_path)
    cached = None if cache_key is None else cache.get(cache_key, Path(request.out_dir))
    compiled.cache = "uncached" if cache_key is None else "hit" if cached is not None else "miss"
    compiled.cache_key = cache_key
    return cache_key, cached


def _compile_prefix(ctx: RunContext, request: CompileRequest, side: Side,
                    timeout: float) -> tuple[Trace | None, CompileRequest, str]:
    """Stage 1 of a hybrid compile: the first passes with the prefix compiler, no backend options,
    under the case's ``compile_timeout``. Returns its trace, the stage-2 request (the remaining
    passes, from the stage-1 model) and the failure message ("" when it compiled)."""
    get_backend(request.backend).require("hybrid_compile")
    stage, rest = request.hybrid_stages(side.prefix_len, str(side.prefix_path) if side.prefix_path else None)
    outcome = run_worker(stage, timeout, ctx.workdir / "ipc")
    response = outcome.response
    if outcome.failure or outcome.error or response is None:
        reason = outcome.failure or (outcome.error.message if outcome.error else "no artifact")
        return None, request, f"hybrid prefix ({side.prefix_len} passes from {side.prefix_path}) failed: {reason}"
    return Trace.from_json(response.trace), rest.with_model(response.artifact.path), ""


def mark_failed(compiled: CompiledCase, stage: str, message: str) -> CompiledCase:
    """Record that ``compiled`` failed at ``stage`` (compile, verify, measure...) with ``message``."""
    compiled.entry = compiled.entry.failed(stage, message)
    return compiled
