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

from collections.abc import Callable, Sequence

from perfguard.results.explanation import Change, OpDelta, ProfileDiff, Spread
from perfguard.workers.trace import OpStats, ProfileRun


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
