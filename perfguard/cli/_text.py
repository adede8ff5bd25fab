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


def literal(value: object, style: str = "", *, keep_newlines: bool = False) -> Text:
    """``value`` as Rich shows it literally: no markup, no emoji codes, control characters and
    bidi marks written as escapes (``perfguard.names.visible``), in ``style``. A word too long for
    its table column is folded onto the next line, never cut to ``…``: a case id cut short names
    no case."""
    from rich.text import Text

    return Text(visible(str(value), keep_newlines=keep_newlines), style=style, overflow="fold")


def cli_console(*, stderr: bool = False, min_width: int = 0) -> Console:
    """The Rich console a command prints on (stdout, or stderr): ``COLUMNS`` wide when it is set; on
    a terminal its width, at least ``min_width``; off a terminal :data:`LOG_WIDTH`, so no table row
    or progress line wraps in a CI log or a file."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return Console(file=stream, width=int(columns))
    probe = Console(file=stream)
    return Console(file=stream, width=max(min_width, probe.width) if probe.is_terminal else LOG_WIDTH)
