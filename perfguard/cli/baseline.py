"""Stored baselines: `perfguard baseline update SUITE` measures the suite and writes the result
under baselines/ (keyed by the full case key, with raw values and the environment fingerprint);
`perfguard check SUITE --baseline PATH` compares against it."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfguard.exit_codes import ExitCode

HELP = "write or refresh a stored baseline"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(parser))
    update = sub.add_parser("update", help="measure SUITE and store the result as its baseline")
    update.add_argument("suite", help="suite file (TOML)")
    update.add_argument("--out", metavar="PATH", help="baseline file (default: baselines/SUITE.json)")
    update.add_argument("--case", metavar="PATTERN", help="only cases whose id matches")
    update.add_argument("--workers", type=int, metavar="N", help="workers (default: the suite's [check] workers)")
    update.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> ExitCode:
    import dataclasses

    from perfguard.cli._progress import RichProgress
    from perfguard.cli.run import print_table
    from perfguard.errors import UserError
    from perfguard.measure.job import run_suite
    from perfguard.names import safe_filename
    from perfguard.results import check_writable, write_json_atomic
    from perfguard.suite import load_suite

    suite = load_suite(args.suite)
    workers = args.workers or suite.check.workers
    if workers < 1:
        raise UserError(f"--workers must be >= 1, found {workers}")
    cases = [dataclasses.replace(c, measure=dataclasses.replace(c.measure, workers=workers))
             for c in suite.select(args.case)]
    out = Path(args.out) if args.out else Path("baselines") / f"{safe_filename(suite.name)}.json"
    check_writable(out, "--out" if args.out else "the baseline file (set --out PATH)")
    progress = RichProgress(args.quiet)
    try:
        document = run_suite(suite, cases, progress=progress)
    finally:
        progress.stop()
    failed = [c.id for c in document.cases if not c.ok]
    if failed:
        raise UserError(f"not writing a baseline: {len(failed)} case(s) failed ({', '.join(failed[:3])}); "
                        "fix them or leave them out with --case")
    write_json_atomic(out, document.to_json())
    print_table(document)
    print(f"baseline written to {out}")
    return ExitCode.OK
