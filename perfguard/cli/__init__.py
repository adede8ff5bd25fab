"""The ``perfguard`` command: one module per subcommand, each with ``add_arguments`` and ``run``.

Exit codes (``perfguard.exit_codes.ExitCode``, also docs/reference/exit-codes.md): 0 success / no regression; 1
regression found; 2 bad usage or bad input, or an output that cannot be written (one line on
stderr, no traceback, nothing half written); 3 undecided cases with ``--fail-on-unknown``; 4 the
run completed but some cases failed (compile error, wrong answer, every worker crashed); 70
internal error, a bug in perfguard (``EX_SOFTWARE``; one line on stderr naming the exception and
the file holding its traceback, and the same in the ``--json`` output where one was asked for).
An internal error is never reported as a regression. ``bisect`` adds 3 inconclusive, 5 no
reproducible regression and 6 undecided (good -> bad too noisy to tell). ``bisect step`` speaks ``git bisect run``: 0 good, 1 bad, 125 skip, and
128 for every error of the tool (bad input or internal), which makes ``git bisect run`` abort
instead of blaming a commit. 130 interrupted (Ctrl-C), 143 stopped by SIGTERM (a cancelled CI
job), 129 by SIGHUP, 141 stdout closed early (``| head``). A signal stops a command the way Ctrl-C
does: ``main`` installs handlers while the command runs that kill every child's process group
(``perfguard.children``) and raise ``KeyboardInterrupt``, ``Terminated`` or ``HungUp``, so every
``finally`` runs (temporary folders removed, state files left whole); the command then exits with
one line on stderr. Which error gets which code: ``ERROR_EXIT_CODES``, the one table ``main``
consults.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from perfguard import __version__, children
from perfguard.errors import HungUp, StorageError, Terminated, UserError, one_line
from perfguard.exit_codes import ExitCode

COMMANDS = {
    "run": "perfguard.cli.run",
    "validate": "perfguard.cli.validate",
    "passes": "perfguard.cli.passes",
    "runners": "perfguard.cli.runners",
    "check": "perfguard.cli.check",
    "compare": "perfguard.cli.compare",
    "merge": "perfguard.cli.merge",
    "baseline": "perfguard.cli.baseline",
    "calibrate": "perfguard.cli.calibrate",
    "bisect": "perfguard.cli.bisect",
    "compile": "perfguard.cli.compile",
    "report": "perfguard.cli.report",
    "nightly": "perfguard.cli.nightly",
    "history": "perfguard.cli.history",
    "export": "perfguard.cli.export",
    "profile": "perfguard.cli.profile",
    "tune": "perfguard.cli.tune",
    "tvm-tune": "perfguard.cli.tvm_tune",
}

# What leaves a command, and the exit code it gets: the most specific class of the exception
# that is in the table wins. A storage OSError (full disk, read-only folder) becomes a StorageError
# first (``_translated``). Under ``bisect step``, USAGE and INTERNAL become STEP_ABORT (``_in_step``).
ERROR_EXIT_CODES: dict[type[BaseException], ExitCode] = {
    UserError: ExitCode.USAGE,  # bad usage or input: one line on stderr names what to fix
    KeyboardInterrupt: ExitCode.INTERRUPTED,
    Terminated: ExitCode.TERMINATED,  # SIGTERM, what CI sends when it cancels a job
    HungUp: ExitCode.HUNG_UP,  # SIGHUP: the terminal or session is gone
    BrokenPipeError: ExitCode.BROKEN_PIPE,  # stdout closed early (`| head`): not an error of perfguard
    Exception: ExitCode.INTERNAL,  # anything else is a bug in perfguard, never a verdict
}
# OSErrors that mean "this machine cannot store the output" (exit 2), not a bug in perfguard.
_STORAGE_ERRNOS = {"ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EFBIG"}

class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"perfguard: error: {message}\n")
        raise SystemExit(ExitCode.USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="perfguard", description="Performance-regression CI for AI compilers.")
    parser.add_argument("--version", action="version", version=f"perfguard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(name, help=module.HELP, description=module.__doc__)
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


def _is_step(argv: list[str]) -> bool:
    """``perfguard bisect step ...``: the top-level parser has no options before the command."""
    return argv[:2] == ["bisect", "step"]


def exit_code_of(exc: BaseException, step: bool = False) -> ExitCode:
    """The exit code of ``exc`` leaving a command (``ERROR_EXIT_CODES``; ``step``: under
    ``bisect step``)."""
    code = next((ERROR_EXIT_CODES[kind] for kind in type(exc).__mro__ if kind in ERROR_EXIT_CODES),
                ExitCode.INTERNAL)
    return _in_step(code, step)


def _in_step(code: ExitCode, step: bool) -> ExitCode:
    """Under ``git bisect run`` any code from 1 to 127 but 125 marks the commit bad: a tool error
    (bad input or a bug) must abort the bisection instead."""
    return ExitCode.STEP_ABORT if step and code in (ExitCode.USAGE, ExitCode.INTERNAL) else code


def _translated(exc: BaseException) -> BaseException:
    """An OSError that says this machine cannot store the output, as the StorageError it is."""
    import errno

    if not isinstance(exc, OSError) or errno.errorcode.get(exc.errno or 0) not in _STORAGE_ERRNOS:
        return exc
    where = f"{exc.filename}: " if exc.filename else ""  # a full disk or a read-only folder
    return StorageError(f"{where}{exc.strerror or exc}")


def _aborting(code: int) -> str:
    return f" (exit {ExitCode.STEP_ABORT:d}: git bisect run aborts)" if code == ExitCode.STEP_ABORT else ""


def main(argv: list[str] | None = None) -> int:
    from perfguard import quiet_known_warnings

    quiet_known_warnings()
    argv = list(sys.argv[1:] if argv is None else argv)
    step = _is_step(argv)
    try:
        parser = build_parser()
    except Exception as exc:  # a command module that does not import is a bug too
        return internal_error(exc, argv, None, _in_step(ExitCode.INTERNAL, step))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        if step and exc.code not in (0, None):  # a usage error must not mark the commit bad
            sys.stderr.write(f"perfguard: bisect step: bad usage{_aborting(ExitCode.STEP_ABORT)}\n")
            raise SystemExit(ExitCode.STEP_ABORT) from None
        raise
    if not getattr(args, "handler", None):
        parser.print_help()
        return ExitCode.USAGE
    try:
        from perfguard.cli._cache import artifact_cache

        with _stopped_by_signals(), artifact_cache(args):
            return int(args.handler(args))
    except Terminated as exc:  # its own line: "interrupted" would say someone pressed Ctrl-C
        try:
            sys.stderr.write(f"perfguard: stopped by {exc.signal_name}\n")
        except OSError:  # after SIGHUP the terminal may be gone: the exit code says it alone
            pass
        return exit_code_of(exc, step)
    except (Exception, KeyboardInterrupt) as exc:
        return _report(_translated(exc), argv, args, step)


# The signals that stop a command, and what each raises in the main thread.
_STOP_SIGNALS: dict[int, type[KeyboardInterrupt]] = {
    signal.SIGINT: KeyboardInterrupt, signal.SIGTERM: Terminated, signal.SIGHUP: HungUp}


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """While a command runs, SIGTERM and SIGHUP stop it as Ctrl-C does: the handler kills every
    child's process group (workers, spares, a build; ``perfguard.children.stop_all``) so threads
    waiting on them return, then raises. Children run in sessions of their own, so Ctrl-C in a
    terminal reaches only perfguard: SIGINT gets the same handler. A later signal kills any child
    again but raises nothing, so the cleanup the first one started (temporary folders, worktrees,
    the store's rollback) is not cut short; SIGKILL remains the way to stop at once."""
    if threading.current_thread() is not threading.main_thread():  # main() called from a thread
        yield
        return
    first: list[BaseException] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        exc = _STOP_SIGNALS[signum]()
        if first:
            children.stop_all(first[0])
            return
        first.append(exc)
        if children.stop_all(exc):  # else a child is being started: popen raises it once tracked
            raise exc

    previous = {signum: signal.signal(signum, stop) for signum in _STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:  # None: installed outside Python, cannot be put back
                signal.signal(signum, handler)
        children.reset()


def _report(exc: BaseException, argv: list[str], args: argparse.Namespace | None, step: bool) -> ExitCode:
    """Tell the user about ``exc`` that left a command, the way its kind asks; return its code."""
    code = exit_code_of(exc, step)
    if code == ExitCode.INTERRUPTED:
        sys.stderr.write("perfguard: interrupted\n")
    elif code == ExitCode.BROKEN_PIPE:  # nothing to say: the reader is gone; keep Python's exit quiet too
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
    elif isinstance(exc, UserError):
        from perfguard.names import visible
        from perfguard.redact import redact

        # The message may quote a user's name (control or bidi characters shown escaped) or a
        # store URL given on the command line (its password masked).
        sys.stderr.write(f"perfguard: error: {visible(redact(one_line(exc)))}{_aborting(code)}\n")
    else:
        internal_error(exc, argv, args, code)
    return code


def internal_error(exc: BaseException, argv: list[str], args: argparse.Namespace | None, code: int) -> int:
    """Report a bug: one line on stderr naming the exception and the file with its traceback (in
    the temporary folder, written atomically), and an error document at ``--json`` if one was
    asked for. Returns ``code``."""
    import shlex
    import tempfile
    import time
    import traceback

    from perfguard.errors import first_line
    from perfguard.redact import redact, redact_url

    # The file and the document are meant for bug reports, the line for CI logs: no credential of
    # the command line or of $PERFGUARD_STORE may reach them, even echoed inside an exception message.
    # Every URL's path and query are masked too: a webhook's path is its secret (issue 32).
    command = [redact_url(arg, paths=True) for arg in argv]
    sources = [*argv, os.environ.get("PERFGUARD_STORE", "")]
    text = redact("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)), values=sources, paths=True)
    message = redact(str(exc), values=sources, paths=True)
    # Cut to one line after redacting: a URL cut short would hide its "@" from the redaction.
    summary = f"{type(exc).__name__}: {first_line(Exception(message), empty='(no message)')}"
    header = (f"perfguard {__version__}: internal error (exit {code:d})\n"
              f"command: {shlex.join(['perfguard', *command])}\ncwd: {os.getcwd()}\npython: {sys.version}\n\n")
    path: str | None = None
    try:
        from perfguard.results import write_text_atomic

        stamp = time.strftime("%Y%m%dT%H%M%S")
        candidate = os.path.join(tempfile.gettempdir(), f"perfguard-traceback-{stamp}-{os.getpid()}.txt")
        write_text_atomic(candidate, header + text)
        path = candidate
    except Exception:  # nowhere to write it: the traceback goes to stderr below
        path = None
    json_path = getattr(args, "json", None)
    if json_path:
        try:
            from perfguard.results import write_json_atomic

            write_json_atomic(json_path, {"version": 1, "kind": "error", "exit_code": int(code), "command": command,
                                          "error": {"kind": "internal", "type": type(exc).__name__,
                                                    "message": message, "traceback_file": path,
                                                    "traceback": text}})
        except Exception:
            pass
    if path is not None:
        sys.stderr.write(f"perfguard: internal error: {summary}; traceback written to {path}"
                         + _aborting(code) + "\n")
    else:
        sys.stderr.write(f"perfguard: internal error: {summary}; no file could hold the traceback:\n{text}")
    return code
