"""The JSON reader every perfguard document goes through (:func:`parse_json`): bounded in depth
before parsing, finite numbers, integers within 2**63, no half surrogate pairs; a refused value
is a one-line ``StorageError`` naming the file. Low in the layers (it needs only ``errors``), so
every package that reads JSON a user or a cache can hand it (models' descriptors, the artifact
cache, the store, notify's answers) reads it the same way; ``perfguard.results.documents``
re-exports it for the document readers.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from perfguard.errors import RefusedValue, StorageError

#: How deep a document may nest objects and lists. perfguard's own documents nest about 8 deep;
#: Python's JSON reader and everything that walks a document (the schema check, ``to_json``)
#: recurse, so 100,000 brackets would end in a ``RecursionError`` far from the file's name.
MAX_DEPTH = 100

#: The largest integer magnitude a document may hold: a count or a size beyond 2**63 means
#: nothing, and converting it to a float for a statistic raises ``OverflowError``.
MAX_INTEGER = 2**63

# A JSON string (escapes included), removed before brackets are counted; unrolled so that
# ``re`` scans a long string without backtracking.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _refuse_constant(token: str) -> NoReturn:
    raise RefusedValue(f"{token} is not a number (JSON has no NaN or Infinity; write a finite number)")


def _finite_float(token: str) -> float:
    value = float(token)
    if math.isinf(value):
        raise RefusedValue(f"{token} is too large for a number (it overflows to infinity)")
    return value


def _too_large(token: str) -> bool:
    # The length test first: int() of 5,000 digits would raise Python's own int-string limit.
    return len(token.lstrip("-")) > 19 or abs(int(token)) > MAX_INTEGER


def _bounded_int(token: str) -> int:
    if _too_large(token):
        shown = token if len(token) <= 24 else f"{token[:12]}...({len(token)} digits)"
        raise RefusedValue(f"{shown} is too large an integer (beyond 2**63)")
    return int(token)


def _nesting(text: str) -> int:
    """How deep ``text`` nests its brackets outside strings, counted without recursion."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0  # too few brackets to be too deep: the common case costs two counts
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(itertools.accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


class _Bad:
    """Where a refused value stood, when the document is parsed again to name its field."""

    def __init__(self, token: str) -> None:
        self.token = token


def _bad_token(token: str) -> _Bad:
    return _Bad(token)


def _first(data: object, refused: Callable[[object], bool]) -> str | None:
    """The path (``cases[0].metrics.node_count``) of the first value in ``data`` that is
    ``refused`` (a key counts as a value), or None."""
    stack: list[tuple[str, object]] = [("", data)]
    while stack:  # depth-first, in document order, without recursion
        path, value = stack.pop()
        if refused(value):
            return path or "(top)"
        if isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                where = f"{path}.{key}" if path else str(key)
                if refused(key):
                    return where
                stack.append((where, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return None


def _where(text: str, finite: bool) -> str:
    """The path of the first refused number in ``text``, or ""."""
    try:
        data = json.loads(text, parse_int=lambda t: _Bad(t) if _too_large(t) else int(t),
                          parse_float=lambda t: _Bad(t) if math.isinf(float(t)) else float(t),
                          parse_constant=_bad_token if finite else float)
    except (ValueError, RecursionError):
        return ""
    return _first(data, lambda value: isinstance(value, _Bad)) or ""


# A \uD800-\uDFFF escape: JSON may spell half of a UTF-16 pair alone, which no UTF-8 file, HTML
# report or history store can hold. Where the text has none (most documents), nothing is walked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _not_text(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_json(text: str, path: str | Path, *, finite: bool = True) -> object:
    """The JSON value of ``text`` (the content of ``path``) as every document reader takes it:
    no ``NaN``/``Infinity``/``-Infinity`` (``finite=False`` accepts them: asv and pytest-benchmark
    write them), no number that overflows a float (``1e400``), no integer beyond 2**63, no
    nesting deeper than ``MAX_DEPTH``, no string with half a UTF-16 surrogate pair. A refused
    value is a one-line ``StorageError`` naming the file and the field; text that is not JSON
    raises ``ValueError`` for the caller to word."""
    if _nesting(text) > MAX_DEPTH:
        raise StorageError(f"{path}: nested deeper than {MAX_DEPTH} levels; not a document perfguard reads")
    try:
        data = json.loads(text, parse_int=_bounded_int, parse_float=_finite_float if finite else float,
                          parse_constant=_refuse_constant if finite else float)
    except RefusedValue as exc:
        where = _where(text, finite)
        raise StorageError(f"{path}: {where + ': ' if where else ''}{exc}") from None
    except RecursionError:  # deeper than the interpreter allows though the brackets looked shallow
        raise StorageError(f"{path}: nested deeper than {MAX_DEPTH} levels; not a document perfguard reads") from None
    if _SURROGATE_ESCAPE.search(text):
        half = _first(data, _not_text)
        if half is not None:
            raise StorageError(f"{path}: {half}: a string holds half of a UTF-16 surrogate pair (\\uD800-\\uDFFF "
                               "alone), which is not text")
    return data
