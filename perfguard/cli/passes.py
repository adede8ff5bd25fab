"""List the pass names a pipeline of a backend may use."""

from __future__ import annotations

import argparse

from perfguard.exit_codes import ExitCode

HELP = "list the passes a pipeline may name"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", default="ort", help="backend name (default: ort)")


def run(args: argparse.Namespace) -> ExitCode:
    from rich.table import Table

    from perfguard.backends import get_backend
    from perfguard.cli._text import cli_console, literal

    backend = get_backend(args.backend)
    table = Table(title=literal(f"passes of backend {args.backend!r}"))
    table.add_column("pass")
    table.add_column("source")
    table.add_column("what it does")
    for info in backend.list_passes():
        table.add_row(literal(info.name), literal(info.source), literal(info.summary))
    console = cli_console(min_width=120)
    console.print(table)
    if backend.capabilities.user_passes:
        console.print("A pipeline may also name a user pass as package.module:function "
                      f"({backend.user_pass_signature}).")
    return ExitCode.OK
