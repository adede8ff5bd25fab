"""Write perfguard results as other tools' files, for their viewers and comparisons.

  perfguard export asv RESULT... --out DIR [--repo PATH] [--branch NAME] [--machine NAME] [--commit SHA]
  perfguard export pytest-benchmark RESULT... --out DIR

RESULT is a result document (``perfguard run --json``) or a verdicts document, whose candidate
result is taken. ``asv`` writes an asv project folder: ``DIR/asv.conf.json`` and
``DIR/results/`` (``benchmarks.json``, ``<machine>/machine.json``, one results file per commit);
then ``asv --config DIR/asv.conf.json publish`` builds the html (``DIR/html``). asv orders commits
by the git repository ``--repo`` (default: the current folder's checkout), so each result needs a
compiler commit in it (``--commit`` for results that record none). Exporting again into DIR adds
to what is there. ``pytest-benchmark`` writes one ``NNNN_<suite>_<commit>.json`` per result, which
``pytest-benchmark compare`` reads. Exit codes: 0 written; 2 bad input or an unwritable DIR (one
line, nothing written).
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from perfguard.exit_codes import ExitCode

HELP = "write results as asv results (asv publish) or pytest-benchmark runs (pytest-benchmark compare)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from perfguard.formats import FORMATS

    parser.add_argument("format", choices=FORMATS, help="the tool whose files to write")
    parser.add_argument("results", nargs="+", metavar="RESULT", help="result or verdicts documents")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write into (created if missing)")
    asv = parser.add_argument_group("asv")
    asv.add_argument("--repo", metavar="PATH",
                     help="the compiler's git repository holding the results' commits, written to asv.conf.json "
                          "(default: the git checkout of the current folder)")
    asv.add_argument("--branch", metavar="NAME",
                     help="the branch asv publish graphs (default: the repository's current branch)")
    asv.add_argument("--machine", metavar="NAME", help="asv machine name (default: each runner's host name)")
    asv.add_argument("--commit", metavar="SHA", help="commit of the results that record none")


def run(args: argparse.Namespace) -> ExitCode:
    from perfguard.errors import UserError
    from perfguard.formats.common import load_export_sources
    from perfguard.results import check_writable

    out = Path(args.out)
    check_writable(out, "--out", directory=True)
    if args.format == "pytest-benchmark":
        given = [f"--{name}" for name in ("repo", "branch", "machine", "commit") if getattr(args, name)]
        if given:
            raise UserError(f"export pytest-benchmark does not take {', '.join(given)} "
                            f"(an option{'s' if len(given) > 1 else ''} of export asv)")
    sources = load_export_sources(args.results)
    if args.format == "pytest-benchmark":
        from perfguard.formats import pytest_benchmark

        written = pytest_benchmark.export(sources, out)
        for source, path in zip(sources, written, strict=True):
            print(f"{source.path}: written to {path}")
        return ExitCode.OK
    from perfguard.formats import asv

    repo, branch = _repository(args.repo, args.branch)
    written = asv.export(sources, out, repo=repo, branch=branch, machine=args.machine, commit=args.commit)
    files = sum(1 for p in written if p.parent.parent == out / "results" and p.name != "machine.json")
    print(f"asv project written to {out} ({files} results file(s), repo {repo}, branch {branch}); build its html with "
          f"`asv --config {out / 'asv.conf.json'} publish`")
    return ExitCode.OK


def _repository(repo: str | None, branch: str | None) -> tuple[str, str]:
    """The repository asv.conf.json names (a local checkout as an absolute path; a URL as it is)
    and the branch to graph (default: the checkout's current branch, else ``main``)."""
    from perfguard.errors import UserError

    if repo and "://" in repo:
        return repo, branch or "main"
    path = Path(repo or ".").resolve()
    try:
        top = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"export asv: cannot run git to find the repository ({exc})") from None
    if top.returncode != 0:
        raise UserError(f"export asv: {path} is not a git checkout; asv publish orders the results by the "
                        "repository that holds their commits (--repo PATH)")
    if branch:
        return top.stdout.strip(), branch
    head = subprocess.run(["git", "-C", str(path), "symbolic-ref", "--quiet", "--short", "HEAD"],
                          capture_output=True, text=True, check=False, timeout=30)
    return top.stdout.strip(), head.stdout.strip() if head.returncode == 0 and head.stdout.strip() else "main"
