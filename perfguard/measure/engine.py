"""The parent side of the measurement protocol: spawn workers, collect values, survive faults.

Protocol (see README, "Measurement protocol"): for a group of variants (the pipelines of one model
on one runner) perfguard starts ``workers`` fresh processes one after another. Each loads every
variant in a rotated order (its peak memory after the first load is that variant's memory
sample), discards ``warmup`` runs of each (fewer once they lasted ``warmup * min_time``), then
times ``rounds`` rounds, or stops after ``min_rounds`` once they lasted ``max_time``; in each round
every variant runs ``loops`` times back to back in a fresh random order. ``loops`` is calibrated by
the first worker so that one value lasts at least ``min_time``, and reused by the others.

A worker that crashes or outlives ``timeout`` is recorded and the run goes on. When its last status
line names a variant (it was loading or running it), that variant is dropped from later workers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from perfguard.measure.protocol import (
    MeasureRequest,
    ProtocolError,
    Request,
    WorkerError,
    decode_response,
    split_stderr,
    status_variant,
)

R = TypeVar("R")


@dataclass
class WorkerOutcome(Generic[R]):
    """What became of one worker: its response body (None when it failed before having one), the
    fault that killed it (``failure``) or the error it reported (``error``), its last status line
    and the last lines of its other stderr output."""

    response: R | None
    failure: str | None = None
    last_status: str = ""
    stderr_tail: str = ""
    error: WorkerError | None = None


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def run_worker(request: Request[R], timeout: float, workdir: Path) -> WorkerOutcome[R]:
    """Run one worker process on ``request``; never raises for the child's faults."""
    workdir.mkdir(parents=True, exist_ok=True)
    fd, request_path = tempfile.mkstemp(prefix="request-", suffix=".json", dir=workdir)
    with os.fdopen(fd, "w") as handle:
        json.dump(request.to_json(), handle)
    response_path = request_path.replace("request-", "response-")
    stderr_path = request_path.replace("request-", "stderr-").replace(".json", ".txt")
    env = dict(os.environ)
    # Keep libraries that size their own thread pools from the core count out of the way.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, str(request.threads))
    failure = None
    with open(stderr_path, "w") as stderr:
        try:
            proc = subprocess.run([sys.executable, "-m", "perfguard.measure.worker", request_path, response_path],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                  timeout=timeout, env=env, check=False)
            if proc.returncode < 0:
                failure = f"worker crashed ({_signal_name(proc.returncode)})"
            elif proc.returncode != 0:
                failure = f"worker exited with code {proc.returncode}"
        except subprocess.TimeoutExpired:
            failure = f"worker timed out after {timeout:g} s and was killed"
    text = Path(stderr_path).read_text(errors="replace")
    statuses, others = split_stderr(text)
    response, error = None, None
    if failure is None:
        try:
            data = json.loads(Path(response_path).read_text())
        except (OSError, ValueError):
            failure = "worker exited without writing a response"
        else:
            try:
                response, error = decode_response(data, request.parse_response)
            except ProtocolError as exc:
                failure = f"worker wrote a malformed response: {exc}"
    for path in (request_path, response_path, stderr_path):
        try:
            os.unlink(path)
        except OSError:
            pass
    return WorkerOutcome(response, failure, statuses[-1] if statuses else "", "\n".join(others[-5:]), error)


@dataclass
class VariantValues:
    """All values of one variant: ``per_worker[i]`` came from worker ``worker_ids[i]``."""

    per_worker: list[list[float]] = field(default_factory=list)
    worker_ids: list[int] = field(default_factory=list)
    loops: int | None = None
    rss_delta_bytes: list[int] = field(default_factory=list)
    peak_rss_bytes: list[int] = field(default_factory=list)
    # The peak of each worker that loaded this variant first, before any other: a memory sample.
    memory_samples: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    dropped: str | None = None
    # Device telemetry record of each worker in ``worker_ids`` (None: the runner has none); the
    # variants of one worker share it, since they ran interleaved on the same device.
    telemetry: list[dict[str, Any] | None] = field(default_factory=list)


def measure_group(request: MeasureRequest, *, timeout: float, workers: int, workdir: Path) -> dict[str, VariantValues]:
    """Measure the variants of ``request`` interleaved across ``workers`` fresh workers, numbered
    on from ``request.worker_index`` (adaptive sampling adds workers to an earlier call's)."""
    results = {v.id: VariantValues() for v in request.variants}
    live = list(request.variants)
    loops: dict[str, int] = {}
    for index in range(workers):
        if not live:
            break
        worker_index = request.worker_index + index
        outcome = run_worker(request.for_worker(worker_index, live, loops), timeout, workdir)
        if outcome.failure or outcome.error or outcome.response is None:
            reason = outcome.failure or (outcome.error.message if outcome.error else "no response")
            if outcome.stderr_tail and outcome.failure:
                reason += f": {outcome.stderr_tail.splitlines()[-1][:200]}"
            culprit = status_variant(outcome.last_status, [v.id for v in live])
            if culprit is not None:
                results[culprit].failures.append(f"worker {worker_index}: {reason}")
                results[culprit].dropped = f"dropped after worker {worker_index}: {reason}"
                live = [v for v in live if v.id != culprit]
            else:
                for variant in live:
                    results[variant.id].failures.append(f"worker {worker_index}: {reason}")
            continue
        response = outcome.response
        for variant_id, values in response.values.items():
            entry = results[variant_id]
            entry.per_worker.append(list(values))
            entry.worker_ids.append(worker_index)
            entry.loops = response.loops[variant_id]
            entry.rss_delta_bytes.append(response.rss_delta_bytes[variant_id])
            entry.peak_rss_bytes.append(response.peak_rss_bytes)
            entry.telemetry.append(dict(response.telemetry) if response.telemetry is not None else None)
            loops.setdefault(variant_id, response.loops[variant_id])
        if response.first_peak_rss_bytes is not None and response.load_order:
            results[response.load_order[0]].memory_samples.append(response.first_peak_rss_bytes)
    return results
