"""What every persisted document shares: the JSON reader with one-line errors, the shipped JSON
Schemas, the atomic writers (sorted keys), the output-path check and UTC time stamps.

The documents themselves are owned by one module each: ``perfguard.results.result`` (result),
``perfguard.compare.verdicts`` (verdicts), ``perfguard.results.artifacts`` (manifest),
``perfguard.bisect`` (bisection state and result).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from perfguard.atomic import write_atomic, write_json_atomic as write_json_atomic
from perfguard.errors import StorageError
from perfguard.jsonfields import JsonDict
from perfguard.jsonparse import MAX_DEPTH as MAX_DEPTH, MAX_INTEGER as MAX_INTEGER, parse_json as parse_json

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
