"""The parent side of the measurement protocol: spawn workers, collect values, survive faults.

Protocol (see README, "Measurement protocol"): for a group of variants (the pipelines of one model
on one runner) perfguard starts ``workers`` fresh processes one after another. Each loads every
variant in a random order, discards ``warmup`` runs, then times ``rounds`` rounds; in each round
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
from typing import Any

from perfguard.measure.worker import STATUS_PREFIX


@dataclass
class WorkerOutcome:
    response: dict[str, Any] | None
    failure: str | None = None
    last_status: str = ""
    stderr_tail: str = ""


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def run_worker(request: dict[str, Any], timeout: float, workdir: Path) -> WorkerOutcome:
    """Run one worker process on ``request``; never raises for the child's faults."""
    workdir.mkdir(parents=True, exist_ok=True)
    fd, request_path = tempfile.mkstemp(prefix="request-", suffix=".json", dir=workdir)
    with os.fdopen(fd, "w") as handle:
        json.dump(request, handle)
    response_path = request_path.replace("request-", "response-")
    stderr_path = request_path.replace("request-", "stderr-").replace(".json", ".txt")
    env = dict(os.environ)
    # Keep libraries that size their own thread pools from the core count out of the way.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, str(request.get("threads", 1)))
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
    statuses = [line[len(STATUS_PREFIX):] for line in text.splitlines() if line.startswith(STATUS_PREFIX)]
    others = [line for line in text.splitlines() if not line.startswith(STATUS_PREFIX) and line.strip()]
    response = None
    if failure is None:
        try:
            response = json.loads(Path(response_path).read_text())
        except (OSError, ValueError):
            failure = "worker exited without writing a response"
    for path in (request_path, response_path, stderr_path):
        try:
            os.unlink(path)
        except OSError:
            pass
    return WorkerOutcome(response, failure, statuses[-1] if statuses else "", "\n".join(others[-5:]))


@dataclass
class VariantValues:
    """All values of one variant: ``per_worker[i]`` came from worker ``worker_ids[i]``."""

    per_worker: list[list[float]] = field(default_factory=list)
    worker_ids: list[int] = field(default_factory=list)
    loops: int | None = None
    rss_delta_bytes: list[int] = field(default_factory=list)
    peak_rss_bytes: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    dropped: str | None = None
    # Device telemetry record of each worker in ``worker_ids`` (None: the runner has none); the
    # variants of one worker share it, since they ran interleaved on the same device.
    telemetry: list[dict[str, Any] | None] = field(default_factory=list)


def measure_group(variants: list[dict[str, Any]], *, runner: str, threads: int, warmup: int, rounds: int,
                  min_time: float, timeout: float, workers: int, seed: int, input_specs: list[dict[str, Any]],
                  workdir: Path, worker_offset: int = 0, runner_options: dict[str, Any] | None = None) -> dict[str, VariantValues]:
    """Measure ``variants`` (``{"id", "artifact"}`` dicts) interleaved across fresh workers.

    ``worker_offset`` numbers workers on from an earlier call (adaptive sampling adds workers);
    ``runner_options`` are the suite's ``[runners.NAME]`` settings (``RunnerOptions.to_json()``)."""
    results = {v["id"]: VariantValues() for v in variants}
    live = list(variants)
    loops: dict[str, int] = {}
    for index in range(workers):
        if not live:
            break
        worker_index = worker_offset + index
        request = {"mode": "measure", "variants": live, "runner": runner, "threads": threads, "warmup": warmup,
                   "rounds": rounds, "min_time": min_time, "seed": seed, "worker_index": worker_index,
                   "input_specs": input_specs, "loops": {k: v for k, v in loops.items()} or None,
                   "runner_options": runner_options}
        if loops and any(v["id"] not in loops for v in live):
            request["loops"] = None
        outcome = run_worker(request, timeout, workdir)
        error = outcome.response.get("error") if outcome.response else None
        if outcome.failure or error:
            reason = outcome.failure or error["message"]  # type: ignore[index]
            if outcome.stderr_tail and outcome.failure:
                reason += f": {outcome.stderr_tail.splitlines()[-1][:200]}"
            culprit = _culprit(outcome.last_status, live)
            if culprit is not None:
                results[culprit].failures.append(f"worker {worker_index}: {reason}")
                results[culprit].dropped = f"dropped after worker {worker_index}: {reason}"
                live = [v for v in live if v["id"] != culprit]
            else:
                for variant in live:
                    results[variant["id"]].failures.append(f"worker {worker_index}: {reason}")
            continue
        response = outcome.response or {}
        for variant_id, values in response["values"].items():
            entry = results[variant_id]
            entry.per_worker.append(values)
            entry.worker_ids.append(worker_index)
            entry.loops = response["loops"][variant_id]
            entry.rss_delta_bytes.append(response["rss_delta_bytes"][variant_id])
            entry.peak_rss_bytes.append(response["peak_rss_bytes"])
            entry.telemetry.append(response.get("telemetry"))
            loops.setdefault(variant_id, response["loops"][variant_id])
    return results


def _culprit(status: str, live: list[dict[str, Any]]) -> str | None:
    for verb in ("loading ", "running ", "calibrating "):
        if status.startswith(verb):
            name = status[len(verb):]
            if any(v["id"] == name for v in live):
                return name
    return None
