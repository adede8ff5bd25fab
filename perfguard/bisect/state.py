"""Bisection state: saved after every probe, so the same command resumes a killed run.

The file holds every probe's result under a key that names what was measured (for example
``triple:<lo>:<mid>:<hi>``). The search is deterministic given those results, so a resumed run
walks the same path, finds each finished probe in the file, and measures only what is missing.

Format history (``STATE_VERSION``): 1. first format.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from perfguard.errors import StorageError
from perfguard.results import write_json_atomic

STATE_VERSION = 1


def state_key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


class BisectState:
    """Probe results by key, persisted atomically to ``path`` after every ``record``."""

    def __init__(self, path: Path, key: str, header: dict[str, Any]) -> None:
        self.path = path
        self.key = key
        self.header = header
        self.probes: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.resumed = 0
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise StorageError(f"{path}: corrupt bisection state ({exc}); delete it to start over") from None
            if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
                raise StorageError(f"{path}: not a perfguard bisection state of version {STATE_VERSION}")
            if data.get("key") == key:
                self.probes = dict(data.get("probes", {}))
                self.order = list(data.get("order", []))

    def get(self, probe_key: str) -> dict[str, Any] | None:
        result = self.probes.get(probe_key)
        if result is not None:
            self.resumed += 1
        return result

    def record(self, probe_key: str, result: dict[str, Any]) -> None:
        self.probes[probe_key] = result
        if probe_key not in self.order:
            self.order.append(probe_key)
        write_json_atomic(self.path, {"version": STATE_VERSION, "key": self.key, "header": self.header,
                                      "probes": self.probes, "order": self.order})
