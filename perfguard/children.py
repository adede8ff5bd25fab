"""The child processes perfguard starts (workers, spares, the user-pass check, build commands):
each in a process group of its own, tracked, so that one call stops them all.

Why a group of its own: a worker starts tools of its own (``iree-compile``) and a build command
starts whatever the user's build starts (``make -j``, a compiler server), so stopping the direct
child is not enough; ``os.killpg`` reaches everything that stayed in its group. A new session also
keeps a terminal's Ctrl-C and hang-up away from the children: the ``perfguard`` process receives
them and decides (``perfguard.cli.main`` installs the handlers that call :func:`stop_all`).

Why tracked: compiles, memory probes and profile workers run from threads, each blocked in a wait
on its child. A signal reaches the main thread only; it kills every live group first
(:func:`stop_all`), so those waits return at once and the thread pools wind down instead of
waiting minutes for workers to finish; from then on :func:`popen` refuses to start anything, so a
queued task cannot start a new worker while the command unwinds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["PARENT_PID_ENV", "forget", "kill_group", "popen", "reset", "run", "stop_all", "stopping"]

#: The pid of the perfguard process that started a worker (the worker stops when it is gone:
#: ``perfguard.workers.worker.die_with_parent``).
PARENT_PID_ENV = "PERFGUARD_PARENT_PID"

# Set operations are single steps under the GIL: the signal handler (main thread) and the threads
# that spawn and reap children share these without a lock, which the handler could never take if
# it interrupted the main thread while that held it.
_live: set[subprocess.Popen[Any]] = set()
_stopped_by: BaseException | None = None
_local = threading.local()


def stopping() -> BaseException | None:
    """The exception a signal raised when :func:`stop_all` ran (None while nothing asked to stop)."""
    return _stopped_by


def _refuse() -> None:
    if _stopped_by is not None:
        raise type(_stopped_by)(*_stopped_by.args)


def popen(args: str | Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` in a new session (its own process group), tracked until :func:`forget`;
    raises the stopping signal's exception once :func:`stop_all` ran (and kills a child that was
    being started when it ran)."""
    env = dict(kwargs.pop("env", None) or os.environ)
    env[PARENT_PID_ENV] = str(os.getpid())
    _refuse()  # a queued task after the signal: start nothing new
    # Between Popen's fork and the set, a signal in this thread would leave a child that nobody
    # tracks: the handler defers its exception to the end of this block (``stop_all``'s result).
    _local.spawning = True
    try:
        proc: subprocess.Popen[Any] = subprocess.Popen(args, start_new_session=True, env=env, **kwargs)
        _live.add(proc)
    finally:
        _local.spawning = False
    if _stopped_by is not None:
        kill_group(proc)
        proc.wait()
        forget(proc)
        _refuse()
    return proc


def forget(proc: subprocess.Popen[Any]) -> None:
    """Stop tracking ``proc`` (it was waited for)."""
    _live.discard(proc)


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL the process group ``proc`` leads (every process still in it, the leader too)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group is empty already
        pass


def stop_all(reason: BaseException) -> bool:
    """Kill the group of every tracked child and refuse new ones (``reason`` is raised instead).
    Called by the signal handlers, in the main thread; False when that thread is starting a child
    in :func:`popen`, which then raises ``reason`` itself once the child is tracked and killed."""
    global _stopped_by
    _stopped_by = reason  # first: a popen that adds its child after the loop below kills it itself
    for proc in list(_live):
        kill_group(proc)
    return not getattr(_local, "spawning", False)


def reset() -> None:
    """Forget a past :func:`stop_all` (``perfguard.cli.main`` called again in the same process)."""
    global _stopped_by
    _stopped_by = None


def run(args: str | Sequence[str], *, timeout: float | None = None, check: bool = False,
        input: str | bytes | None = None, capture_output: bool = False,
        **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` through :func:`popen`: on a timeout the child's whole group is killed
    (then ``TimeoutExpired`` as ``subprocess.run`` raises it), and on any other exception too.

    The output is read until the child and everything holding its pipes are gone; a command that
    may leave a daemon behind must write into files instead (``perfguard.compile.checkout``)."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    proc = popen(args, **kwargs)
    try:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            kill_group(proc)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(proc.args, exc.timeout, out, err) from None
        except BaseException:
            kill_group(proc)
            proc.wait()
            raise
    finally:
        forget(proc)
    completed: subprocess.CompletedProcess[Any] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check:
        completed.check_returncode()
    return completed


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
