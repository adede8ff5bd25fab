"""The profiles a counted worker dumps, read in one place: found (:func:`thread_profiles`, the
calling thread's files of one process), opened safely (:func:`read_profile`), their totals by
window (:func:`read_dumps`) and their instructions by function (:func:`window_functions`).

A callgrind profile (callgrind's manual, "Callgrind Format Specification") names its columns in
``events:`` and their totals in ``summary:``, and lists per function (``fn=``, in an object
``ob=``) cost lines, whose first column is the position and the next ones the events (``Ir``
first here). A line after ``calls=`` is the *inclusive* cost of a call made from that function
and is not its own cost, so it is skipped: what is summed is each function's self cost, and the
self costs of all functions add up to the profile's ``totals:``. Names may be compressed
(``fn=(12) name`` defines number 12, ``fn=(12)`` refers to it), positions relative (``+3``,
``-2``, ``*``); both are read.

A function without a symbol is named by its address (``0x000000000022d4c0``): such code is
summed per object as one entry named ``NO_SYMBOL`` (``perfguard.results.counted_functions``: a
stripped library such as ONNX Runtime's reads as one entry, which says that it is stripped rather
than showing addresses that mean nothing across builds). A counts document keeps at most
``MAX_FUNCTIONS`` functions, the largest, per inference.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from perfguard.results.counted_functions import MAX_FUNCTIONS, NO_SYMBOL, FunctionCount
from perfguard.results.counts import EVENTS

_COMPRESSED = re.compile(r"^\((\d+)\)(?:\s+(.*))?$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
#: An object loaded from a temporary file has a random name in each process: IREE's loader
#: writes a ``system-dylib`` module's library to ``iree_dylib_XXXXXX_mem_.so`` (mkstemp's six
#: characters), so the random part is dropped to compare two processes' functions.
_TEMPORARY = re.compile(r"_[A-Za-z0-9]{6}(_mem_\.so)$")


def thread_profiles(out_dir: Path, pid: int) -> list[Path]:
    """The profiles of the calling thread of process ``pid`` in ``out_dir``, in order (files
    ``callgrind.out.PID.N-01``: ``--separate-threads=yes``, ``perfguard.counting.valgrind``)."""
    return sorted(out_dir.glob(f"callgrind.out.{pid}.*-01"))


@dataclass(frozen=True)
class Dump:
    """One profile callgrind (or cachegrind: the same ``events:`` and ``summary:`` lines) wrote:
    the label of the client request that dumped it (None for the dump at exit) and its event
    totals."""

    label: str | None
    events: Mapping[str, int]


_TRIGGER = re.compile(r"^desc: Trigger: Client Request: (.*)$", re.MULTILINE)


def parse_dump(text: str) -> Dump:
    """The label and the ``summary:`` totals of a callgrind profile (format: callgrind's manual,
    "Callgrind Format Specification": ``events:`` names the columns, ``summary:`` the totals)."""
    names = next((line.split()[1:] for line in text.splitlines() if line.startswith("events:")), None)
    totals = next((line.split()[1:] for line in text.splitlines() if line.startswith("summary:")), None)
    if names is None or totals is None:
        raise ValueError("not a callgrind profile: no 'events:' or 'summary:' line")
    if len(totals) > len(names) or not all(t.isdigit() for t in totals):
        raise ValueError(f"callgrind summary {' '.join(totals)!r} does not match the events {' '.join(names)}")
    trigger = _TRIGGER.search(text)
    events = {name: int(value) for name, value in zip(names, totals, strict=False)}
    return Dump(trigger.group(1) if trigger else None, {e: events.get(e, 0) for e in EVENTS})


def read_dumps(out_dir: Path, pid: int) -> dict[str, Mapping[str, int]]:
    """The labelled windows of the main thread of process ``pid`` (files
    ``callgrind.out.PID.N-01``: ``--separate-threads=yes``), by label; a ``ValueError`` for a
    profile that is a link, too large (:func:`read_profile`) or holds a cost line no reader reads."""
    windows: dict[str, Mapping[str, int]] = {}
    for path in thread_profiles(out_dir, pid):
        text = read_profile(path)
        bad = unreadable_cost_line(text)  # the window's functions are read from these lines
        if bad is not None:
            raise ValueError(f"{path.name}: {bad}")
        dump = parse_dump(text)
        if dump.label is not None:
            windows[dump.label] = dump.events
    return windows


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
    that read these files first, :func:`read_dumps`, failed on it already)."""
    trigger = f"desc: Trigger: Client Request: {label}\n"
    try:
        for path in thread_profiles(out_dir, pid):
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
