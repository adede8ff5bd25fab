"""A/A calibration: every case against itself (two sessions of the same artifact in the same
workers). Reports per case the noise, the A/A verdict (a DIFFERENT is a false positive), the
minimum detectable effect at the check budget, and a recommended latency floor; --write FILE
stores the floors as threshold overrides that a suite includes with [thresholds] include = FILE."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfguard.exit_codes import ExitCode

HELP = "A/A runs: noise, false positives, detectable effect, recommended floors"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", help="suite file (TOML)")
    parser.add_argument("--case", metavar="PATTERN", help="only cases whose id matches")
    parser.add_argument("--workers", type=int, metavar="N", help="workers (default: the suite's [check] workers)")
    parser.add_argument("--write", metavar="FILE", help="write recommended floors (TOML) for [thresholds] include")
    parser.add_argument("--json", metavar="PATH", help="write the calibration as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> ExitCode:
    import dataclasses

    from rich.table import Table
    from rich.text import Text

    from perfguard.cli._progress import RichProgress
    from perfguard.cli._text import cli_console, literal
    from perfguard.errors import UserError
    from perfguard.flows.calibrate import calibrate, floors_toml
    from perfguard.results import check_writable, write_json_atomic, write_text_atomic
    from perfguard.suite import load_suite

    suite = load_suite(args.suite)
    if args.write:  # outputs are checked before any measurement
        check_writable(args.write, "--write")
    if args.json:
        check_writable(args.json, "--json")
    settings = suite.check
    if args.workers is not None:
        if args.workers < 2:
            raise UserError(f"--workers must be >= 2, found {args.workers}")
        settings = dataclasses.replace(settings, workers=args.workers)
    progress = RichProgress(args.quiet)
    try:
        result = calibrate(suite, suite.select(args.case), settings, progress)
    finally:
        progress.stop()
    table = Table(title=literal(f"perfguard calibrate: {suite.name} (A/A, {settings.workers} workers)"))
    for column in ("case", "noise sd", "within cv", "A/A change", "interval", "verdict", "mde", "floor"):
        table.add_column(column, justify="left" if column in ("case", "verdict") else "right")
    for row in result.cases:
        if row.status != "ok":
            failed = (Text("failed", "red") if row.status == "failed"
                      else Text.assemble(("unknown", "yellow"), literal(f": {row.reason}")))
            table.add_row(literal(row.case), "", "", "", "", failed, "", "")
            continue
        mde = f"{row.mde * 100:.1f}%" if row.mde is not None else "n/a"
        verdict = "[bold red]FALSE POSITIVE[/]" if row.false_positive else row.decision
        table.add_row(literal(row.case), _pct(row.noise_sd, 2), _pct(row.within_cv), _pct(_less_one(row.aa_ratio), 2, "+"),
                      f"[{_pct(_less_one(row.ci_low), 1, '+')}, {_pct(_less_one(row.ci_high), 1, '+')}]", verdict,
                      mde, f"{(row.recommended_floor or 0.0) * 100:g}%")
    cli_console(min_width=130).print(table)
    print(f"{result.false_positives} false positive(s) in {len(result.cases)} A/A comparisons")
    if args.write:
        path = Path(args.write)
        write_text_atomic(path, floors_toml(result))
        print(f"floors written to {path}; include them with [thresholds] include = \"{path.name}\"")
    if args.json:
        write_json_atomic(args.json, result.to_json())
    return ExitCode.OK


def _less_one(ratio: float | None) -> float | None:
    return None if ratio is None else ratio - 1


def _pct(value: float | None, digits: int = 1, sign: str = "") -> str:
    return "n/a" if value is None else f"{value * 100:{sign}.{digits}f}%"
