"""Check a suite without running it: TOML, keys, models, pipelines, passes, runners."""

from __future__ import annotations

import argparse

from perfguard.exit_codes import ExitCode

HELP = "check a suite file without running it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", help="suite file (TOML)")


def run(args: argparse.Namespace) -> ExitCode:
    from perfguard.compile.preflight import check_suite
    from perfguard.suite import load_suite

    suite = load_suite(args.suite)
    check_suite(suite, list(suite.cases))
    print(f"{args.suite}: ok: {len(suite.models)} models, {len(suite.pipelines)} pipelines, {len(suite.cases)} cases")
    return ExitCode.OK
