"""Adaptive sampling: add worker processes while a comparison is UNKNOWN, up to a cap.

Peeking problem: testing after every batch and stopping at the first "different" gives the null
hypothesis several chances to look significant: looking at 8, 12, 16 and 20 workers, each at
alpha = 0.05, calls 9.2 % of A/A comparisons "different" with no floor, against 4.7 % with the
schedule below (600 simulated checks through ``perfguard.compare.check.adaptive_check``, in
``tests/test_stats_sim.py``). The same holds for "same" verdicts, which come from the interval.

Spending schedule (:func:`spending_schedule`): the number of looks K is planned in advance
(:func:`planned_looks`) and look k tests at a level ``a_k`` with ``a_1 + ... + a_K = alpha``;
its interval is built at ``1 - (1 - confidence) * a_k / alpha`` (``1 - a_k`` for a check, whose
confidence is ``1 - alpha``). By the union bound the chance of any false "different" over all
looks is at most ``alpha``, and likewise for a false "same"; the bound needs no assumption about
how the statistic evolves between looks (a Pocock or O'Brien-Fleming boundary does).

The first look gets half of alpha, the later looks split the other half equally: for the
default 8 -> 20 workers in steps of 4 (K = 4) that is 0.025 at 8 workers and 0.0083 at 12, 16
and 20. Why: the exact signed-rank test is discrete, its smallest two-sided p with n workers is
``2 / 2**n``: 0.0078 at 8 workers, 0.00049 at 12. At the first look the resolution is the
bottleneck. With the equal split (``alpha / K`` = 0.0125 per look) only "all 8 workers agree"
can reject, and Benjamini-Hochberg over m latency comparisons of which j regressed then needs
``0.0078 * K * m / j <= alpha``: a single regression among two models (0.0625) never decided
at the first look. With ``a_1`` = 0.025 one regression among up to three models
(``0.0156 * 3 = 0.047``) and 7 of 8 agreeing workers (p = 0.0156 or 0.0234) decide at once;
from 12 workers on the smallest p is far below 0.0083, so the smaller later levels cost little.
An O'Brien-Fleming-like schedule, spending almost nothing early, would make the first look
useless at 8 workers. Simulated through the production loop (``python
benchmarks/first_look.py``, two models per check, within-process CV 3 %, floor 2 %, 500 checks
per row), the fraction of comparisons decided at the first look, equal split -> this schedule:
+3 % (both models) 0.59 -> 0.93, +3 % (one of two) 0.002 -> 0.79, +5 % (one of two) 0 -> 0.99,
+10 % (one of two) 0 -> 1.00, +18 % (one of two) 0.004 -> 1.00; A/A decided (SAME) at the first
look 0.34 -> 0.45; A/A "different" at the 2 % floor 0 in 1000 comparisons with either.

A consequence of the exact signed-rank test: a look at level ``a`` needs at least
``ceil(log2(2 / a))`` workers before it can say "different" (7 for 0.025, 8 for 0.0083), so
the default first batch is 8 workers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from perfguard import jsonfields as f
from perfguard.jsonfields import JsonDict
from perfguard.stats.compare import compare_paired
from perfguard.stats.options import ComparisonOptions
from perfguard.stats.verdict import Comparison, Decision

GroupBatch = tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]]
T = TypeVar("T")


@dataclass(frozen=True)
class AdaptiveResult:
    """Outcome of :func:`adaptive_compare`: the last comparison and how it was reached.

    ``n_workers`` is the number of paired worker groups used, ``looks`` how many comparisons were
    made (``max_looks`` were planned), ``history`` the decision at each look, and
    ``alpha_by_look`` / ``confidence_by_look`` the levels of the planned looks
    (:attr:`SequentialPlan.levels`; the comparison of look k used the k-th).
    """

    comparison: Comparison
    n_workers: int
    looks: int
    max_looks: int
    alpha_by_look: tuple[float, ...]
    confidence_by_look: tuple[float, ...]
    history: tuple[Decision, ...]

    @property
    def stopped_early(self) -> bool:
        """True when a decision was reached before the planned last look."""
        return self.comparison.decision != "unknown" and self.looks < self.max_looks


def planned_looks(initial_workers: int, step_workers: int, max_workers: int) -> int:
    """Number of looks K = 1 + ceil((max_workers - initial_workers) / step_workers)."""
    return 1 + math.ceil(max(0, max_workers - initial_workers) / step_workers)


#: Share of ``alpha`` spent at the first look; the later looks split the rest equally.
FIRST_LOOK_SHARE = 0.5


def spending_schedule(alpha: float, looks: int, first_share: float = FIRST_LOOK_SHARE) -> tuple[float, ...]:
    """Significance level of each of ``looks`` looks: ``alpha * first_share`` at the first, the
    rest of ``alpha`` split equally over the others (one look: ``alpha``). The levels sum to
    ``alpha``, so by the union bound the chance of any false "different" over all looks is at most
    ``alpha`` (see the module docstring for why the first look gets the larger share)."""
    if looks < 1:
        raise ValueError(f"looks must be >= 1, got {looks!r}")
    if not 0.0 < first_share <= 1.0:
        raise ValueError(f"first_share must be in (0, 1], got {first_share!r}")
    if looks == 1:
        return (alpha,)
    rest = alpha * (1.0 - first_share) / (looks - 1)
    return (alpha * first_share, *([rest] * (looks - 1)))


@dataclass(frozen=True)
class SequentialPlan:
    """The planned looks of one sequential comparison, and the level each look tests at.

    Look ``k`` (1-based) uses ``initial_workers + (k - 1) * step_workers`` workers (capped at
    ``max_workers``), tests at ``levels[k - 1]`` (:func:`spending_schedule`) and builds its
    interval at ``1 - (1 - confidence) * levels[k - 1] / alpha``; with the default
    ``confidence = 1 - alpha`` that is ``1 - levels[k - 1]``, so a false "same" is bounded by the
    same budget as a false "different". ``adaptive=False`` is a single look at ``alpha`` (a stored
    baseline: nothing more can be measured).
    """

    initial_workers: int = 8
    step_workers: int = 4
    max_workers: int = 20
    alpha: float = 0.05
    confidence: float | None = None
    first_share: float = FIRST_LOOK_SHARE
    adaptive: bool = True

    @property
    def looks(self) -> int:
        if not self.adaptive:
            return 1
        return planned_looks(self.initial_workers, self.step_workers, self.max_workers)

    @property
    def levels(self) -> tuple[float, ...]:
        return spending_schedule(self.alpha, self.looks, self.first_share)

    @property
    def confidences(self) -> tuple[float, ...]:
        miss = 1.0 - (1.0 - self.alpha if self.confidence is None else self.confidence)
        return tuple(1.0 - miss * level / self.alpha for level in self.levels)

    def level(self, look: int) -> float:
        return self.levels[min(look, self.looks) - 1]

    def confidence_at(self, look: int) -> float:
        return self.confidences[min(look, self.looks) - 1]

    def sequential_p(self, p_value: float, level: float) -> float:
        """The p-value of a comparison made at a look of level ``level``, on the scale of the whole
        sequence: ``min(1, p * alpha / level)``. Under "no change" it is at most ``t`` with
        probability at most ``t`` whichever look the comparison stopped at (union bound over the
        looks), so Benjamini-Hochberg at ``alpha`` over these values controls the false-discovery
        rate of the sequential decisions, and a single comparison is rejected exactly when
        ``p <= level``."""
        return min(1.0, p_value * self.alpha / level)


@dataclass(frozen=True)
class Look:
    """One look of the sequential sampling: its number (from 1), the workers planned by then, and
    how many units were still undecided after it. A probe's and a check's sampling history is one
    per look, in a verdicts document's ``settings.history``, a bisection probe's ``looks``."""

    look: int
    workers: int
    undecided: int

    def to_json(self) -> JsonDict:
        return {"look": self.look, "workers": self.workers, "undecided": self.undecided}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Look:
        return cls(f.count(data, "look", "look"), f.count(data, "workers", "look"), f.count(data, "undecided", "look"))


def sequential_sampling(
    plan: SequentialPlan,
    look: Callable[[int], Collection[T]],
    more: Callable[[Collection[T], int], bool],
) -> list[Look]:
    """The sampling loop shared by ``perfguard check`` (:func:`perfguard.compare.check.adaptive_check`)
    and :func:`adaptive_compare`.

    ``look(k)`` decides everything at look ``k`` and returns the undecided units; while some are
    undecided, looks remain and the budget allows, ``more(units, n)`` measures ``n`` more workers
    for them (``step_workers``, less at ``max_workers``) and returns False when nothing more could
    be measured. The decision to go on depends only on the data; at most ``plan.looks`` looks are
    made, which is what the levels of the plan pay for. Returns one :class:`Look` per look
    (``workers``: the planned count at that look).
    """
    workers = plan.initial_workers
    history: list[Look] = []
    for k in range(1, plan.looks + 1):
        undecided = look(k)
        history.append(Look(k, workers, len(undecided)))
        if not undecided or k == plan.looks or workers >= plan.max_workers:
            break
        step = min(plan.step_workers, plan.max_workers - workers)
        if not more(undecided, step):
            break
        workers += step
    return history


def adaptive_compare(
    more: Callable[[int], GroupBatch],
    options: ComparisonOptions | None = None,
    *,
    initial_workers: int = 8,
    step_workers: int = 4,
    max_workers: int = 20,
) -> AdaptiveResult:
    """Run :func:`~perfguard.stats.compare.compare_paired` on growing samples until it decides.

    ``more(n)`` measures ``n`` new worker processes and returns ``(a_groups, b_groups)`` for them
    (paired, as for ``compare_paired``); it is first called with ``initial_workers`` (a caller
    that has already measured can return those groups from this first call), then with
    ``step_workers`` (less at the cap) while the decision is ``unknown`` and fewer than
    ``max_workers`` groups were collected. Returning no groups ends the sampling; returning fewer
    than asked (a crashed worker) is accepted.

    Test and thresholds: those of ``compare_paired`` with ``options`` (:class:`ComparisonOptions`,
    its defaults when None) at every look, look k at the level ``a_k`` of
    :func:`spending_schedule` and its interval at ``1 - (1 - confidence) * a_k / alpha``
    (:class:`SequentialPlan`, the plan ``perfguard check`` uses too; see the module docstring).
    The looks never exceed K = :func:`planned_looks` and the levels sum to ``alpha``, so the
    family-wise error stays within ``alpha``. The loop is :func:`sequential_sampling`.

    Assumption: the decision to continue depends only on the data (optional stopping is what the
    correction pays for); ``more`` measures new, independent processes.
    """
    if initial_workers < 1 or step_workers < 1:
        raise ValueError(
            f"initial_workers and step_workers must be >= 1, got {initial_workers} and {step_workers}"
        )
    if max_workers < initial_workers:
        raise ValueError(f"max_workers ({max_workers}) must be >= initial_workers ({initial_workers})")
    options = options if options is not None else ComparisonOptions()
    plan = SequentialPlan(initial_workers, step_workers, max_workers, options.alpha, options.confidence)
    a_groups: list[Sequence[float]] = []
    b_groups: list[Sequence[float]] = []
    _extend(a_groups, b_groups, more(initial_workers))
    history: list[Decision] = []
    results: list[Comparison] = []

    def look(k: int) -> set[int]:
        at_look = replace(options, alpha=plan.level(k), confidence=plan.confidence_at(k),
                          seed=options.seed + len(history))
        result = compare_paired(a_groups, b_groups, at_look)
        history.append(result.decision)
        results.append(result)
        return {0} if result.decision == "unknown" and len(a_groups) < max_workers else set()

    sequential_sampling(plan, look, lambda _, n: _extend(a_groups, b_groups, more(n)) > 0)
    return AdaptiveResult(
        comparison=results[-1],
        n_workers=len(a_groups),
        looks=len(history),
        max_looks=plan.looks,
        alpha_by_look=plan.levels,
        confidence_by_look=plan.confidences,
        history=tuple(history),
    )


def _extend(a_groups: list[Sequence[float]], b_groups: list[Sequence[float]], batch: GroupBatch) -> int:
    """Append a batch of paired groups; return how many pairs it held."""
    try:
        extra_a, extra_b = batch
    except (TypeError, ValueError) as exc:
        raise TypeError(f"more() must return (a_groups, b_groups), got {batch!r:.80}") from exc
    if len(extra_a) != len(extra_b):
        raise ValueError(
            f"more() returned {len(extra_a)} baseline and {len(extra_b)} candidate groups; they must be paired"
        )
    a_groups.extend(extra_a)
    b_groups.extend(extra_b)
    return len(extra_a)
