"""The profile diff of a compared pair: per (op type, provider), before and after.

Op types, never node names, are matched across the two sides: fusions rename and remove nodes,
and a lost fusion shows directly in the node counts of the op types it touched.

Every figure is per inference. Within a worker it is the least over the profiled runs
(``perfguard.workers.trace``: a preempted run only adds time); across the workers of a side it is
the mean of the workers' values, with their range ``[low, high]`` as the interval. The run time
(``model_run_us``) is the sum of the parts, so for each side Σ kernel time of the op types +
framework overhead = run time, and the ``share`` of each row and of the framework overhead in the
total change sum to exactly 1. The interval of a change is the conservative difference of the two
ranges (``after.low - before.high``, ``after.high - before.low``): it is above 0 only when every
worker of the candidate saw more than every worker of the baseline (with 3 workers a side: a
one-sided exact rank test at p = 1/20).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfguard import jsonfields as f
from perfguard.jsonfields import JsonDict
from perfguard.workers.trace import OpStats, ProfileRun


@dataclass(frozen=True)
class Spread:
    """A per-inference figure of one side: the mean across workers and the workers' range."""

    mean: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            return cls(0.0, 0.0, 0.0)
        return cls(sum(values) / len(values), min(values), max(values))

    def to_json(self) -> JsonDict:
        return {"mean": self.mean, "low": self.low, "high": self.high}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Spread:
        return cls(f.number(data, "mean", "spread"), f.number(data, "low", "spread"), f.number(data, "high", "spread"))


@dataclass(frozen=True)
class Change:
    """One figure before and after: the change of the means and its interval across workers."""

    before: Spread
    after: Spread

    @property
    def delta(self) -> float:
        return self.after.mean - self.before.mean

    @property
    def delta_low(self) -> float:
        return self.after.low - self.before.high

    @property
    def delta_high(self) -> float:
        return self.after.high - self.before.low

    @property
    def ratio(self) -> float | None:
        return self.after.mean / self.before.mean if self.before.mean > 0 else None

    def to_json(self) -> JsonDict:
        return {"before": self.before.to_json(), "after": self.after.to_json(), "delta": self.delta,
                "delta_low": self.delta_low, "delta_high": self.delta_high}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Change:
        kind = "profile change"
        return cls(Spread.from_json(f.obj(data, "before", kind)), Spread.from_json(f.obj(data, "after", kind)))


@dataclass(frozen=True)
class OpDelta:
    """One (op type, provider) row: nodes before/after, kernel time (µs per inference), kernels
    per inference, bytes moved (activations read + outputs written) per inference, and the
    row's ``share`` of the total change in ``model_run`` (None when that did not change)."""

    op_type: str
    provider: str
    nodes_before: int
    nodes_after: int
    kernel_us: Change
    kernels: Change
    moved_bytes: Change
    share: float | None

    @property
    def nodes_delta(self) -> int:
        return self.nodes_after - self.nodes_before

    def to_json(self) -> JsonDict:
        return {"op_type": self.op_type, "provider": self.provider, "nodes_before": self.nodes_before,
                "nodes_after": self.nodes_after, "kernel_us": self.kernel_us.to_json(),
                "kernels": self.kernels.to_json(), "moved_bytes": self.moved_bytes.to_json(), "share": self.share}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OpDelta:
        kind = "op delta"
        return cls(f.string(data, "op_type", kind), f.string(data, "provider", kind),
                   f.integer(data, "nodes_before", kind), f.integer(data, "nodes_after", kind),
                   Change.from_json(f.obj(data, "kernel_us", kind)), Change.from_json(f.obj(data, "kernels", kind)),
                   Change.from_json(f.obj(data, "moved_bytes", kind)), f.opt_number(data, "share", kind))


@dataclass(frozen=True)
class ProfileDiff:
    """Both sides' profiles compared: the op rows (largest change first), ``model_run``, Σ
    kernel time, framework overhead, kernels per inference and ``session_initialization`` (µs),
    and how many worker profiles each side had."""

    ops: tuple[OpDelta, ...]
    model_run_us: Change
    kernel_us: Change
    overhead_us: Change
    kernels: Change
    session_init_us: Change
    workers_before: int
    workers_after: int

    @property
    def total_change_us(self) -> float:
        return self.model_run_us.delta

    @property
    def overhead_share(self) -> float | None:
        total = self.total_change_us
        return self.overhead_us.delta / total if total else None

    def to_json(self) -> JsonDict:
        return {"ops": [o.to_json() for o in self.ops], "model_run_us": self.model_run_us.to_json(),
                "kernel_us": self.kernel_us.to_json(), "overhead_us": self.overhead_us.to_json(),
                "kernels": self.kernels.to_json(), "session_init_us": self.session_init_us.to_json(),
                "workers_before": self.workers_before, "workers_after": self.workers_after}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProfileDiff:
        kind = "profile diff"

        def change(key: str) -> Change:
            return Change.from_json(f.obj(data, key, kind))

        return cls(tuple(OpDelta.from_json(o) for o in f.objects(data, "ops", kind)), change("model_run_us"),
                   change("kernel_us"), change("overhead_us"), change("kernels"), change("session_init_us"),
                   f.integer(data, "workers_before", kind), f.integer(data, "workers_after", kind))


def _change(before: Sequence[ProfileRun], after: Sequence[ProfileRun], value: Callable[[ProfileRun], float]) -> Change:
    return Change(Spread.of([value(r) for r in before]), Spread.of([value(r) for r in after]))


def _op(run: ProfileRun, key: tuple[str, str]) -> OpStats | None:
    return next((o for o in run.ops if (o.op_type, o.provider) == key), None)


def _of_op(key: tuple[str, str], attr: str) -> Callable[[ProfileRun], float]:
    """``attr`` of op ``key`` in a profile (0 where the profile has no such op)."""
    return lambda run: float(getattr(_op(run, key), attr, 0.0) or 0.0)


def diff_profiles(before: Sequence[ProfileRun], after: Sequence[ProfileRun]) -> ProfileDiff:
    """Compare the worker profiles of two sides per (op type, provider). An op type a side
    lacks counts as 0 nodes and 0 µs there. ``ValueError`` when a side has no profile."""
    if not before or not after:
        raise ValueError(f"a profile diff needs profiles of both sides, found {len(before)} and {len(after)}")
    total = _change(before, after, lambda r: r.run_us)
    keys = sorted({(o.op_type, o.provider) for r in (*before, *after) for o in r.ops})
    rows = []
    for key in keys:
        kernel = _change(before, after, _of_op(key, "kernel_us"))
        nodes = _of_op(key, "nodes")
        rows.append(OpDelta(key[0], key[1], max(int(nodes(r)) for r in before), max(int(nodes(r)) for r in after),
                            kernel, _change(before, after, _of_op(key, "kernels")),
                            _change(before, after, _of_op(key, "moved_bytes")),
                            kernel.delta / total.delta if total.delta else None))
    rows.sort(key=lambda r: (-abs(r.kernel_us.delta), r.op_type, r.provider))
    return ProfileDiff(tuple(rows), total, _change(before, after, lambda r: r.kernel_us),
                       _change(before, after, lambda r: r.overhead_us), _change(before, after, lambda r: r.kernels_per_run),
                       _change(before, after, lambda r: r.session_init_us), len(before), len(after))
