"""Statistics for perfguard: pure functions that turn samples into verdicts.

* :mod:`~perfguard.stats.thresholds` - typed thresholds parsed from ``median:3%``, ``p90:0.5ms``.
* :mod:`~perfguard.stats.compare` - paired (same-job A/B) and unpaired (stored baseline)
  comparisons returning a :class:`Comparison` with a three-way decision.
* :mod:`~perfguard.stats.options` - :class:`ComparisonOptions`, the floors and levels of one test.
* :mod:`~perfguard.stats.verdict` - the :class:`Comparison` result and the decision rule.
* :mod:`~perfguard.stats.adaptive` - add workers while UNKNOWN: the planned looks, the spending
  schedule of alpha over them, and the sampling loop that ``perfguard check`` runs.
* :mod:`~perfguard.stats.multiple` - Benjamini-Hochberg across a whole check (one family per metric).
* :mod:`~perfguard.stats.deterministic` - exact metrics (node count, artifact size).

No I/O and no global state; every function names its test, thresholds and assumptions in its
docstring. The A/A false-positive and power simulations that justify the defaults are in
``tests/test_stats_sim.py`` (run it as a script for the full tables).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfguard.stats.adaptive import (
        AdaptiveResult,
        SequentialPlan,
        adaptive_compare,
        planned_looks,
        sequential_sampling,
        spending_schedule,
    )
    from perfguard.stats.compare import UNPAIRED_REL_FLOOR, compare_paired, compare_unpaired
    from perfguard.stats.deterministic import compare_deterministic
    from perfguard.stats.multiple import benjamini_hochberg, bh_adjust
    from perfguard.stats.options import ComparisonOptions
    from perfguard.stats.thresholds import Threshold, parse_threshold
    from perfguard.stats.verdict import Comparison, Decision, Direction

# Where each name lives: imported on first use, so that importing one light submodule
# (``perfguard.stats.thresholds``, which a suite needs and a measurement worker imports) does
# not pull SciPy into every worker process.
_HOMES = {
    "AdaptiveResult": "adaptive", "SequentialPlan": "adaptive", "adaptive_compare": "adaptive",
    "planned_looks": "adaptive", "sequential_sampling": "adaptive", "spending_schedule": "adaptive",
    "UNPAIRED_REL_FLOOR": "compare", "compare_paired": "compare", "compare_unpaired": "compare",
    "compare_deterministic": "deterministic", "benjamini_hochberg": "multiple", "bh_adjust": "multiple",
    "ComparisonOptions": "options",
    "Threshold": "thresholds", "parse_threshold": "thresholds",
    "Comparison": "verdict", "Decision": "verdict", "Direction": "verdict",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'perfguard.stats' has no attribute {name!r}")
    return getattr(import_module(f"perfguard.stats.{home}"), name)


__all__ = [
    "UNPAIRED_REL_FLOOR",
    "AdaptiveResult",
    "Comparison",
    "ComparisonOptions",
    "Decision",
    "Direction",
    "SequentialPlan",
    "Threshold",
    "adaptive_compare",
    "benjamini_hochberg",
    "bh_adjust",
    "compare_deterministic",
    "compare_paired",
    "compare_unpaired",
    "parse_threshold",
    "planned_looks",
    "sequential_sampling",
    "spending_schedule",
]
