"""List the runners this machine can serve, and why the others are unavailable.

With RUNNER names, checks only those and exits with code 2 when one is unavailable (useful as a
guard at the top of a CI job: ``perfguard runners cuda``).
"""

from __future__ import annotations

import argparse
import sys

from perfguard.exit_codes import ExitCode

HELP = "list the runners (cpu, cuda, npu:<provider>) this machine can serve"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", metavar="RUNNER",
                        help="runners to check (default: cpu, cuda and every known npu provider)")
    parser.add_argument("--json", metavar="PATH", help="also write the statuses as JSON to PATH")


def _ort_line() -> str:
    try:
        import onnxruntime
    except ImportError as exc:
        return f"onnxruntime: not importable ({exc})"
    return f"onnxruntime {onnxruntime.__version__} providers: {', '.join(onnxruntime.get_available_providers())}"


def run(args: argparse.Namespace) -> ExitCode:
    from rich.console import Console
    from rich.table import Table

    from perfguard.cli._text import literal
    from perfguard.errors import RunnerUnavailable
    from perfguard.results import write_json_atomic
    from perfguard.runners import runner_status
    from perfguard.runners.telemetry import LOCK_HINT

    if args.json:
        from perfguard.results import check_writable

        check_writable(args.json, "--json")
    statuses = runner_status(list(args.names) or None)
    table = Table(title="perfguard runners on this machine")
    table.add_column("runner")
    table.add_column("status")
    table.add_column("device, or why not")
    for status in statuses:
        state = "[green]available[/green]" if status.available else "[red]unavailable[/red]"
        table.add_row(literal(status.name), state, literal(status.detail))
    console = Console(file=sys.stdout, width=max(120, Console().width))
    console.print(table)
    console.print(literal(_ort_line()), highlight=False)
    if any(s.name == "cuda" and s.available for s in statuses):
        console.print(literal("GPU results record clocks and throttling; for stable numbers " + LOCK_HINT),
                      highlight=False)
    if args.json:
        write_json_atomic(args.json, {"version": 1, "runners": [s.to_json() for s in statuses]})
    missing = [s for s in statuses if not s.available]
    if args.names and missing:
        raise RunnerUnavailable(f"runner {missing[0].name!r} is unavailable: {missing[0].detail}")
    return ExitCode.OK
