"""Compile here, measure there: compile every case of SUITE on this machine (pass traces and the
correctness check included) and write the artifacts with a manifest into DIR. On the runner
machine, `perfguard run --artifacts DIR` verifies and measures them."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "compile a suite into an artifact folder for another machine"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", help="suite file (TOML)")
    parser.add_argument("--out", required=True, metavar="DIR", help="new folder for the artifacts and manifest")
    parser.add_argument("--case", metavar="PATTERN", help="only cases whose id matches")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from perfguard.artifacts import compile_to_dir
    from perfguard.cli.run import RichProgress
    from perfguard.suite import load_suite

    suite = load_suite(args.suite)
    progress = RichProgress(args.quiet)
    try:
        manifest = compile_to_dir(suite, suite.select(args.case), Path(args.out), progress)
    finally:
        progress.stop()
    failed = [c for c in manifest["cases"] if c["status"] != "ok"]
    for case in failed:
        print(f"failed: {case['id']}: {case['error']['stage']}: {case['error']['message']}")
    print(f"{len(manifest['cases']) - len(failed)} artifacts written to {args.out} (manifest.json); "
          f"measure them with: perfguard run --artifacts {args.out}")
    return 4 if failed else 0
