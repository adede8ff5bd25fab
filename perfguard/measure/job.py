"""``perfguard run``'s engine: suite -> models -> compiles -> interleaved measurement -> result.

Stages never reach around each other: models are materialized once, each case compiles in its own
worker process (the compiler under test may crash or hang), and the pipelines of one model on one
runner are measured together, interleaved, in fresh worker processes.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from perfguard import __version__
from perfguard.backends.base import NOT_BUILT
from perfguard.children import available_cores
from perfguard.compile.case import (
    CompiledCase,
    RunContext,
    Side,
    Variant,
    compile_case,
    mark_failed,
)
from perfguard.compile.preflight import start_check_suite
from perfguard.counting.plan import DEFAULT_METHOD, Counted, Target
from perfguard.counting.served import served, store
from perfguard.counting.take import count_targets
from perfguard.counting.valgrind import valgrind_path, valgrind_version
from perfguard.measure.groups import VariantValues, measure_group
from perfguard.measure.memory import probe_memory, with_memory
from perfguard.models.loader import LoadedModel, materialize
from perfguard.progress import Progress
from perfguard.results import Latency, Measurement, ModelInfo, ResultDocument, SuiteInfo, utc_now
from perfguard.results.counts import CompileCounts
from perfguard.results.result import CacheUse
from perfguard.runners import get_runner
from perfguard.runners.telemetry import judge_device_state, summarize_telemetry
from perfguard.scratch import reclaim_stale, scratch_folder
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.model import CountMode
from perfguard.workers.protocol import MeasureVariant, variant_id
from perfguard.workers.requests import measure_request


def _group_key(compiled: CompiledCase) -> tuple[str, str, str]:
    measure = compiled.case.measure
    return compiled.model.spec.name, compiled.case.runner, json.dumps(dataclasses.asdict(measure), sort_keys=True)


def fill_measurement(compiled: CompiledCase, values: VariantValues, group_id: str, requested: int) -> None:
    measure = compiled.case.measure
    # Device state during the timed rounds (GPU clocks, throttling): see perfguard.runners.telemetry.
    telemetry = summarize_telemetry(values.telemetry)
    measurement = Measurement(
        group_id, requested, len(values.per_worker), tuple(values.worker_ids), values.loops, measure.warmup,
        measure.rounds, measure.min_time, measure.threads, tuple(values.failures), values.dropped,
        telemetry={"summary": telemetry, "per_worker": values.telemetry} if telemetry else None,
        device_state=judge_device_state(telemetry), min_rounds=measure.min_rounds, max_time_s=measure.max_time)
    compiled.entry = dataclasses.replace(compiled.entry, measurement=measurement)
    if not any(values.per_worker):
        reason = values.failures[-1] if values.failures else "no values were taken"
        mark_failed(compiled, "measure", f"no worker finished: {reason}")
        return
    latency = Latency.from_values(values.per_worker)
    rss = values.rss_delta_bytes
    compiled.entry = compiled.entry.with_metrics(
        latency_s=latency, throughput_per_s=1.0 / latency.median, session_rss_bytes=int(sorted(rss)[len(rss) // 2]),
        session_rss_bytes_per_worker=tuple(rss), worker_peak_rss_bytes=int(max(values.peak_rss_bytes)))
    if measure.memory_probes > 0 and values.memory_samples:
        compiled.entry = with_memory(compiled.entry, values.memory_samples)


def run_suite(suite: Suite, cases: list[CaseSpec], *, workdir: Path | None = None,
              progress: Progress | None = None, repo: Path | None = None, side: Side | None = None) -> ResultDocument:
    """Run ``cases`` of ``suite`` and return the result document (not yet written); ``side``
    names the compiler version measured (default: the suite's compiler path, as ``head``)."""
    job = Job(suite, cases, workdir=workdir, progress=progress, repo=repo, sides=None if side is None else [side])
    try:
        job.compile(memory=False)
        job.measure()
        job.probe_memory()
        return job.documents()["head"]
    finally:
        job.close()



def _compile(ctx: RunContext, case: CaseSpec, model: LoadedModel, index: int, side: Side,
             memory: bool) -> CompiledCase:
    """:func:`compile_case`, then the variant's memory probes unless ``memory`` is False or its
    artifact cannot load here (a deferred check: compiled here for another machine's runner)."""
    compiled = compile_case(ctx, case, model, index, side)
    correctness = compiled.entry.correctness
    if memory and (correctness is None or correctness.status != "deferred"):
        probe_memory(ctx, compiled)
    return compiled

class Job:
    """One measurement job: compile every case for every side, measure them interleaved.

    ``sides`` are versions of the compiler under test measured in the same worker processes (the
    default is one side, ``head``, the suite's own compiler path). ``measure`` can be called again
    for some variants with more workers (adaptive sampling); values accumulate per variant.
    """

    def __init__(self, suite: Suite, cases: list[CaseSpec], *, sides: list[Side] | None = None,
                 workdir: Path | None = None, progress: Progress | None = None, repo: Path | None = None,
                 check: bool = True, check_runners: bool = True) -> None:
        # ``check=False``: measuring artifacts compiled elsewhere (no model files here);
        # ``check_runners=False``: compiling here for runners of another machine. The user
        # passes' import check runs on while the models are built; ``compile`` waits for it.
        # How this job counts: the suite's mode (``[measure] counts``, or ``--counts`` applied to the
        # suite: ``Suite.counted``); a missing Valgrind is one line before any work, not after the timing.
        self.counts: CountMode | None = suite.counts
        if self.counts is not None:
            valgrind_path()
        self.pending_check = start_check_suite(suite, cases, runners=check_runners) if check else None
        self.owned = workdir is None
        if self.owned:  # the folders of jobs that were killed (no cleanup ran) go first
            reclaim_stale()
        folder = scratch_folder() if workdir is None else workdir
        self.ctx = RunContext(suite, cases, folder, progress or Progress(),
                              sides=sides or [Side("head", suite.compiler.path)])
        self.repo = repo
        self.started = utc_now()
        self.models: dict[str, LoadedModel] = {}
        self.compiled: list[CompiledCase] = []
        self.values: dict[str, VariantValues] = {}
        self.workers_used: dict[tuple[str, str, str], int] = {}

    def close(self) -> None:
        if self.pending_check is not None:
            self.pending_check.close()
            self.pending_check = None
        if self.owned:
            shutil.rmtree(self.ctx.workdir, ignore_errors=True)

    def prepare(self) -> None:
        """Fingerprint the runners and materialize the models (once), then wait for the user
        passes' import check: what comes before the first compile."""
        if self.models:
            return
        pending, self.pending_check = self.pending_check, None
        try:
            self._materialize()
        except BaseException:  # a broken model: the check's child is not waited for
            if pending is not None:
                pending.close()
            raise
        if pending is not None:  # no compile before every user pass imports
            pending.wait()

    def _materialize(self) -> None:
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
            self.models[name] = materialize(spec, ctx.workdir / "models", ctx.suite.compiler.path)

    def compile(self, memory: bool = True) -> None:
        """Materialize the models (:meth:`prepare`) and compile every case for every side, as many
        compiles at once as the machine has cores (each in its own worker process; the
        measurement that follows runs one process at a time). ``memory=False`` leaves the memory
        probes to :meth:`probe_memory` (a check skips them for identical artifacts)."""
        self.prepare()
        ctx = self.ctx
        # Case by case, every side of a case next to each other: the sides of one comparison
        # compile at the same time, so any slowdown from running together hits both alike.
        tasks = [(side, index, case) for index, case in enumerate(ctx.cases) for side in ctx.sides]
        with ThreadPoolExecutor(max_workers=max(1, min(len(tasks), available_cores()))) as pool:
            futures = [pool.submit(_compile, ctx, case, self.models[case.model.name], index, side, memory)
                       for side, index, case in tasks]
            done = {}
            for (side, index, case), future in zip(tasks, futures, strict=True):
                label = f" [{side.label}]" if len(ctx.sides) > 1 else ""
                compiled = future.result()
                cached = " (from the artifact cache)" if compiled.cache == "hit" else ""
                ctx.progress.advance(f"compile {case.id}{label}{cached}")
                error, trace = compiled.entry.error, compiled.entry.trace
                if error is not None and error.stage == NOT_BUILT:
                    ctx.progress.log(f"NOT RUN {case.id}{label}: {error.message}", style="yellow")
                elif error is not None:
                    ctx.progress.log(f"FAILED {case.id}{label}: {error.message}", style="red")
                elif trace is not None and trace.database_use is not None and trace.database_use.warning:
                    ctx.progress.log(f"warning: {case.id}{label}: {trace.database_use.warning}", style="yellow")
                done[(side.label, index)] = compiled
        self.compiled.extend(done[(side.label, index)] for side in ctx.sides for index in range(len(ctx.cases)))

    def probe_memory(self, skip: Collection[str] = ()) -> None:
        """Memory probes for every compiled variant but those in ``skip`` that has fewer than
        ``memory_probes`` memory samples: after :meth:`measure` only the variants that too few
        workers loaded first (each worker is a memory probe of the variant it loads first). The
        probes run side by side on the machine's cores: a probe reads its own process's peak
        (``VmHWM``), which another process running beside it does not change."""
        todo = [c for c in self.compiled if c.variant_id not in skip and c.artifact is not None
                and len(c.entry.metrics.peak_rss_bytes_probes or ()) < c.case.measure.memory_probes]
        with ThreadPoolExecutor(max_workers=max(1, min(len(todo), available_cores()))) as pool:
            for future in [pool.submit(probe_memory, self.ctx, compiled) for compiled in todo]:
                future.result()

    def groups(self) -> dict[tuple[str, str, str], list[CompiledCase]]:
        """Variants measured together: every side and pipeline of one model on one runner."""
        groups: dict[tuple[str, str, str], list[CompiledCase]] = {}
        for compiled in self.compiled:
            if compiled.artifact is not None:
                groups.setdefault(_group_key(compiled), []).append(compiled)
        return groups

    def measure(self, only: set[str] | None = None, workers: int | None = None, skip: Collection[str] = ()) -> None:
        """Measure every group (or the variants ``only`` names) with ``workers`` more worker
        processes (default: the suite's ``workers``); values accumulate. Variants in ``skip`` are
        not measured (identical artifacts: see ``perfguard.flows.check``)."""
        ctx = self.ctx
        measured: list[CompiledCase] = []
        for key, members in self.groups().items():
            members = [m for m in members if (only is None or m.variant_id in only) and m.variant_id not in skip]
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
                merged.memory_samples.extend(new.memory_samples)
                merged.failures.extend(new.failures)
                merged.dropped = new.dropped or merged.dropped
                merged.telemetry.extend(new.telemetry)
                fill_measurement(member, merged, group_id, self.workers_used[key])
                error = member.entry.error
                if error is not None and error.stage == "measure":
                    ctx.progress.log(f"FAILED {member.variant_id}: {error.message}", style="red")
            measured.extend(members)
        if self.counts is not None:  # after all the timing: one counted process for the whole job
            self.count(measured)

    def count(self, members: Sequence[CompiledCase], compile: bool = True) -> None:
        """Count every member not counted yet under Valgrind (``perfguard.counting.take``): one
        counted process for all of them, its run and, when ``compile``, its compile (not a hybrid
        compile of pass bisection: its passes come from two compilers). A failed count is logged
        and leaves the variant without counts."""
        todo = [m for m in members if m.artifact is not None and m.entry.metrics.counts is None and m.entry.ok]
        if not todo:
            return
        sides = {s.label: s for s in self.ctx.sides}
        targets = [Target(m, compile and sides[m.side].prefix_len == 0, sides[m.side].compiler_path) for m in todo]
        for member, counted in zip(todo, self._counted(targets), strict=True):
            counts = counted.run.counts.get(DEFAULT_METHOD)
            if counts is None:
                self.ctx.progress.log(f"NOT COUNTED {member.variant_id}: {counted.run.failure}", style="yellow")
                continue
            member.entry = member.entry.with_metrics(counts=counts)
            if counted.compile is not None:
                self._with_compile_counts(member, counted.compile)
            elif counted.compile_failure is not None:
                self.ctx.progress.log(f"COMPILE NOT COUNTED {member.variant_id}: {counted.compile_failure}",
                                      style="yellow")

    def _counted(self, targets: Sequence[Target]) -> list[Counted]:
        """What counting ``targets`` gives: from the artifact cache where it holds their counts
        (``perfguard.counting.served``), else counted (and then stored there)."""
        cache = self.ctx.cache
        tool = valgrind_version(valgrind_path()) if cache is not None else ""
        simulate = self.counts == "cache"
        found = served(cache, targets, simulate, tool) if cache is not None else [None] * len(targets)
        todo = [target for target, hit in zip(targets, found, strict=True) if hit is None]
        served_count = len(targets) - len(todo)
        if not todo:
            self.ctx.progress.log(f"count nothing under Valgrind: {served_count} variant(s) from the artifact cache")
        else:
            self.ctx.progress.log(f"count {len(todo)} variant(s) under Valgrind"
                                  + (f" ({served_count} more from the artifact cache)" if served_count else ""))
        counted = count_targets(self.ctx.suite, todo, self.ctx.workdir / "ipc", simulate) if todo else []
        if cache is not None and counted:
            store(cache, todo, counted, simulate, tool)
        fresh = iter(counted)
        return [hit if hit is not None else next(fresh) for hit in found]

    @staticmethod
    def _with_compile_counts(member: CompiledCase, figures: CompileCounts) -> None:
        """The compile's instructions, in total and per pass of its trace (a record named as one of
        its steps, IREE's ``iree-import-onnx``, takes that step's figure)."""
        entry = member.entry.with_metrics(compile_instructions=figures.total)
        if entry.trace is not None:
            passes = tuple(dataclasses.replace(p, instructions=figures.per_pass.get(p.index, figures.steps.get(p.name)))
                           for p in entry.trace.passes)
            entry = dataclasses.replace(entry, trace=dataclasses.replace(entry.trace, passes=passes))
        member.entry = entry

    def model_infos(self) -> dict[str, ModelInfo]:
        return {name: ModelInfo(m.sha256, m.node_count, m.opset, m.spec.source(), tuple(m.inputs))
                for name, m in self.models.items()}

    def documents(self) -> dict[str, ResultDocument]:
        """One result document per side."""
        finished = utc_now()
        suite = self.ctx.suite
        models = self.model_infos()
        documents = {}
        for side in self.ctx.sides:
            for compiled in self.compiled:
                if compiled.side == side.label:
                    compiled.entry = compiled.entry.finished(finished)
            documents[side.label] = ResultDocument(
                SuiteInfo(suite.name, str(suite.path), suite.sha256), self.started, finished,
                dict(self.ctx.environment), dict(models),
                tuple(c.entry for c in self.compiled if c.side == side.label), __version__, compiler=side.info(),
                artifact_cache=self._cache_use(side.label))
        return documents

    def _cache_use(self, side: str) -> CacheUse | None:
        """How ``side``'s compiles used the artifact cache (None: the job had none)."""
        if self.ctx.cache is None:
            return None
        used = [c.cache for c in self.compiled if c.side == side]
        return CacheUse(used.count("hit"), used.count("miss"), used.count("uncached"))


def compile_variants(suite: Suite, case: CaseSpec, variants: Sequence[Variant], progress: Progress
                     ) -> tuple[Job, dict[str, CompiledCase]]:
    """One job that compiles every variant of ``case`` (latency only: no memory probes), and the
    compiled case of each variant by label, compile errors included in its entry. The caller
    measures or profiles them and closes the job; variants differ in side or in passes, and the
    job compiles each distinct (side, pipeline) once."""
    cases = [(variant, variant.case_of(case)) for variant in variants]
    unique_cases = {c.id: c for _, c in cases}
    unique_sides = {v.side.label: v.side for v in variants}
    job = Job(suite, list(unique_cases.values()), sides=list(unique_sides.values()), progress=progress)
    try:
        job.compile(memory=False)
    except BaseException:
        job.close()
        raise
    by_variant = {c.variant_id: c for c in job.compiled}
    return job, {variant.label: by_variant[variant_id(variant.side.label, vcase.id)] for variant, vcase in cases}
