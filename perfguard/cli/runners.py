"""List the runners this machine can serve, and why the others are unavailable, per backend.

A runner serves a backend's cases when its device is there and what that backend needs from it
(``Backend.check_runner``) is there too: ``ort`` cases need the runner's ONNX Runtime execution
provider (``CUDAExecutionProvider`` on ``cuda``), ``iree`` cases IREE's HAL driver (``cuda``).
With RUNNER names, checks only those and exits with code 2 when one serves no backend (useful as
a guard at the top of a CI job: ``perfguard runners cuda``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from perfguard.exit_codes import ExitCode

if TYPE_CHECKING:
    from perfguard.runners import Runner

HELP = "list the runners (cpu, cuda, npu:<provider>) this machine can serve"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", metavar="RUNNER",
                        help="runners to check (default: cpu, cuda and every known npu provider)")
    parser.add_argument("--backend", action="append", metavar="NAME",
                        help="check only this backend's needs (repeatable; default: every registered backend but the "
                             "test backend mock)")
    parser.add_argument("--json", metavar="PATH", help="also write the statuses as JSON to PATH")


def _ort_line() -> str:
    try:
        import onnxruntime
    except ImportError as exc:
        return f"onnxruntime: not importable ({exc})"
    return f"onnxruntime {onnxruntime.__version__} providers: {', '.join(onnxruntime.get_available_providers())}"


def _backend_checks(names: list[str] | None) -> dict[str, Callable[[Runner], None]]:
    """Each backend's ``check_runner`` (a backend that cannot load says so in its rows)."""
    from perfguard.backends import available_backends, get_backend
    from perfguard.errors import UserError

    checks: dict[str, Callable[[Runner], None]] = {}
    for name in names or available_backends():
        try:
            backend = get_backend(name)
        except UserError as exc:
            if names:  # asked for by name: a typo is an error, with the list
                raise
            checks[name] = partial(_refuse, str(exc))
            continue
        if names or not backend.test_only:
            checks[name] = backend.check_runner
    return checks


def _refuse(reason: str, runner: Runner) -> None:
    from perfguard.errors import RunnerUnavailable

    raise RunnerUnavailable(reason)


def run(args: argparse.Namespace) -> ExitCode:
    from rich.table import Table

    from perfguard.cli._text import cli_console, literal
    from perfguard.errors import RunnerUnavailable
    from perfguard.results import write_json_atomic
    from perfguard.runners import runner_class, runner_status
    from perfguard.runners.telemetry import LOCK_HINT

    if args.json:
        from perfguard.results import check_writable

        check_writable(args.json, "--json")
    statuses = runner_status(list(args.names) or None, backends=_backend_checks(args.backend))
    table = Table(title="perfguard runners on this machine")
    table.add_column("runner")
    table.add_column("backend")
    table.add_column("status")
    table.add_column("device, or why not")
    for status in statuses:
        state = "[green]available[/green]" if status.available else "[red]unavailable[/red]"
        table.add_row(literal(status.name), "", state, literal(status.detail))
        for row in status.backends:
            state = "[green]yes[/green]" if row.available else "[red]no[/red]"
            table.add_row("", literal(row.backend), state, literal(row.detail))
    console = cli_console(min_width=120)
    console.print(table)
    console.print(literal(_ort_line()), highlight=False)
    if any(runner_class(s.name).cuda_kernels and s.available for s in statuses):
        console.print(literal("GPU results record clocks and throttling; for stable numbers " + LOCK_HINT),
                      highlight=False)
    if args.json:
        write_json_atomic(args.json, {"version": 1, "runners": [s.to_json() for s in statuses]})
    missing = [s for s in statuses if not s.available]
    if args.names and missing:
        raise RunnerUnavailable(f"runner {missing[0].name!r} is unavailable: {missing[0].detail}")
    return ExitCode.OK
