"""Why, counted: the instructions of a counted window by function, and the change between two
sides attributed to functions (``docs/guides/exact-evidence.md``, "Why, counted").

A callgrind profile (callgrind's manual, "Callgrind Format Specification") lists per function
(``fn=``, in an object ``ob=``) cost lines, whose first column is the position and the next ones
the events (``Ir`` first here). A line after ``calls=`` is the *inclusive* cost of a call made
from that function and is not its own cost, so it is skipped: what is summed is each function's
self cost, and the self costs of all functions add up to the profile's ``totals:``. Names may be
compressed (``fn=(12) name`` defines number 12, ``fn=(12)`` refers to it), positions relative
(``+3``, ``-2``, ``*``); both are read.

A function without a symbol is named by its address (``0x000000000022d4c0``): such code is
summed per object as one entry named :data:`NO_SYMBOL` (a stripped library such as ONNX Runtime's
reads as one entry, which says that it is stripped rather than showing addresses that mean
nothing across builds). A counts document keeps at most :data:`MAX_FUNCTIONS` functions, the
largest, per inference.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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

_COMPRESSED = re.compile(r"^\((\d+)\)(?:\s+(.*))?$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
#: An object loaded from a temporary file has a random name in each process: IREE's loader
#: writes a ``system-dylib`` module's library to ``iree_dylib_XXXXXX_mem_.so`` (mkstemp's six
#: characters), so the random part is dropped to compare two processes' functions.
_TEMPORARY = re.compile(r"_[A-Za-z0-9]{6}(_mem_\.so)$")


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


class _Names:
    """Callgrind's name compression: ``(N) name`` defines N, ``(N)`` refers to it (per kind)."""

    def __init__(self) -> None:
        self.known: dict[tuple[str, str], str] = {}

    def read(self, kind: str, value: str) -> str:
        match = _COMPRESSED.match(value)
        if match is None:
            return value
        key = (kind, match.group(1))
        if match.group(2) is not None:
            self.known[key] = match.group(2)
        return self.known.get(key, value)


def function_costs(text: str) -> dict[tuple[str, str], int]:
    """Self ``Ir`` of every function of one callgrind profile, by (object file name, function)."""
    names = _Names()
    costs: dict[tuple[str, str], int] = {}
    obj, function, call_cost = "", None, False
    for line in text.splitlines():
        head = line[:1]
        if head.isdigit() or head in "+-*":
            if call_cost:
                call_cost = False
            elif function is not None:
                parts = line.split()
                if len(parts) > 1:
                    costs[(obj, function)] = costs.get((obj, function), 0) + int(parts[1])
            continue
        key, _, value = line.partition("=")
        if key == "fn":
            function = names.read("fn", value)
        elif key == "ob":
            obj = _TEMPORARY.sub(r"\1", names.read("ob", value).rsplit("/", 1)[-1])
        elif key == "calls":
            call_cost = True
        elif key in ("cfn", "cfi", "cfl", "cob", "fl", "fi", "fe"):
            names.read("fn" if key == "cfn" else "ob" if key == "cob" else "fl", value)
    return costs


def top_functions(costs: Mapping[tuple[str, str], int], inferences: int,
                  limit: int = MAX_FUNCTIONS) -> tuple[FunctionCount, ...]:
    """The ``limit`` largest functions per inference; code without a symbol summed per object
    (:data:`NO_SYMBOL`)."""
    merged: dict[tuple[str, str], int] = {}
    for (obj, name), value in costs.items():
        key = (obj, NO_SYMBOL if _ADDRESS.match(name) else name)
        merged[key] = merged.get(key, 0) + value
    ranked = sorted(merged.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return tuple(FunctionCount(name, obj, value / max(1, inferences)) for (obj, name), value in ranked if value > 0)


def functions_of_profile(text: str, inferences: int) -> tuple[FunctionCount, ...]:
    """The largest functions of one window's profile, per inference."""
    return top_functions(function_costs(text), inferences)


def window_functions(out_dir: Path, pid: int, label: str, inferences: int) -> tuple[FunctionCount, ...]:
    """The largest functions per inference of the calling thread's window ``label`` (the profile
    ``callgrind.out.PID.N-01`` whose trigger is that client request); empty when there is none,
    or when a profile cannot be read (a link, too large, a cost line no reader reads: the count
    that read these files first, ``callgrind.read_dumps``, failed on it already)."""
    trigger = f"desc: Trigger: Client Request: {label}\n"
    try:
        for path in sorted(out_dir.glob(f"callgrind.out.{pid}.*-01")):
            text = read_profile(path)
            if trigger in text:
                return () if unreadable_cost_line(text) else functions_of_profile(text, inferences)
    except (OSError, ValueError):
        return ()
    return ()


#: The largest profile read (``callgrind.out.*``): a counted window's, names uncompressed, is a
#: few MB (5 MB for a whole ``import numpy``); a larger one (a link to ``/dev/zero``, a 3 GB file
#: a misbehaving ``valgrind`` wrote) is refused after this many bytes.
MAX_PROFILE_BYTES = 256 << 20
_PROFILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# A line that starts as a cost line (a position: digits, +N, -N or *) but is not one position and
# whole numbers.
_BAD_COST_LINE = re.compile(r"^(?=[0-9+*-])(?!\S+(?:[ \t]+\d+)*[ \t]*$).*$", re.MULTILINE)


def read_profile(path: Path) -> str:
    """The text of the profile ``path``: a regular file, opened without following a link, at most
    :data:`MAX_PROFILE_BYTES`; a ``ValueError`` otherwise (an ``OSError`` when it cannot be read)."""
    try:
        fd = os.open(path, _PROFILE_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"{path.name} is a symbolic link") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path.name} is not a regular file")
        data = handle.read(MAX_PROFILE_BYTES + 1)
    if len(data) > MAX_PROFILE_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_PROFILE_BYTES} bytes")
    return data.decode(errors="replace")


def unreadable_cost_line(text: str) -> str | None:
    """What is wrong with the first cost line of a profile that is not a position and whole
    numbers (:func:`function_costs` could not read it), or None."""
    bad = _BAD_COST_LINE.search(text)
    return None if bad is None else f"a cost line that is not a position and numbers: {bad.group(0)[:80]!r}"


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
