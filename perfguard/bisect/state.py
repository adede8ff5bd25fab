"""Bisection state: saved after every probe, so the same command resumes a killed run.

The file holds every probe's result under a key that names what was measured (for example
``triple:<lo>:<mid>:<hi>``). The search is deterministic given those results, so a resumed run
walks the same path, finds each finished probe in the file, and measures only what is missing.

The file is :class:`StateFile`; its probe records reuse the result document's verdict summaries
(:mod:`perfguard.bisect.document`). ``to_json(from_json(d)) == d`` for every state file perfguard
writes (``tests/golden/v1/bisect-*state.json``).

Format history (``STATE_VERSION``): 1. first format.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from perfguard.bisect.document import (
    Json,
    Trace,
    VerdictSummary,
    as_object,
    get_bool,
    get_int,
    get_list,
    get_number,
    get_str,
    optional,
    read_look,
    summaries,
)
from perfguard.errors import StorageError
from perfguard.results import write_json_atomic
from perfguard.stats.adaptive import Look

__all__ = ["STATE_VERSION", "BisectState", "ProbeEntry", "ProbeRecord", "StateFile", "StateHeader", "state_key"]

STATE_VERSION = 1


@dataclass(frozen=True)
class ProbeEntry:
    """What a probe keeps of one variant's case entry: enough to search its passes later
    (``identity``, the artifact's execution identity, where ``perfguard tune`` keeps it)."""

    trace: Trace | None = None
    median_s: float | None = None
    node_count: int | None = None
    identity: str | None = None

    @classmethod
    def from_json(cls, value: object) -> ProbeEntry:
        d = as_object(value, "entries")
        return cls(optional(d.get("trace"), lambda v: as_object(v, "trace")), get_number(d, "median_s"),
                   get_int(d, "node_count"), get_str(d, "identity"))

    def to_json(self) -> Json:
        out: Json = {"trace": self.trace, "median_s": self.median_s, "node_count": self.node_count}
        if self.identity is not None:
            out["identity"] = self.identity
        return out


@dataclass(frozen=True)
class ProbeRecord:
    """One probe's outcome: ``ok`` with a summary per comparison (``"A->B"``), or ``skip`` with a reason.

    ``uncertain`` is kept where a state file of an earlier run has it (the search used to mark the
    stored outcome after recording it); it is written only when true."""

    status: str
    reason: str | None = None
    verdicts: dict[str, VerdictSummary] = field(default_factory=dict)
    entries: dict[str, ProbeEntry] = field(default_factory=dict)
    looks: list[Look] = field(default_factory=list)
    uncertain: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_json(cls, value: object) -> ProbeRecord:
        d = as_object(value, "probe")
        return cls(get_str(d, "status", "") or "", get_str(d, "reason"),
                   summaries(d.get("verdicts")),
                   {str(k): ProbeEntry.from_json(v) for k, v in as_object(d.get("entries") or {}, "entries").items()},
                   get_list(d, "looks", read_look), bool(get_bool(d, "uncertain", False)))

    def to_json(self) -> Json:
        out: Json = ({"status": self.status, "verdicts": {k: v.to_json() for k, v in self.verdicts.items()},
                      "entries": {k: v.to_json() for k, v in self.entries.items()}, "looks": [look.to_json() for look in self.looks]}
                     if self.ok else {"status": self.status, "reason": self.reason})
        if self.uncertain:
            out["uncertain"] = True
        return out


@dataclass(frozen=True)
class StateHeader:
    """What the state file says it bisects: suite, case and refs (commits mode) or the key's parts."""

    suite: str | None = None
    case: str | None = None
    good: str | None = None
    bad: str | None = None
    parts: list[str] | None = None

    @classmethod
    def from_json(cls, value: object) -> StateHeader:
        d = as_object(value, "header")
        return cls(get_str(d, "suite"), get_str(d, "case"), get_str(d, "good"), get_str(d, "bad"),
                   get_list(d, "parts", str) if d.get("parts") is not None else None)

    def to_json(self) -> Json:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class StateFile:
    """The bisection state file: probe records by key, and the order they were measured in."""

    key: str
    header: StateHeader
    probes: dict[str, ProbeRecord]
    order: list[str]
    version: int = STATE_VERSION

    @classmethod
    def from_json(cls, value: object) -> StateFile:
        d = as_object(value, "state")
        return cls(get_str(d, "key", "") or "", StateHeader.from_json(d.get("header") or {}),
                   {str(k): ProbeRecord.from_json(v) for k, v in as_object(d.get("probes") or {}, "probes").items()},
                   get_list(d, "order", str), get_int(d, "version") or STATE_VERSION)

    def to_json(self) -> Json:
        return {"version": self.version, "key": self.key, "header": self.header.to_json(),
                "probes": {k: v.to_json() for k, v in self.probes.items()}, "order": self.order}


def state_key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


class BisectState:
    """Probe results by key, persisted atomically to ``path`` after every ``record``."""

    def __init__(self, path: Path, key: str, header: StateHeader, what: str = "bisection") -> None:
        """``what`` names the state in messages (``perfguard tune`` keeps its evaluations here too)."""
        from perfguard.results.documents import current_format, read_json

        self.path = path
        self.key = key
        self.header = header
        self.probes: dict[str, ProbeRecord] = {}
        self.order: list[str] = []
        self.resumed = 0
        if path.exists():
            corrupt = "{path}: corrupt " + what + " state ({exc}); delete it to start over"
            data = read_json(path, missing=corrupt, not_json=corrupt, unreadable=corrupt)
            data = current_format(data, path, kind=f"{what} state", version=STATE_VERSION, migrations={},
                                  title=f"perfguard {what} state of version {STATE_VERSION}",
                                  newer_hint=", or delete it to start over")
            if data.get("key") == key:
                try:
                    saved = StateFile.from_json(data)
                except StorageError as exc:
                    raise StorageError(f"{path}: corrupt {what} state ({exc}); delete it to start over") from None
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
