"""The parent side of the measurement protocol: spawn workers, collect values, survive faults.

Protocol (see README, "Measurement protocol"): for a group of variants (the pipelines of one model
on one runner) perfguard starts ``workers`` fresh processes one after another (each started ahead
of its turn as a :class:`Spare` that has only imported, while the previous one works). Each loads every
variant in a rotated order (its peak memory after the first load is that variant's memory
sample), discards ``warmup`` runs of each (fewer once they lasted ``warmup * min_time``), then
times ``rounds`` rounds, or stops after ``min_rounds`` once they lasted ``max_time``; a round is
``loops`` steps, in each of which every variant runs once, in a fresh random order, each run timed
on its own (``perfguard.measure.worker``). ``loops`` is calibrated by the first worker so that one
value lasts at least ``min_time`` (one count for every variant), and reused by the others.

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

from perfguard import children
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


def _worker_env(threads: int, workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    # Keep libraries that size their own thread pools from the core count out of the way.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, str(threads))
    # A worker's temporary files (profiles, ONNX Runtime's scratch) go inside the job's folder: a
    # worker killed by a signal cannot remove them itself, the job's cleanup removes that folder.
    scratch = workdir / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    env["TMPDIR"] = str(scratch)
    return env


class Spare:
    """A measurement worker started ahead of its turn: a fresh process that has paid for the
    interpreter and the imports of a measure worker (numpy, ONNX Runtime: about 0.5 s) and then
    waits on stdin for its request. It has loaded no model and run nothing, so it is as fresh as
    a process started on the spot; ``measure_group`` starts the next worker's spare while the
    current worker loads its models, which takes that start-up off the critical path."""

    def __init__(self, workdir: Path, threads: int) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        fd, self.stderr_path = tempfile.mkstemp(prefix="stderr-", suffix=".txt", dir=workdir)
        self.stderr = os.fdopen(fd, "w")
        self.threads = threads
        try:
            self.proc = children.popen([sys.executable, "-m", "perfguard.measure.worker", "--spare"],
                                       stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.stderr,
                                       env=_worker_env(threads, workdir), text=True)
        except BaseException:
            self.stderr.close()
            raise

    def close(self) -> None:
        """Stop a spare that was never used (its stdin closes: it exits at once), or one still
        working when its caller stops (a signal: its whole process group is killed)."""
        if self.proc.poll() is None and self.proc.stdin is not None and children.stopping() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            children.kill_group(self.proc)
            self.proc.wait()
        children.forget(self.proc)
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:  # the pipe of a killed spare
                pass
        self.stderr.close()
        try:
            os.unlink(self.stderr_path)
        except OSError:
            pass


def run_worker(request: Request[R], timeout: float, workdir: Path, spare: Spare | None = None) -> WorkerOutcome[R]:
    """Run one worker process on ``request`` (in ``spare`` when given: a worker started ahead);
    never raises for the child's faults."""
    workdir.mkdir(parents=True, exist_ok=True)
    fd, request_path = tempfile.mkstemp(prefix="request-", suffix=".json", dir=workdir)
    with os.fdopen(fd, "w") as handle:
        json.dump(request.to_json(), handle)
    response_path = request_path.replace("request-", "response-")
    failure = None
    if spare is None:
        stderr_path = request_path.replace("request-", "stderr-").replace(".json", ".txt")
        with open(stderr_path, "w") as stderr:
            try:
                proc = children.run([sys.executable, "-m", "perfguard.measure.worker", request_path, response_path],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                    timeout=timeout, env=_worker_env(request.threads, workdir))
                returncode: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                returncode = None
    else:
        stderr_path = spare.stderr_path
        try:
            assert spare.proc.stdin is not None
            spare.proc.stdin.write(f"{request_path}\t{response_path}\n")
            spare.proc.stdin.close()
        except OSError:  # the spare died before its turn: it shows as its exit code below
            pass
        try:
            returncode = spare.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            children.kill_group(spare.proc)
            spare.proc.wait()
            returncode = None
        children.forget(spare.proc)
        spare.stderr.close()
    if returncode is None:
        failure = f"worker timed out after {timeout:g} s and was killed"
    elif returncode < 0:
        failure = f"worker crashed ({_signal_name(returncode)})"
    elif returncode != 0:
        failure = f"worker exited with code {returncode}"
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
    # The next worker starts (as a spare: imports only) while this one loads its models.
    current: Spare | None = None
    spare: Spare | None = Spare(workdir, request.threads) if workers > 0 else None
    try:
        for index in range(workers):
            if not live:
                break
            current, spare = spare, (Spare(workdir, request.threads) if index + 1 < workers else None)
            _measure_one(request, index, current, live, loops, results, timeout, workdir)
            live = [v for v in live if results[v.id].dropped is None]
    finally:
        for left in (current, spare):
            if left is not None:
                left.close()
    return results


def _measure_one(request: MeasureRequest, index: int, spare: Spare | None, live: list[Any], loops: dict[str, int],
                 results: dict[str, VariantValues], timeout: float, workdir: Path) -> None:
    """One worker of ``measure_group`` (in ``spare``), its values added to ``results``."""
    worker_index = request.worker_index + index
    outcome = run_worker(request.for_worker(worker_index, live, loops), timeout, workdir, spare)
    if outcome.failure or outcome.error or outcome.response is None:
        reason = outcome.failure or (outcome.error.message if outcome.error else "no response")
        if outcome.stderr_tail and outcome.failure:
            reason += f": {outcome.stderr_tail.splitlines()[-1][:200]}"
        culprit = status_variant(outcome.last_status, [v.id for v in live])
        if culprit is not None:
            results[culprit].failures.append(f"worker {worker_index}: {reason}")
            results[culprit].dropped = f"dropped after worker {worker_index}: {reason}"
        else:
            for variant in live:
                results[variant.id].failures.append(f"worker {worker_index}: {reason}")
        return
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
