"""Why, counted, as documents: the instructions of a counted window by function
(:class:`FunctionCount`, the largest :data:`MAX_FUNCTIONS` per inference), and the change
between two sides attributed to functions (:func:`attribute`, :class:`CountedWhy`;
``docs/guides/exact-evidence.md``, "Why, counted"). The profiles they are read from are parsed in
``perfguard.counting.dumps``; code without a symbol is one entry per object, :data:`NO_SYMBOL`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from perfguard import jsonfields as f
from perfguard.jsonfields import JsonDict

#: Functions kept per counted window, the largest self costs first.
MAX_FUNCTIONS = 20
#: The name of an object's code that has no symbol (a stripped library, JIT-loaded code).
NO_SYMBOL = "(no symbols)"
#: Functions shown per attribution.
SHOWN = 8
#: How a function moved between two counted windows (``FunctionDelta.kind``).
DELTA_KINDS = ("added", "removed", "changed")

#: A JSON object as read (the class below has a field named ``object``).
_Fields = Mapping[str, object]

@dataclass(frozen=True)
class FunctionCount:
    """One function's own instructions (callgrind's self ``Ir``) per inference, and the object
    (library, executable, compiled module) it lives in, by file name."""

    name: str
    object: str
    instructions: float

    @property
    def key(self) -> tuple[str, str]:
        return self.object, self.name

    @property
    def label(self) -> str:
        return f"{self.name} ({self.object})" if self.object else self.name

    def to_json(self) -> JsonDict:
        return {"name": self.name, "object": self.object, "instructions": self.instructions}

    @classmethod
    def from_json(cls, data: _Fields) -> FunctionCount:
        kind = "function count"
        value = f.finite(data, "instructions", kind)
        if value < 0:
            raise f.wrong_type(kind, "instructions", "a count >= 0", value)
        return cls(f.string(data, "name", kind), f.string(data, "object", kind), value)


@dataclass(frozen=True)
class FunctionDelta:
    """One function's change of instructions per inference: ``kind`` is ``added`` (not among the
    baseline's largest), ``removed`` (not among the candidate's) or ``changed``; ``share`` is its
    part of the whole window's change (negative where it moved against it)."""

    name: str
    object: str
    baseline: float | None
    candidate: float | None
    delta: float
    share: float | None
    kind: str

    @property
    def label(self) -> str:
        return f"{self.name} ({self.object})" if self.object else self.name

    def to_json(self) -> JsonDict:
        return {"name": self.name, "object": self.object, "baseline": self.baseline, "candidate": self.candidate,
                "delta": self.delta, "share": self.share, "kind": self.kind}

    @classmethod
    def from_json(cls, data: _Fields) -> FunctionDelta:
        kind = "function delta"
        change = f.string(data, "kind", kind)
        if change not in DELTA_KINDS:
            raise f.wrong_type(kind, "kind", f"one of {', '.join(DELTA_KINDS)}", change)
        return cls(f.string(data, "name", kind), f.string(data, "object", kind), f.opt_number(data, "baseline", kind),
                   f.opt_number(data, "candidate", kind), f.number(data, "delta", kind),
                   f.opt_number(data, "share", kind), change)


@dataclass(frozen=True)
class CountedWhy:
    """The instruction change of one pair attributed to functions: ``total_delta`` is the whole
    window's change per inference, ``functions`` the largest changes first, ``stripped`` the
    objects whose code has no symbols and moved (their change cannot be split further)."""

    total_delta: float
    functions: tuple[FunctionDelta, ...]
    stripped: tuple[str, ...]

    def to_json(self) -> JsonDict:
        return {"total_delta": self.total_delta, "functions": [d.to_json() for d in self.functions],
                "stripped": list(self.stripped)}

    @classmethod
    def from_json(cls, data: _Fields) -> CountedWhy:
        kind = "counted why"
        return cls(f.number(data, "total_delta", kind),
                   tuple(FunctionDelta.from_json(d) for d in f.objects(data, "functions", kind)),
                   f.string_list(data, "stripped", kind))


@dataclass(frozen=True)
class CountedPair:
    """One compared pair's counted attribution with who was compared: the case, the labels of its
    two sides and the attribution (what an alert keeps of its culprit's explanation)."""

    case: str
    baseline: str
    candidate: str
    why: CountedWhy

    def to_json(self) -> JsonDict:
        return {"case": self.case, "baseline": self.baseline, "candidate": self.candidate, "why": self.why.to_json()}

    @classmethod
    def from_json(cls, data: _Fields) -> CountedPair:
        kind = "counted pair"
        return cls(f.string(data, "case", kind), f.string(data, "baseline", kind), f.string(data, "candidate", kind),
                   CountedWhy.from_json(f.obj(data, "why", kind)))


def attribute(baseline: Sequence[FunctionCount], candidate: Sequence[FunctionCount], total_delta: float,
              limit: int = SHOWN) -> CountedWhy:
    """The functions that moved most between ``baseline`` and ``candidate`` (each the largest
    functions of its side's window, per inference); ``total_delta`` the window's whole change."""
    before = {c.key: c for c in baseline}
    after = {c.key: c for c in candidate}
    deltas = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        delta = (new.instructions if new else 0.0) - (old.instructions if old else 0.0)
        if delta == 0:
            continue
        kind = "added" if old is None else "removed" if new is None else "changed"
        share = delta / total_delta if total_delta else None
        deltas.append(FunctionDelta(key[1], key[0], old.instructions if old else None,
                                    new.instructions if new else None, delta, share, kind))
    deltas.sort(key=lambda d: (-abs(d.delta), d.object, d.name))
    shown = tuple(deltas[:limit])
    stripped = tuple(sorted({d.object for d in shown if d.name == NO_SYMBOL}))
    return CountedWhy(total_delta, shown, stripped)


def functions_json(functions: Iterable[FunctionCount]) -> list[JsonDict]:
    return [c.to_json() for c in functions]


def functions_from_json(data: Mapping[str, object], kind: str) -> tuple[FunctionCount, ...]:
    """The optional ``functions`` list of a counts document (absent in older ones: empty)."""
    if data.get("functions") is None:
        return ()
    items = f.array(data, "functions", kind)
    if not all(isinstance(item, dict) for item in items):
        raise f.wrong_type(kind, "functions", "a list of objects", items)
    return tuple(FunctionCount.from_json(item) for item in items if isinstance(item, dict))
