"""The whole night in one command: check the working tree against the last nightly commit in the
history store (same job, paired), store results and verdicts, find change points in every series,
confirm them (the next night, or an immediate same-job re-check), and bisect a newly confirmed
latency regression over its commit range (and the fixing range of an alert fixed tonight, for the
commit that fixed it).

  perfguard nightly SUITE [--store URL] [--summary FILE] [--json PATH] [--no-bisect] [--no-explain]

The first night of a suite in a store measures the working tree and starts the chain. Exit codes:
0 nothing new (also: tonight's commit already has a night on tonight's runner class, so nothing is
measured: one night per suite, runner class and commit); 1 a new confirmed regression; 2 bad input
or a bad store; 4 some cases failed.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfguard.cli._progress import RichProgress
    from perfguard.profile.explain import ProfileSettings
    from perfguard.results.shard import ShardInfo
    from perfguard.store import Store
    from perfguard.suite import CaseSpec, Suite
    from perfguard.suite.gates import CheckSettings

from perfguard.cli._cache import add_cache_arguments
from perfguard.exit_codes import ExitCode

HELP = "the nightly job: check against the last night, store, detect change points, bisect"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from perfguard.cli._sampling import add_sampling_arguments
    from perfguard.cli._shard import shard_option
    from perfguard.cli.history import store_option
    from perfguard.cli.profile import add_profile_arguments

    parser.add_argument("suite", help="suite file (TOML)")
    store_option(parser)
    parser.add_argument("--case", metavar="PATTERN", help="only cases whose id matches (glob or text)")
    shard_option(parser, "this part is only measured and stored (no detection, no bisection): run --follow-up "
                         "once after all N parts")
    parser.add_argument("--summary", metavar="FILE",
                        help="write the Markdown summary (what changed since the previous night) here, e.g. "
                             "$GITHUB_STEP_SUMMARY; it is printed either way")
    parser.add_argument("--json", metavar="PATH", help="write the night's verdicts (or first result) as JSON")
    parser.add_argument("--no-bisect", action="store_true",
                        help="do not bisect newly confirmed regressions, nor the fixing range of an alert fixed "
                             "tonight")
    parser.add_argument("--no-explain", action="store_true",
                        help="do not profile a new culprit against its parent to say why it is slower (the alert's "
                             "explanation); by default each new culprit is explained once")
    parser.add_argument("--bisect-only", action="store_true",
                        help="only bisect the store's confirmed regressions that have no bisection yet, and the "
                             "fixing ranges of fixed alerts whose fixing commit is not known (the follow-up job on "
                             "the runner class where they were seen); measures nothing else")
    parser.add_argument("--follow-up", action="store_true",
                        help="after the N parts of a sharded night (--shard K/N) stored theirs: re-check tonight's "
                             "latency regressions in a fresh job, detect and confirm change points over the store, "
                             "raise alerts and bisect once per new regression (one job per runner class); measures "
                             "nothing else")
    parser.add_argument("--no-recheck", action="store_true",
                        help="do not re-check a regression in a fresh job (it is then confirmed on the next night)")
    add_sampling_arguments(parser)
    add_cache_arguments(parser)
    add_profile_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> ExitCode:
    import dataclasses

    from perfguard.atomic import write_json_atomic
    from perfguard.cli._progress import RichProgress
    from perfguard.cli._sampling import sampling_options
    from perfguard.cli._shard import select_part
    from perfguard.cli._verdicts import print_verdicts
    from perfguard.cli.history import open_store
    from perfguard.flows.nightly.night import run_nightly
    from perfguard.report.nightly import markdown_summary
    from perfguard.report.plain import plain_text
    from perfguard.results import check_writable
    from perfguard.suite import load_suite

    options = sampling_options(args)
    suite = options.counted(load_suite(args.suite))
    cases = suite.select(args.case)
    settings = options.applied(suite.check)
    for path, option in ((args.json, "--json"), (args.summary, "--summary")):
        if path:
            check_writable(path, option)
    progress = RichProgress(args.quiet)
    if args.bisect_only:
        if args.shard:
            from perfguard.errors import UserError

            raise UserError("--shard K/N measures a part of the night; --bisect-only measures nothing")
        return _bisect_only(suite, cases, settings, args, progress)
    if args.follow_up:
        return _follow_up(suite, cases, settings, args, progress)
    with open_store(args.store, create=True) as store:
        cases, shard = select_part(args, suite, cases, command="nightly", store=store,
                                   decided={"case": args.case, "check": dataclasses.asdict(settings)})
        repeat = _repeated_night(store, suite, cases, shard)
        if repeat is not None:
            progress.stop()
            print(repeat)
            if args.summary:
                with open(args.summary, "a", encoding="utf-8") as handle:  # appended, as $GITHUB_STEP_SUMMARY is
                    handle.write(repeat + "\n")
            return ExitCode.OK
        try:
            report = run_nightly(suite, cases, store, settings, progress, bisect=not args.no_bisect,
                                 recheck=not args.no_recheck, shard=shard, explain=_explain(args))
        finally:
            progress.stop()
        if report.verdicts is not None:
            print_verdicts(report.verdicts)
        summary = markdown_summary(report)
        print(plain_text(summary), end="")  # the Markdown's escapes undone; names stay data (visible)
        if args.summary:
            with open(args.summary, "a", encoding="utf-8") as handle:  # $GITHUB_STEP_SUMMARY is appended to
                handle.write(summary + "\n")
        document_id = report.night.document_id
        if args.json and document_id is None:
            print(f"broken night: no document to write to {args.json}")
        elif args.json and document_id is not None:
            write_json_atomic(args.json, store.document(document_id))
            print(f"night written to {args.json}")
    if report.exit_regression:
        return ExitCode.REGRESSION
    return ExitCode.CASE_FAILED if report.failed_cases else ExitCode.OK


def _explain(args: argparse.Namespace) -> ProfileSettings | None:
    """How the night explains its new culprits, None under --no-explain."""
    from perfguard.cli.profile import profile_settings

    return None if args.no_explain else profile_settings(args)


def _repeated_night(store: Store, suite: Suite, cases: list[CaseSpec], shard: ShardInfo | None) -> str | None:
    """The line that says tonight repeats a recorded night (one per suite, runner class and
    commit: ``perfguard.flows.nightly.one_per_commit``), or None."""
    from perfguard.flows.nightly.one_per_commit import recorded_night
    from perfguard.flows.shards import head_commit
    from perfguard.names import visible

    commit = head_commit(suite)
    night = recorded_night(store, suite, cases, commit, shard) if commit else None
    if night is None:
        return None
    return (f"nightly: {visible(suite.name)} already has a night at commit {night.commit[:10]} (night {night.id}, "
            f"{night.time}{', broken' if night.broken else ''}) on tonight's runner class; one night per suite, "
            "runner class and commit: nothing measured")


def _follow_up(suite: Suite, cases: list[CaseSpec], settings: CheckSettings, args: argparse.Namespace,
               progress: RichProgress) -> ExitCode:
    from perfguard.cli.history import open_store
    from perfguard.errors import UserError
    from perfguard.flows.nightly.shard_followup import follow_up
    from perfguard.report.nightly import markdown_summary
    from perfguard.report.plain import plain_text

    if args.shard or args.bisect_only:
        raise UserError("--follow-up decides over the stored parts of a sharded night: no --shard or --bisect-only")
    with open_store(args.store, create=False) as store:
        try:
            report = follow_up(suite, cases, store, settings, progress, bisect=not args.no_bisect,
                               recheck=not args.no_recheck, explain=_explain(args))
        finally:
            progress.stop()
    summary = markdown_summary(report)
    print(plain_text(summary), end="")
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as handle:
            handle.write(summary + "\n")
    return ExitCode.REGRESSION if report.exit_regression else ExitCode.OK


def _bisect_only(suite: Suite, cases: list[CaseSpec], settings: CheckSettings, args: argparse.Namespace,
                 progress: RichProgress) -> ExitCode:
    from perfguard.cli.history import open_store
    from perfguard.flows.bisection.fix_search import bisect_fixes
    from perfguard.flows.nightly.night import bisect_open_changes
    from perfguard.report.nightly import bisections_summary
    from perfguard.report.plain import plain_text

    with open_store(args.store, create=False) as store:
        try:
            done = bisect_open_changes(suite, cases, store, settings, progress, _explain(args))
            fixes = bisect_fixes(suite, cases, store, settings, progress)  # the fixing ranges not yet bisected
        finally:
            progress.stop()
    summary = bisections_summary(suite.name, done, fixes)
    print(plain_text(summary), end="")
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as handle:
            handle.write(summary)
    return ExitCode.OK
