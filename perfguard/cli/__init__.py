"""The ``perfguard`` command: one module per subcommand, each with ``add_arguments`` and ``run``.

Exit codes (also in README): 0 success / no regression; 1 regression found; 2 bad usage or bad
input (one line on stderr, no traceback); 3 undecided cases with ``--fail-on-unknown``; 4 the run
completed but some cases failed (compile error, wrong answer, every worker crashed).
"""

from __future__ import annotations

import argparse
import importlib
import sys

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


def main(argv: list[str] | None = None) -> int:
    from perfguard.errors import UserError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.handler(args))
    except UserError as exc:
        sys.stderr.write(f"perfguard: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("perfguard: interrupted\n")
        return 130
