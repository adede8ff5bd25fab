"""Adaptive sampling: add worker processes while a comparison is UNKNOWN, up to a cap.

Peeking problem: testing after every batch and stopping at the first "different" gives the null
hypothesis several chances to look significant: looking at 8, 12, 16 and 20 workers, each at
alpha = 0.05, calls 9.5 % of A/A comparisons "different" with no floor, against 3.7 % with the
correction below (600 simulated runs in ``tests/test_stats_sim.py``). The same
holds for "same" verdicts, which come from the confidence interval. We plan the number of looks
K in advance and spend the error budget evenly (Bonferroni over looks): each look tests at
``alpha / K`` and builds its interval at ``1 - (1 - confidence) / K``. By the union bound the
chance of any false "different" over all looks is at most ``alpha``, and likewise for a false
"same". This is conservative (a Pocock or O'Brien-Fleming boundary would spend less), but it
needs no assumption about how the statistic evolves between looks, and perfguard's priority is no
false alarms.

A consequence of the exact signed-rank test: a look at level ``alpha / K`` needs at least
``ceil(log2(2 K / alpha))`` workers before it can say "different" (8 for the default K = 4), so
the default first batch is 8 workers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from perfguard.errors import UserError
from perfguard.stats.compare import compare_paired
from perfguard.stats.verdict import Comparison, Decision

GroupBatch = tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]]


@dataclass(frozen=True)
class AdaptiveResult:
    """Outcome of :func:`adaptive_compare`: the last comparison and how it was reached.

    ``n_workers`` is the number of paired worker groups used, ``looks`` how many comparisons were
    made (``max_looks`` were planned), ``history`` the decision at each look, and
    ``alpha_per_look`` / ``confidence_per_look`` the Bonferroni-corrected levels every look used.
    """

    comparison: Comparison
    n_workers: int
    looks: int
    max_looks: int
    alpha_per_look: float
    confidence_per_look: float
    history: tuple[Decision, ...]

    @property
    def stopped_early(self) -> bool:
        """True when a decision was reached before the planned last look."""
        return self.comparison.decision != "unknown" and self.looks < self.max_looks


def planned_looks(initial_workers: int, step_workers: int, max_workers: int) -> int:
    """Number of looks K = 1 + ceil((max_workers - initial_workers) / step_workers)."""
    return 1 + math.ceil(max(0, max_workers - initial_workers) / step_workers)


def adaptive_compare(
    more: Callable[[int], GroupBatch],
    *,
    initial_workers: int = 8,
    step_workers: int = 4,
    max_workers: int = 20,
    rel_floor: float = 0.02,
    abs_floor: float = 0.0,
    alpha: float = 0.05,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    higher_is_worse: bool = True,
    statistic: str = "median",
) -> AdaptiveResult:
    """Run :func:`~perfguard.stats.compare.compare_paired` on growing samples until it decides.

    ``more(n)`` measures ``n`` new worker processes and returns ``(a_groups, b_groups)`` for them
    (paired, as for ``compare_paired``); it is first called with ``initial_workers`` (a caller
    that has already measured can return those groups from this first call), then with
    ``step_workers`` (less at the cap) while the decision is ``unknown`` and fewer than
    ``max_workers`` groups were collected. Returning no groups ends the sampling; returning fewer
    than asked (a crashed worker) is accepted.

    Test and thresholds: those of ``compare_paired`` at every look, with ``alpha / K`` and
    ``1 - (1 - confidence) / K`` for K = :func:`planned_looks` (Bonferroni over looks, see the
    module docstring). The looks never exceed K, so the family-wise error stays within ``alpha``.

    Assumption: the decision to continue depends only on the data (optional stopping is what the
    correction pays for); ``more`` measures new, independent processes.
    """
    if initial_workers < 1 or step_workers < 1:
        raise UserError(
            f"initial_workers and step_workers must be >= 1, got {initial_workers} and {step_workers}"
        )
    if max_workers < initial_workers:
        raise UserError(f"max_workers ({max_workers}) must be >= initial_workers ({initial_workers})")
    max_looks = planned_looks(initial_workers, step_workers, max_workers)
    alpha_look = alpha / max_looks
    confidence_look = 1.0 - (1.0 - confidence) / max_looks
    a_groups: list[Sequence[float]] = []
    b_groups: list[Sequence[float]] = []
    _extend(a_groups, b_groups, more(initial_workers))
    history: list[Decision] = []
    while True:
        result = compare_paired(
            a_groups,
            b_groups,
            rel_floor=rel_floor,
            abs_floor=abs_floor,
            alpha=alpha_look,
            confidence=confidence_look,
            n_boot=n_boot,
            seed=seed + len(history),
            higher_is_worse=higher_is_worse,
            statistic=statistic,
        )
        history.append(result.decision)
        if result.decision != "unknown" or len(history) >= max_looks or len(a_groups) >= max_workers:
            break
        if not _extend(a_groups, b_groups, more(min(step_workers, max_workers - len(a_groups)))):
            break
    return AdaptiveResult(
        comparison=result,
        n_workers=len(a_groups),
        looks=len(history),
        max_looks=max_looks,
        alpha_per_look=alpha_look,
        confidence_per_look=confidence_look,
        history=tuple(history),
    )


def _extend(a_groups: list[Sequence[float]], b_groups: list[Sequence[float]], batch: GroupBatch) -> int:
    """Append a batch of paired groups; return how many pairs it held."""
    try:
        extra_a, extra_b = batch
    except (TypeError, ValueError) as exc:
        raise UserError(f"more() must return (a_groups, b_groups), got {batch!r:.80}") from exc
    if len(extra_a) != len(extra_b):
        raise UserError(
            f"more() returned {len(extra_a)} baseline and {len(extra_b)} candidate groups; they must be paired"
        )
    a_groups.extend(extra_a)
    b_groups.extend(extra_b)
    return len(extra_a)
