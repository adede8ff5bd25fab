"""Markdown that perfguard wrote, as plain text for a console or a CI log.

The nightly's summary is Markdown for ``$GITHUB_STEP_SUMMARY``; its names are escaped for GitHub
(:mod:`perfguard.report.escape`: ``2026\\-12\\-04``, ``bert\\_t``, ``&lt;``). Printed as it is,
a CI log showed those escapes. :func:`plain_text` reads the Markdown with a CommonMark parser
(markdown-it-py, which Rich already depends on), so every escape and entity is undone the way
GitHub undoes it, and writes each block as lines: a heading underlined, a list item after ``-``,
a table row's cells joined by `` | ``, emphasis and code fences dropped. A row or paragraph
longer than a CI log's 120 columns continues on indented lines; a heading is never wrapped.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from perfguard.names import visible

if TYPE_CHECKING:
    from markdown_it.token import Token

__all__ = ["plain_text"]

_ZWSP = "\u200b"  # md_text's guard against mentions and autolinks, meaningless off GitHub
_UNDERLINE = {"h1": "=", "h2": "=", "h3": "-"}
#: The longest line written (``perfguard.cli._text.LOG_TABLE_WIDTH``): a longer table row or
#: paragraph continues on indented lines.
WIDTH = 120


def _inline(token: Token) -> str:
    """The text of an inline token: its literal text, code spans' content, breaks as spaces."""
    parts = []
    for child in token.children or ():
        if child.type in ("text", "code_inline", "html_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return visible("".join(parts).replace(_ZWSP, ""))


def _fitted(text: str, first: str = "") -> list[str]:
    """``text`` after ``first`` in lines of at most :data:`WIDTH` characters, the later ones
    indented under the first: a table row or a paragraph too long for a CI log."""
    if len(first) + len(text) <= WIDTH:
        return [first + text]
    indent = " " * (len(first) + 4)
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=indent, break_on_hyphens=False)


def plain_text(markdown: str) -> str:
    """``markdown`` (headings, paragraphs, lists and tables) as plain text lines."""
    from markdown_it import MarkdownIt

    lines: list[str] = []
    heading: str | None = None
    row: list[str] | None = None
    depth = 0
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        kind = token.type
        if kind == "heading_open":
            heading = token.tag
        elif kind in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif kind in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
            if depth == 0:
                lines.append("")
        elif kind == "tr_open":
            row = []
        elif kind == "tr_close" and row is not None:
            lines += _fitted(" | ".join(row))
            row = None
        elif kind == "table_close":
            lines.append("")
        elif kind in ("fence", "code_block"):
            lines += [visible(line) for line in token.content.splitlines()] + [""]
        elif kind == "inline":
            text = _inline(token)
            if row is not None:
                row.append(text)
            elif heading is not None:
                lines += [text, _UNDERLINE.get(heading, "-") * len(text), ""]
                heading = None
            elif depth:
                lines += _fitted(text, "  " * (depth - 1) + "- ")
            else:
                lines += [*_fitted(text), ""]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"
