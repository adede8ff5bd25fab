"""Counted measurement (``--counts``, ``[measure] counts = true``): each compiled variant also
runs once in a fresh worker under Valgrind's callgrind, which counts its instructions and
simulated cache misses per inference (``perfguard.workers.counting`` is the worker side,
``perfguard.results.counts.Counts`` the record, ``docs/guides/exact-evidence.md`` the guide).

One counted process per job (per backend), after the timing: it starts Python and the runtime
under Valgrind once and forks a child for every variant's run and every counted compile, so
each count starts from the same state, with nobody's allocations or caches before it, and two
children count side by side on two cores (``perfguard.workers.counting.do_count_batch``). A
count that fails costs that variant's counts (its verdict rows read UNKNOWN), never its timing.
"""

from __future__ import annotations

import contextvars
import dataclasses
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.children import available_cores
from perfguard.jsonfields import JsonDict, int_map, integer
from perfguard.results.counted_functions import window_functions
from perfguard.results.counts import Counts
from perfguard.workers.callgrind import (
    counted_command,
    counted_env,
    read_dumps,
    valgrind_path,
    valgrind_version,
)
from perfguard.workers.counting import (
    CountBatchRequest,
    CountItem,
    CountRequest,
    ItemOutcome,
    window_label,
)
from perfguard.workers.engine import run_worker
from perfguard.workers.protocol import MeasureVariant

if TYPE_CHECKING:
    from perfguard.compile.case import CompiledCase
    from perfguard.suite import Suite

#: Inferences in the counted window, and warm-up runs before instrumentation starts (one more
#: runs instrumented: ``counting.INSTRUMENTED_WARMUP``): the instrumented work of a count is
#: 1 + COUNT_INFERENCES inferences at ~100x native time (it was 2 + 1 + 5 before 2026-12-06;
#: the A/A spread of the smaller window is on docs/measured.md, "Counted evidence"). The
#: uninstrumented warm-up (~10x native) brings the heap to its steady state first.
COUNT_INFERENCES = 3
COUNT_WARMUP = 3
#: How the per-inference figure is made: ``window`` = the window of N / N (``benchmarks/counts.py``
#: measured the alternative, the difference of two windows, and it spread 20x more).
DEFAULT_METHOD = "window"
#: A counted worker runs the model about 50-100x slower than natively (cache simulation on).
TIMEOUT_FACTOR = 20.0
MIN_TIMEOUT_S = 600.0

_requested: contextvars.ContextVar[bool] = contextvars.ContextVar("perfguard_counts", default=False)


@contextmanager
def counting(enabled: bool = True) -> Iterator[None]:
    """``--counts`` for every job started inside (``Job`` reads :func:`counts_wanted`); checks
    that Valgrind is installed first, so a command fails with one line before any work."""
    if enabled:
        valgrind_path()
    token = _requested.set(enabled)
    try:
        yield
    finally:
        _requested.reset(token)


def counts_wanted(suite: Suite) -> bool:
    """Whether this job counts: ``--counts`` or the suite's ``[measure] counts``."""
    return _requested.get() or suite.counts


@dataclass(frozen=True)
class CountOutcome:
    """What counting one variant gave: per-inference counts by method, or the failure in one line."""

    counts: Mapping[str, Counts]
    failure: str | None = None


def per_inference(windows: Mapping[str, Mapping[str, int]], variant: str, inferences: int,
                  tool: str) -> dict[str, Counts]:
    """Per-inference counts of ``variant`` from its window, by method (``window``: the N window
    / N); empty when its window is missing."""
    many = windows.get(window_label(variant, inferences))
    return {} if many is None else {DEFAULT_METHOD: Counts.from_events(many, inferences, DEFAULT_METHOD, tool)}


@dataclass(frozen=True)
class CompileCounts:
    """A counted compile: ``total`` instructions of its real work (every pass, or onnxoptimizer
    group, and the backend's own steps), ``per_pass`` by pass index, ``steps`` by name."""

    total: int
    per_pass: Mapping[int, int]
    steps: Mapping[str, int]

    def to_json(self) -> JsonDict:
        return {"total": self.total, "per_pass": {str(k): v for k, v in self.per_pass.items()},
                "steps": dict(self.steps)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CompileCounts:
        kind = "compile counts"
        per_pass = int_map(data, "per_pass", kind)
        if not all(index.isdigit() for index in per_pass):
            raise ValueError(f"{kind}: per_pass is not a count by pass index")
        return cls(integer(data, "total", kind), {int(index): value for index, value in per_pass.items()},
                   int_map(data, "steps", kind))


def compile_counts(windows: Mapping[str, Mapping[str, int]]) -> CompileCounts:
    """The compile's figures from its windows (labels: ``onnx_passes.COUNT_WINDOW``): a pass's own
    figure is its replay window inside an onnxoptimizer group, else its work window."""
    work: dict[int, int] = {}
    replay: dict[int, int] = {}
    steps: dict[str, int] = {}
    for label, events in windows.items():
        kind, _, name = label.partition("|")
        if kind == "work":
            work[int(name)] = events["Ir"]
        elif kind == "replay":
            replay[int(name)] = events["Ir"]
        elif kind == "step":
            steps[name] = events["Ir"]
    return CompileCounts(sum(work.values()) + sum(steps.values()), {**work, **replay}, steps)


@dataclass(frozen=True)
class Target:
    """One variant to count: its inferences, and its compile too when ``compile`` (with the
    compiler under test at ``compiler_path``)."""

    compiled: CompiledCase
    compile: bool = True
    compiler_path: Path | None = None


@dataclass(frozen=True)
class Counted:
    """What counting one target gave: its run's outcome, and its compile's figures or the reason
    it has none (None and None: its compile was not asked for)."""

    run: CountOutcome
    compile: CompileCounts | None = None
    compile_failure: str | None = None


def count_targets(suite: Suite, targets: Sequence[Target], workdir: Path,
                  inferences: int = COUNT_INFERENCES) -> list[Counted]:
    """Count every target, one counted process per backend (``count_batch``: every run and every
    compile a child forked from it, two at a time on two cores); a result per target, in order."""
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
        counted = _count_batch(suite, name, batch, workdir, inferences)
        for index, result in zip(indices, counted, strict=True):
            out[index] = dataclasses.replace(result, compile_failure=no_compile[index]) if index in no_compile else result
    return [result for result in out if result is not None]


def _items(suite: Suite, target: Target, scratch: Path, inferences: int) -> list[CountItem]:
    """A target's count requests: its run, then its compile when asked for."""
    from perfguard.workers.counting import CountCompileRequest
    from perfguard.workers.requests import compile_request

    compiled = target.compiled
    case = compiled.case
    assert compiled.artifact is not None
    items: list[CountItem] = [CountRequest(MeasureVariant(compiled.variant_id, compiled.artifact), case.runner,
                                           suite.runner_options(case.runner), COUNT_WARMUP, inferences,
                                           case.measure.seed, tuple(compiled.model.inputs))]
    if target.compile:
        folder = Path(tempfile.mkdtemp(prefix="compile-", dir=scratch))
        items.append(CountCompileRequest(compile_request(
            suite, case, compiled.model.path, compiled.model.inputs, compiler_path=target.compiler_path,
            out_dir=folder / "artifact", reference_cache=folder / "unused.npz")))
    return items


def _count_batch(suite: Suite, backend: str, targets: Sequence[Target], workdir: Path,
                 inferences: int) -> list[Counted]:
    """One counted process for ``targets`` (all of ``backend``): see :func:`count_targets`."""
    valgrind = valgrind_path()
    workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="callgrind-", dir=workdir))
    per_target = [_items(suite, t, scratch, inferences) for t in targets]
    items = tuple(item for group in per_target for item in group)
    parallel = max(1, min(available_cores(), len(items)))
    timeout = sum(max(MIN_TIMEOUT_S, t.compiled.case.measure.timeout * TIMEOUT_FACTOR) * len(group)
                  for t, group in zip(targets, per_target, strict=True)) / parallel
    try:
        outcome = run_worker(CountBatchRequest(items, (backend,), parallel), timeout, workdir,
                             prepare=lambda worker, env: (counted_command(valgrind, scratch, worker),
                                                          counted_env(worker, env)))
        if outcome.response is None:
            why = outcome.failure or (outcome.error.message if outcome.error else "no response")
            failed = CountOutcome({}, f"counted worker failed: {why}")
            return [Counted(failed, None, failed.failure if t.compile else None) for t in targets]
        answers = iter(outcome.response.items)
        tool = valgrind_version(valgrind)
        return [_counted(t, scratch, [next(answers) for _ in group], inferences, tool)
                for t, group in zip(targets, per_target, strict=True)]
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


def _counted(target: Target, scratch: Path, answers: Sequence[ItemOutcome], inferences: int, tool: str) -> Counted:
    windows, failure = _windows(scratch, answers[0])
    counts = per_inference(windows, target.compiled.variant_id, inferences, tool) if failure is None else {}
    response = answers[0].response
    if "window" in counts and response is not None:  # why, counted: the window's largest functions
        label = window_label(target.compiled.variant_id, inferences)
        counts["window"] = dataclasses.replace(counts["window"], functions=window_functions(
            scratch, response.pid, label, inferences))
    run = CountOutcome(counts, failure or (None if counts else "callgrind dumped no window"))
    if not target.compile:
        return Counted(run)
    windows, failure = _windows(scratch, answers[1])
    if failure is not None:
        return Counted(run, None, f"counted compile failed: {failure}")
    return Counted(run, compile_counts(windows))
