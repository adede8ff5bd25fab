"""The options of one noisy comparison's test, as one value.

:func:`~perfguard.stats.compare.compare_paired`, :func:`~perfguard.stats.compare.compare_unpaired`,
:func:`~perfguard.stats.adaptive.adaptive_compare` and the check's rows
(:func:`perfguard.compare.check.compare_pair`) take the same eight options; a
:class:`ComparisonOptions` carries them so that a caller builds them once and a look or an
across-runs floor changes one field (``dataclasses.replace``) instead of repeating the other seven.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfguard.errors import UserError
from perfguard.stats.estimators import check_statistic


@dataclass(frozen=True)
class ComparisonOptions:
    """Thresholds and levels of one comparison; checked when built (``ValueError``: the callers
    validate the user's settings, so a bad value here is a programming error).

    ``rel_floor`` is a fraction (0.02 for 2 %), ``abs_floor`` is in the metric's unit (seconds for
    times); the practical floor is the larger of the two relative to the baseline's ``statistic``.
    ``alpha`` is the test's level, ``confidence`` the interval's, ``n_boot`` and ``seed`` the
    bootstrap's resamples and random seed; ``higher_is_worse`` is False for a throughput. The
    defaults are the paired comparison's; :func:`~perfguard.stats.compare.compare_unpaired` given
    no options uses :data:`~perfguard.stats.compare.UNPAIRED_REL_FLOOR` instead of 2 %.
    """

    rel_floor: float = 0.02
    abs_floor: float = 0.0
    alpha: float = 0.05
    confidence: float = 0.95
    n_boot: int = 2000
    seed: int = 0
    higher_is_worse: bool = True
    statistic: str = "median"

    def __post_init__(self) -> None:
        try:
            check_statistic(self.statistic)  # a suite's statistic names are checked when it loads
        except UserError as exc:
            raise ValueError(str(exc)) from None
        if not (math.isfinite(self.rel_floor) and self.rel_floor >= 0):
            raise ValueError(f"rel_floor must be a fraction >= 0 (0.02 for 2 %), got {self.rel_floor!r}")
        if not (math.isfinite(self.abs_floor) and self.abs_floor >= 0):
            raise ValueError(
                f"abs_floor must be >= 0 in the metric's unit (seconds for times), got {self.abs_floor!r}"
            )
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence!r}")
        if self.n_boot < 100:
            raise ValueError(f"n_boot must be >= 100 for a usable interval, got {self.n_boot!r}")
