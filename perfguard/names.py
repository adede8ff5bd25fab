"""Names are data: what a suite may call a model, pipeline or runner, how any name is shown on a
terminal, and the file name made from it.

Names reach perfguard from suites (checked here when the suite is read) and from documents that
other tools or other machines wrote (result files, pytest-benchmark and asv imports, artifact
manifests), which are shown and stored as they are. So every name is treated as hostile where it
meets a terminal or a file system, whichever way it came in:

* :func:`name_problem` is the suite rule. A case id joins the names with ``/`` and models are
  written as ``<name>.onnx``, so a path separator, ``.`` or ``..``, a control character, an empty
  name or one past :data:`MAX_NAME_LENGTH` is refused. Brackets (pytest ids such as
  ``test_sum[float32]``), ``:`` (``npu:<provider>``), spaces and bidi marks (needed to write some
  scripts) stay valid: they are only shown, and :func:`visible` shows them safely.
* :func:`visible` is how a name is printed: control characters, line and paragraph separators and
  bidi controls are written as escapes (``\\n``, ``\\x1b``, ``\\u202e``), so a name can neither
  break a table's lines, move the cursor, nor reorder the text around it.
* :func:`safe_filename` is the one place a file name is made from a name.
* :class:`CaseId` is the one place a case id is made from its three names and taken apart.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

#: The longest model, pipeline or runner name a suite may use (a case id joins three of them and
#: becomes part of file names, which most file systems cap at 255 bytes).
MAX_NAME_LENGTH = 200

#: The longest file name :func:`safe_filename` returns, leaving room for a suffix and a
#: timestamp within the 255 bytes most file systems allow.
MAX_FILENAME_LENGTH = 100

# Bidi controls: the marks (LRM, RLM, ALM), embeddings and overrides (U+202A-U+202E) and isolates
# (U+2066-U+2069). Unescaped they reorder what follows them on the line ("Trojan Source").
_BIDI = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)})
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Characters kept in file names: portable on every file system and harmless in a shell.
_UNSAFE_IN_FILENAME = re.compile(r"[^A-Za-z0-9._+=@,-]")
# Device names Windows reserves in any folder, with any extension.
_RESERVED = re.compile(r"(?i)(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?")


def _hidden(char: str) -> bool:
    """A character that changes how a line is laid out instead of showing a glyph, or one a
    terminal cannot be sent at all (a lone surrogate from a JSON ``\\ud800`` fails to encode)."""
    return unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp") or ord(char) in _BIDI


def _escape(char: str) -> str:
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every control character, line or paragraph separator and bidi control
    written as an escape (``\\n``, ``\\x1b``, ``\\u202e``); other text, backslashes included, is
    left as it is. ``keep_newlines``: ``\\n`` stays a line break (a log message of several lines).
    """
    if not any(_hidden(c) for c in text):
        return text
    return "".join(_escape(c) if _hidden(c) and not (keep_newlines and c == "\n") else c for c in text)


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a model, pipeline or runner of a suite, or None when it can
    (see the module docstring for the rule and its reasons)."""
    if not name:
        return "is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"is {len(name)} characters long; at most {MAX_NAME_LENGTH}"
    if "/" in name or "\\" in name:
        return "contains a path separator ('/' or '\\'); case ids join names with '/'"
    if name in (".", ".."):
        return "is a path component ('.' or '..')"
    hidden = next((c for c in name if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")), None)
    if hidden is not None:
        return f"contains the control character {_escape(hidden)!r}"
    return None


def safe_filename(name: str) -> str:
    """A file name made from ``name`` that stays inside whatever folder it is joined to.

    A name made only of ASCII letters, digits and ``._+=@,-`` that does not start with ``.`` and
    fits :data:`MAX_FILENAME_LENGTH` is returned as it is (``resnet_s`` stays ``resnet_s``). Any
    other name has each other character replaced by ``_``, a leading ``.`` by ``_``, is cut to
    length, and gets ``-`` and 8 hex digits of its SHA-256, so that two names that read alike
    (``a/b``, ``a b``) still name two files. Never empty, never ``.`` or ``..``, never a path
    separator, never a device name Windows reserves.
    """
    if (name and not _UNSAFE_IN_FILENAME.search(name) and not name.startswith(".")
            and len(name) <= MAX_FILENAME_LENGTH and not _RESERVED.fullmatch(name)):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    stem = _UNSAFE_IN_FILENAME.sub("_", name)
    if stem.startswith("."):
        stem = "_" + stem[1:]
    stem = stem[:MAX_FILENAME_LENGTH - 9] or "_"
    return f"{stem}-{digest}"


@dataclass(frozen=True)
class CaseId:
    """The id of a suite's case, ``model/pipeline/runner``: the one place it is made
    (``str(case_id)``) and taken apart (:meth:`parse`).

    A suite's names hold no ``/`` (:func:`name_problem`), so a suite case's id has exactly three
    non-empty parts. Ids that other tools' documents carry (a pytest node id with its path, an asv
    benchmark) are not case ids, even when they hold ``/``: :meth:`parse` returns None for any text
    that is not three non-empty parts, and a caller that knows where an id came from (a series of
    an imported benchmark has no model) does not parse it at all."""

    model: str
    pipeline: str
    runner: str

    def __str__(self) -> str:
        return f"{self.model}/{self.pipeline}/{self.runner}"

    @classmethod
    def parse(cls, text: str) -> CaseId | None:
        """The case id ``text`` names, or None when it is not ``model/pipeline/runner``."""
        parts = text.split("/")
        if len(parts) != 3 or not all(parts):
            return None
        return cls(parts[0], parts[1], parts[2])

    def with_pipeline(self, pipeline: str) -> CaseId:
        """The id of the same model on the same runner through ``pipeline``."""
        return CaseId(self.model, pipeline, self.runner)
