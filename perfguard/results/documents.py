"""The result document: one versioned JSON file per run, validated by a shipped JSON Schema.

Format history (``RESULT_VERSION``):

1. First format: suite, environment per runner, and per case its full key (model hash, pipeline
   name + ordered passes + hash, backend and settings, runner fingerprint hash), pass trace,
   correctness check, raw latency values per worker process, and summary metrics.

Readers refuse a newer version ("upgrade perfguard") and migrate older ones step by step
(``_MIGRATIONS[n]`` turns version n into n + 1). Files are written with sorted keys, atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from perfguard.atomic import write_atomic
from perfguard.atomic import write_json_atomic as write_json_atomic
from perfguard.errors import StorageError

RESULT_VERSION = 1
_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def utc_now() -> str:
    """The time stamp of result documents: UTC, ISO 8601, microseconds, ``Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def summarize(values: Sequence[float]) -> dict[str, float | int]:
    """Median, mean, spread and percentiles of raw values (all values are kept elsewhere)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return {"n": 0}
    p10, p25, median, p75, p90, p99 = np.percentile(data, [10, 25, 50, 75, 90, 99])
    mean = float(data.mean())
    stdev = float(data.std(ddof=1)) if data.size > 1 else 0.0
    return {"n": int(data.size), "median": float(median), "mean": mean, "stdev": stdev,
            "cv": stdev / mean if mean > 0 else 0.0, "min": float(data.min()), "max": float(data.max()),
            "p10": float(p10), "p25": float(p25), "p75": float(p75), "p90": float(p90), "p99": float(p99)}


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


@cache
def load_schema(name: str = "result") -> dict[str, Any]:
    """The shipped JSON Schema ``result`` or ``verdicts`` (version 1 of each)."""
    text = resources.files("perfguard.schemas").joinpath(f"{name}-v1.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def schema_errors(document: Any, name: str = "result") -> list[str]:
    """Every schema violation as 'path: message' (empty when valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(load_schema(name))
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}" for e in errors]


def read_json(path: Path, *, missing: str, not_json: str, unreadable: str = "{path}: cannot read: {exc}") -> Any:
    """The JSON value of a document file, every failure a one-line ``StorageError``.

    The messages are templates with ``{path}`` and ``{exc}``: ``missing`` when the file does not
    exist, ``unreadable`` for another read error, ``not_json`` when the text is not JSON. The one
    reader of result, verdicts, bisect and manifest files; each then checks its own kind and version."""
    def message(template: str, exc: BaseException | str = "") -> str:
        # Plain substitution, not str.format: a path may hold braces.
        return template.replace("{path}", str(path)).replace("{exc}", str(exc))

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StorageError(message(missing)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(message(unreadable, exc)) from None
    except ValueError as exc:
        raise StorageError(message(not_json, exc)) from None


def load_result(path: str | Path) -> dict[str, Any]:
    """Read a result file: refuse newer versions, migrate older ones, validate against the schema."""
    path = Path(path)
    document = read_json(path, missing="{path}: result file not found",
                         not_json="{path}: corrupt result file (not JSON: {exc}); re-run perfguard run")
    if not isinstance(document, dict) or not isinstance(document.get("version"), int):
        raise StorageError(f"{path}: not a perfguard result (no integer 'version')")
    version = document["version"]
    if version > RESULT_VERSION:
        raise StorageError(f"{path}: result format version {version} is newer than this perfguard reads "
                           f"({RESULT_VERSION}); upgrade perfguard")
    while version < RESULT_VERSION:
        document = _MIGRATIONS[version](document)
        version = document["version"]
    errors = schema_errors(document)
    if errors:
        raise StorageError(f"{path}: corrupt result file: {errors[0]}")
    result: dict[str, Any] = document
    return result
