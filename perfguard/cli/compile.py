"""Compile here, measure there: compile every case of SUITE on this machine (pass traces and the
correctness check included) and write the artifacts with a manifest into DIR. On the runner
machine, `perfguard run --artifacts DIR` verifies and measures them."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfguard.exit_codes import ExitCode

HELP = "compile a suite into an artifact folder for another machine"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", help="suite file (TOML)")
    parser.add_argument("--out", required=True, metavar="DIR", help="new folder for the artifacts and manifest")
    parser.add_argument("--case", metavar="PATTERN", help="only cases whose id matches")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> ExitCode:
    from perfguard.cli._progress import RichProgress
    from perfguard.errors import UserError
    from perfguard.flows.compile_here import compile_to_dir
    from perfguard.names import visible
    from perfguard.results import check_writable
    from perfguard.suite import load_suite

    suite = load_suite(args.suite)
    cases = suite.select(args.case)
    out = Path(args.out)
    check_writable(out, "--out", directory=True)
    if out.exists() and any(out.iterdir()):
        raise UserError(f"--out {out}: the folder exists and is not empty; choose a new one")
    existed = out.exists()
    progress = RichProgress(args.quiet)
    try:
        manifest = compile_to_dir(suite, cases, out, progress)
    except BaseException:
        _discard(out, existed)  # no half-written folder (and no out/.work) after a failure
        raise
    finally:
        progress.stop()
    failed = [c.entry for c in manifest.cases if not c.entry.ok]
    for case in failed:
        stage, message = (case.error.stage, case.error.message) if case.error else ("?", "failed")
        print(visible(f"failed: {case.id}: {stage}: {message}"))
    print(f"{len(manifest.cases) - len(failed)} artifacts written to {args.out} (manifest.json); "
          f"measure them with: perfguard run --artifacts {args.out}")
    return ExitCode.CASE_FAILED if failed else ExitCode.OK


def _discard(out: Path, existed: bool) -> None:
    """Remove what a failed compile wrote: ``out`` itself when it was created, else its contents
    (it was empty before: compile refuses a folder that is not)."""
    import shutil

    if not existed:
        shutil.rmtree(out, ignore_errors=True)
        return
    for child in list(out.iterdir()) if out.is_dir() else []:
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
