"""Shards: the K-th of N disjoint parts of a suite's selected cases (``--shard K/N``).

The partition is pure and deterministic: the same cases, costs and N give the same parts on any
machine, whatever the order the cases came in. Cases measured together stay together: the
pipelines of one model on one runner are one measurement group (``perfguard.measure.groups``),
interleaved in the same workers, and a check compares them with each other (``--against-pipeline``)
or each with its base side (``--base-ref``); splitting them would change what is measured. So
the unit of the partition is the *group* (model, runner), never a row.

Groups go onto the N shards by greedy longest-processing-time (LPT): sorted by cost, largest
first (ties by group id), each onto the currently cheapest shard (ties: the lowest shard
number). LPT is within 4/3 of the best makespan for any costs (Graham 1969) and much closer when
there are many groups of similar cost, as in a suite of 60 cases over 4 shards. The costs are the
caller's estimate, in seconds: the history store's last compile and measurement times, else a
static estimate (``perfguard.flows.shards``); only their ratios matter.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from perfguard.errors import UserError
from perfguard.suite.model import CaseSpec

#: The most shards a run, check or night may be split into (``--shard K/N``, a shard document's
#: ``n``): far beyond any runner fleet, and small enough that nothing sized by N costs memory.
MAX_SHARDS = 10_000

_SHARD = re.compile(r"^\s*([0-9]+)\s*/\s*([0-9]+)\s*$", re.ASCII)


@dataclass(frozen=True)
class ShardSpec:
    """Which part of how many: ``k`` in 1..``n``."""

    k: int
    n: int

    @classmethod
    def parse(cls, text: str) -> ShardSpec:
        """``"2/3"`` -> ShardSpec(2, 3); a ``UserError`` naming the fix for anything else."""
        match = _SHARD.match(text) if len(text) <= 64 else None
        if match is None:
            raise UserError(f"--shard {text[:64]!r}: expected K/N with whole numbers, e.g. --shard 1/4")
        # Digits are counted before int(): a 10^20 (or a 10^5-digit) N never becomes a number.
        k_text, n_text = (group.lstrip("0") or "0" for group in match.groups())
        digits = len(str(MAX_SHARDS))
        if len(n_text) > digits or int(n_text) > MAX_SHARDS:
            raise UserError(f"--shard {text.strip()}: N is at most {MAX_SHARDS}, found {_shown(n_text)}")
        n = int(n_text)
        if n < 1 or len(k_text) > digits or not 1 <= int(k_text) <= n:
            raise UserError(f"--shard {text.strip()}: K must be from 1 to N and N at least 1, found "
                            f"K={_shown(k_text)}, N={n}")
        k = int(k_text)
        return cls(k, n)

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"


def _shown(digits: str) -> str:
    return digits if len(digits) <= 12 else f"a number of {len(digits)} digits"


def group_of(case: CaseSpec) -> str:
    """The measurement group of a case: its model on its runner (every pipeline of it)."""
    return f"{case.model.name}/{case.runner}"


def case_groups(cases: Sequence[CaseSpec]) -> dict[str, list[CaseSpec]]:
    """The cases by measurement group, groups and their cases sorted by id."""
    groups: dict[str, list[CaseSpec]] = {}
    for case in sorted(cases, key=lambda c: c.id):
        groups.setdefault(group_of(case), []).append(case)
    return dict(sorted(groups.items()))


def partition(costs: Mapping[str, float], n: int) -> list[list[str]]:
    """The items of ``costs`` (item -> cost, 0 or more) on ``n`` bins by greedy LPT: largest cost
    first, ties by item name; each onto the bin with the smallest load so far, ties by the lowest
    bin. Each bin's items sorted. Pure and deterministic; a bin may stay empty (fewer items than
    bins)."""
    bins: list[list[str]] = [[] for _ in range(n)]
    for item, target in assignment(costs, n).items():
        bins[target].append(item)
    return [sorted(b) for b in bins]


def assignment(costs: Mapping[str, float], n: int) -> dict[str, int]:
    """The bin (0-based) of each item in :func:`partition`, in memory and time that follow the
    items, not ``n``: the bins never touched all have load 0, so of them only the lowest is a
    candidate, next to the heap of the bins in use."""
    if n < 1:
        raise ValueError(f"a partition needs at least one bin, found {n}")
    used: list[tuple[float, int]] = []  # (load, bin) of the bins that hold an item
    fresh = 0  # the lowest bin never used (bins fresh..n-1 all have load 0)
    out: dict[str, int] = {}
    for item in sorted(costs, key=lambda name: (-costs[name], name)):
        if fresh < n and (not used or (0.0, fresh) < used[0]):
            load, target = 0.0, fresh
            fresh += 1
        else:
            load, target = heapq.heappop(used)
        out[item] = target
        heapq.heappush(used, (load + max(0.0, costs[item]), target))
    return out


def shard_cases(cases: Sequence[CaseSpec], spec: ShardSpec, cost: Mapping[str, float]) -> list[CaseSpec]:
    """The cases of shard ``spec`` (in their given order): the groups LPT puts on it, a group
    costing the sum of its cases' ``cost`` (by case id; a case not in ``cost`` costs 1)."""
    groups = case_groups(cases)
    group_costs = {name: sum(cost.get(c.id, 1.0) for c in members) for name, members in groups.items()}
    mine = {c.id for name, target in assignment(group_costs, spec.n).items() if target == spec.k - 1
            for c in groups[name]}
    return [c for c in cases if c.id in mine]
