"""The parent side of the process boundary: start a worker (or a :class:`Spare` that has only
imported, ready for its turn), hand it a request, collect its response, survive its faults.

A worker that crashes or outlives ``timeout`` is an outcome with a ``failure``, never an
exception: the stage that asked decides what it costs. The measurement protocol that drives
groups of workers is :mod:`perfguard.measure.groups`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from perfguard import children
from perfguard.backends import get_backend
from perfguard.errors import UserError
from perfguard.workers.protocol import (
    ProtocolError,
    Request,
    WorkerError,
    decode_response,
    split_stderr,
)

R = TypeVar("R")
#: The module a worker runs as (``python -m``), unless its request names another (``entry``: the
#: counted process's ``perfguard.counting``).
WORKER_MODULE = "perfguard.workers.worker"
#: What ``run_worker``'s ``prepare`` does: (command, environment) -> (command, environment) run.
Prepare = Callable[[list[str], dict[str, str]], tuple[list[str], dict[str, str]]]


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


def _worker_env(threads: int, workdir: Path, backends: Sequence[str]) -> dict[str, str]:
    env = dict(os.environ)
    # Keep libraries that size their own thread pools from the core count out of the way; each
    # backend adds its runtime's own variables (``Backend.thread_env``: TVM's pool reads
    # TVM_NUM_THREADS once, at start-up, so it must be set before the worker imports TVM).
    wanted = {var: str(threads) for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    for name in backends:
        try:
            wanted.update(get_backend(name).thread_env(threads))
        except UserError:  # an unknown backend: the worker reports it, with the valid names
            continue
    for var, value in wanted.items():
        env.setdefault(var, value)
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

    def __init__(self, workdir: Path, threads: int, backends: Sequence[str]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        fd, self.stderr_path = tempfile.mkstemp(prefix="stderr-", suffix=".txt", dir=workdir)
        self.stderr = os.fdopen(fd, "w")
        self.threads = threads
        try:
            self.proc = children.popen([sys.executable, "-m", WORKER_MODULE, "--spare"],
                                       stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.stderr,
                                       env=_worker_env(threads, workdir, backends), text=True)
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


def run_worker(request: Request[R], timeout: float, workdir: Path, spare: Spare | None = None, *,
               prepare: Prepare | None = None) -> WorkerOutcome[R]:
    """Run one worker process on ``request`` (in ``spare`` when given: a worker started ahead);
    never raises for the child's faults. ``prepare`` turns the worker's command and environment
    into the ones run (a counted worker runs under Valgrind, in an environment of fixed size)."""
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
                command = [sys.executable, "-m", getattr(request, "entry", WORKER_MODULE), request_path, response_path]
                env = _worker_env(request.threads, workdir, request.backends)
                if prepare is not None:
                    command, env = prepare(command, env)
                proc = children.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                    timeout=timeout, env=env)
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
