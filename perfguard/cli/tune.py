"""Find a better pinned pass order for one case, and prove it with the check.

  perfguard tune SUITE --case MODEL/PIPELINE/RUNNER [--budget N | --time 20m] [--passes a,b,c|FILE|suite|all]
                 [--objective latency|compile_time|both] [--out suite-patch.toml] [--json F] [--report DIR]

Starts from the case's pinned pipeline; searches pipelines made by dropping, inserting, moving
passes (and the backend's own option edits: IREE's opt level and flags, TVM's opt level): greedy ablation, best single insert or move, then
random local search. Illegal candidates (compile error, invalid model, wrong answer) are recorded
and never measured; identical artifacts are measured once. Screens are cheap; every accepted move
is confirmed in a fresh paired probe, and the winner is proved in a fresh paired check against the
pinned order on every model the pipeline runs on. State is saved after every evaluation: the same
command resumes a killed run. Exit codes: 0 a proved better order (the patch is written); 3 nothing
better within the budget, or the winner was not proved (rejected on some model, or no decided
gain); 2 bad input.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.cli._cache import add_cache_arguments
from perfguard.exit_codes import ExitCode

if TYPE_CHECKING:
    from perfguard.flows.tuning.tune_flow import TuneResult

HELP = "search for a better pass order of one case and prove it with the check"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", help="suite file (TOML)")
    parser.add_argument("--case", required=True, metavar="PATTERN", help="exactly one case (model/pipeline/runner)")
    parser.add_argument("--budget", type=int, metavar="N",
                        help="candidates to try, infeasible and identical ones included (default 60; with --time "
                             "alone: no limit but the time)")
    parser.add_argument("--time", metavar="DURATION", help="stop searching after this long (e.g. 20m); the proof follows")
    parser.add_argument("--passes", metavar="LIST",
                        help="passes an insert may add: a,b,c, a file with one per line, 'suite' (default: the "
                             "suite's pipelines' passes and the backend's own) or 'all' (every pass of the backend)")
    parser.add_argument("--objective", choices=("latency", "compile_time", "both"), default="latency")
    parser.add_argument("--out", metavar="PATH", help="write the proved pipeline as a suite patch (TOML)")
    parser.add_argument("--json", metavar="PATH", help="write the tune document (search, trajectory, proof)")
    parser.add_argument("--report", metavar="DIR", help="write the HTML report (trajectory plot, top orders, proof)")
    parser.add_argument("--state", metavar="FILE", help="state file (default: .perfguard/tune-KEY.json)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the local search's random moves (default 0)")
    parser.add_argument("--screen-workers", type=int, default=4, metavar="N",
                        help="worker processes per screen (default 4)")
    parser.add_argument("--batch", type=int, default=8, metavar="N",
                        help="candidates measured together with the incumbent per screen (default 8)")
    parser.add_argument("--no-proof", action="store_true", help="search only: do not prove the winner")
    parser.add_argument("--workers", type=int, metavar="N", help="first-look workers of confirmations and the proof")
    parser.add_argument("--max-workers", type=int, metavar="N", help="worker budget of confirmations and the proof")
    add_cache_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> ExitCode:
    from perfguard.cli._progress import RichProgress
    from perfguard.cli._sampling import sampling_options
    from perfguard.errors import UserError
    from perfguard.flows.probe import require_case
    from perfguard.flows.tuning.order_search import UNLIMITED
    from perfguard.flows.tuning.tune_flow import tune
    from perfguard.results import check_writable, write_json_atomic, write_text_atomic
    from perfguard.suite import load_suite
    from perfguard.units import parse_duration

    suite = load_suite(args.suite)
    case = require_case(suite, args.case)
    if args.budget is None:
        args.budget = UNLIMITED if args.time else 60
    for option, value, least in (("--budget", args.budget, 1), ("--screen-workers", args.screen_workers, 2),
                                 ("--batch", args.batch, 1)):
        if value < least:
            raise UserError(f"{option} must be >= {least}, found {value}")
    time_limit = parse_duration(args.time, "--time") if args.time else None
    options = sampling_options(args)
    suite = options.counted(suite)
    settings = options.applied(suite.check)
    # Every output is checked before the first compile.
    for option, target in (("--out", args.out), ("--json", args.json), ("--state", args.state)):
        if target:
            check_writable(target, option)
    if args.report:
        check_writable(args.report, "--report", directory=True)
    if not args.state:
        check_writable(Path(".perfguard") / "tune-state.json", "the state folder (set --state FILE)")
    progress = RichProgress(args.quiet)
    try:
        result = tune(suite, case, settings, progress, objective=args.objective, budget=args.budget,
                      time_limit_s=time_limit, passes=args.passes, seed=args.seed,
                      screen_workers=args.screen_workers, batch=args.batch,
                      state_path=Path(args.state) if args.state else None, proof=not args.no_proof)
    finally:
        progress.stop()
    print_result(result)
    if args.json:
        write_json_atomic(args.json, result.to_json())
        print(f"tune document written to {args.json}")
    if args.out and result.patch:
        write_text_atomic(args.out, result.patch)
        print(f"suite patch written to {args.out}")
    if args.report:
        from perfguard.cli.report import write_report

        written = write_report([result], args.report)
        print(f"report written to {written['html']}")
    return ExitCode.OK if result.status == "proved" else ExitCode.INCONCLUSIVE


def _pct(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{(value - 1) * 100:+.1f}%"


def _mde(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value * 100:.1f}%"


def nothing_better(result: TuneResult) -> str:
    """What a search that accepted nothing could have detected."""
    if not any(p.status == "screened" for p in result.points):
        return ("nothing better within the budget: every candidate tried compiled to the incumbent's artifact or "
                "was infeasible, so no order within reach changes this model's compiled graph")
    return (f"nothing better within the budget: a gain had to pass the {result.floor * 100:.1f}% floor; a "
            f"confirmation could detect {_mde(result.confirm_mde)} (its MDE), a screen "
            f"{_mde(result.screen_mde)}")


def print_result(result: TuneResult) -> None:
    from perfguard.names import visible

    def say(text: str = "", end: str = "\n") -> None:  # names are data: bidi marks shown, not obeyed
        sys.stdout.write(visible(text, keep_newlines=True) + end)

    points = result.points
    counts = {s: sum(1 for p in points if p.status == s) for s in ("screened", "identical", "infeasible")}
    say()
    say(f"tune {result.case}: {len(points)} candidates in {result.wall_time_s:.0f} s (stopped: {result.stopped}): "
        f"{counts['screened']} screened, {counts['identical']} identical to the incumbent (not timed), "
        f"{counts['infeasible']} infeasible; {result.confirmations} confirmation probe(s)")
    for step in result.steps:
        say(f"  accepted #{step.index} {step.move}: latency {_pct(step.latency.ratio)} "
            f"[{_pct(step.latency.ci_low)}, {_pct(step.latency.ci_high)}]")
    say(f"start: {result.start.describe()}")
    say(f"best:  {result.best.describe()}")
    if result.status == "nothing-better":
        say(nothing_better(result))
        return
    for effect in result.proof_effects:
        line = (f"  proof {effect['case']}: {effect['metric']} {_pct(effect.get('ratio'))} "
                f"[{_pct(effect.get('ci_low'))}, {_pct(effect.get('ci_high'))}] {effect['decision']}")
        say(line + (f"; rejects: {effect['rejects']}" if effect.get("rejects") else ""))
    verdict = {"proved": "proved: the tuned order is faster and regresses no model",
               "rejected": "rejected: the tuned order regresses or fails on a model (see above)",
               "no-gain": "not proved: the fresh check does not decide a gain",
               "unproved": "not proved (--no-proof)"}
    say(verdict.get(result.status, result.status))
    if result.patch:
        say(result.patch, end="")
