"""Did this change make anything slower (or bigger, or slower to compile)? A verdict per case and
metric with an effect, its confidence interval and the minimum detectable effect, and an exit code
to gate on: 0 no regression, 1 regression (or a failed candidate), 2 bad input, 3 undecided with
--fail-on-unknown.

Baselines: --base-ref REF (the compiler under test at REF, measured interleaved in the same job:
the default for pull requests), --against-pipeline NAME (another pipeline of the same compiler),
--baseline PATH (a stored baseline from `perfguard baseline update`), or --baseline store:[URL] (the
newest result of the suite in the history store, from this machine's fingerprint where there is one).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from perfguard.cli._cache import add_cache_arguments
from perfguard.cli._sampling import add_sampling_arguments
from perfguard.exit_codes import ExitCode

if TYPE_CHECKING:
    from perfguard.compare.verdicts import VerdictsDocument
    from perfguard.flows.check_request import CheckRequest, SamplingOptions
    from perfguard.suite import Suite

HELP = "compare against a git ref, a pipeline or a stored baseline; gate on regressions"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", nargs="?", help="suite file (TOML); not with --artifacts")
    from perfguard.cli._shard import shard_option

    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--base-ref", metavar="REF", help="compiler under test at this git ref (e.g. the merge-base)")
    group.add_argument("--against-pipeline", metavar="NAME", help="compare every pipeline with pipeline NAME")
    group.add_argument("--baseline", metavar="PATH",
                       help="stored baseline file (perfguard baseline update), or store:[URL] for the newest result "
                            "in the history store measured on this machine's fingerprint")
    parser.add_argument("--artifacts", metavar="DIR",
                        help="with --against-pipeline: compare the pipelines of an artifact folder written by "
                             "`perfguard compile` (verified and measured here, paired), instead of compiling SUITE")
    parser.add_argument("--case", metavar="PATTERN", help="only cases whose id matches (glob or text)")
    shard_option(parser, "`perfguard merge` joins the parts' --json documents into the verdicts of the whole")
    parser.add_argument("--json", metavar="PATH", help="write the verdicts as JSON")
    parser.add_argument("--report", metavar="DIR", help="write the HTML report, summary.md and comment.md into DIR")
    parser.add_argument("--annotations", action="store_true",
                        help="print ::error / ::warning GitHub workflow commands for regressions and undecided cases")
    parser.add_argument("--fail-on-unknown", action="store_true", help="exit 3 when a case stays undecided")
    parser.add_argument("--strict-env", action="store_true", help="refuse a baseline from another environment")
    add_sampling_arguments(parser)
    parser.add_argument("--explain", action="store_true",
                        help="after the verdicts, profile both sides of every case whose latency regressed and say "
                             "why it got slower: the change per op type and the bottleneck dimension (see `perfguard "
                             "profile`; --base-ref and --against-pipeline); for exact regressions (node count, size) "
                             "what the two pass traces say")
    parser.add_argument("--trace-out", metavar="DIR",
                        help="with --explain: a Perfetto / chrome://tracing file of both sides per explained case")
    parser.add_argument("--verbose", action="store_true", help="show every metric row")
    add_cache_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> ExitCode:
    import dataclasses

    from perfguard.cli._progress import RichProgress
    from perfguard.cli._sampling import sampling_options
    from perfguard.cli._shard import select_part
    from perfguard.flows.check_request import run_check
    from perfguard.suite import load_suite

    if args.artifacts:
        return _run_artifacts(args)
    if args.suite is None:
        from perfguard.errors import UserError

        raise UserError("give a SUITE file to check (or --artifacts DIR with --against-pipeline)")
    options = sampling_options(args)
    suite = options.counted(load_suite(args.suite))
    cases = suite.select(args.case)
    request = check_request(suite, args, options)
    decided = {"base_ref": args.base_ref, "against_pipeline": args.against_pipeline, "baseline": args.baseline,
               "case": args.case, "check": dataclasses.asdict(request.settings)}
    cases, shard = select_part(args, suite, cases, command="check", decided=decided)
    _check_outputs(args)
    progress = RichProgress(args.quiet)
    try:
        document = run_check(suite, cases, request, progress, shard)
    finally:
        progress.stop()
    return _report(document, args)


def check_request(suite: Suite, args: argparse.Namespace, options: SamplingOptions) -> CheckRequest:
    """The typed request of the command line's options (``--trace-out`` checked writable)."""
    from perfguard.flows.check_request import Against, CheckRequest

    against = Against.one_of(base_ref=args.base_ref, against_pipeline=args.against_pipeline, baseline=args.baseline)
    explain = None
    if args.explain or args.trace_out:
        from perfguard.errors import UserError
        from perfguard.profile.explain import ProfileSettings
        from perfguard.results import check_writable

        if not args.explain:
            raise UserError("--trace-out writes the profiles of --explain: add --explain")
        if args.trace_out and against.kind != "baseline":
            check_writable(args.trace_out, "--trace-out", directory=True)
        explain = ProfileSettings(trace_dir=args.trace_out)
    return CheckRequest(against, options.applied(suite.check), explain, args.strict_env)


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse unwritable outputs before any checkout, compile or measurement."""
    from perfguard.results import check_writable

    if args.json:
        check_writable(args.json, "--json")
    if args.report:
        check_writable(args.report, "--report", directory=True)


def _run_artifacts(args: argparse.Namespace) -> ExitCode:
    """``check --artifacts DIR --against-pipeline NAME``: the folder's pipelines, measured here."""
    from pathlib import Path

    from perfguard.cli._progress import RichProgress
    from perfguard.cli._sampling import sampling_options
    from perfguard.errors import UserError
    from perfguard.flows.check import check_artifacts_against_pipeline
    from perfguard.suite import load_suite

    if args.suite is not None:
        raise UserError("--artifacts DIR measures the folder's own suite: give no SUITE file")
    if not args.against_pipeline:
        raise UserError("--artifacts compares the folder's pipelines: add --against-pipeline NAME")
    if args.explain or args.trace_out or args.shard:
        raise UserError("--artifacts takes no --explain, --trace-out or --shard")
    folder = Path(args.artifacts)
    options = sampling_options(args)
    settings = options.applied(load_suite(folder / "suite.toml").check) if (folder / "suite.toml").is_file() else None
    _check_outputs(args)
    progress = RichProgress(args.quiet)
    try:
        document = check_artifacts_against_pipeline(folder, args.against_pipeline, settings, progress, args.case,
                                                    counts=options.counts)
    finally:
        progress.stop()
    return _report(document, args)


def _report(document: VerdictsDocument, args: argparse.Namespace) -> ExitCode:
    """Print, write and annotate the verdicts; the exit code to gate on."""
    from perfguard.cli._text import LOG_TABLE_WIDTH, cli_console, print_wrapped
    from perfguard.cli._verdicts import print_verdicts, write_verdicts
    from perfguard.compare.check import exit_code
    from perfguard.report.quality import check_timing_notes

    print_verdicts(document, args.verbose)
    notes = cli_console(min_width=130, log_width=LOG_TABLE_WIDTH)
    for note in check_timing_notes(document):  # why an interval is wide, where the values say so
        print_wrapped(notes, note)
    if document.explanations:
        from perfguard.cli._explain import print_explanations

        print_explanations(document.explanations)
    if getattr(args, "explain", False):
        from perfguard.cli._explain import print_exact_whys

        print_exact_whys(document)
    from perfguard.cli._explain import print_counted_why

    print_counted_why([document])
    write_verdicts(args.json, document)
    if args.report:
        from perfguard.cli.report import write_report

        written = write_report([document], args.report)
        print(f"report written to {written['html']}")
    if args.annotations:
        from perfguard.cli.report import print_annotations

        print_annotations([document])
    return exit_code(document, args.fail_on_unknown)
