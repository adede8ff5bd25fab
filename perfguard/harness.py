"""``perfguard run``'s engine: suite -> models -> compiles -> interleaved measurement -> result.

Stages never reach around each other: models are materialized once, each case compiles in its own
worker process (the compiler under test may crash or hang), and the pipelines of one model on one
runner are measured together, interleaved, in fresh worker processes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfguard import __version__
from perfguard.backends import Artifact, get_backend
from perfguard.errors import UserError
from perfguard.inputs import input_specs
from perfguard.measure.engine import VariantValues, measure_group, run_worker
from perfguard.measure.protocol import CompileRequest, MeasureVariant
from perfguard.measure.protocol import variant_id as _variant_id
from perfguard.measure.requests import compile_request, measure_request, memory_request
from perfguard.models.loader import LoadedModel, materialize
from perfguard.results import RESULT_VERSION, summarize
from perfguard.runners import get_runner
from perfguard.runners.fingerprint import fingerprint_hash
from perfguard.runners.telemetry import judge_device_state, summarize_telemetry
from perfguard.suite import CaseSpec, ModelSpec, Suite
from perfguard.user_passes import check_user_passes


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Progress:
    """Callbacks the CLI uses for its progress bar; the default does nothing."""

    def start(self, total: int) -> None: ...

    def advance(self, description: str) -> None: ...

    def log(self, message: str) -> None: ...


@dataclass
class CompiledCase:
    case: CaseSpec
    model: LoadedModel
    entry: dict[str, Any]
    artifact: Artifact | None = None
    side: str = "head"

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

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "commit": self.commit, "subject": self.subject,
                "pass_path": str(self.compiler_path) if self.compiler_path else None}


@dataclass
class RunContext:
    suite: Suite
    cases: list[CaseSpec]
    workdir: Path
    progress: Progress = field(default_factory=Progress)
    environment: dict[str, Any] = field(default_factory=dict)
    sides: list[Side] = field(default_factory=list)


def check_suite(suite: Suite, cases: list[CaseSpec]) -> None:
    """Everything that can be checked before work: backends, passes, options, runners, files,
    the inputs of model files (every dynamic dimension given), and that user passes import."""
    for case in cases:
        backend = get_backend(case.pipeline.backend)
        backend.check_pipeline(case.pipeline)
        get_runner(case.runner, options=suite.runner_options(case.runner)).check_available()
    for model in {c.model.name: c.model for c in cases}.values():
        if model.path is not None and not model.path.is_file():
            raise UserError(f"{suite.path}: [models.{model.name}] path: file not found: {model.path}")
        if model.path is not None:
            _check_model_inputs(model)
    if suite.compiler.path is not None and not suite.compiler.path.is_dir():
        raise UserError(f"{suite.path}: [compiler] path: folder not found: {suite.compiler.path}")
    # User passes resolve from the working tree's [compiler] path, imported in a child process so
    # this process's sys.modules stays clean for compiles from other checkouts (check --base-ref).
    user: dict[str, list[str]] = {}
    for pipeline in {c.pipeline.name: c.pipeline for c in cases}.values():
        if pipeline.backend == "ort":  # the backend whose pipelines run user passes (onnx_passes)
            names = [name for name in pipeline.passes if ":" in name]
            if names:
                user[f"{suite.path}: [pipelines.{pipeline.name}] passes"] = names
    if user:
        check_user_passes(user, suite.compiler.path)


def _check_model_inputs(model: ModelSpec) -> None:
    """Resolve a model file's input shapes with the suite's settings (``UserError`` for a dynamic
    dimension left open); a file that does not load is left to the model stage's own error."""
    import onnx

    try:
        proto = onnx.load(str(model.path), load_external_data=False)
    except Exception:
        return
    input_specs(proto, model.input_settings)


def case_key(case: CaseSpec, model: LoadedModel, versions: dict[str, str], runner_hash: str,
             runner_options: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "model": {"name": model.spec.name, "sha256": model.sha256, "source": model.spec.source()},
        "pipeline": {"name": case.pipeline.name, "passes": list(case.pipeline.passes),
                     "options": dict(case.pipeline.options), "sha256": case.pipeline.sha256},
        "backend": {"name": case.pipeline.backend, "versions": versions},
        "runner": {"name": case.runner, "fingerprint_sha256": runner_hash, "options": runner_options},
        "measure": case.measure.to_json(),
    }


def key_hash(key: dict[str, Any]) -> str:
    """Hash of what decides a measurement: model, pipeline, backend versions, runner fingerprint."""
    part = {k: key[k] for k in ("model", "pipeline", "backend", "runner")}
    return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:16]


def compile_case(ctx: RunContext, case: CaseSpec, model: LoadedModel, index: int,
                 side: Side | None = None) -> CompiledCase:
    side = side or Side("head", ctx.suite.compiler.path)
    runner_fp = ctx.environment[case.runner]
    versions = get_backend(case.pipeline.backend).versions()
    key = case_key(case, model, versions, fingerprint_hash(runner_fp),
                   ctx.suite.runner_options(case.runner).to_json())
    entry: dict[str, Any] = {
        "id": case.id, "model": model.spec.name, "pipeline": case.pipeline.name, "runner": case.runner,
        "status": "ok", "error": None, "key": key, "key_hash": key_hash(key), "trace": None, "correctness": None,
        "metrics": {}, "measurement": None, "started_at": utc_now(),
    }
    request = compile_request(ctx.suite, case, model.path, model.inputs, compiler_path=side.compiler_path,
                              out_dir=ctx.workdir / "artifacts" / side.label / f"{index:03d}",
                              reference_cache=ctx.workdir / "refs" / f"{model.sha256[:16]}-{case.tolerance.seed}.npz")
    (ctx.workdir / "refs").mkdir(parents=True, exist_ok=True)
    compiled = CompiledCase(case, model, entry, side=side.label)
    prefix_trace = None
    if side.prefix_len > 0:
        prefix_trace, request, failure = _compile_prefix(ctx, request, side, case.measure.compile_timeout)
        if failure:
            return _fail(compiled, "compile", failure)
    outcome = run_worker(request, case.measure.compile_timeout, ctx.workdir / "ipc")
    if outcome.failure:
        stage = outcome.last_status or "compile"
        detail = f": {outcome.stderr_tail.splitlines()[-1][:200]}" if outcome.stderr_tail else ""
        message = outcome.failure.replace("worker", "compile worker", 1) + f" during {stage}{detail}"
        return _fail(compiled, stage, message)
    response = outcome.response
    if response is not None:
        entry["trace"] = dict(response.trace)
        if prefix_trace is not None:
            for record in entry["trace"]["passes"]:
                record["index"] += side.prefix_len
            entry["trace"]["passes"] = prefix_trace["passes"] + entry["trace"]["passes"]
            entry["trace"]["input_hash"] = prefix_trace["input_hash"]
            entry["trace"]["total_time_s"] += prefix_trace["total_time_s"]
        entry["correctness"] = response.correctness.to_json()
        artifact = response.artifact
        cached = bool(response.trace.get("cache_hit"))
        # A compile served from a backend's artifact cache timed a file copy: keep it out of the gate.
        entry["metrics"].update(compile_time_s=response.compile_time_s,
                                compile_times_s=[] if cached else list(response.compile_times_s),
                                artifact_size_bytes=artifact.size_bytes, node_count=artifact.node_count)
        entry["artifact"] = {"sha256": artifact.sha256, "size_bytes": artifact.size_bytes,
                             "node_count": artifact.node_count, "settings": artifact.settings}
    if outcome.error is not None:
        return _fail(compiled, outcome.error.stage, outcome.error.message)
    assert response is not None  # a worker without an error always sends its body
    compiled.artifact = response.artifact
    probe_memory(ctx, compiled)
    return compiled


def probe_memory(ctx: RunContext, compiled: CompiledCase) -> None:
    """Peak RSS of fresh processes that load only this artifact (``memory_probes`` of them)."""
    measure = compiled.case.measure
    if compiled.artifact is None:
        return
    peaks: list[int] = []
    for probe in range(measure.memory_probes):
        request = memory_request(ctx.suite, compiled.case, compiled.artifact, compiled.model.inputs, probe)
        outcome = run_worker(request, measure.timeout, ctx.workdir / "ipc")
        if outcome.response is not None:
            peaks.append(outcome.response.peak_rss_bytes)
    if peaks:
        compiled.entry["metrics"]["peak_rss_bytes_probes"] = peaks
        compiled.entry["metrics"]["peak_rss_bytes"] = int(sorted(peaks)[len(peaks) // 2])


def _compile_prefix(ctx: RunContext, request: CompileRequest, side: Side,
                    timeout: float) -> tuple[Mapping[str, Any] | None, CompileRequest, str]:
    """Stage 1 of a hybrid compile: the first passes with the prefix compiler, no ORT options,
    under the case's ``compile_timeout``. Returns its trace, the stage-2 request (the remaining
    passes, from the stage-1 model) and the failure message ("" when it compiled)."""
    if request.backend != "ort":
        raise UserError(f"hybrid (pass-bisection) compiles need an ONNX-level backend, not {request.backend!r}")
    stage, rest = request.hybrid_stages(side.prefix_len, str(side.prefix_path) if side.prefix_path else None)
    outcome = run_worker(stage, timeout, ctx.workdir / "ipc")
    response = outcome.response
    if outcome.failure or outcome.error or response is None:
        reason = outcome.failure or (outcome.error.message if outcome.error else "no artifact")
        return None, request, f"hybrid prefix ({side.prefix_len} passes from {side.prefix_path}) failed: {reason}"
    return response.trace, rest.with_model(response.artifact.path), ""


def _fail(compiled: CompiledCase, stage: str, message: str) -> CompiledCase:
    compiled.entry["status"] = "failed"
    compiled.entry["error"] = {"stage": stage, "message": message}
    return compiled


def _group_key(compiled: CompiledCase) -> tuple[str, str, str]:
    measure = compiled.case.measure
    return compiled.model.spec.name, compiled.case.runner, json.dumps(dataclasses.asdict(measure), sort_keys=True)


def fill_measurement(compiled: CompiledCase, values: VariantValues, group_id: str, requested: int) -> None:
    entry = compiled.entry
    flat = [v for worker in values.per_worker for v in worker]
    measure = compiled.case.measure
    entry["measurement"] = {
        "group": group_id, "workers_requested": requested, "workers_ok": len(values.per_worker),
        "worker_ids": values.worker_ids, "loops": values.loops, "warmup": measure.warmup, "rounds": measure.rounds,
        "min_time_s": measure.min_time, "threads": measure.threads, "failures": values.failures,
        # Why this variant stopped being measured (it crashed or hung its worker), or None.
        "dropped": values.dropped,
    }
    # Device state during the timed rounds (GPU clocks, throttling): see perfguard.runners.telemetry.
    telemetry = summarize_telemetry(values.telemetry)
    entry["measurement"]["telemetry"] = {"summary": telemetry, "per_worker": values.telemetry} if telemetry else None
    entry["measurement"]["device_state"] = judge_device_state(telemetry).to_json()
    if not flat:
        reason = values.failures[-1] if values.failures else "no values were taken"
        _fail(compiled, "measure", f"no worker finished: {reason}")
        return
    latency = summarize(flat)
    latency["per_worker"] = values.per_worker  # type: ignore[assignment]
    entry["metrics"]["latency_s"] = latency
    entry["metrics"]["throughput_per_s"] = 1.0 / float(latency["median"])
    entry["metrics"]["session_rss_bytes"] = int(sorted(values.rss_delta_bytes)[len(values.rss_delta_bytes) // 2])
    entry["metrics"]["session_rss_bytes_per_worker"] = list(values.rss_delta_bytes)
    entry["metrics"]["worker_peak_rss_bytes"] = int(max(values.peak_rss_bytes))


def run_suite(suite: Suite, cases: list[CaseSpec], *, workdir: Path | None = None,
              progress: Progress | None = None, repo: Path | None = None) -> dict[str, Any]:
    """Run ``cases`` of ``suite`` and return the result document (not yet written)."""
    job = Job(suite, cases, workdir=workdir, progress=progress, repo=repo)
    try:
        job.compile()
        job.measure()
        return job.documents()["head"]
    finally:
        job.close()


class Job:
    """One measurement job: compile every case for every side, measure them interleaved.

    ``sides`` are versions of the compiler under test measured in the same worker processes (the
    default is one side, ``head``, the suite's own compiler path). ``measure`` can be called again
    for some variants with more workers (adaptive sampling); values accumulate per variant.
    """

    def __init__(self, suite: Suite, cases: list[CaseSpec], *, sides: list[Side] | None = None,
                 workdir: Path | None = None, progress: Progress | None = None, repo: Path | None = None,
                 check: bool = True) -> None:
        if check:  # ``check=False``: measuring artifacts compiled elsewhere (no model files here)
            check_suite(suite, cases)
        self.owned = workdir is None
        folder = Path(tempfile.mkdtemp(prefix="perfguard-")) if workdir is None else workdir
        self.ctx = RunContext(suite, cases, folder, progress or Progress(),
                              sides=sides or [Side("head", suite.compiler.path)])
        self.repo = repo
        self.started = utc_now()
        self.models: dict[str, LoadedModel] = {}
        self.compiled: list[CompiledCase] = []
        self.values: dict[str, VariantValues] = {}
        self.workers_used: dict[tuple[str, str, str], int] = {}

    def close(self) -> None:
        if self.owned:
            shutil.rmtree(self.ctx.workdir, ignore_errors=True)

    def compile(self) -> None:
        ctx = self.ctx
        runners = sorted({c.runner for c in ctx.cases})
        where = self.repo or ctx.suite.compiler.repo or ctx.suite.path
        ctx.environment = {name: get_runner(name, where, ctx.suite.runner_options(name)).fingerprint()
                           for name in runners}
        model_specs = {c.model.name: c.model for c in ctx.cases}
        group_count = len({(c.model.name, c.runner, json.dumps(c.measure.to_json(), sort_keys=True))
                           for c in ctx.cases})
        ctx.progress.start(len(model_specs) + len(ctx.cases) * len(ctx.sides) + group_count)
        for name, spec in model_specs.items():
            ctx.progress.advance(f"model {name}")
            self.models[name] = materialize(spec, ctx.workdir / "models")
        for side in ctx.sides:
            for index, case in enumerate(ctx.cases):
                label = f" [{side.label}]" if len(ctx.sides) > 1 else ""
                ctx.progress.advance(f"compile {case.id}{label}")
                compiled = compile_case(ctx, case, self.models[case.model.name], index, side)
                self.compiled.append(compiled)
                if compiled.entry["status"] == "failed":
                    ctx.progress.log(f"[red]FAILED[/red] {case.id}{label}: {compiled.entry['error']['message']}")

    def groups(self) -> dict[tuple[str, str, str], list[CompiledCase]]:
        """Variants measured together: every side and pipeline of one model on one runner."""
        groups: dict[tuple[str, str, str], list[CompiledCase]] = {}
        for compiled in self.compiled:
            if compiled.artifact is not None:
                groups.setdefault(_group_key(compiled), []).append(compiled)
        return groups

    def measure(self, only: set[str] | None = None, workers: int | None = None) -> None:
        """Measure every group (or the groups holding a variant id in ``only``) with ``workers``
        more worker processes (default: the suite's ``workers``); values accumulate."""
        ctx = self.ctx
        for key, members in self.groups().items():
            if only is not None:
                members = [m for m in members if m.variant_id in only]
                if not members:
                    continue
            model_name, runner, _ = key
            group_id = f"{model_name}/{runner}"
            measure = members[0].case.measure
            count = workers or measure.workers
            offset = self.workers_used.get(key, 0)
            ctx.progress.advance(f"measure {group_id} ({len(members)} variants x {count} workers)")
            variants = [MeasureVariant(m.variant_id, m.artifact) for m in members if m.artifact is not None]
            request = measure_request(ctx.suite, members[0].case, variants, members[0].model.inputs, offset)
            values = measure_group(request, timeout=measure.timeout, workers=count, workdir=ctx.workdir / "ipc")
            self.workers_used[key] = offset + count
            for member in members:
                merged = self.values.setdefault(member.variant_id, VariantValues())
                new = values[member.variant_id]
                merged.per_worker.extend(new.per_worker)
                merged.worker_ids.extend(new.worker_ids)
                merged.loops = new.loops or merged.loops
                merged.rss_delta_bytes.extend(new.rss_delta_bytes)
                merged.peak_rss_bytes.extend(new.peak_rss_bytes)
                merged.failures.extend(new.failures)
                merged.dropped = new.dropped or merged.dropped
                merged.telemetry.extend(new.telemetry)
                fill_measurement(member, merged, group_id, self.workers_used[key])
                if member.entry["status"] == "failed" and member.entry["error"]["stage"] == "measure":
                    ctx.progress.log(f"[red]FAILED[/red] {member.variant_id}: {member.entry['error']['message']}")

    def documents(self) -> dict[str, dict[str, Any]]:
        """One result document per side."""
        finished = utc_now()
        documents = {}
        for side in self.ctx.sides:
            entries = [c.entry for c in self.compiled if c.side == side.label]
            for entry in entries:
                entry.setdefault("finished_at", finished)
            documents[side.label] = {
                "version": RESULT_VERSION,
                "tool": {"name": "perfguard", "version": __version__},
                "suite": {"name": self.ctx.suite.name, "path": str(self.ctx.suite.path),
                          "sha256": self.ctx.suite.sha256},
                "compiler": side.to_json(),
                "started_at": self.started, "finished_at": finished,
                "environment": self.ctx.environment,
                "models": {name: {"sha256": m.sha256, "nodes": m.node_count, "opset": m.opset,
                                  "source": m.spec.source(), "inputs": [s.to_json() for s in m.inputs]}
                           for name, m in self.models.items()},
                "cases": entries,
            }
        return documents
