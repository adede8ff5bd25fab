"""Profiles, measured apart from timing: the worker that profiles one artifact, and the parent
that asks fresh workers for profiles of both sides of a comparison.

A profiled session pays for the profiler (ORT writes an event per node per run: bert's kernel
sum was 6.34 ms profiled against 5.9 ms unprofiled), so a profile never feeds a verdict and a
timed run is never profiled. Each profiling worker is a fresh process that loads both sides of
the comparison (load order rotated by worker) and runs them interleaved, run by run in a random
order, as the timed workers do: profiled in separate processes one after the other, the same
Conv kernels took 30 % more or less time from one process to the next on the loaded 2-core
machine, which drowned a +12 % change made of inserted Transposes. Several workers give an
interval across processes (``perfguard.profile.diff``); they run side by side on the machine's
cores (each holds both sides, so what one worker's neighbour costs, it costs both sides alike).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.errors import BackendError, first_line
from perfguard.measure.engine import WorkerOutcome, run_worker
from perfguard.measure.job import available_cores
from perfguard.measure.protocol import MeasureVariant, ProfileRequest, ProfileResponse
from perfguard.measure.requests import profile_request
from perfguard.profile.trace import ProfileRun, TraceError, aggregate, read_trace

if TYPE_CHECKING:
    from perfguard.compile.case import CompiledCase
    from perfguard.suite import Suite

#: Backends whose runtime has a profiler perfguard reads (ONNX Runtime's JSON trace).
PROFILED_BACKENDS = ("ort",)


def do_profile(request: ProfileRequest) -> ProfileResponse:
    """The worker side of a ``profile`` request (see ``ProfileRequest``)."""
    from perfguard.backends.ort import OrtBackend
    from perfguard.models.inputs import make_feeds
    from perfguard.runners import get_runner

    for variant in request.variants:
        if variant.artifact.backend not in PROFILED_BACKENDS:
            raise BackendError(f"no profiler for backend {variant.artifact.backend!r}; profiles need one of "
                               f"{', '.join(PROFILED_BACKENDS)}")
    runner = get_runner(request.runner, options=request.runner_options)
    feeds = make_feeds(list(request.input_specs), request.seed)
    rng = random.Random(request.seed * 100_003 + request.worker_index)
    order = sorted(request.variants, key=lambda v: v.id)
    shift = request.worker_index % len(order) if order else 0
    order = order[shift:] + order[:shift]
    scratch = Path(tempfile.mkdtemp(prefix="perfguard-profile-"))
    try:
        sessions = {}
        for index, variant in enumerate(order):
            sessions[variant.id] = OrtBackend().load(variant.artifact, runner, request.threads,
                                                     profile_prefix=str(scratch / f"v{index}"))
            for _ in range(max(0, request.warmup)):
                sessions[variant.id].run(feeds)
        ids = list(sessions)
        for _ in range(max(1, request.runs)):
            rng.shuffle(ids)
            for variant_id in ids:
                sessions[variant_id].run(feeds)
        runner.synchronize()
        profiles, kept = {}, {}
        for index, variant in enumerate(order):
            path = str(sessions[variant.id].session.end_profiling())
            try:
                profiles[variant.id] = aggregate(read_trace(path), skip_runs=max(0, request.warmup))
            except TraceError as exc:
                raise BackendError(f"unreadable ONNX Runtime profile of {variant.id}: {first_line(exc)}") from None
            if request.trace_dir:
                target = Path(request.trace_dir) / f"worker{request.worker_index}-{index}.json"
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(path, target)
                kept[variant.id] = str(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return ProfileResponse(profiles, kept, os.getpid())


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
    run; ``keep_traces``: keep the raw trace files (for ``--trace-out``) under ``workdir``."""
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
    # verdict, and each worker runs both sides interleaved, so a neighbour slows both alike.
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
