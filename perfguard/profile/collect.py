"""Profiles, measured apart from timing: the worker that profiles one artifact, and the parent
that asks fresh workers for profiles of both sides of a comparison.

A profiled session pays for the profiler (ORT writes an event per node per run: bert's kernel
sum was 6.34 ms profiled against 5.9 ms unprofiled), so a profile never feeds a verdict and a
timed run is never profiled. Each profile comes from a fresh worker process that loads only that
artifact (its ``session_initialization`` is then that artifact's alone), and the workers of the
two sides alternate (A B A B ...) so that drift hits both alike; several workers per side give
an interval across processes (``perfguard.profile.diff``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.errors import BackendError, first_line
from perfguard.measure.engine import run_worker
from perfguard.measure.protocol import ProfileRequest, ProfileResponse
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

    artifact = request.artifact
    if artifact.backend not in PROFILED_BACKENDS:
        raise BackendError(f"no profiler for backend {artifact.backend!r}; profiles need one of "
                           f"{', '.join(PROFILED_BACKENDS)}")
    runner = get_runner(request.runner, options=request.runner_options)
    feeds = make_feeds(list(request.input_specs), request.seed)
    folder = Path(request.trace_path).parent if request.trace_path else Path(artifact.path).parent
    folder.mkdir(parents=True, exist_ok=True)
    executable = OrtBackend().load(artifact, runner, request.threads,
                                   profile_prefix=str(folder / f"profile-{os.getpid()}"))
    for _ in range(max(0, request.warmup) + max(1, request.runs)):
        executable.run(feeds)
    runner.synchronize()
    path = str(executable.session.end_profiling())
    try:
        profile = aggregate(read_trace(path), skip_runs=max(0, request.warmup))
    except TraceError as exc:
        raise BackendError(f"unreadable ONNX Runtime profile: {first_line(exc)}") from None
    if request.trace_path:
        shutil.move(path, request.trace_path)
    else:
        os.unlink(path)
    return ProfileResponse(profile, request.trace_path, os.getpid())


@dataclass
class SideProfiles:
    """The profiles of one side, one per worker that finished, and why the others did not."""

    label: str
    runs: list[ProfileRun] = field(default_factory=list)
    trace_paths: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def profile_sides(suite: Suite, sides: Sequence[tuple[str, CompiledCase]], *, workers: int, runs: int,
                  workdir: Path, keep_traces: bool = False) -> list[SideProfiles]:
    """Profile every side's artifact in ``workers`` fresh processes each, alternating the sides;
    ``keep_traces``: keep each side's raw trace files (for ``--trace-out``) under ``workdir``."""
    results = [SideProfiles(label) for label, _ in sides]
    for worker in range(workers):
        for (label, compiled), result in zip(sides, results, strict=True):
            if compiled.artifact is None:
                if not result.failures:
                    result.failures.append(f"{label}: no artifact to profile")
                continue
            trace = workdir / "traces" / f"{label}-{worker}.json" if keep_traces else None
            request = profile_request(suite, compiled.case, compiled.artifact, compiled.model.inputs, worker, runs,
                                      trace)
            outcome = run_worker(request, compiled.case.measure.timeout, workdir / "ipc")
            if outcome.response is None:
                reason = outcome.failure or (outcome.error.message if outcome.error else "no response")
                result.failures.append(f"worker {worker}: {reason}")
                continue
            result.runs.append(outcome.response.profile)
            if outcome.response.trace_path:
                result.trace_paths.append(outcome.response.trace_path)
    return results
