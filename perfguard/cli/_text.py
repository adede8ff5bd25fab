"""User data in Rich output: every name, message and reason a command prints in a table, a title
or a progress line goes through :func:`literal`.

A ``str`` handed to Rich is markup: ``[/x]`` in a name raised ``MarkupError`` (exit 70),
``test_sum[float32]`` lost ``[float32]``, and ``:fire:`` became an emoji. A ``Text`` is never
parsed, so names are passed as ``Text``; the markup perfguard writes itself (badges such as
``[bold red]REGRESSION[/]``) stays a ``str``. Imported inside the commands' ``run`` only, like
Rich itself (``tests/test_cli_startup.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfguard.names import visible

if TYPE_CHECKING:
    from rich.text import Text


def literal(value: object, style: str = "", *, keep_newlines: bool = False) -> Text:
    """``value`` as Rich shows it literally: no markup, no emoji codes, control characters and
    bidi marks written as escapes (``perfguard.names.visible``), in ``style``. A word too long for
    its table column is folded onto the next line, never cut to ``…``: a case id cut short names
    no case."""
    from rich.text import Text

    return Text(visible(str(value), keep_newlines=keep_newlines), style=style, overflow="fold")
