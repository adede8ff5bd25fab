"""Why did it get slower? Profile one case on both sides of a comparison, in fresh worker
processes apart from any timing, and print the per-op diff (op type and provider: nodes, kernel
time before and after with the interval across workers, share of the change; framework overhead;
session initialization) and the bottleneck dimension (compute, memory, scheduling,
compile-overhead, unclear) with the evidence that named it.

--trace-out DIR writes both sides as one Perfetto / chrome://tracing file (DIR/CASE/profile-trace.json).
--counts (or the suite's ``[measure] counts``) also counts both sides' inferences once under Valgrind
and lists the functions whose instructions moved most ("why, counted"), when the change of
instructions is past the suite's floor.
Exit codes: 0 explained (whatever the dimension), 2 bad input.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from perfguard.exit_codes import ExitCode

if TYPE_CHECKING:
    from perfguard.profile.explain import ProfileSettings

HELP = "profile one case on both sides of a comparison and say why it got slower"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", help="suite file (TOML)")
    parser.add_argument("--case", metavar="PATTERN", required=True, help="the case to profile (must match one)")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--against-pipeline", metavar="NAME", help="compare with the same model under pipeline NAME")
    group.add_argument("--base-ref", metavar="REF", help="compare with the compiler under test at this git ref")
    add_profile_arguments(parser)
    parser.add_argument("--json", metavar="PATH", help="write the explanation as JSON")
    parser.add_argument("--trace-out", metavar="DIR", help="write a Perfetto trace of both sides into DIR")
    parser.add_argument("--counts", action="store_true",
                        help="also count both sides once under Valgrind (callgrind) and attribute their change of "
                             "instructions per inference to functions: why, counted (needs valgrind; also on with the "
                             "suite's [measure] counts)")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    """--profile-workers and --profile-runs (``profile`` and ``check --explain``)."""
    parser.add_argument("--profile-workers", type=int, default=3, metavar="N",
                        help="profiled worker processes per side (default 3)")
    parser.add_argument("--profile-runs", type=int, default=20, metavar="N",
                        help="profiled runs per worker, after the warm-up (default 20)")


def profile_settings(args: argparse.Namespace, trace_dir: str | None = None) -> ProfileSettings:
    from perfguard.errors import UserError
    from perfguard.profile.explain import ProfileSettings

    if args.profile_workers < 1:
        raise UserError(f"--profile-workers must be >= 1, found {args.profile_workers}")
    if args.profile_runs < 1:
        raise UserError(f"--profile-runs must be >= 1, found {args.profile_runs}")
    return ProfileSettings(args.profile_workers, args.profile_runs, trace_dir)


def run(args: argparse.Namespace) -> ExitCode:
    from perfguard.atomic import write_json_atomic
    from perfguard.cli._explain import print_explanation
    from perfguard.cli._progress import RichProgress
    from perfguard.cli._sampling import count_mode
    from perfguard.profile.explain import profile_document
    from perfguard.profile.pairs import profile_against_pipeline, profile_against_ref
    from perfguard.results import check_writable
    from perfguard.suite import load_suite

    suite = load_suite(args.suite).counted(count_mode(args))
    settings = profile_settings(args, args.trace_out)
    if args.json:
        check_writable(args.json, "--json")
    if args.trace_out:
        check_writable(args.trace_out, "--trace-out", directory=True)
    progress = RichProgress(args.quiet)
    try:
        if args.against_pipeline:
            explanation = profile_against_pipeline(suite, args.case, args.against_pipeline, settings, progress)
        else:
            explanation = profile_against_ref(suite, args.case, args.base_ref, settings, progress)
    finally:
        progress.stop()
    print_explanation(explanation)
    if args.json:
        write_json_atomic(args.json, profile_document([explanation]))
        print(f"explanation written to {args.json}")
    return ExitCode.OK
