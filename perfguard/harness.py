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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfguard import __version__
from perfguard.backends import get_backend
from perfguard.errors import UserError
from perfguard.measure.engine import VariantValues, measure_group, run_worker
from perfguard.models.loader import LoadedModel, materialize
from perfguard.results import RESULT_VERSION, summarize
from perfguard.runners import get_runner
from perfguard.runners.fingerprint import fingerprint_hash
from perfguard.suite import CaseSpec, Suite


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
    artifact: dict[str, Any] | None = None


@dataclass
class RunContext:
    suite: Suite
    cases: list[CaseSpec]
    workdir: Path
    progress: Progress = field(default_factory=Progress)
    environment: dict[str, Any] = field(default_factory=dict)


def check_suite(suite: Suite, cases: list[CaseSpec]) -> None:
    """Everything that can be checked before work: backends, passes, options, runners, files."""
    for case in cases:
        backend = get_backend(case.pipeline.backend)
        backend.check_pipeline(case.pipeline)
        get_runner(case.runner).check_available()
    for model in {c.model.name: c.model for c in cases}.values():
        if model.path is not None and not model.path.is_file():
            raise UserError(f"{suite.path}: [models.{model.name}] path: file not found: {model.path}")
    if suite.compiler.path is not None and not suite.compiler.path.is_dir():
        raise UserError(f"{suite.path}: [compiler] path: folder not found: {suite.compiler.path}")


def case_key(case: CaseSpec, model: LoadedModel, versions: dict[str, str], runner_hash: str) -> dict[str, Any]:
    return {
        "model": {"name": model.spec.name, "sha256": model.sha256, "source": model.spec.source()},
        "pipeline": {"name": case.pipeline.name, "passes": list(case.pipeline.passes),
                     "options": dict(case.pipeline.options), "sha256": case.pipeline.sha256},
        "backend": {"name": case.pipeline.backend, "versions": versions},
        "runner": {"name": case.runner, "fingerprint_sha256": runner_hash},
        "measure": case.measure.to_json(),
    }


def key_hash(key: dict[str, Any]) -> str:
    """Hash of what decides a measurement: model, pipeline, backend versions, runner fingerprint."""
    part = {k: key[k] for k in ("model", "pipeline", "backend", "runner")}
    return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:16]


def compile_case(ctx: RunContext, case: CaseSpec, model: LoadedModel, index: int) -> CompiledCase:
    runner_fp = ctx.environment[case.runner]
    versions = get_backend(case.pipeline.backend).versions()
    key = case_key(case, model, versions, fingerprint_hash(runner_fp))
    entry: dict[str, Any] = {
        "id": case.id, "model": model.spec.name, "pipeline": case.pipeline.name, "runner": case.runner,
        "status": "ok", "error": None, "key": key, "key_hash": key_hash(key), "trace": None, "correctness": None,
        "metrics": {}, "measurement": None, "started_at": utc_now(),
    }
    request = {
        "mode": "compile", "backend": case.pipeline.backend, "model_path": str(model.path),
        "pipeline": {"name": case.pipeline.name, "backend": case.pipeline.backend,
                     "passes": list(case.pipeline.passes), "options": dict(case.pipeline.options)},
        "out_dir": str(ctx.workdir / "artifacts" / f"{index:03d}"),
        "compiler_path": str(ctx.suite.compiler.path) if ctx.suite.compiler.path else None,
        "runner": case.runner, "threads": case.measure.threads,
        "correctness": case.tolerance.to_json(), "input_specs": [s.to_json() for s in model.inputs],
        "reference_cache": str(ctx.workdir / "refs" / f"{model.sha256[:16]}-{case.tolerance.seed}.npz"),
    }
    (ctx.workdir / "refs").mkdir(parents=True, exist_ok=True)
    outcome = run_worker(request, case.measure.compile_timeout, ctx.workdir / "ipc")
    compiled = CompiledCase(case, model, entry)
    if outcome.failure:
        stage = outcome.last_status or "compile"
        detail = f": {outcome.stderr_tail.splitlines()[-1][:200]}" if outcome.stderr_tail else ""
        message = outcome.failure.replace("worker", "compile worker", 1) + f" during {stage}{detail}"
        return _fail(compiled, stage, message)
    response = outcome.response or {}
    entry["trace"] = response.get("trace")
    entry["correctness"] = response.get("correctness")
    if "artifact" in response:
        artifact = response["artifact"]
        entry["metrics"].update(compile_time_s=response["compile_time_s"], artifact_size_bytes=artifact["size_bytes"],
                                node_count=artifact["node_count"])
        entry["artifact"] = {k: artifact[k] for k in ("sha256", "size_bytes", "node_count", "settings")}
    if response.get("error"):
        return _fail(compiled, response["error"]["stage"], response["error"]["message"])
    compiled.artifact = response["artifact"]
    return compiled


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
    }
    if not flat:
        reason = values.failures[-1] if values.failures else "no values were taken"
        _fail(compiled, "measure", f"no worker finished: {reason}")
        return
    latency = summarize(flat)
    latency["per_worker"] = values.per_worker  # type: ignore[assignment]
    entry["metrics"]["latency_s"] = latency
    entry["metrics"]["throughput_per_s"] = 1.0 / float(latency["median"])
    entry["metrics"]["session_rss_bytes"] = int(sorted(values.rss_delta_bytes)[len(values.rss_delta_bytes) // 2])
    entry["metrics"]["worker_peak_rss_bytes"] = int(max(values.peak_rss_bytes))


def run_suite(suite: Suite, cases: list[CaseSpec], *, workdir: Path | None = None,
              progress: Progress | None = None, repo: Path | None = None) -> dict[str, Any]:
    """Run ``cases`` of ``suite`` and return the result document (not yet written)."""
    check_suite(suite, cases)
    owned = workdir is None
    folder = Path(tempfile.mkdtemp(prefix="perfguard-")) if workdir is None else workdir
    ctx = RunContext(suite, cases, folder, progress or Progress())
    try:
        return _run(ctx, repo)
    finally:
        if owned:
            shutil.rmtree(folder, ignore_errors=True)


def _run(ctx: RunContext, repo: Path | None) -> dict[str, Any]:
    started = utc_now()
    runners = sorted({c.runner for c in ctx.cases})
    ctx.environment = {name: get_runner(name, repo or ctx.suite.compiler.repo or ctx.suite.path).fingerprint()
                       for name in runners}
    groups: dict[tuple[str, str, str], list[CompiledCase]] = {}
    model_specs = {c.model.name: c.model for c in ctx.cases}
    group_count = len({(c.model.name, c.runner, json.dumps(c.measure.to_json(), sort_keys=True)) for c in ctx.cases})
    ctx.progress.start(len(model_specs) + len(ctx.cases) + group_count)
    models: dict[str, LoadedModel] = {}
    for name, spec in model_specs.items():
        ctx.progress.advance(f"model {name}")
        models[name] = materialize(spec, ctx.workdir / "models")
    compiled_cases = []
    for index, case in enumerate(ctx.cases):
        ctx.progress.advance(f"compile {case.id}")
        compiled = compile_case(ctx, case, models[case.model.name], index)
        compiled_cases.append(compiled)
        if compiled.entry["status"] == "failed":
            ctx.progress.log(f"[red]FAILED[/red] {case.id}: {compiled.entry['error']['message']}")
        else:
            groups.setdefault(_group_key(compiled), []).append(compiled)
    for (model_name, runner, _), members in groups.items():
        group_id = f"{model_name}/{runner}"
        measure = members[0].case.measure
        ctx.progress.advance(f"measure {group_id} ({len(members)} variants x {measure.workers} workers)")
        variants = [{"id": m.case.id, "artifact": m.artifact} for m in members]
        values = measure_group(variants, runner=runner, threads=measure.threads, warmup=measure.warmup,
                               rounds=measure.rounds, min_time=measure.min_time, timeout=measure.timeout,
                               workers=measure.workers, seed=measure.seed,
                               input_specs=[s.to_json() for s in members[0].model.inputs],
                               workdir=ctx.workdir / "ipc")
        for member in members:
            fill_measurement(member, values[member.case.id], group_id, measure.workers)
            if member.entry["status"] == "failed":
                ctx.progress.log(f"[red]FAILED[/red] {member.case.id}: {member.entry['error']['message']}")
    for compiled in compiled_cases:
        compiled.entry["finished_at"] = utc_now()
    return {
        "version": RESULT_VERSION,
        "tool": {"name": "perfguard", "version": __version__},
        "suite": {"name": ctx.suite.name, "path": str(ctx.suite.path), "sha256": ctx.suite.sha256},
        "started_at": started, "finished_at": utc_now(),
        "environment": ctx.environment,
        "models": {name: {"sha256": m.sha256, "nodes": m.node_count, "opset": m.opset, "source": m.spec.source(),
                          "inputs": [s.to_json() for s in m.inputs]} for name, m in models.items()},
        "cases": [c.entry for c in compiled_cases],
    }
