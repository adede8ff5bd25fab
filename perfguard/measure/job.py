"""``perfguard run``'s engine: suite -> models -> compiles -> interleaved measurement -> result.

Stages never reach around each other: models are materialized once, each case compiles in its own
worker process (the compiler under test may crash or hang), and the pipelines of one model on one
runner are measured together, interleaved, in fresh worker processes.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from perfguard import __version__
from perfguard.compile.case import CompiledCase, RunContext, Side, compile_case, mark_failed
from perfguard.compile.preflight import check_suite
from perfguard.measure.engine import VariantValues, measure_group
from perfguard.measure.progress import Progress
from perfguard.measure.protocol import MeasureVariant
from perfguard.measure.requests import measure_request
from perfguard.models.loader import LoadedModel, materialize
from perfguard.results import RESULT_VERSION, summarize, utc_now
from perfguard.runners import get_runner
from perfguard.runners.telemetry import judge_device_state, summarize_telemetry
from perfguard.suite import CaseSpec, Suite


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
        mark_failed(compiled, "measure", f"no worker finished: {reason}")
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
