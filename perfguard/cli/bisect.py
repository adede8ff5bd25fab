"""Attribute a regression to a commit and a compiler pass.

  perfguard bisect commits --suite S --case C --good REV --bad REV
  perfguard bisect passes  --suite S --case C --good REV --bad REV
  perfguard bisect passes  --suite S --case C --good-pipeline P1 --bad-pipeline P2
  git bisect run perfguard bisect step --suite S --case C --good REV

Every probe uses the same interleaved, adaptive three-way comparison as `perfguard check`, state is
saved after every probe (the same command resumes a killed run), and a culprit is confirmed
against its predecessor. A found culprit is then explained: both of its sides (its parent and it;
the good pipeline and the smallest reproducing edit) are compiled again and profiled as
`check --explain` does, and the op-level "why" is printed and kept in --json (--no-explain: not;
a side that cannot be profiled is recorded as "explanation unavailable", never a failure).
Exit codes: 0 culprit found and confirmed; 2 bad input; 3 inconclusive (a range bordered by
versions that do not build, or a culprit timing did not confirm); 5 no reproducible regression
between good and bad; 6 undecided (commits, and passes between commits: good -> bad too noisy to
tell; the output names the --metric that decides it where an exact metric changed between the
ends). `step`: 0 good (no regression; an undecided change that is not a slowdown beyond the floor
counts as good), 1 bad, 125 skip (does not build or compile, or an undecided slowdown beyond the
floor).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.cli._cache import add_cache_arguments
from perfguard.exit_codes import ExitCode

if TYPE_CHECKING:
    from perfguard.bisect.document import BisectResult
    from perfguard.profile.explain import ProfileSettings
    from perfguard.progress import Progress
    from perfguard.suite import CaseSpec, Suite
    from perfguard.suite.gates import CheckSettings

HELP = "find the commit and the pass behind a regression"


def _common(parser: argparse.ArgumentParser) -> None:
    from perfguard.cli.profile import add_profile_arguments

    parser.add_argument("--suite", required=True, help="suite file (TOML)")
    parser.add_argument("--case", required=True, metavar="PATTERN", help="exactly one case (model/pipeline/runner)")
    parser.add_argument("--json", metavar="PATH", help="write the bisection as JSON")
    parser.add_argument("--state", metavar="FILE", help="state file (default: .perfguard/bisect-KEY.json)")
    parser.add_argument("--workers", type=int, metavar="N", help="first-look workers per probe")
    parser.add_argument("--max-workers", type=int, metavar="N", help="worker budget per probe")
    parser.add_argument("--alpha", type=float, default=0.01, help="error level of each probe (default 0.01)")
    add_cache_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar (the narrative still prints)")
    parser.add_argument("--no-explain", action="store_true",
                        help="do not profile the found culprit's two sides to say why it is slower")
    parser.add_argument("--metric", default="latency", metavar="NAME",
                        help="what the probes compare: latency (timed, the default) or an exact metric: node_count "
                             "or artifact_size (one compile per version), instructions, estimated_cycles or "
                             "compile_instructions (one count under Valgrind per version); no timing, no confirmation "
                             "round (commits and passes between commits)")
    add_profile_arguments(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="mode", metavar="MODE", required=True, parser_class=type(parser))
    commits = sub.add_parser("commits", help="which commit between --good and --bad made the case slower")
    _common(commits)
    commits.add_argument("--good", required=True, metavar="REV")
    commits.add_argument("--bad", required=True, metavar="REV")
    commits.add_argument("--no-passes", action="store_true", help="do not search the culprit commit's passes")
    passes = sub.add_parser("passes", help="which pass: between two commits, or between two pipelines")
    _common(passes)
    passes.add_argument("--good", metavar="REV")
    passes.add_argument("--bad", metavar="REV")
    passes.add_argument("--good-pipeline", metavar="NAME")
    passes.add_argument("--bad-pipeline", metavar="NAME")
    step = sub.add_parser("step", help="one git-bisect-run step: the working tree against --good")
    step.add_argument("--suite", required=True)
    step.add_argument("--case", required=True, metavar="PATTERN")
    step.add_argument("--good", required=True, metavar="REV")
    step.add_argument("--workers", type=int, metavar="N", help="first-look workers")
    step.add_argument("--max-workers", type=int, metavar="N", help="worker budget")
    step.add_argument("--alpha", type=float, default=0.05, help="error level (default 0.05)")
    add_cache_arguments(step)
    step.add_argument("--quiet", action="store_true")


def _settings(suite: Suite, args: argparse.Namespace) -> CheckSettings:
    from perfguard.cli._sampling import sampling_options
    from perfguard.errors import UserError

    if not 0 < args.alpha < 0.5:
        raise UserError(f"--alpha must be between 0 and 0.5, found {args.alpha}")
    return sampling_options(args, alpha=args.alpha).applied(suite.check)


def run(args: argparse.Namespace) -> ExitCode:
    from perfguard.cli._progress import Narrator
    from perfguard.cli._sampling import count_mode
    from perfguard.cli.profile import profile_settings
    from perfguard.errors import UserError
    from perfguard.flows.probe import require_case
    from perfguard.results import check_writable, write_json_atomic
    from perfguard.suite import load_suite

    suite = load_suite(args.suite).counted(count_mode(args))
    if args.mode == "step":
        return _step(suite, args)
    case = require_case(suite, args.case)
    settings = _settings(suite, args)
    narrator = Narrator(args.quiet)
    state_path = Path(args.state) if args.state else None
    # Every output is checked before the first checkout, build or measurement.
    if args.json:
        check_writable(args.json, "--json")
    check_writable(state_path or Path(".perfguard") / "bisect-state.json",
                   "--state" if state_path else "the state folder (set --state FILE)")
    explain = None if args.no_explain else profile_settings(args)
    if args.metric != "latency":
        report = _bisect_exact(suite, case, args, narrator, explain)
    elif args.mode == "commits":
        from perfguard.flows.bisection.commit_search import bisect_commits

        report = bisect_commits(suite, case, args.good, args.bad, settings, narrator, state_path,
                                with_passes=not args.no_passes, explain=explain)
    elif args.good_pipeline or args.bad_pipeline:
        if not (args.good_pipeline and args.bad_pipeline) or args.good or args.bad:
            raise UserError("bisect passes: give --good-pipeline and --bad-pipeline, or --good and --bad")
        from perfguard.flows.bisection.version_search import bisect_between_pipelines

        report = bisect_between_pipelines(suite, case, args.good_pipeline, args.bad_pipeline, settings, narrator,
                                          state_path, explain)
    else:
        if not (args.good and args.bad):
            raise UserError("bisect passes: give --good and --bad (commits), or --good-pipeline and --bad-pipeline")
        from perfguard.flows.bisection.version_search import bisect_passes_between_commits

        report = bisect_passes_between_commits(suite, case, args.good, args.bad, settings, narrator, state_path,
                                               explain)
    _print_summary(report)
    _print_explanations(report)
    if args.json:
        write_json_atomic(args.json, report.to_json())
        print(f"bisection written to {args.json}")
    return {"found": ExitCode.FOUND, "no-regression": ExitCode.NO_REGRESSION,
            "undecided": ExitCode.UNDECIDED}.get(report.status, ExitCode.INCONCLUSIVE)


def _bisect_exact(suite: Suite, case: CaseSpec, args: argparse.Namespace, narrator: Progress,
                  explain: ProfileSettings | None) -> BisectResult:
    """``--metric node_count`` (an exact metric): commits, or passes between two commits, by
    compiling only (``perfguard.flows.bisection.exact_probes``)."""
    from perfguard.errors import UserError
    from perfguard.flows.bisection.exact_probes import bisect_exact_between, bisect_exact_commits, exact_probe

    exact_probe(args.metric)  # an unknown metric is one line naming the valid ones
    if args.mode == "commits":
        return bisect_exact_commits(suite, case, args.good, args.bad, args.metric, narrator,
                                    with_passes=not args.no_passes, explain=explain)
    if args.good_pipeline or args.bad_pipeline or not (args.good and args.bad):
        raise UserError(f"bisect passes --metric {args.metric}: give --good and --bad (commits); between two "
                        "pipelines only latency is bisected")
    return bisect_exact_between(suite, case, args.good, args.bad, args.metric, narrator)


def _step(suite: Suite, args: argparse.Namespace) -> ExitCode:
    """git bisect run: 0 good, 1 bad, 125 skip (the commit under test cannot build or compile, or
    undecided). Every error of the tool (bad input, --good that does not build, a bug) leaves as an
    exception, which ``perfguard.cli.main`` turns into exit 128: git bisect run aborts."""
    from perfguard.cli._progress import Narrator
    from perfguard.errors import BuildError, UserError
    from perfguard.flows.check import check_against_ref
    from perfguard.flows.probe import require_case

    case = require_case(suite, args.case)
    try:
        document = check_against_ref(suite, [case], args.good, _settings(suite, args), Narrator(args.quiet))
    except BuildError as exc:
        if exc.label == "base":  # --good itself does not build: no commit can be judged against it
            raise UserError(f"--good {args.good}: {exc}") from None
        print(f"skip: {exc}")
        return ExitCode.STEP_SKIP
    row = next(r for r in document.verdicts if r.metric in ("latency", "status"))
    reason = row.comparison.reason
    if row.decision == "failed":
        print(f"skip: {reason}")
        return ExitCode.STEP_SKIP
    if row.is_regression:
        print(f"bad: {reason}")
        return ExitCode.STEP_BAD
    if row.decision == "unknown":
        # Undecided, but the estimate is not a slowdown beyond the floor: this commit does not carry
        # a regression worth bisecting, so it is good for git bisect. Only an undecided slowdown
        # beyond the floor is skipped.
        ratio, floor = row.comparison.ratio, row.comparison.floor
        if math.isfinite(ratio) and math.isfinite(floor) and ratio - 1.0 <= floor:
            print(f"good (no slowdown beyond the floor): {reason}")
            return ExitCode.STEP_GOOD
        print(f"skip (undecided): {reason}")
        return ExitCode.STEP_SKIP
    print(f"good: {reason}")
    return ExitCode.STEP_GOOD


def _print_explanations(report: BisectResult) -> None:
    """Why the culprit is slower, after the summary, as ``check --explain`` prints it."""
    from perfguard.cli._explain import print_explanations

    print_explanations(report.explanations, blank_line=True)


def undecided_lines(report: BisectResult) -> list[str]:
    """An undecided bisection in words: the ends' comparison, then what would decide it (the
    ``--metric`` of each exact metric that changed between the ends, else more samples)."""
    e = report.endpoints
    measured = ""
    if e is not None and e.ratio is not None:
        interval = (f" [{(e.ci_low - 1) * 100:+.1f}%, {(e.ci_high - 1) * 100:+.1f}%]"
                    if e.ci_low is not None and e.ci_high is not None else "")
        measured = f" ({(e.ratio - 1) * 100:+.1f}%{interval})"
    lines = [f"undecided between good and bad: {report.metric}{measured} could not be told from noise, so it is "
             "neither a regression nor none: nothing bisected"]
    for metric, (before, after) in sorted(report.exact_changes.items()):
        lines.append(f"{metric} changed between the ends ({before:g} -> {after:g}): rerun with --metric {metric} "
                     "to bisect it by compiling only")
    if not report.exact_changes:
        lines.append("no exact metric changed between the ends: to decide, add workers (--workers, --max-workers), "
                     "count instead of timing (--metric instructions, under Valgrind) or use a quieter runner")
    return lines


def _print_summary(report: BisectResult) -> None:
    from perfguard.names import visible

    def say(text: str = "") -> None:  # names, authors and commit subjects are data: shown, not obeyed
        sys.stdout.write(visible(text) + "\n")

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{(value - 1) * 100:+.1f}%"

    say()
    if report.status == "no-regression":
        say("no reproducible regression between good and bad: nothing to bisect")
    if report.status == "undecided":
        for line in undecided_lines(report):
            say(line)
    for culprit in report.culprits:
        commit, effect = culprit.commit, culprit.effect
        where = (f"range {', '.join(c.sha[:10] for c in culprit.range)}" if culprit.range
                 else f"commit {commit.sha[:10] if commit else ''} {(commit.subject if commit else None) or ''!r}")
        author = commit.author if commit and commit.author is not None else "?"
        interval = (f" {report.metric} (exact)" if report.metric != "latency" else
                    f" [{pct(effect.ci_low if effect else None)}, {pct(effect.ci_high if effect else None)}]")
        say(f"culprit: {where} by {author}: {pct(effect.ratio if effect else None)}{interval}"
            + ("" if culprit.confirmed else " (not confirmed)"))
        if culprit.pass_:
            p = culprit.pass_
            say(f"  pass #{p.position} {p.name!r}" + ("" if p.confirmed else " (not confirmed)"))
    for edit in report.minimal:
        say(f"edit: {edit.describe}")
    if report.effect:
        e = report.effect
        say(f"effect: {pct(e.ratio)} [{pct(e.ci_low)}, {pct(e.ci_high)}]")
    total = "?" if report.total_probes is None else report.total_probes
    from perfguard.suite.gates import COUNTED_METRICS

    once = "counted once under Valgrind" if report.metric in COUNTED_METRICS else "compiled once"
    how = "" if report.metric == "latency" else f" ({report.metric}: each version {once}, not timed)"
    say(f"probes: {total}{how}, wall time {report.wall_time_s or 0:.1f} s")
