"""What every persisted document shares: the JSON reader with one-line errors, the shipped JSON
Schemas, the atomic writers (sorted keys), the output-path check and UTC time stamps.

The documents themselves are owned by one module each: ``perfguard.results.result`` (result),
``perfguard.compare.verdicts`` (verdicts), ``perfguard.results.artifacts`` (manifest),
``perfguard.bisect`` (bisection state and result).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from perfguard.atomic import write_atomic, write_json_atomic as write_json_atomic
from perfguard.errors import RefusedValue, StorageError
from perfguard.jsonfields import JsonDict

T = TypeVar("T")

def utc_now() -> str:
    """The time stamp of result documents: UTC, ISO 8601, microseconds, ``Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# The one atomic writer lives in perfguard.atomic (no numpy, so workers use it cheaply); these
# are the names the writers of documents and reports import.
write_text_atomic = write_atomic


def check_writable(path: str | Path, option: str, *, directory: bool = False) -> None:
    """Refuse, before any work, an output path that cannot be written: ``UserError`` naming the
    option and the path. ``path`` is a file (``directory=False``) or a folder to create or fill.

    Nothing is left behind: the nearest existing folder is probed with a temporary file that is
    removed at once. A full disk cannot be foreseen; :func:`write_text_atomic` reports that."""
    from perfguard.errors import UserError

    path = Path(path)

    def refuse(reason: str) -> UserError:
        return UserError(f"{option} {path} is not writable: {reason}")

    if path.exists():
        if directory and not path.is_dir():
            raise refuse("it is a file, not a folder")
        if not directory and path.is_dir():
            raise refuse("it is a folder, not a file")
        if not directory and not path.is_file():  # a pipe or a device: written in place
            if not os.access(path, os.W_OK):
                raise refuse("permission denied")
            return
    if not directory and path.is_symlink():
        path = path.resolve()
    folder = path if directory else path.parent
    folder = folder if str(folder) else Path(".")
    while not folder.exists():
        if folder.is_symlink():  # a dangling link: mkdir would fail on it
            raise refuse(f"{folder} is a broken symbolic link")
        folder = folder.parent
    if not folder.is_dir():
        raise refuse(f"{folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".perfguard-write-probe-", dir=folder)
    except OSError as exc:
        raise refuse(f"cannot create a file in {folder} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)


#: The current format version of each document with a shipped schema (``<name>-v<N>.schema.json``).
SCHEMA_VERSIONS = {"result": 2, "verdicts": 2}


@cache
def load_schema(name: str = "result") -> dict[str, Any]:  # a JSON Schema: jsonschema's input
    """The shipped JSON Schema of the current version of ``result`` or ``verdicts``."""
    text = resources.files("perfguard.schemas").joinpath(f"{name}-v{SCHEMA_VERSIONS[name]}.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def schema_errors(document: object, name: str = "result") -> list[str]:
    """Every schema violation as 'path: message' (empty when valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(load_schema(name))
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}" for e in errors]


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


def read_json(path: Path, *, missing: str, not_json: str, unreadable: str = "{path}: cannot read: {exc}",
              finite: bool = True) -> object:
    """The JSON value of a document file, every failure a one-line ``StorageError``.

    The messages are templates with ``{path}`` and ``{exc}``: ``missing`` when the file does not
    exist, ``unreadable`` for another read error (not UTF-8 included), ``not_json`` when the text
    is not JSON. Numbers and nesting are checked as :func:`parse_json` does (``finite``). The one
    reader of every document a user hands perfguard: result, verdicts, bisect, tune, manifest,
    pytest-benchmark and asv files; each then checks its own kind and version."""
    def message(template: str, exc: BaseException | str = "") -> str:
        # Plain substitution, not str.format: a path may hold braces.
        return template.replace("{path}", str(path)).replace("{exc}", str(exc))

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StorageError(message(missing)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(message(unreadable, exc)) from None
    try:
        return parse_json(text, path, finite=finite)
    except StorageError:
        raise
    except ValueError as exc:
        raise StorageError(message(not_json, exc)) from None


#: The kinds :func:`document_kind` tells apart.
DOCUMENT_KINDS = ("result", "verdicts", "bisect", "tune", "manifest", "bisect-state")


def document_kind(data: object) -> str | None:
    """Which perfguard file ``data`` (a parsed JSON value) is: one of ``DOCUMENT_KINDS``, or None.

    The one set of rules for every reader (the report, the history's ingest, export): bisect and
    tune documents name their ``kind``; the others are told by their keys. A manifest has
    ``cases`` and ``suite`` like a result, so a result is told by ``finished_at`` (or, written by
    hand, by having no ``created_at``). The version is not checked here: each kind's loader
    (:func:`current_format`) refuses a missing or newer one with its own message."""
    if not isinstance(data, dict):
        return None
    if data.get("kind") in ("bisect", "tune"):
        return str(data["kind"])
    if "verdicts" in data and "results" in data:
        return "verdicts"
    if {"header", "order", "probes"} <= data.keys():
        return "bisect-state"
    if "cases" in data and ("finished_at" in data or ("suite" in data and "created_at" not in data)):
        return "result"
    if "cases" in data and "created_at" in data:
        return "manifest"
    return None


def current_format(data: object, path: str | Path, *, kind: str, title: str, version: int,
                   migrations: Mapping[int, Callable[[JsonDict], JsonDict]],
                   newer_hint: str = "") -> JsonDict:
    """The JSON object ``data`` of a versioned document (``kind`` in messages, ``title`` what it
    is, e.g. "perfguard result") at format ``version``: refuses a value that is not such a
    document and a newer version ("upgrade perfguard", then ``newer_hint``), and migrates an older
    one step by step (``migrations[n]`` turns version n into n + 1). Every failure is a one-line
    ``StorageError``. The one loader of every perfguard document kind (result, verdicts, manifest,
    bisect, bisection state, tune); the history store's own schema revisions are the store's."""
    found = data.get("version") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(found, int) or isinstance(found, bool):
        raise StorageError(f"{path}: not a {title} (no integer 'version')")
    if found > version:
        raise StorageError(f"{path}: {kind} format version {found} is newer than this perfguard reads "
                           f"({version}); upgrade perfguard{newer_hint}")
    current: JsonDict = data
    while found < version:
        if found not in migrations:  # older than the first format (hand-edited): nothing to migrate from
            raise StorageError(f"{path}: not a {title} ({kind} format version {found} never existed)")
        current = migrations[found](current)
        found += 1  # each migration writes the next version
    return current


def typed_document(data: JsonDict, path: str | Path, parse: Callable[[JsonDict], T], *,
                   corrupt: str, schemas: Mapping[str, tuple[str, object]] = {}) -> T:
    """``parse(data)`` after checking each ``schemas`` entry (label -> (schema name, JSON value)),
    with every failure one line: ``{path}: corrupt {corrupt}: ...``."""
    from perfguard.errors import FieldError

    for label, (schema, value) in schemas.items():
        errors = schema_errors(value, schema)
        if errors:
            raise StorageError(f"{path}: corrupt {label}: {errors[0]}")
    try:
        return parse(data)
    except (FieldError, TypeError) as exc:  # TypeError: an object that is not what its field holds
        raise StorageError(f"{path}: corrupt {corrupt}: {exc}") from None
