"""Bisection state: saved after every probe, so the same command resumes a killed run.

The file holds every probe's result under a key that names what was measured (for example
``triple:<lo>:<mid>:<hi>``). The search is deterministic given those results, so a resumed run
walks the same path, finds each finished probe in the file, and measures only what is missing.
The file's format (:class:`~perfguard.bisect.document.StateFile`) and its history
(``STATE_VERSION``) live in :mod:`perfguard.bisect.document`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from perfguard.bisect.document import STATE_VERSION, ProbeRecord, StateFile, StateHeader
from perfguard.errors import StorageError
from perfguard.results import write_json_atomic

__all__ = ["STATE_VERSION", "BisectState", "state_key"]


def state_key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


class BisectState:
    """Probe results by key, persisted atomically to ``path`` after every ``record``."""

    def __init__(self, path: Path, key: str, header: StateHeader) -> None:
        from perfguard.results.documents import read_json

        self.path = path
        self.key = key
        self.header = header
        self.probes: dict[str, ProbeRecord] = {}
        self.order: list[str] = []
        self.resumed = 0
        if path.exists():
            corrupt = "{path}: corrupt bisection state ({exc}); delete it to start over"
            data = read_json(path, missing=corrupt, not_json=corrupt, unreadable=corrupt)
            if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
                raise StorageError(f"{path}: not a perfguard bisection state of version {STATE_VERSION}")
            if data.get("key") == key:
                try:
                    saved = StateFile.from_json(data)
                except StorageError as exc:
                    raise StorageError(f"{path}: corrupt bisection state ({exc}); delete it to start over") from None
                self.probes = dict(saved.probes)
                self.order = list(saved.order)

    def get(self, probe_key: str) -> ProbeRecord | None:
        result = self.probes.get(probe_key)
        if result is not None:
            self.resumed += 1
        return result

    def record(self, probe_key: str, result: ProbeRecord) -> None:
        self.probes[probe_key] = result
        if probe_key not in self.order:
            self.order.append(probe_key)
        write_json_atomic(self.path, StateFile(self.key, self.header, self.probes, self.order).to_json())
