"""Join the shards of one sharded check (or run) into the document of the whole.

  perfguard merge SHARD.json... --json merged.json [--report DIR] [--fail-on-unknown]

The shards are the --json documents of `perfguard check --shard K/N` (verdicts) or the result
files of `perfguard run --shard K/N`, every K from 1 to N once. The verdicts are corrected again as
one family over the union of the shards (Benjamini-Hochberg from each row's own p-value), exactly
as an unsharded check decides, and the exit code is the whole check's: 0 no regression, 1 a
regression or a failed candidate (a run: 4 failed cases), 3 undecided with --fail-on-unknown, 2 a
missing, duplicated or foreign shard (one line naming it).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from perfguard.exit_codes import ExitCode

if TYPE_CHECKING:
    from perfguard.report import Document

HELP = "join the shard documents of a sharded check or run into the verdicts (or result) of the whole"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("documents", nargs="+", metavar="SHARD",
                        help="the --json documents of `check --shard K/N` (or result files of `run --shard K/N`), "
                             "one per K")
    parser.add_argument("--json", metavar="PATH", required=True, help="write the merged document here")
    parser.add_argument("--report", metavar="DIR", help="write the HTML report, summary.md and comment.md into DIR")
    parser.add_argument("--annotations", action="store_true",
                        help="print ::error / ::warning GitHub workflow commands for regressions and undecided cases")
    parser.add_argument("--fail-on-unknown", action="store_true", help="exit 3 when a case stays undecided")
    parser.add_argument("--quiet", action="store_true", help="print only the summary line, not the verdicts table")


def run(args: argparse.Namespace) -> ExitCode:
    from perfguard.compare.check import exit_code
    from perfguard.compare.merge import merge_results, merge_verdicts
    from perfguard.compare.verdicts import VerdictsDocument
    from perfguard.errors import UserError
    from perfguard.report import load_document
    from perfguard.results import ResultDocument, check_writable, write_json_atomic

    check_writable(args.json, "--json")
    if args.report:
        check_writable(args.report, "--report", directory=True)
    loaded = [(path, load_document(path)) for path in args.documents]
    verdicts = [(p, d) for p, d in loaded if isinstance(d, VerdictsDocument)]
    results = [(p, d) for p, d in loaded if isinstance(d, ResultDocument)]
    if len(verdicts) + len(results) != len(loaded) or (verdicts and results):
        odd = next(p for p, d in loaded if not isinstance(d, VerdictsDocument if verdicts else ResultDocument))
        raise UserError(f"{odd}: merge takes the verdicts of `check --shard` or the results of `run --shard`, "
                        "all of one kind")
    if results:
        merged_run, warnings = merge_results(results)
        write_json_atomic(args.json, merged_run.to_json())
        _warn(warnings)
        failed = sum(1 for c in merged_run.cases if not c.ok)
        print(f"{len(results)} shards merged: {len(merged_run.cases)} cases, {failed} failed; written to {args.json}")
        if args.report:
            _report(merged_run, args.report)
        return ExitCode.CASE_FAILED if failed else ExitCode.OK
    document, warnings = merge_verdicts(verdicts)
    if not args.quiet:
        from perfguard.cli._verdicts import print_verdicts

        print_verdicts(document)
    else:
        _warn(warnings)
    write_json_atomic(args.json, document.to_json())
    print(f"{len(verdicts)} shards merged, corrected as one family: verdicts written to {args.json}")
    if args.report:
        _report(document, args.report)
    if args.annotations:
        from perfguard.cli.report import print_annotations

        print_annotations([document])
    return exit_code(document, args.fail_on_unknown)


def _warn(warnings: list[str]) -> None:
    from perfguard.names import visible

    for warning in warnings:
        print(f"warning: {visible(warning)}")


def _report(document: Document, out: str) -> None:
    from perfguard.cli.report import write_report

    written = write_report([document], out)
    print(f"report written to {written['html']}")
