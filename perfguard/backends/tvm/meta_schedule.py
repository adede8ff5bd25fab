"""A pinned MetaSchedule database for the ``tvm`` backend (``perfguard tvm-tune``).

Untuned TIR is naive loops: every pass order of a model runs within a few percent, ~100x slower
than ONNX Runtime, so an untuned comparison measures the kernels, not the passes. A database gives
every PrimFunc a real schedule; to compare pipelines fairly they must share one database, tuned
on the *union* of their tasks (a changed pass list changes the task set: fused and unfused
kernels are different tasks).

Where a pipeline's tasks come from: the module right before its ``MetaScheduleApplyDatabase``
pass, or (a pipeline that does not apply one) before its first dataflow-lowering pass.

The search is random (no cost model: xgboost is not installed here, and MetaSchedule's own
``cost_model="random"`` still sends candidates through its process pools, whose workers each
import TVM's tensor intrinsics: minutes on a busy 2-core machine before the first build). Per task
and trial: MetaSchedule's design space (``post-order-apply``, the llvm schedule rules) sampled
with a fresh seed, its post-processors applied, built and timed in this process
(``time_evaluator``), every valid candidate committed to a ``JSONDatabase``; applying the database
picks each task's fastest record. Seeds make the sampled schedules reproducible; the timings (and
so which record wins) are not.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from perfguard.backends.tvm import (
    APPLY_DATABASE,
    DATABASE_FILES,
    LOWERING_PASSES,
    import_onnx,
    pass_specs,
    resolve_target,
    run_passes,
    tvm_settings,
)
from perfguard.backends.tvm.relax_trace import structural_hash
from perfguard.errors import BackendError, UserError, first_line
from perfguard.jsonfields import JsonDict


@dataclass(frozen=True)
class TuneSummary:
    """What ``build_database`` did: tasks (union over the pipelines), records written, seconds."""

    tasks: int
    records: int
    failed: int
    seconds: float
    pipelines: tuple[str, ...]
    out: str

    def to_json(self) -> JsonDict:
        return asdict(self)


def tasks_prefix(passes: tuple[str, ...] | list[str]) -> int:
    """How many of ``passes`` run before a pipeline's tasks are extracted (see the module doc)."""
    names = [p.split("(", 1)[0].strip() for p in passes]
    if APPLY_DATABASE in names:
        return names.index(APPLY_DATABASE)
    for index, name in enumerate(names):
        if name in LOWERING_PASSES:
            return index
    return len(names)


def extract_tasks(model_path: Path, pipelines: Mapping[str, tuple[tuple[str, ...], Mapping[str, object]]],
                  threads: int) -> tuple[list[Any], Any]:
    """The union of the tuning tasks of ``pipelines`` (name -> (passes, options)) on one model,
    deduplicated by structural hash, and the target they were extracted for."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    imported = import_onnx(model_path)
    tasks: list[Any] = []
    seen: set[str] = set()
    target = None
    for name, (passes, options) in pipelines.items():
        where = f"pipeline {name!r}"
        settings = tvm_settings(options, where)
        table = {**resolve_target(settings.target), "num-cores": threads}
        target = tvm.target.Target(table)
        specs = pass_specs(list(passes)[:tasks_prefix(passes)], where)
        mod = run_passes(imported, specs, settings, target)
        with tvm.transform.PassContext(opt_level=settings.opt_level, config=dict(settings.config)):
            for task in ms.relax_integration.extract_tasks(mod, target):
                key = structural_hash(task.dispatched[0])
                if key not in seen:
                    seen.add(key)
                    tasks.append(task)
    return tasks, target


def _random_args(func: Any, device: Any, seed: int) -> tuple[list[Any], Any]:
    import numpy as np
    import tvm
    from tvm.s_tir import meta_schedule as ms

    rng = np.random.default_rng(seed)
    info = ms.arg_info.ArgInfo.from_prim_func(func)
    args = [tvm.runtime.tensor(rng.random([int(d) for d in a.shape]).astype(str(a.dtype)), device) for a in info]
    return args, info


def build_database(model_path: Path, pipelines: Mapping[str, tuple[tuple[str, ...], Mapping[str, object]]],
                   out: Path, trials: int, threads: int = 1, seed: int = 0,
                   log: Callable[[str], None] = lambda _: None) -> TuneSummary:
    """Tune the union of ``pipelines``' tasks with ``trials`` random candidates each and write
    the database to ``out``: added to the records already there (tune each model of a suite into
    one directory), written in a scratch folder and renamed, never left half-written."""
    if trials < 1:
        raise UserError(f"--trials must be >= 1, found {trials}")
    os.environ.setdefault("TVM_NUM_THREADS", str(threads))
    import tvm
    from tvm.s_tir import meta_schedule as ms

    start = time.perf_counter()
    tasks, target = extract_tasks(model_path, pipelines, threads)
    log(f"{len(tasks)} tasks from {len(pipelines)} pipelines")
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    records = failed = 0
    try:
        for name in DATABASE_FILES:  # an existing database keeps its records (other models' tasks)
            if (out / name).is_file():
                shutil.copyfile(out / name, scratch / name)
        database = ms.database.JSONDatabase(work_dir=str(scratch))
        device = tvm.cpu()
        for number, task in enumerate(tasks):
            mod = task.dispatched[0]
            func = next(iter(mod.functions.values()))
            args, info = _random_args(func, device, seed)
            workload = database.commit_workload(mod)
            for trial in range(trials):
                try:
                    seconds = _trial(mod, target, seed + trial, args, trial)
                except BackendError as exc:
                    failed += 1
                    log(f"task {number + 1}/{len(tasks)} {task.task_name}: trial {trial + 1} failed: {exc}")
                    continue
                schedule, run_secs = seconds
                database.commit_tuning_record(ms.database.TuningRecord(schedule.trace, workload, run_secs, target,
                                                                       info))
                records += 1
            log(f"task {number + 1}/{len(tasks)} {task.task_name}: {trials} trials")
        if out.exists():
            shutil.rmtree(out)
        scratch.rename(out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return TuneSummary(len(tasks), records, failed, time.perf_counter() - start, tuple(pipelines), str(out))


def _trial(mod: Any, target: Any, seed: int, args: list[Any], trial: int) -> tuple[Any, list[float]]:
    """One random candidate: a design space sampled with ``seed``, post-processed, built, timed."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    try:
        context = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                                 search_strategy="replay-trace", rand_state=seed, num_threads=1)
        spaces = context.generate_design_space()
        schedule = spaces[trial % len(spaces)]
        if not all(postproc.apply(schedule) for postproc in context.space_generator.postprocs):
            raise BackendError("a post-processor rejected the sampled schedule")
        module = tvm.compile(schedule.mod, target=target).jit()
        timer = module.time_evaluator("main", tvm.cpu(), number=3, repeat=1)
        return schedule, [float(s) for s in timer(*args).results]
    except BackendError:
        raise
    except Exception as exc:
        raise BackendError(first_line(exc)) from None
