"""Compile every case of a suite under its pinned pipeline, check it, measure it, write a result.

Without SUITE, runs the built-in smoke suite (small ResNet-, BERT- and YOLO-style models under
pipelines that really differ).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.cli._cache import add_cache_arguments
from perfguard.exit_codes import ExitCode

if TYPE_CHECKING:
    from perfguard.results import CaseEntry, ResultDocument

HELP = "compile, check and measure a suite; write a JSON result"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from perfguard.cli._shard import shard_option

    parser.add_argument("suite", nargs="?", help="suite file (TOML); default: the built-in smoke suite")
    parser.add_argument("--case", metavar="PATTERN", help="only cases whose id (model/pipeline/runner) matches "
                        "this glob or contains this text")
    shard_option(parser, "`perfguard merge` joins the parts' result files into the result of the whole")
    parser.add_argument("--out", metavar="FILE", help="result file (default: perfguard-results/SUITE-UTC.json)")
    parser.add_argument("--workers", type=int, metavar="N", help="override the suite's worker process count (1 to 1024)")
    parser.add_argument("--rounds", type=int, metavar="N", help="override the suite's rounds per worker (1 to 1,000,000)")
    parser.add_argument("--keep-artifacts", metavar="DIR", help="keep compiled artifacts and models in DIR")
    parser.add_argument("--artifacts", metavar="DIR", help="measure artifacts compiled elsewhere by perfguard "
                        "compile (verifies them on this runner first); takes no SUITE")
    add_cache_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> ExitCode:
    import dataclasses
    from datetime import datetime, timezone

    from perfguard.cli._bounds import MAX_ROUNDS, MAX_WORKERS, in_range
    from perfguard.cli._progress import RichProgress
    from perfguard.cli._sampling import count_mode
    from perfguard.cli._shard import select_part
    from perfguard.measure.job import run_suite
    from perfguard.names import safe_filename
    from perfguard.results import check_writable, write_json_atomic
    from perfguard.suite import builtin_suite_path, load_suite

    workers = in_range(args.workers, "--workers", 1, MAX_WORKERS)
    rounds = in_range(args.rounds, "--rounds", 1, MAX_ROUNDS)
    if args.artifacts:
        return _run_artifacts(args, workers, rounds)
    suite = load_suite(args.suite or builtin_suite_path("smoke")).counted(count_mode(args))
    cases = suite.select(args.case)
    cases, shard = select_part(args, suite, cases, command="run",
                               decided={"case": args.case, "workers": args.workers, "rounds": args.rounds})
    if workers or rounds:
        cases = [dataclasses.replace(c, measure=c.measure.overridden(workers, rounds)) for c in cases]
    out = Path(args.out) if args.out else Path("perfguard-results") / (
        f"{safe_filename(suite.name)}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}.json")
    check_writable(out, "--out" if args.out else "the result file (set --out FILE)")
    if args.keep_artifacts:
        check_writable(args.keep_artifacts, "--keep-artifacts", directory=True)
    progress = RichProgress(args.quiet)
    workdir = Path(args.keep_artifacts).resolve() if args.keep_artifacts else None
    if workdir:
        workdir.mkdir(parents=True, exist_ok=True)
    try:
        document = run_suite(suite, cases, workdir=workdir, progress=progress)
    finally:
        progress.stop()
    document = dataclasses.replace(document, shard=shard)
    write_json_atomic(out, document.to_json())
    print_table(document)
    failed = [c for c in document.cases if not c.ok]
    print(f"result written to {out} ({summary_counts(document)})")
    return ExitCode.CASE_FAILED if failed else ExitCode.OK


def _run_artifacts(args: argparse.Namespace, workers: int | None, rounds: int | None) -> ExitCode:
    from datetime import datetime, timezone

    from perfguard.cli._progress import RichProgress
    from perfguard.cli._sampling import count_mode
    from perfguard.errors import UserError
    from perfguard.flows.compile_here import run_from_dir
    from perfguard.names import safe_filename
    from perfguard.results import check_writable, write_json_atomic

    if args.suite or args.case or args.keep_artifacts or args.shard:
        raise UserError("--artifacts DIR takes no SUITE, --case, --shard or --keep-artifacts: the folder holds them")
    folder = Path(args.artifacts)
    # The default name needs the manifest's suite name; its folder is checked here, before measuring.
    check_writable(args.out or Path("perfguard-results") / "result.json",
                   "--out" if args.out else "the result folder (set --out FILE)")
    progress = RichProgress(args.quiet)
    try:
        document = run_from_dir(folder, progress, workers=workers, rounds=rounds, counts=count_mode(args))
    finally:
        progress.stop()
    # The suite's name comes from the folder's manifest, a document: made safe as a file name.
    stamp = datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')
    out = Path(args.out) if args.out else Path("perfguard-results") / (
        f"{safe_filename(document.suite.name)}-artifacts-{stamp}.json")
    write_json_atomic(out, document.to_json())
    print_table(document)
    failed = [c for c in document.cases if not c.ok]
    print(f"result written to {out} ({summary_counts(document)})")
    return ExitCode.CASE_FAILED if failed else ExitCode.OK


def is_blind(case: CaseEntry) -> bool:
    """A case whose correctness check could not see anything (outputs independent of the inputs)."""
    return case.correctness is not None and case.correctness.status == "blind"


def summary_counts(document: ResultDocument) -> str:
    """``3 ok, 1 failed`` plus the cases whose correctness check was blind (ok, but not verified)."""
    cases = document.cases
    failed = sum(1 for c in cases if not c.ok)
    text = f"{len(cases) - failed} ok, {failed} failed"
    blind = sum(1 for c in cases if c.ok and is_blind(c))
    if blind:
        text += (f"; correctness not verified for {blind} (blind: the reference outputs do not depend on the "
                 "inputs)")
    return text


def print_table(document: ResultDocument) -> None:
    from rich.table import Table

    from perfguard.backends.base import NOT_BUILT
    from perfguard.cli._text import LOG_TABLE_WIDTH, cli_console, literal, print_wrapped
    from perfguard.report.quality import timing_notes
    from perfguard.units import format_bytes, format_duration

    table = Table(title=literal(f"perfguard run: {document.suite.name}"))
    for column in ("case", "status", "median", "p90", "cv", "vs first", "nodes", "compile", "size"):
        table.add_column(column, justify="left" if column in ("case", "status") else "right")
    first_median: dict[str, float] = {}
    for case in document.cases:
        metrics = case.metrics
        latency = metrics.latency_s
        nodes = str(metrics.node_count) if metrics.compiled else ""
        if not case.ok or latency is None:
            error = case.error
            said = "not run (not built)" if error and error.stage == NOT_BUILT else f"failed ({error.stage})" if error else ""
            table.add_row(literal(case.id), literal(said, "yellow" if error and error.stage == NOT_BUILT else "red")
                          if error else "failed",
                          "", "", "", "", nodes, "", "")
            if error and error.message:  # whole: a build command cut short builds nothing
                table.add_row("", literal(error.message if error.stage == NOT_BUILT else error.message[:160], "red"),
                              *[""] * 7)
            continue
        group = case.measurement.group if case.measurement else ""
        base = first_median.setdefault(group, latency.median)
        relative = f"{(latency.median / base - 1) * 100:+.1f}%" if base else ""
        status = "[yellow]ok (blind)[/yellow]" if is_blind(case) else "ok"
        table.add_row(literal(case.id), status, format_duration(latency.median), format_duration(latency.p90),
                      f"{latency.cv * 100:.1f}%", relative, nodes,
                      format_duration(metrics.compile_time_s if metrics.compile_time_s is not None else float("nan")),
                      format_bytes(metrics.artifact_size_bytes or 0))
    cli_console(min_width=120).print(table)
    print("'vs first' is the ratio of medians to the first pipeline of the same model and runner, measured "
          "interleaved in the same workers; it is not a verdict (use perfguard check for that).")
    notes = cli_console(min_width=120, log_width=LOG_TABLE_WIDTH)
    for note in timing_notes(document):  # values of two modes, or far noisier than the backend's usual
        print_wrapped(notes, note)
    if any(is_blind(c) for c in document.cases if c.ok):
        print("'ok (blind)': the correctness check could not see anything: the reference outputs are the same on "
              "two different inputs, so a wrong pass would pass it. Give the model real weights or inputs.")
