"""Compare two result files (A = baseline, B = candidate) case by case, unpaired and conservative.

Same verdicts, table, JSON and exit codes as `perfguard check`. Results from separate runs drift
(medians of separate processes differed 4-8 % here, bursts of +35 % came and went within
minutes), so prefer a same-job check (`check --base-ref` or `--against-pipeline`) where possible.
"""

from __future__ import annotations

import argparse

from perfguard.exit_codes import ExitCode

HELP = "compare two result files"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("baseline", help="result file A (the baseline)")
    parser.add_argument("candidate", help="result file B (the candidate)")
    parser.add_argument("--json", metavar="PATH", help="write the verdicts as JSON")
    parser.add_argument("--alpha", type=float, default=0.05, help="false-discovery level (default 0.05)")
    parser.add_argument("--fail-on-unknown", action="store_true", help="exit 3 when a case stays undecided")
    parser.add_argument("--strict-env", action="store_true", help="refuse results from different environments")
    parser.add_argument("--verbose", action="store_true", help="show every metric row")


def run(args: argparse.Namespace) -> ExitCode:
    from perfguard.cli._verdicts import print_verdicts, write_verdicts
    from perfguard.compare.check import exit_code
    from perfguard.compare.documents import compare_documents
    from perfguard.errors import UserError
    from perfguard.results import check_writable, load_result
    from perfguard.suite.gates import CheckSettings

    if not 0 < args.alpha < 0.5:
        raise UserError(f"--alpha must be between 0 and 0.5, found {args.alpha}")
    if args.json:
        check_writable(args.json, "--json")
    document = compare_documents(load_result(args.baseline), load_result(args.candidate),
                                 CheckSettings(alpha=args.alpha), (args.baseline, args.candidate), args.strict_env)
    print_verdicts(document, args.verbose)
    write_verdicts(args.json, document)
    return exit_code(document, args.fail_on_unknown)
