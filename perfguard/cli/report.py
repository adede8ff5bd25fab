"""Write a report of result, verdicts and bisect documents: one self-contained HTML file
(index.html: inline CSS and SVG, no network), a Markdown job summary (summary.md) and a short
pull-request comment (comment.md), and optionally GitHub workflow annotations on stdout.

Inputs in any mix: verdicts from `perfguard check --json` or `compare --json` (they embed their
results), plain results from `perfguard run` (shown side by side when several), bisections from
`perfguard bisect --json`. Without --out, --summary-md or --comment-md, writes into perfguard-report/.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.exit_codes import ExitCode

if TYPE_CHECKING:
    from perfguard.report import Document

HELP = "write the HTML report, Markdown summary and PR comment of result or verdict files"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("documents", nargs="+", metavar="FILE", help="result, verdicts or bisect JSON files")
    parser.add_argument("--out", metavar="DIR", help="write index.html, summary.md and comment.md into DIR")
    parser.add_argument("--summary-md", metavar="PATH", help="write the job summary here (e.g. $GITHUB_STEP_SUMMARY)")
    parser.add_argument("--comment-md", metavar="PATH", help="write the pull-request comment here")
    parser.add_argument("--report-url", metavar="URL", help="link to the HTML report in the summary and comment "
                        "(default in GitHub Actions: the workflow run's page)")
    parser.add_argument("--annotations", action="store_true",
                        help="print ::error / ::warning workflow commands for regressions and undecided cases")


def default_report_url() -> str | None:
    """The workflow run's page when running in GitHub Actions (its artifacts hold the report)."""
    server, repository, run_id = (os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY",
                                                              "GITHUB_RUN_ID"))
    if os.environ.get("GITHUB_ACTIONS") == "true" and server and repository and run_id:
        return f"{server}/{repository}/actions/runs/{run_id}"
    return None


def write_report(documents: Sequence[Document], out_dir: str, *, labels: list[str] | None = None,
                 report_url: str | None = None) -> dict[str, Path]:
    """Write index.html, summary.md and comment.md of ``documents`` into ``out_dir``."""
    from perfguard.report import write_report as write

    return write(documents, out_dir, labels=labels, report_url=report_url or default_report_url())


def print_annotations(documents: Sequence[Document], labels: list[str] | None = None) -> None:
    from perfguard.report import build_report
    from perfguard.report.markdown import workflow_annotations

    for line in workflow_annotations(build_report(documents, labels)):
        print(line)


def _write_text(path: str, text: str) -> None:
    from perfguard.results import write_text_atomic

    write_text_atomic(path, text)


def run(args: argparse.Namespace) -> ExitCode:
    from perfguard.report import build_report, load_document
    from perfguard.report.markdown import job_summary, pr_comment
    from perfguard.results import check_writable

    url = args.report_url or default_report_url()
    out = args.out or (None if args.summary_md or args.comment_md else "perfguard-report")
    if out:  # every output is checked before anything is read or written
        check_writable(out, "--out" if args.out else "the report folder (set --out DIR)", directory=True)
    for option, target in (("--summary-md", args.summary_md), ("--comment-md", args.comment_md)):
        if target:
            check_writable(target, option)
    documents = [load_document(path) for path in args.documents]
    labels = [Path(path).name for path in args.documents]
    if out:
        written = write_report(documents, out, labels=labels, report_url=url)
        print(f"report written to {written['html']} (summary.md, comment.md beside it)")
    if args.summary_md or args.comment_md:
        report = build_report(documents, labels)
        if args.summary_md:
            _write_text(args.summary_md, job_summary(report, url))
        if args.comment_md:
            _write_text(args.comment_md, pr_comment(report, url))
    if args.annotations:
        print_annotations(documents, labels)
    return ExitCode.OK
