"""The search space of ``perfguard tune``: pipelines one edit away from another.

A candidate is a pipeline's ordered passes plus its backend options. Its neighbours are the
candidates one *move* away: drop a pass, insert a pass of the universe at a position, move a pass
to another position (an adjacent move is a swap) and the option edits the backend offers
(``Backend.tuning_moves``: IREE's opt level and boolean flags). Pass-order search results (CompilerGym's leaderboard: greedy search 1.055x over
``-Oz`` in under 3 minutes, random search 1.045x in 60 s) say that one-edit neighbourhoods searched
greedily get most of the gain, so the space stays this small; the budget, not the space, bounds
the search.

The universe of insertable passes (``--passes``): ``suite`` (default), every pass the suite's
pipelines of the backend name plus the backend's own passes (perfguard's constant folding and
cleanup for ``ort``); ``all``, every pass the backend lists (``perfguard passes``); or a list.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfguard.errors import UserError, unknown_name_message
from perfguard.jsonfields import JsonDict
from perfguard.suite import PipelineSpec, Suite


@dataclass(frozen=True)
class Candidate:
    """One pipeline of the search: ordered passes and the backend's options."""

    passes: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """A short stable hash of what decides the artifact (state keys, pipeline names)."""
        text = json.dumps({"passes": list(self.passes), "options": self.options}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def pipeline(self, name: str, backend: str) -> PipelineSpec:
        return PipelineSpec(name=name, backend=backend, passes=self.passes, options=dict(self.options))

    def describe(self) -> str:
        flags = self.options.get("flags") or {}
        extra = [f"opt_level={self.options['opt_level']}"] if "opt_level" in self.options else []
        extra += [f"{k}={v}" for k, v in sorted(flags.items())]
        # Parentheses, not brackets: the progress bar reads [...] as markup.
        return "(" + (", ".join(self.passes) or "no passes") + ")" + (f" {' '.join(extra)}" if extra else "")

    def to_json(self) -> JsonDict:
        return {"passes": list(self.passes), "options": json.loads(json.dumps(self.options, default=str))}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Candidate:
        return cls(tuple(str(p) for p in value.get("passes") or ()), dict(value.get("options") or {}))

    @classmethod
    def of(cls, pipeline: PipelineSpec) -> Candidate:
        return cls(tuple(pipeline.passes), dict(pipeline.options))


@dataclass(frozen=True)
class Move:
    """A candidate and the edit that made it from its parent (``drop fuse_bn_into_conv``)."""

    kind: str  # drop | insert | move | option
    describe: str
    candidate: Candidate


def pass_universe(suite: Suite, backend: str, spec: str | None) -> tuple[str, ...]:
    """The passes ``insert`` moves may add: see the module docstring for ``spec``."""
    from perfguard.backends import get_backend

    listed = get_backend(backend).list_passes()
    if spec in (None, "", "suite"):
        named = [p for pipe in suite.pipelines.values() if pipe.backend == backend for p in pipe.passes]
        own = [info.name for info in listed if info.source == "perfguard"]
        return tuple(dict.fromkeys(named + own))
    if spec == "all":
        return tuple(info.name for info in listed)
    path = Path(spec)
    if path.is_file():
        names = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    else:
        names = [name.strip() for name in spec.split(",")]
    names = [n for n in names if n]
    if not names:
        raise UserError(f"--passes {spec!r}: no pass names (give a,b,c, a file with one name per line, suite or all)")
    known = {info.name for info in listed}
    for name in names:
        if name not in known and ":" not in name:  # package.module:function is a user pass
            raise UserError("--passes: " + unknown_name_message("pass", name, sorted(known)))
    return tuple(dict.fromkeys(names))


def option_moves(candidate: Candidate, backend: str) -> list[Move]:
    """The option edits ``backend`` offers from ``candidate``'s options (``Backend.tuning_moves``:
    IREE's opt levels and rewrite flags; none for ONNX Runtime, whose optimizer level is a
    runtime setting, not an order), each with the candidate's passes."""
    from perfguard.backends import get_backend

    return [Move("option", edit.describe, Candidate(candidate.passes, dict(edit.options)))
            for edit in get_backend(backend).tuning_moves(candidate.options)]


def drops(candidate: Candidate) -> list[Move]:
    p = candidate.passes
    return [Move("drop", f"drop {p[i]} (#{i + 1})", Candidate(p[:i] + p[i + 1:], candidate.options))
            for i in range(len(p))]


def inserts(candidate: Candidate, universe: Sequence[str]) -> list[Move]:
    """Each universe pass at each position (a pass may run twice: folding after a fusion, say)."""
    p = candidate.passes
    out = []
    for name in universe:
        for pos in range(len(p) + 1):
            if (pos > 0 and p[pos - 1] == name) or (pos < len(p) and p[pos] == name):
                continue  # the same pass twice in a row: idempotent for every pass we know
            where = f"before {p[pos]}" if pos < len(p) else "at the end"
            out.append(Move("insert", f"insert {name} {where}",
                            Candidate(p[:pos] + (name,) + p[pos:], candidate.options)))
    return out


def moves(candidate: Candidate) -> list[Move]:
    p = list(candidate.passes)
    out = []
    for i in range(len(p)):
        for j in range(len(p)):  # position in the list without p[i]
            rest = p[:i] + p[i + 1:]
            moved = tuple(rest[:j] + [p[i]] + rest[j:])
            if moved == candidate.passes:
                continue
            kind = "swap" if abs(i - j) == 1 else "move"
            where = f"before {rest[j]}" if j < len(rest) else "to the end"
            out.append(Move("move", f"{kind}: {p[i]} (#{i + 1}) {where}", Candidate(moved, candidate.options)))
    return out


def unique(candidates: Sequence[Move], exclude: set[str]) -> list[Move]:
    """Moves in order with each resulting candidate once, none whose key is in ``exclude``."""
    seen = set(exclude)
    out = []
    for move in candidates:
        if move.candidate.key not in seen:
            seen.add(move.candidate.key)
            out.append(move)
    return out


def perturb(candidate: Candidate, universe: Sequence[str], rng: random.Random, steps: int,
            backend: str) -> Move:
    """``steps`` random moves from ``candidate`` (a restart of the local search)."""
    current, described = candidate, list[str]()
    for _ in range(steps):
        pool = drops(current) + inserts(current, universe) + moves(current) + option_moves(current, backend)
        if not pool:
            break
        move = rng.choice(pool)
        current, described = move.candidate, [*described, move.describe]
    return Move("restart", "restart: " + "; ".join(described), current)
