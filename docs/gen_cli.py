"""MkDocs hook: the reference pages that are generated from the code at build time.

A page holds a marker comment, replaced here by Markdown rendered from the code itself, so the
reference cannot drift from the program (a retyped option table did: the README's once missed
options that the parser had):

``<!-- perfguard:cli -->``
    every command and subcommand of ``perfguard.cli.build_parser()``: usage, description and every
    argument with its default;
``<!-- perfguard:exit-codes -->``
    the table in ``perfguard.exit_codes``'s docstring, checked against the ``ExitCode`` enum;
``<!-- perfguard:schemas -->``
    each JSON Schema shipped in ``perfguard/schemas/``.

Registered in ``mkdocs.yml`` under ``hooks:``; ``exclude_docs`` keeps this file out of the site.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import textwrap
from importlib import resources
from typing import Any

MARKERS = {
    "<!-- perfguard:cli -->": lambda: render_cli(),
    "<!-- perfguard:exit-codes -->": lambda: render_exit_codes(),
    "<!-- perfguard:schemas -->": lambda: render_schemas(),
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    for marker, render in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown


# --- the CLI ---------------------------------------------------------------------------------


def render_cli() -> str:
    # argparse wraps usage lines to the terminal's width: fix it so the page is the same everywhere.
    os.environ["COLUMNS"] = "100"
    from perfguard.cli import build_parser

    out: list[str] = []
    _command(build_parser(), ["perfguard"], "", out)
    return "\n".join(out)


def _command(parser: argparse.ArgumentParser, path: list[str], summary: str, out: list[str]) -> None:
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if len(path) > 1:
        out.append(f"{'#' * min(len(path), 4)} `{' '.join(path)}`\n")
        if summary:
            out.append(f"*{_cell(summary)}*\n")
    out.append(f"```text\n{parser.format_usage().strip()}\n```\n")
    if len(path) > 1 and parser.description:
        out.append(_prose(parser.description) + "\n")
    rows = [_row(parser, action) for action in parser._actions
            if not isinstance(action, (argparse._SubParsersAction, argparse._HelpAction))
            and action.help != argparse.SUPPRESS]
    if rows:
        out.append("| argument | value | default | what it does |\n| --- | --- | --- | --- |")
        out.extend(rows)
        out.append("")
    for sub in subparsers:
        helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
        for name, child in sub.choices.items():
            _command(child, [*path, name], helps.get(name, ""), out)


def _row(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    names = ", ".join(f"`{name}`" for name in action.option_strings) or f"`{action.metavar or action.dest}`"
    value = ""
    if action.option_strings and action.nargs != 0:
        metavar = action.metavar or action.dest.upper()
        value = f"`{metavar if isinstance(metavar, str) else ' '.join(metavar)}`"
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        value = " \\| ".join(f"`{choice}`" for choice in action.choices)
    default = action.default
    hidden = default is None or default is False or default == argparse.SUPPRESS or action.nargs == 0
    shown = "" if hidden else f"`{default}`"
    helptext = parser._get_formatter()._expand_help(action) if action.help else ""
    return f"| {names} | {value} | {shown} | {_cell(helptext)} |"


def _cell(text: str) -> str:
    """One table cell: a single line, ``|`` escaped, HTML's ``<`` and ``>`` shown as text outside
    code spans (a help text's ``<ref>`` is no tag)."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;")
                   for p in parts).replace("|", "\\|")


def _prose(docstring: str) -> str:
    """A module docstring as Markdown: a paragraph indented under the text (command examples) as
    a code block, the others as paragraphs where RST's double backticks read as code spans."""
    out = []
    for block in re.split(r"\n\s*\n", inspect.cleandoc(docstring)):
        lines = block.splitlines()
        if lines and all(line.startswith(" ") for line in lines):
            out.append("```text\n" + textwrap.dedent(block) + "\n```")
        elif block.strip():
            out.append(_cell(block).replace("\\|", "|"))
    return "\n\n".join(out)


# --- exit codes ------------------------------------------------------------------------------


def render_exit_codes() -> str:
    from perfguard import exit_codes

    rows: list[list[str]] = []
    for line in (exit_codes.__doc__ or "").splitlines():
        head = re.match(r"^\s*(\d+)\s+``(\w+)``\s+(.*)$", line)
        if head:
            rows.append([head.group(1), head.group(2), head.group(3)])
        elif rows and line.startswith(" " * 20) and line.strip() and not line.strip().startswith("="):
            rows[-1][2] += " " + line.strip()
    members = {name: int(code) for name, code in exit_codes.ExitCode.__members__.items()}
    documented = {name: int(code) for code, name, _ in rows}
    canonical = {code.name: int(code) for code in exit_codes.ExitCode}
    if documented != canonical:  # the docstring's table and the enum say the same, or no site
        raise ValueError(f"perfguard/exit_codes.py: docstring table {documented} != ExitCode {canonical}")
    out = ["| code | name | meaning |", "| --- | --- | --- |"]
    out += [f"| {code} | `{name}` | {_cell(meaning.replace('``', '`'))} |" for code, name, meaning in rows]
    aliases = [f"`{name}` = {value}" for name, value in members.items() if name not in canonical]
    out.append(f"\nAliases, named for the command that gives the number its meaning: {', '.join(aliases)}.")
    return "\n".join(out) + "\n"


# --- schemas ---------------------------------------------------------------------------------


def render_schemas() -> str:
    out: list[str] = []
    folder = resources.files("perfguard.schemas")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".schema.json"):
            continue
        schema = json.loads(entry.read_text())
        out.append(f"### `{entry.name}`\n")
        out.append(f"{schema.get('title', '')} (`$id` `{schema.get('$id', '')}`).\n")
        required = set(schema.get("required", []))
        out.append("| field | type | required |\n| --- | --- | --- |")
        for name, spec in schema.get("properties", {}).items():
            kind = spec.get("type") or ("const " + json.dumps(spec["const"]) if "const" in spec else "see schema")
            out.append(f"| `{name}` | {_cell(str(kind))} | {'yes' if name in required else ''} |")
        out.append('\n??? note "The whole schema"\n\n    ```json\n'
                   + "\n".join("    " + line for line in json.dumps(schema, indent=2).splitlines())
                   + "\n    ```\n")
    return "\n".join(out)
