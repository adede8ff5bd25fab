"""Profiles, measured apart from timing: the parent that asks fresh workers for profiles of both
sides of a comparison (the worker's side is :mod:`perfguard.workers.profile`).

A profiled session pays for the profiler (ORT writes an event per node per run: bert's kernel
sum was 6.34 ms profiled against 5.9 ms unprofiled), so a profile never feeds a verdict and a
timed run is never profiled. Each profiling worker is a fresh process that loads both sides of
the comparison (load order rotated by worker) and runs them interleaved, run by run in a random
order, as the timed workers do: profiled in separate processes one after the other, the same
Conv kernels took 30 % more or less time from one process to the next on the loaded 2-core
machine, which drowned a +12 % change made of inserted Transposes. Several workers give an
interval across processes (``perfguard.profile.diff``); they run side by side on the machine's
cores. Interleaving alone does not make a neighbour cost both sides alike: its time slices land in
single runs, about every other one under load, and a median of such runs flipped between the
sides; each worker's figures are its fastest runs' (``perfguard.workers.trace``).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.children import available_cores
from perfguard.workers.launch import WorkerOutcome, run_worker
from perfguard.workers.protocol import MeasureVariant, ProfileResponse
from perfguard.workers.requests import profile_request
from perfguard.workers.trace import ProfileRun

if TYPE_CHECKING:
    from perfguard.compile.case import CompiledCase
    from perfguard.suite import Suite

@dataclass
class SideProfiles:
    """The profiles of one side, one per worker that finished, and why the others did not."""

    label: str
    runs: list[ProfileRun] = field(default_factory=list)
    trace_paths: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def profile_sides(suite: Suite, sides: Sequence[tuple[str, CompiledCase]], *, workers: int, runs: int,
                  workdir: Path, keep_traces: bool = False) -> list[SideProfiles]:
    """Profile the sides' artifacts together in ``workers`` fresh processes, interleaved run by
    run; ``keep_traces``: keep the raw trace files (for ``--trace-out``) under ``workdir``.
    ``UserError`` before any worker starts when a side's backend cannot profile."""
    from perfguard.backends import get_backend

    for name in dict.fromkeys(c.artifact.backend for _, c in sides if c.artifact is not None):
        get_backend(name).require("profile")
    results = [SideProfiles(label) for label, _ in sides]
    variants = [MeasureVariant(compiled.variant_id, compiled.artifact) for _, compiled in sides
                if compiled.artifact is not None]
    for (label, compiled), result in zip(sides, results, strict=True):
        if compiled.artifact is None:
            result.failures.append(f"{label}: no artifact to profile")
    if len(variants) < len(sides):
        return results
    first = sides[0][1]

    def profile(worker: int) -> WorkerOutcome[ProfileResponse]:
        request = profile_request(suite, first.case, variants, first.model.inputs, worker, runs,
                                  workdir / "traces" if keep_traces else None)
        return run_worker(request, first.case.measure.timeout, workdir / "ipc")

    # Workers run side by side on the cores the case's threads leave free: a profile feeds no
    # verdict, and the fastest-run figures leave out the runs a neighbour preempts (module docstring).
    at_once = max(1, min(workers, available_cores() // max(1, first.case.measure.threads)))
    with ThreadPoolExecutor(max_workers=at_once) as pool:
        outcomes = list(pool.map(profile, range(workers)))
    for worker, outcome in enumerate(outcomes):
        response = outcome.response
        if response is None:
            reason = outcome.failure or (outcome.error.message if outcome.error else "no response")
            if outcome.stderr_tail and outcome.failure:
                reason += f": {outcome.stderr_tail.splitlines()[-1][:200]}"
            for result in results:
                result.failures.append(f"worker {worker}: {reason}")
            continue
        for (_, compiled), result in zip(sides, results, strict=True):
            result.runs.append(response.profiles[compiled.variant_id])
            if compiled.variant_id in response.trace_paths:
                result.trace_paths.append(response.trace_paths[compiled.variant_id])
    return results
