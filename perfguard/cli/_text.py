"""User data in Rich output: every name, message and reason a command prints in a table, a title
or a progress line goes through :func:`literal`.

A ``str`` handed to Rich is markup: ``[/x]`` in a name raised ``MarkupError`` (exit 70),
``test_sum[float32]`` lost ``[float32]``, and ``:fire:`` became an emoji. A ``Text`` is never
parsed, so names are passed as ``Text``; the markup perfguard writes itself (badges such as
``[bold red]REGRESSION[/]``) stays a ``str``. Imported inside the commands' ``run`` only, like
Rich itself (``tests/test_cli_startup.py``).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from perfguard.names import visible

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

#: The width of a console that is not a terminal and has no ``COLUMNS``: CI logs (GitHub Actions'
#: are not terminals) and files scroll sideways, and Rich's default of 80 columns wrapped table
#: rows mid-hash (``da70fe1a79..183705`` / ``3d1d``). Tables take their natural width, not this.
LOG_WIDTH = 10_000
#: The widest a verdict, history or alert table may be off a terminal with no ``COLUMNS`` (issue 43:
#: 178-column tables and 408-character lines in a GitHub log). Its cells fold inside their
#: columns; long reasons go on their own lines under the table; titles are lines of their own.
LOG_TABLE_WIDTH = 120


def literal(value: object, style: str = "", *, keep_newlines: bool = False) -> Text:
    """``value`` as Rich shows it literally: no markup, no emoji codes, control characters and
    bidi marks written as escapes (``perfguard.names.visible``), in ``style``. A word too long for
    its table column is folded onto the next line, never cut to ``…``: a case id cut short names
    no case."""
    from rich.text import Text

    return Text(visible(str(value), keep_newlines=keep_newlines), style=style, overflow="fold")


def cli_console(*, stderr: bool = False, min_width: int = 0, log_width: int = LOG_WIDTH) -> Console:
    """The Rich console a command prints on (stdout, or stderr): ``COLUMNS`` wide when it is set; on
    a terminal its width, at least ``min_width``; off a terminal ``log_width``: by default
    :data:`LOG_WIDTH`, so no table row or progress line wraps in a CI log or a file, or
    :data:`LOG_TABLE_WIDTH` for a command whose tables fold to fit a log."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return Console(file=stream, width=int(columns))
    probe = Console(file=stream)
    return Console(file=stream, width=max(min_width, probe.width) if probe.is_terminal else log_width)


def print_title(console: Console, title: str) -> None:
    """A table's title as a line of its own: never wrapped, never centred or padded to the table's
    width (Rich's table titles were both in a CI log)."""
    console.print(literal(title, "bold"), soft_wrap=True, highlight=False)


def print_wrapped(console: Console, line: str, first: Text | None = None) -> None:
    """``line`` as lines of at most the console's width (off a terminal with no ``COLUMNS``,
    :data:`LOG_TABLE_WIDTH` for the commands whose tables fold), the ones after the first
    indented, a word split only when it is longer than a line. ``first``: a styled prefix
    (``warning:``) in place of the line's first characters."""
    import textwrap

    from rich.text import Text

    parts = textwrap.wrap(line, console.width, subsequent_indent="    ", break_on_hyphens=False)
    for index, part in enumerate(parts or [""]):
        text = literal(part)
        if index == 0 and first is not None and part.startswith(first.plain):
            text = Text.assemble(first, literal(part[len(first.plain):]))
        console.print(text, soft_wrap=True, highlight=False)
