"""Counted measurement (``--counts``, ``[measure] counts = true``), taken from the parent: each
compiled variant also runs once in a worker under Valgrind's callgrind, which counts its
instructions and simulated cache misses per inference (``perfguard.counting.child`` is the
worker side, ``perfguard.results.counts.Counts`` the record, ``docs/guides/exact-evidence.md``
the guide).

One counted process per job (per backend), after the timing: it starts Python and the runtime
under Valgrind once and forks a child for every variant's run and every counted compile, so
each count starts from the same state, with nobody's allocations or caches before it, and two
children count side by side on two cores (``perfguard.counting.child.do_count_batch``). A
count that fails costs that variant's counts (its verdict rows read UNKNOWN), never its timing.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.children import available_cores
from perfguard.counting.child import CountBatchRequest, CountItem, CountRequest, ItemOutcome
from perfguard.counting.dumps import read_dumps, window_functions
from perfguard.counting.plan import (
    DEFAULT_METHOD,
    Counted,
    CountOutcome,
    CountPlan,
    Target,
    compile_counts,
    least_window,
    per_inference,
    target_plan,
)
from perfguard.counting.valgrind import counted_command, counted_env, valgrind_path, valgrind_version
from perfguard.scratch import scratch_folder
from perfguard.workers.launch import run_worker
from perfguard.workers.protocol import MeasureVariant

if TYPE_CHECKING:
    from perfguard.backends.base import Artifact
    from perfguard.suite import Suite

#: A counted worker runs the model about 50-100x slower than natively (cache simulation on).
TIMEOUT_FACTOR = 20.0
MIN_TIMEOUT_S = 600.0


def count_targets(suite: Suite, targets: Sequence[Target], workdir: Path, cache: bool = False) -> list[Counted]:
    """Count every target, one counted process per backend (``count_batch``: every run and every
    compile a child forked from it, two at a time on two cores), with callgrind's cache
    simulation when ``cache``; a result per target, in order. ``workdir`` is unused by the
    counted process itself (see :func:`_count_batch`)."""
    from perfguard.backends import get_backend

    out: list[Counted | None] = [None] * len(targets)
    no_compile: dict[int, str] = {}  # a compile asked for that the backend cannot count: why
    by_backend: dict[str, list[int]] = {}
    for index, target in enumerate(targets):
        artifact = target.compiled.artifact
        if artifact is None:
            out[index] = Counted(CountOutcome({}, "no artifact to count"))
            continue
        backend = get_backend(artifact.backend)
        ability = backend.capabilities.missing(artifact.backend, "counts")
        blocker = str(ability) if ability is not None else backend.count_blocker(artifact)
        if blocker is not None:
            out[index] = Counted(CountOutcome({}, blocker))
            continue
        compile_ability = backend.capabilities.missing(artifact.backend, "compile_counts")
        if target.compile and compile_ability is not None:
            no_compile[index] = str(compile_ability)
        by_backend.setdefault(artifact.backend, []).append(index)
    for name, indices in by_backend.items():
        batch = [dataclasses.replace(targets[i], compile=False) if i in no_compile else targets[i] for i in indices]
        counted = _count_batch(suite, name, batch, cache)
        for index, result in zip(indices, counted, strict=True):
            out[index] = dataclasses.replace(result, compile_failure=no_compile[index]) if index in no_compile else result
    return [result for result in out if result is not None]


def staged_id(index: int) -> str:
    """The id the ``index``-th target of a counted process is counted under: one length for
    every target (its window's label is a string the counted child allocates)."""
    return f"{index:04d}"


def _staged(artifact: Artifact, scratch: Path, index: int) -> Artifact:
    """``artifact`` as the counted child loads it: through a link of one length in ``scratch``
    to its folder (``items/NNNN``), so that the path the runtime reads, parses and keeps is as
    long in every job whatever the job's folder, the cache's or the case's name. What a counted
    process allocates before its window moves the heap, and with it the cost of the runtime's
    hash tables and allocator inside the window (docs/measured.md, "Exact on every model")."""
    folder = scratch / "items"
    folder.mkdir(exist_ok=True)
    link = folder / staged_id(index)
    source = Path(artifact.path)
    os.symlink(source.parent.resolve(), link, target_is_directory=True)
    return dataclasses.replace(artifact, path=str(link / source.name))


def _items(suite: Suite, target: Target, scratch: Path, index: int, plan: CountPlan) -> list[CountItem]:
    """A target's count requests: its run, then its compile when asked for."""
    from perfguard.counting.child import CountCompileRequest
    from perfguard.workers.requests import compile_request

    compiled = target.compiled
    case = compiled.case
    assert compiled.artifact is not None
    artifact = _staged(compiled.artifact, scratch, index)
    items: list[CountItem] = [CountRequest(MeasureVariant(staged_id(index), artifact), case.runner,
                                           suite.runner_options(case.runner), plan.warmup, plan.inferences,
                                           case.measure.seed, tuple(compiled.model.inputs),
                                           plan.instrumented_warmup)]
    if target.compile:
        folder = Path(tempfile.mkdtemp(prefix="compile-", dir=scratch))
        items.append(CountCompileRequest(compile_request(
            suite, case, compiled.model.path, compiled.model.inputs, compiler_path=target.compiler_path,
            out_dir=folder / "artifact", reference_cache=folder / "unused.npz")))
    return items


def _count_batch(suite: Suite, backend: str, targets: Sequence[Target], cache: bool) -> list[Counted]:
    """One counted process for ``targets`` (all of ``backend``): see :func:`count_targets`.

    Its folder is made in the system's temporary folder, not in the job's, and every target is
    staged into it under a name of one length (:func:`_staged`): the strings the counted process
    reads (its arguments, its environment, its request) are then as long in every job, and so
    is what it allocates before the first window (docs/measured.md, "Exact on every
    model")."""
    valgrind = valgrind_path()
    scratch = scratch_folder("count-")
    plans = [target_plan(t, cache) for t in targets]
    per_target = [_items(suite, t, scratch, i, plan) for i, (t, plan) in enumerate(zip(targets, plans, strict=True))]
    items = tuple(item for group in per_target for item in group)
    parallel = max(1, min(available_cores(), len(items)))
    timeout = sum(max(MIN_TIMEOUT_S, t.compiled.case.measure.timeout * TIMEOUT_FACTOR) * len(group)
                  for t, group in zip(targets, per_target, strict=True)) / parallel
    try:
        outcome = run_worker(CountBatchRequest(items, (backend,), parallel), timeout, scratch / "ipc",
                             prepare=lambda worker, env: (counted_command(valgrind, scratch, worker, cache=cache),
                                                          counted_env(worker, env)))
        if outcome.response is None:
            why = outcome.failure or (outcome.error.message if outcome.error else "no response")
            failed = CountOutcome({}, f"counted worker failed: {why}")
            return [Counted(failed, None, failed.failure if t.compile else None) for t in targets]
        answers = iter(outcome.response.items)
        tool = valgrind_version(valgrind)
        return [_counted(t, i, scratch, [next(answers) for _ in group], plan, tool)
                for i, (t, group, plan) in enumerate(zip(targets, per_target, plans, strict=True))]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _windows(scratch: Path, answer: ItemOutcome) -> tuple[dict[str, Mapping[str, int]], str | None]:
    """The labelled windows an item's child dumped (and the tools it counted whole), or why there
    are none."""
    if answer.response is None:
        return {}, answer.failure or "no response"
    if answer.response.valgrind < 1:
        return {}, "the counted worker did not run under Valgrind"
    try:  # with the tools a counted compile ran whole (IREE's), as its steps
        return {**read_dumps(scratch, answer.response.pid), **answer.response.processes}, None
    except (OSError, ValueError) as exc:
        return {}, f"unreadable callgrind profile: {exc}"


def _counted(target: Target, index: int, scratch: Path, answers: Sequence[ItemOutcome], plan: CountPlan,
             tool: str) -> Counted:
    windows, failure = _windows(scratch, answers[0])
    variant, inferences = staged_id(index), plan.inferences
    counts = per_inference(windows, variant, inferences, tool, plan.cache) if failure is None else {}
    response = answers[0].response
    label = least_window(windows, variant, inferences)
    if DEFAULT_METHOD in counts and response is not None and label is not None:  # why, counted
        counts[DEFAULT_METHOD] = dataclasses.replace(counts[DEFAULT_METHOD], functions=window_functions(
            scratch, response.pid, label, 1))
    run = CountOutcome(counts, failure or (None if counts else "callgrind dumped no window"))
    if not target.compile:
        return Counted(run)
    windows, failure = _windows(scratch, answers[1])
    if failure is not None:
        return Counted(run, None, f"counted compile failed: {failure}")
    return Counted(run, compile_counts(windows))
