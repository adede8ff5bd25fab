"""Files of other benchmark tools, in and out: pytest-benchmark's JSON runs and asv's results.

``read_files(name, paths)`` reads and validates every file of a tool's format into
:class:`~perfguard.store.extract.Imported` (its JSON, stored as it is, and the history points it
gives) before anything is stored: ``perfguard history ingest --format pytest-benchmark|asv``.
The writers turn perfguard results into files the tools read: ``perfguard export``. One module
per tool (:mod:`perfguard.formats.pytest_benchmark`, :mod:`perfguard.formats.asv`) owns its format
and says what maps to what. perfguard reads and writes these files as JSON, from their documented
layout: neither tool is imported (they are test-time dependencies only; the tests run the real
tools on both sides).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.errors import UserError, unknown_name_message

if TYPE_CHECKING:
    from perfguard.store.extract import Imported

#: The formats perfguard reads and writes, by the name the commands take.
FORMATS = ("pytest-benchmark", "asv")


def read_files(name: str, paths: Sequence[str | Path], *, project: str | None = None) -> list[Imported]:
    """Every file of format ``name`` that ``paths`` name (a folder: every file of the format under
    it), read and validated; ``project`` names the suite instead of what the files say. An
    unknown format is a ``UserError`` listing the known ones."""
    if name == "pytest-benchmark":
        from perfguard.formats import pytest_benchmark

        return pytest_benchmark.read(paths, project=project)
    if name == "asv":
        from perfguard.formats import asv

        return asv.read(paths, project=project)
    raise UserError(unknown_name_message("format", name, FORMATS))
