"""The ``perfguard`` command: one module per subcommand, each with ``add_arguments`` and ``run``.

Exit codes (also in README): 0 success / no regression; 1 regression found; 2 bad usage or bad
input, or an output that cannot be written (one line on stderr, no traceback, nothing half
written); 3 undecided cases with ``--fail-on-unknown``; 4 the run completed but some cases failed
(compile error, wrong answer, every worker crashed); 70 internal error, a bug in perfguard
(``EX_SOFTWARE``; one line on stderr naming the exception and the file holding its traceback, and
the same in the ``--json`` output where one was asked for). An internal error is never reported
as a regression. ``bisect`` adds 3 inconclusive and 5 no reproducible regression. ``bisect step``
speaks ``git bisect run``: 0 good, 1 bad, 125 skip, and 128 for every error of the tool (bad
input or internal), which makes ``git bisect run`` abort instead of blaming a commit.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from perfguard import __version__

COMMANDS = {
    "run": "perfguard.cli.run",
    "validate": "perfguard.cli.validate",
    "passes": "perfguard.cli.passes",
    "runners": "perfguard.cli.runners",
    "check": "perfguard.cli.check",
    "compare": "perfguard.cli.compare",
    "baseline": "perfguard.cli.baseline",
    "calibrate": "perfguard.cli.calibrate",
    "bisect": "perfguard.cli.bisect",
    "compile": "perfguard.cli.compile",
    "report": "perfguard.cli.report",
}

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_UNKNOWN, EXIT_CASE_FAILED = 0, 1, 2, 3, 4
EXIT_INTERNAL = 70  # EX_SOFTWARE (sysexits.h): a bug in perfguard; no command uses 70 for anything else
# `bisect step` under `git bisect run`: 1-127 except 125 mean "bad", so every error of the tool
# exits 128, which makes git bisect abort (125 = skip is decided by the step itself).
EXIT_STEP_ABORT = 128
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `perfguard ... | head`
# OSErrors that mean "this machine cannot store the output" (exit 2), not a bug in perfguard.
_STORAGE_ERRNOS = {"ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EFBIG"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"perfguard: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


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


def main(argv: list[str] | None = None) -> int:
    from perfguard.errors import UserError, one_line

    argv = list(sys.argv[1:] if argv is None else argv)
    step = _is_step(argv)
    usage_exit = EXIT_STEP_ABORT if step else EXIT_USAGE
    internal_exit = EXIT_STEP_ABORT if step else EXIT_INTERNAL
    aborting = f" (exit {EXIT_STEP_ABORT}: git bisect run aborts)" if step else ""
    try:
        parser = build_parser()
    except Exception as exc:  # a command module that does not import is a bug too
        return internal_error(exc, argv, None, internal_exit)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        if step and exc.code not in (0, None):  # a usage error must not mark the commit bad
            sys.stderr.write(f"perfguard: bisect step: bad usage{aborting}\n")
            raise SystemExit(EXIT_STEP_ABORT) from None
        raise
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.handler(args))
    except UserError as exc:
        sys.stderr.write(f"perfguard: error: {one_line(exc)}{aborting}\n")
        return usage_exit
    except KeyboardInterrupt:
        sys.stderr.write("perfguard: interrupted\n")
        return 130
    except BrokenPipeError:  # stdout closed early (`| head`): not an error of perfguard
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        import errno

        if errno.errorcode.get(exc.errno or 0) not in _STORAGE_ERRNOS:
            return internal_error(exc, argv, args, internal_exit)
        where = f"{exc.filename}: " if exc.filename else ""  # a full disk or a read-only folder
        sys.stderr.write(f"perfguard: error: {where}{exc.strerror or exc}{aborting}\n")
        return usage_exit
    except Exception as exc:
        return internal_error(exc, argv, args, internal_exit)


def internal_error(exc: BaseException, argv: list[str], args: Any, code: int) -> int:
    """Report a bug: one line on stderr naming the exception and the file with its traceback (in
    the temporary folder, written atomically), and an error document at ``--json`` if one was
    asked for. Returns ``code``."""
    import shlex
    import tempfile
    import time
    import traceback

    from perfguard.errors import first_line

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    summary = f"{type(exc).__name__}: {first_line(exc, empty='(no message)')}"
    header = (f"perfguard {__version__}: internal error (exit {code})\n"
              f"command: {shlex.join(['perfguard', *argv])}\ncwd: {os.getcwd()}\npython: {sys.version}\n\n")
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

            write_json_atomic(json_path, {"version": 1, "kind": "error", "exit_code": code, "command": argv,
                                          "error": {"kind": "internal", "type": type(exc).__name__,
                                                    "message": str(exc), "traceback_file": path,
                                                    "traceback": text}})
        except Exception:
            pass
    if path is not None:
        sys.stderr.write(f"perfguard: internal error: {summary}; traceback written to {path}"
                         + (f" (exit {code}: git bisect run aborts)" if code == EXIT_STEP_ABORT else "") + "\n")
    else:
        sys.stderr.write(f"perfguard: internal error: {summary}; no file could hold the traceback:\n{text}")
    return code
