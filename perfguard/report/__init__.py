"""Reports: one self-contained HTML file, Markdown for GitHub, workflow annotations.

``perfguard report FILE... --out DIR`` (and ``perfguard check --report DIR``) write into DIR:

* ``index.html`` - headline, the verdict table (sortable and filterable where JavaScript runs,
  complete where it does not), per-case detail (latency distributions of both sides, the pass
  traces side by side, the environment fingerprint diff) and bisection narratives. Inline CSS,
  inline SVG, no network request (:mod:`perfguard.report.html`);
* ``summary.md`` - the job summary for ``$GITHUB_STEP_SUMMARY``;
* ``comment.md`` - a short pull-request comment (:mod:`perfguard.report.markdown`).

Inputs are documents: verdicts (check, compare), results (run) and bisections, in any mix
(:mod:`perfguard.report.model`). A stage never reaches around another: the report reads these
documents and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from perfguard.atomic import write_atomic
from perfguard.errors import StorageError
from perfguard.report.model import Document, Report, build_report, reported_kind
from perfguard.results.documents import document_kind

__all__ = ["Document", "Report", "build_report", "document_kind", "load_document", "parse_document",
           "write_report"]


def parse_document(data: object, path: str | Path = "<document>") -> Document:
    """A result, verdicts, bisect or tune document from its JSON value (read from ``path``), typed,
    through its own loader (which refuses newer versions and migrates older ones); anything else
    is refused with a one-line ``StorageError``."""
    from perfguard.bisect.document import bisect_from_json
    from perfguard.compare.verdicts import parse_verdicts
    from perfguard.results.result import parse_result
    from perfguard.tune.document import tune_from_json

    kind = reported_kind(data)
    if kind is None:
        raise StorageError(f"{path}: not a perfguard result, verdicts, bisect or tune document")
    if kind == "result":
        return parse_result(data, path)
    if kind == "verdicts":
        return parse_verdicts(data, path)
    if kind == "tune":
        return tune_from_json(data, path)
    return bisect_from_json(data, path)


def load_document(path: str | Path) -> Document:
    """Read a result, verdicts or bisect document; refuse anything else with a one-line error."""
    from perfguard.results.documents import read_json

    path = Path(path)
    return parse_document(read_json(path, missing="{path}: file not found", not_json="{path}: not JSON ({exc})"),
                          path)


def write_report(documents: Sequence[Document], out_dir: str | Path, *, labels: list[str] | None = None,
                 report_url: str | None = None) -> dict[str, Path]:
    """Write ``index.html``, ``summary.md`` and ``comment.md`` into ``out_dir``; return their paths."""
    from perfguard.report.html import render_html
    from perfguard.report.markdown import job_summary, pr_comment

    report = build_report(documents, labels)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"{out}: cannot create the report folder: {exc.strerror}") from None
    written = {"html": out / "index.html", "summary": out / "summary.md", "comment": out / "comment.md"}
    texts = {"html": render_html(report), "summary": job_summary(report, report_url),
             "comment": pr_comment(report, report_url)}
    for key, path in written.items():
        write_atomic(path, texts[key])  # a reader never sees half a report
    return written
