"""The result of a comparison and the three-way decision rule shared by every comparison.

Decision rule (one place, used by :func:`~perfguard.stats.compare.compare_paired`,
:func:`~perfguard.stats.compare.compare_unpaired` and, with a zero-width interval,
:func:`~perfguard.stats.deterministic.compare_deterministic`):

``different``
    the test rejects (``p <= alpha``), the confidence interval of the ratio excludes 1, **and**
    the point estimate lies beyond the practical floor (``|ratio - 1| > floor``). The direction is
    the sign of the change, read through ``higher_is_worse``.
``same``
    the whole confidence interval lies inside ``[1 - floor, 1 + floor]``: any real change is
    smaller than the floor (an equivalence test at the interval's confidence). A statistically
    significant change inside the floor is ``same``: real, but too small to act on.
``unknown``
    anything else: too few workers, too much noise for this floor, or an effect near the floor.
    The remedy is more workers (:func:`~perfguard.stats.adaptive.adaptive_compare`).

Why the *point estimate* and not the whole interval beyond the floor: the interval rule needs
the effect to exceed the floor by a full interval half-width, which wastes most of the samples.
Simulated with realistic noise (within-process CV 3 %, process CV 1.5 %), a +2 % slowdown at a
1 % floor is caught 98.9 % of the time by this rule with 10 workers x 20 values, but 56.5 % by
the interval rule (20 x 20: 100 % vs 91 %). The false-alarm rate stays below ``alpha`` because
the test must reject first, and the floor pushes it towards zero: over nine A/A noise designs
(heavy tails, bimodal, drift and +35 % bursts, creation-order bias) at 10 x 10 values it is
0.3-3.4 % at floor 0, 0.2-2.6 % at floor 1 % and 0-0.4 % at the default 2 %. Numbers from
``python tests/test_stats_sim.py``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from perfguard import jsonfields as f
from perfguard.jsonfields import JsonDict
from perfguard.stats.estimators import t_quantile

Decision = Literal["same", "different", "unknown"]
Direction = Literal["regression", "improvement", "none"]

#: Power at which :attr:`Comparison.mde` is computed.
MDE_POWER = 0.8


def is_regression(decision: str | None, direction: str | None) -> bool:
    """The one rule of a regression, for a comparison in any of its forms (``Comparison``, a
    verdict row, a bisection probe's summary): ``different``, in the worse direction."""
    return decision == "different" and direction == "regression"


@dataclass(frozen=True)
class Comparison:
    """A verdict for one metric of one case: estimate, interval, test and three-way decision.

    ``ratio`` is candidate / baseline (``b / a``) as estimated by the comparison's method;
    ``ci_low`` and ``ci_high`` bound it at ``confidence``. ``mde`` is the smallest relative change
    (a fraction: 0.03 is 3 %) that this comparison would call ``different`` with 80 % power at the
    noise it measured (``inf`` when no change could be detected, e.g. too few workers).
    ``floor`` is the practical floor as a fraction, after converting an absolute floor with the
    baseline. ``baseline_median`` and ``candidate_median`` are medians of all values of each side
    (for display; the decision uses per-worker statistics). ``direction`` is ``"none"`` unless the
    decision is ``different`` - except for deterministic metrics, where it reports the sign of any
    change even when the change is within the gate.
    """

    decision: Decision
    direction: Direction
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    mde: float
    n_pairs: int
    baseline_median: float
    candidate_median: float
    floor: float
    reason: str
    method: str = "paired-wilcoxon"
    statistic: str = "median"
    alpha: float = 0.05
    confidence: float = 0.95

    @property
    def change(self) -> float:
        """Relative change ``ratio - 1`` (0.05 means 5 % larger than the baseline)."""
        return self.ratio - 1.0

    @property
    def is_regression(self) -> bool:
        """True when the decision is ``different`` in the worse direction (the gate fails)."""
        return is_regression(self.decision, self.direction)

    @property
    def under_floor(self) -> bool:
        """A real change the gate lets through: :func:`under_floor`."""
        return under_floor(self)

    @property
    def floor_note(self) -> str:
        """``+1.5%, under the 2% floor`` for a change :attr:`under_floor`, else ``""``."""
        return f"{self.change:+.1%}, under the {self.floor * 100:g}% floor" if self.under_floor else ""

    def to_json(self) -> JsonDict:
        """Plain dict for JSON output; non-finite floats become ``None`` (JSON has no inf/NaN)."""
        out: JsonDict = {}
        for key, value in dataclasses.asdict(self).items():
            if isinstance(value, float) and not math.isfinite(value):
                value = None
            out[key] = value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Comparison:
        """The inverse of :meth:`to_json`: a null float is NaN again (``mde``: infinity). A field
        missing or of the wrong type is a ``FieldError``; an absent default keeps its default."""
        defaults: dict[str, object] = {item.name: item.default for item in dataclasses.fields(cls)}

        def real(key: str) -> float:
            default = defaults[key]
            if key not in data and isinstance(default, float):
                return default  # a default (alpha, confidence)
            if data.get(key, 0) is None:
                return math.inf if key == "mde" else math.nan
            return f.number(data, key, _KIND)

        def word(key: str) -> str:
            default = defaults[key]
            return default if key not in data and isinstance(default, str) else f.string(data, key, _KIND)

        return cls(_decision(f.string(data, "decision", _KIND)), _direction(f.string(data, "direction", _KIND)),
                   real("ratio"), real("ci_low"), real("ci_high"), real("p_value"), real("mde"),
                   f.integer(data, "n_pairs", _KIND), real("baseline_median"), real("candidate_median"),
                   real("floor"), word("reason"), word("method"), word("statistic"), real("alpha"),
                   real("confidence"))


_KIND = "comparison"
_DECISIONS: dict[str, Decision] = {"same": "same", "different": "different", "unknown": "unknown"}
_DIRECTIONS: dict[str, Direction] = {"regression": "regression", "improvement": "improvement", "none": "none"}


def _decision(value: str) -> Decision:
    if value not in _DECISIONS:
        raise f.wrong_type(_KIND, "decision", " or ".join(_DECISIONS), value)
    return _DECISIONS[value]


def _direction(value: str) -> Direction:
    if value not in _DIRECTIONS:
        raise f.wrong_type(_KIND, "direction", " or ".join(_DIRECTIONS), value)
    return _DIRECTIONS[value]


def under_floor(c: Comparison) -> bool:
    """Whether ``c`` is ``same`` only because of the floor: the interval excludes no change, and
    either the test rejected (``p <= alpha``) or the metric is exact (a zero-width interval, no
    noise), yet the whole interval lies inside the floor. Real, too small to gate on; shown as
    such (``+1.5%, under the 2% floor``) so that "same" never hides a measured change. The
    decision is not changed."""
    if c.decision != "same" or not (c.floor > 0 and math.isfinite(c.ratio) and c.ratio != 1.0):
        return False
    excludes_one = c.ci_low > 1.0 or c.ci_high < 1.0
    exact = c.ci_low == c.ci_high
    return excludes_one and (exact or (math.isfinite(c.p_value) and c.p_value <= c.alpha))


def direction_of(change: float, higher_is_worse: bool) -> Direction:
    """Name the direction of a relative change: larger is a regression when ``higher_is_worse``."""
    if change == 0:
        return "none"
    worse = change > 0 if higher_is_worse else change < 0
    return "regression" if worse else "improvement"


def decide(
    *,
    ratio: float,
    ci_low: float,
    ci_high: float,
    p_value: float,
    floor: float,
    alpha: float,
    higher_is_worse: bool,
    detectable: bool,
    confidence: float,
) -> tuple[Decision, Direction, str]:
    """Apply the three-way rule in the module docstring; return (decision, direction, reason).

    ``detectable`` is False when the test cannot reach ``alpha`` at this sample size at all (for
    example fewer than 6 workers for the exact signed-rank test at 0.05); the reason says so.
    """
    change = ratio - 1.0
    pct = f"{change:+.2%}"
    ci = f"[{ci_low - 1.0:+.2%}, {ci_high - 1.0:+.2%}]"
    floor_text = f"\u00b1{floor:.2%}"
    significant = p_value <= alpha and (ci_low > 1.0 or ci_high < 1.0)
    if significant and abs(change) > floor:
        direction = direction_of(change, higher_is_worse)
        return (
            "different",
            direction,
            f"{direction} {pct} {ci}, p={p_value:.3g} <= {alpha:g}, beyond the {floor_text} floor",
        )
    if 1.0 - floor <= ci_low and ci_high <= 1.0 + floor:
        return ("same", "none", f"{pct}, {confidence:.0%} CI {ci} inside the {floor_text} floor")
    if not detectable:
        why = f"too few workers to reach p <= {alpha:g}"
    elif significant:
        why = f"p={p_value:.3g} but the estimate is within the {floor_text} floor"
    elif p_value <= alpha:
        why = f"p={p_value:.3g} but the CI includes no change"
    else:
        why = f"p={p_value:.3g} > {alpha:g}"
    return ("unknown", "none", f"{pct} {ci}: {why}, and the CI is not inside the {floor_text} floor")


def minimum_detectable_effect(
    *, ci_low: float, ci_high: float, n: int, floor: float, alpha: float, confidence: float, detectable: bool
) -> float:
    """Relative change detected with 80 % power at the noise implied by the interval.

    Formula, on the log scale where the interval is ``est +- t_{n-1}((1+confidence)/2) * SE``::

        SE  = (log ci_high - log ci_low) / (2 * t_{n-1}((1 + confidence) / 2))
        mde = exp(max(log(1 + floor), t_{n-1}(1 - alpha/2) * SE) + t_{n-1}(0.8) * SE) - 1

    The first term is the larger of the two hurdles the estimate must clear (the floor and the
    significance threshold); the second adds the 80 % power margin. ``inf`` when the test cannot
    reach ``alpha`` at this sample size or the interval is unbounded.
    """
    if not detectable or n < 2 or not (ci_low > 0 and math.isfinite(ci_high)):
        return math.inf
    df = n - 1
    se = (math.log(ci_high) - math.log(ci_low)) / (2.0 * t_quantile(0.5 + confidence / 2.0, df))
    hurdle = max(math.log1p(floor), t_quantile(1.0 - alpha / 2.0, df) * se)
    return math.expm1(hurdle + t_quantile(MDE_POWER, df) * se)
