"""Text from documents as data in GitHub's Markdown and in workflow commands.

Names (models, pipelines, runners, case ids, passes, suites), commit subjects, reasons and notes
come from documents anyone can write, and GitHub renders Markdown *and* HTML in job summaries
and pull-request comments. Every such string enters a Markdown output through :func:`md_text` or
:func:`md_code`, a workflow command through :func:`command_data` or :func:`command_property`, and
an HTML or XML page through :func:`html_value`:

* :func:`md_text` - a paragraph, list item or table cell: whitespace (newlines included) becomes
  one space, so a row or item cannot end early; ``|`` and Markdown punctuation are
  backslash-escaped, so a cell cannot split and nothing formats or links; ``<``, ``>`` and ``&``
  are entities, so no HTML is injected; a zero-width space after ``@``, ``#`` and the ``GH`` of
  ``GH-123`` and inside ``://`` and ``www.`` keeps GitHub from making a mention, an issue reference or an autolink;
  control characters, bidi controls and lone surrogates are shown as escapes
  (:func:`perfguard.names.visible`).
* :func:`md_code` - a code span whose fence is longer than any run of backticks in the value
  (nothing inside a code span formats, links or mentions); a value with ``|`` falls back to
  :func:`md_text`, because a pipe inside a code span still splits a table cell and its escape
  shows outside tables.
* :func:`command_data` and :func:`command_property` - the escaping GitHub's workflow-command
  parser expects (``%``, ``\\r``, ``\\n`` as ``%25``, ``%0D``, ``%0A``; in properties also ``:``
  and ``,``), so a newline in a case name cannot start a command of its own; other control and
  bidi characters are shown as escapes, as on a terminal.
* :func:`html_value` - the ``finalize`` of the report's and the history site's Jinja environments,
  which autoescape ``<``, ``&`` and quotes: a string also has its control characters, bidi
  controls and lone surrogates shown as escapes (newlines stay), since XML (the Atom feed, SVG
  read as XML) forbids most control characters even escaped, a lone surrogate cannot be written
  as UTF-8, and a bidi override would reorder the text around it.
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup

from perfguard.names import visible

_BACKSLASHED = frozenset("\\`*_[]|~")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_ZWSP = "\u200b"
# Where GitHub would make a mention (@user), a reference (#123, GH-123, owner/repo#123) or an
# autolink (https://..., www....): a zero-width space goes right after the match.
_LINK_TRIGGER = re.compile(r"[@#]|:(?=//)|(?i:www(?=\.)|gh(?=-\d))")
# A block marker at the start of a list item (``- 1. x``, ``- - x``, ``- + x``, ``- = x``) would
# nest a list or make a heading: its punctuation is escaped wherever the text starts.
_LEADING_BLOCK = re.compile(r"^(\d*)([-+=.)])")
_BACKTICKS = re.compile(r"`+")
# The characters :func:`perfguard.names.visible` escapes (categories Cc, Cs, Zl, Zp and the bidi
# controls), newline aside: one regex search lets the pages' many plain values through at C speed
# (0.2 us instead of 6 us for a 28-character case id; the history site writes hundreds of
# thousands of values). tests/test_hostile_markdown.py checks it against ``visible``.
_HIDDEN_IN_HTML = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u061c\u200e\u200f"
                             "\u202a-\u202e\u2066-\u2069]")


def _one_line(value: object, limit: int | None = None) -> str:
    text = " ".join(str(value).split())  # newlines, tabs, U+2028... become single spaces
    if limit is not None and len(text) > limit:
        text = text[:max(limit - 1, 0)] + "…"  # cut before escaping, so no escape is cut in half
    return visible(text)


def md_text(value: object, limit: int | None = None) -> str:
    """``value`` as literal text in a Markdown paragraph, list item or table cell: one line, no
    formatting, HTML, link, mention or reference (see the module docstring); at most ``limit``
    characters of the original text (an ellipsis marks a cut)."""
    text = _LINK_TRIGGER.sub(lambda m: m.group(0) + _ZWSP, _one_line(value, limit))
    escaped = "".join("\\" + c if c in _BACKSLASHED else _ENTITIES.get(c, c) for c in text)
    return _LEADING_BLOCK.sub(r"\1\\\2", escaped, count=1)


def md_code(value: object) -> str:
    """``value`` as a code span, literally (one line; a fence longer than its longest backtick
    run); a value that is empty or holds ``|`` goes through :func:`md_text` instead."""
    text = _one_line(value)
    if not text or "|" in text:
        return md_text(text)
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    # A span that starts or ends with a backtick needs a space on both sides (CommonMark strips
    # one space at each end when both are there).
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def command_data(text: str) -> str:
    """The message of a workflow command (``::error ...::MESSAGE``), one line whatever it holds."""
    return visible(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def command_property(text: str) -> str:
    """A property value of a workflow command (``title=VALUE``)."""
    return command_data(text).replace(":", "%3A").replace(",", "%2C")


def html_value(value: Any) -> Any:
    """A value about to be written into an HTML or XML template: a plain string with its hidden
    characters shown as escapes (newlines kept); ``Markup`` (perfguard's own charts, style and
    script) and anything else as it is."""
    if isinstance(value, str) and not isinstance(value, Markup) and _HIDDEN_IN_HTML.search(value):
        return visible(value, keep_newlines=True)
    return value
