"""Counted measurement (``--counts``, ``[measure] counts = true``): each compiled variant also
runs once in a fresh worker under Valgrind's callgrind, which counts its instructions and
simulated cache misses per inference (``perfguard.workers.counting`` is the worker side,
``perfguard.results.counts.Counts`` the record, ``docs/guides/exact-evidence.md`` the guide).

One counted worker per variant, one after the other: a variant counted alone in its own process
has nobody's allocations or caches before it, and Valgrind serialises a process onto one core
anyway. A counted worker that fails costs that variant's counts (its verdict rows read
UNKNOWN), never its timing.
"""

from __future__ import annotations

import contextvars
import dataclasses
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.results.counted_functions import window_functions
from perfguard.results.counts import Counts
from perfguard.workers.callgrind import (
    clean,
    counted_command,
    counted_env,
    read_dumps,
    valgrind_path,
    valgrind_version,
)
from perfguard.workers.counting import CountRequest, CountResponse, window_label
from perfguard.workers.engine import run_worker
from perfguard.workers.protocol import MeasureVariant

if TYPE_CHECKING:
    from perfguard.compile.case import CompiledCase
    from perfguard.suite import Suite

#: Inferences in the counted window (and warm-up runs before and after instrumentation starts).
COUNT_INFERENCES = 5
COUNT_WARMUP = 2
#: How the per-inference figure is made (``benchmarks/counts.py`` measured both: see
#: ``docs/measured.md``, "Counted evidence"): ``window`` = the window of N / N.
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
    """What one counted worker gave: per-inference counts by method, or the failure in one line."""

    counts: Mapping[str, Counts]
    failure: str | None = None


def per_inference(windows: Mapping[str, Mapping[str, int]], variant: str, inferences: int,
                  tool: str) -> dict[str, Counts]:
    """Per-inference counts of ``variant`` from its two windows, by method: ``window`` (the N
    window / N) and ``difference`` ((N window - 1 window) / (N - 1)); a method whose windows are
    missing is left out."""
    one, many = windows.get(window_label(variant, 1)), windows.get(window_label(variant, inferences))
    out: dict[str, Counts] = {}
    if many is not None:
        out["window"] = Counts.from_events(many, inferences, "window", tool)
    if one is not None and many is not None:
        delta = {name: max(0, many[name] - one.get(name, 0)) for name in many}
        out["difference"] = Counts.from_events(delta, inferences - 1, "difference", tool)
    return out


def count_variant(suite: Suite, compiled: CompiledCase, workdir: Path,
                  inferences: int = COUNT_INFERENCES) -> CountOutcome:
    """Count ``compiled``'s artifact in a fresh worker under callgrind (see the module)."""
    from perfguard.backends import get_backend

    artifact = compiled.artifact
    if artifact is None:
        return CountOutcome({}, "no artifact to count")
    backend = get_backend(artifact.backend)
    ability = backend.capabilities.missing(artifact.backend, "counts")
    if ability is not None:
        return CountOutcome({}, str(ability))
    blocker = backend.count_blocker(artifact)
    if blocker is not None:
        return CountOutcome({}, blocker)
    valgrind = valgrind_path()
    case = compiled.case
    request = CountRequest(MeasureVariant(compiled.variant_id, artifact), case.runner,
                           suite.runner_options(case.runner), COUNT_WARMUP, inferences, case.measure.seed,
                           tuple(compiled.model.inputs))
    workdir.mkdir(parents=True, exist_ok=True)
    out_dir = Path(tempfile.mkdtemp(prefix="callgrind-", dir=workdir))
    timeout = max(MIN_TIMEOUT_S, case.measure.timeout * TIMEOUT_FACTOR)
    try:
        outcome = run_worker(request, timeout, workdir,
                             prepare=lambda worker, env: (counted_command(valgrind, out_dir, worker),
                                                          counted_env(worker, env)))
        if outcome.response is None:
            why = outcome.failure or (outcome.error.message if outcome.error else "no response")
            return CountOutcome({}, f"counted worker failed: {why}")
        response: CountResponse = outcome.response
        if response.valgrind < 1:
            return CountOutcome({}, "the counted worker did not run under Valgrind")
        try:
            windows = read_dumps(out_dir, response.pid)
        except (OSError, ValueError) as exc:
            return CountOutcome({}, f"unreadable callgrind profile: {exc}")
        counts = per_inference(windows, compiled.variant_id, max(2, inferences), valgrind_version(valgrind))
        if "window" in counts:  # why, counted: the window's largest functions
            label = window_label(compiled.variant_id, max(2, inferences))
            counts["window"] = dataclasses.replace(counts["window"], functions=window_functions(
                out_dir, response.pid, label, max(2, inferences)))
        return CountOutcome(counts, None if counts else "callgrind dumped no window")
    finally:
        clean(out_dir)
        try:
            out_dir.rmdir()
        except OSError:
            pass



@dataclass(frozen=True)
class CompileCounts:
    """A counted compile: ``total`` instructions of its real work (every pass, or onnxoptimizer
    group, and the backend's own steps), ``per_pass`` by pass index, ``steps`` by name."""

    total: int
    per_pass: Mapping[int, int]
    steps: Mapping[str, int]


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


def count_compile(suite: Suite, compiled: CompiledCase, compiler_path: Path | None,
                  workdir: Path) -> tuple[CompileCounts | None, str | None]:
    """Compile ``compiled``'s case once more in a fresh worker under callgrind, a window around
    each pass (``perfguard.workers.counting.do_count_compile``); the counts, or the failure."""
    from perfguard.backends import get_backend
    from perfguard.workers.counting import CountCompileRequest
    from perfguard.workers.requests import compile_request

    backend = compiled.case.pipeline.backend
    ability = get_backend(backend).capabilities.missing(backend, "compile_counts")
    if ability is not None:
        return None, str(ability)
    valgrind = valgrind_path()
    workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="counted-compile-", dir=workdir))
    request = CountCompileRequest(compile_request(
        suite, compiled.case, compiled.model.path, compiled.model.inputs, compiler_path=compiler_path,
        out_dir=scratch / "artifact", reference_cache=scratch / "unused.npz"))
    timeout = max(MIN_TIMEOUT_S, compiled.case.measure.compile_timeout * TIMEOUT_FACTOR)
    try:
        outcome = run_worker(request, timeout, workdir,
                             prepare=lambda worker, env: (counted_command(valgrind, scratch, worker),
                                                          counted_env(worker, env)))
        if outcome.response is None:
            why = outcome.failure or (outcome.error.message if outcome.error else "no response")
            return None, f"counted compile failed: {why}"
        if outcome.response.valgrind < 1:
            return None, "the counted compile did not run under Valgrind"
        try:
            windows = read_dumps(scratch, outcome.response.pid)
        except (OSError, ValueError) as exc:
            return None, f"unreadable callgrind profile: {exc}"
        return compile_counts(windows), None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
