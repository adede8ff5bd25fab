"""What the readers and writers of other tools' files share: the file lists a command names,
times in and out, the perfguard documents that are exported, and names that other tools accept.

No I/O beyond reading the named files; every failure is a one-line ``StorageError`` naming the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfguard.errors import StorageError

if TYPE_CHECKING:
    from perfguard.results.result import ResultDocument


@dataclass(frozen=True)
class ExportSource:
    """A perfguard result to write out (a result document, or the candidate side of a verdicts
    document), with the compiler commit it measured (None: not recorded)."""

    path: Path
    result: ResultDocument
    commit: str | None


def read_json_file(path: Path, what: str) -> Any:
    """The JSON value of ``path`` (``what``: the kind of file expected, for the messages). NaN and
    Infinity are read as Python reads them: asv writes them (a skipped benchmark, an interval it
    cannot compute), and the extractors take finite values above zero only; huge integers and
    deep nesting are refused as in every document."""
    from perfguard.results.documents import read_json

    return read_json(path, missing="{path}: file not found", not_json=f"{{path}}: not a {what} file (not JSON: {{exc}})",
                     finite=False)


def json_files(paths: Iterable[str | Path], expand: Callable[[Path], Iterable[Path]] | None = None) -> list[Path]:
    """Every file named: a file as it is, a folder as each ``*.json`` under it (sorted; ``expand``,
    a function of the folder, may choose them instead). A missing path or a folder without
    JSON files is a ``StorageError``."""
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = list(expand(path)) if expand is not None else sorted(p for p in path.rglob("*.json") if p.is_file())
            if not found:
                raise StorageError(f"{path}: no JSON files in this folder")
            out.extend(found)
        elif path.exists():
            out.append(path)
        else:
            raise StorageError(f"{path}: file not found")
    return out


def iso_time(text: object, source: str, what: str) -> str:
    """``text`` (ISO 8601; ``Z``, an offset or none: UTC) as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``;
    a ``StorageError`` naming ``source`` and ``what`` otherwise."""
    if isinstance(text, str) and text.strip():
        value = text.strip()
        if value[-1:] in ("Z", "z"):
            value = value[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    raise StorageError(f"{source}: {what}: expected an ISO-8601 time, found {text!r}")


def time_of_ms(ms: object, source: str, what: str) -> str:
    """A JavaScript time stamp (milliseconds since 1970, UTC: asv's ``date``) as an ISO UTC stamp."""
    if isinstance(ms, (int, float)) and not isinstance(ms, bool) and math.isfinite(ms):
        try:
            moment = datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            pass
        else:
            return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    raise StorageError(f"{source}: {what}: expected a time in milliseconds since 1970, found {ms!r}")


def ms_of_time(stamp: str) -> int:
    """An ISO-8601 time (a perfguard document's stamp) in milliseconds since 1970 (asv's unit)."""
    return int(round(datetime.fromisoformat(iso_time(stamp, "<time>", "time")[:-1] + "+00:00").timestamp() * 1000))


def positive(value: object) -> float | None:
    """``value`` as a float when it is a finite number above zero, else None. History series hold
    such values only: change detection works on ratios of them (``history.changepoints``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def numbers(values: object) -> tuple[float, ...]:
    """The finite numbers of a list (other entries dropped; not a list: none)."""
    if not isinstance(values, list):
        return ()
    return tuple(float(v) for v in values
                 if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))


def identifier(text: str) -> str:
    """``text`` with every character that may not appear in a Python identifier replaced by
    ``_`` (asv benchmark names are dotted Python names)."""
    name = re.sub(r"\W", "_", text, flags=re.ASCII)
    return name if name and not name[0].isdigit() else f"_{name}"


def load_export_sources(paths: Sequence[str | Path]) -> list[ExportSource]:
    """The results to export: each file a perfguard result, or a verdicts document whose
    candidate result (``head``, ``candidate`` or its only one) is taken, with its commit (the
    check's ``head_commit``, else the result's ``compiler.commit``). Every file is read and
    validated before anything is written."""
    from perfguard.compare.verdicts import parse_verdicts
    from perfguard.results.documents import read_json
    from perfguard.results.result import parse_result
    from perfguard.store.extract import stored_kind

    out = []
    for name in paths:
        path = Path(name)
        data = read_json(path, missing="{path}: file not found", not_json="{path}: not a JSON document ({exc})")
        kind = stored_kind(data, str(path))
        if kind == "result":
            result = parse_result(data, path)
            out.append(ExportSource(path, result, result.compiler.commit if result.compiler else None))
        elif kind == "verdicts":
            verdicts = parse_verdicts(data, path)
            if verdicts.results is None:
                raise StorageError(f"{path}: a verdicts document without a candidate result")
            candidate = verdicts.results.candidate
            commit = verdicts.mode.head_commit or (candidate.compiler.commit if candidate.compiler else None)
            out.append(ExportSource(path, candidate, commit))
        else:
            raise StorageError(f"{path}: a {kind} document, not a result or verdicts document to export")
    return out
