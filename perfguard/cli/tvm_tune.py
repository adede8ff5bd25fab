"""Build a pinned MetaSchedule tuning database for a TVM case's model.

  perfguard tvm-tune SUITE --case MODEL/PIPELINE/RUNNER --trials N --out DIR [--seed S]

The database covers the union of the tasks of every pipeline of the suite that runs the case's
model on its backend; pipelines apply it with ``MetaScheduleApplyDatabase`` and
``options.database = DIR``. Exit codes: 0 written; 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfguard.exit_codes import ExitCode

HELP = "build a pinned MetaSchedule database (tvm backend) for one case's model"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", help="suite file (TOML)")
    parser.add_argument("--case", required=True, metavar="PATTERN",
                        help="exactly one case (model/pipeline/runner): its model and backend choose the pipelines")
    parser.add_argument("--trials", type=int, required=True, metavar="N",
                        help="random schedule candidates built and timed per task")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="database directory to write (replaced as a whole); name it in options.database")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampled schedules (default 0)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> ExitCode:
    from perfguard.flows.probe import require_case
    from perfguard.flows.tuning.tvm_database import tune_database
    from perfguard.suite import load_suite

    suite = load_suite(args.suite)
    case = require_case(suite, args.case)

    def log(line: str) -> None:
        if not args.quiet:
            print(f"tvm-tune: {line}", file=sys.stderr, flush=True)

    summary = tune_database(suite, case, Path(args.out), args.trials, seed=args.seed, log=log)
    print(f"{summary.out}: {summary.records} records for {summary.tasks} tasks of pipelines "
          f"{', '.join(summary.pipelines)} ({summary.failed} failed trials) in {summary.seconds:.1f} s")
    return ExitCode.OK
