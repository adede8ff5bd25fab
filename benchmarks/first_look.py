"""How many workers does a regression cost? The production loop with simulated worker values.

Every simulated check goes through ``perfguard.compare.check.adaptive_check`` (the loop ``perfguard check``
runs: the spending schedule, latency tested per look, Benjamini-Hochberg per family, re-measuring
undecided cases); only ``remeasure`` is simulated, handing out the next workers of noise drawn
as in ``tests/test_stats_sim.py`` (within-process CV 3 %, process CV 1.5 %, 10 values per worker,
5 compile times per side that do not change). Defaults of ``[check]``: 8 -> 20 workers in steps
of 4, alpha 0.05, latency floor 2 %. Each check has two models (as the real check of issue 10),
either both with the true effect or only the first.

    .venv/bin/python benchmarks/first_look.py                 # about 2 minutes on 2 cores
    .venv/bin/python benchmarks/first_look.py --compare-equal # also the equal split alpha/K

Columns: "look 1" the fraction of the effect's comparisons decided (DIFFERENT or SAME) at the
first look with 8 workers; "regression" the fraction called a regression by the end; "workers"
the mean workers its candidate was measured with; "A/A alarms" the DIFFERENT rate of the
unchanged comparisons (the 0 % rows, and the unchanged model of the "one" rows).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perfguard.compare.check as check  # noqa: E402
from perfguard.stats.adaptive import SequentialPlan  # noqa: E402
from tests.test_stats_sim import latency_rows, simulated_checks  # noqa: E402

EFFECTS = (0.0, 0.03, 0.05, 0.10, 0.18)


def table(checks: int, seed: int) -> None:
    plan = check.check_plan(check.CheckSettings())
    print(f"levels per look {', '.join(f'{a:.4f}' for a in plan.levels)} (sum {sum(plan.levels):.3f}); "
          f"{checks} checks of 2 models per row")
    print(f"{'effect':>7s} {'models':>6s} {'look 1':>7s} {'regression':>10s} {'workers':>8s} {'A/A alarms':>11s}")
    for k, effect in enumerate(EFFECTS):
        for both in (True, False) if effect else (True,):
            shifts = (effect, effect) if both else (effect, 0.0)
            results = simulated_checks(seed + 10 * k + both, checks, shifts)
            hit, null = [], []
            for result in results:
                for row, shift in zip(latency_rows(result), shifts, strict=True):
                    workers = result[2][row.case]
                    (hit if shift else null).append((row, workers))
            target = hit or null
            look1 = np.mean([r.decision != "unknown" and w == 8 for r, w in target])
            regression = np.mean([r.decision == "different" and r.direction == "regression" for r, _ in target])
            workers = np.mean([w for _, w in target])
            alarms = f"{np.mean([r['decision'] == 'different' for r, _ in null]):.4f}" if null else "-"
            print(f"{effect:+7.0%} {'both' if both else 'one':>6s} {look1:7.3f} {regression:10.3f} {workers:8.2f} "
                  f"{alarms:>11s}", flush=True)


def suite_sizes(checks: int, seed: int) -> None:
    """One model +18 %, the others unchanged: Benjamini-Hochberg over m latency comparisons needs
    the regression's look-adjusted p times m to stay under alpha."""
    print(f"\none model +18 %, the others unchanged ({checks} checks per row)")
    print(f"{'models':>6s} {'look 1':>7s} {'regression':>10s} {'workers':>8s} {'A/A alarms':>11s}")
    for models in (2, 3, 4, 8, 16):
        results = simulated_checks(seed + models, checks, (0.18,) + (0.0,) * (models - 1))
        hit = [(latency_rows(r)[0], r[2][latency_rows(r)[0].case]) for r in results]
        null = [row for r in results for row in latency_rows(r)[1:]]
        look1 = np.mean([r.decision != "unknown" and w == 8 for r, w in hit])
        regression = np.mean([r.decision == "different" and r.direction == "regression" for r, _ in hit])
        alarms = np.mean([r.decision == "different" for r in null])
        print(f"{models:6d} {look1:7.3f} {regression:10.3f} {np.mean([w for _, w in hit]):8.2f} {alarms:11.4f}",
              flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checks", type=int, default=500, help="simulated checks per row (default 500)")
    parser.add_argument("--seed", type=int, default=4000)
    parser.add_argument("--compare-equal", action="store_true",
                        help="also run the equal split alpha/K of every look (the schedule before issue 10)")
    args = parser.parse_args()
    started = time.time()
    print("production schedule (half of alpha at the first look, the rest split over the later ones):")
    table(args.checks, args.seed)
    suite_sizes(max(50, args.checks // 5), args.seed + 500)
    if args.compare_equal:
        production = check.check_plan

        def equal(settings: check.CheckSettings, adaptive: bool = True) -> SequentialPlan:
            plan = production(settings, adaptive)
            return dataclasses.replace(plan, first_share=1.0 / plan.looks)

        check.check_plan = equal  # type: ignore[assignment]
        try:
            print("\nfor comparison, the equal split alpha/K (Bonferroni over looks):")
            table(args.checks, args.seed)
        finally:
            check.check_plan = production  # type: ignore[assignment]
    print(f"\n{time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
