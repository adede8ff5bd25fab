"""The worker side of a ``profile`` request: the entry point the worker process runs
(:func:`do_profile`); the parent that asks for profiles is :mod:`perfguard.profile.collect`.

It lives with the worker so that the process boundary imports no stage above it.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

from perfguard.errors import BackendError, TraceError, first_line
from perfguard.scratch import scratch_folder
from perfguard.workers.protocol import ProfileRequest, ProfileResponse
from perfguard.workers.trace import aggregate, read_trace


def do_profile(request: ProfileRequest) -> ProfileResponse:
    """The worker side of a ``profile`` request (see ``ProfileRequest``): each artifact loaded
    by its backend's profiler entry point (``Backend.load_profiled``)."""
    from perfguard.backends import get_backend
    from perfguard.models.inputs import make_feeds
    from perfguard.runners import get_runner

    backends = {v.artifact.backend: get_backend(v.artifact.backend) for v in request.variants}
    for backend in backends.values():
        backend.require("profile")
    runner = get_runner(request.runner, options=request.runner_options)
    feeds = make_feeds(list(request.input_specs), request.seed)
    rng = random.Random(request.seed * 100_003 + request.worker_index)
    order = sorted(request.variants, key=lambda v: v.id)
    shift = request.worker_index % len(order) if order else 0
    order = order[shift:] + order[:shift]
    scratch = scratch_folder("profile-")
    try:
        sessions = {}
        for index, variant in enumerate(order):
            sessions[variant.id] = backends[variant.artifact.backend].load_profiled(
                variant.artifact, runner, request.threads, str(scratch / f"v{index}"))
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
            path = sessions[variant.id].end_profiling()
            try:
                profiles[variant.id] = aggregate(read_trace(path), skip_runs=max(0, request.warmup))
            except TraceError as exc:
                raise BackendError(f"unreadable {variant.artifact.backend} profile of {variant.id}: "
                                   f"{first_line(exc)}") from None
            if request.trace_dir:
                target = Path(request.trace_dir) / f"worker{request.worker_index}-{index}.json"
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(path, target)
                kept[variant.id] = str(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return ProfileResponse(profiles, kept, os.getpid())
