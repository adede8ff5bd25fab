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

from pathlib import Path
from typing import Any

from perfguard.atomic import write_atomic
from perfguard.errors import StorageError
from perfguard.report.model import Report, build_report, document_kind

__all__ = ["Report", "build_report", "document_kind", "load_document", "write_report"]

#: The newest format version of each document kind this perfguard reads.
READS = {"verdicts": 1, "result": 1, "bisect": 1}


def load_document(path: str | Path) -> dict[str, Any]:
    """Read a result, verdicts or bisect document; refuse anything else with a one-line error."""
    from perfguard.results import load_result, schema_errors
    from perfguard.results.documents import read_json

    path = Path(path)
    document = read_json(path, missing="{path}: file not found", not_json="{path}: not JSON ({exc})")
    kind = document_kind(document)
    if kind is None:
        raise StorageError(f"{path}: not a perfguard result, verdicts or bisect document")
    if document["version"] > READS[kind]:
        raise StorageError(f"{path}: {kind} format version {document['version']} is newer than this perfguard "
                           f"reads ({READS[kind]}); upgrade perfguard")
    if kind == "result":
        return load_result(path)
    if kind == "bisect":
        from perfguard.bisect.document import bisect_from_json

        bisect_from_json(document, path)  # a value of the wrong type: one line naming the file and key
    if kind == "verdicts":
        errors = schema_errors(document, "verdicts")
        if errors:
            raise StorageError(f"{path}: corrupt verdicts document: {errors[0]}")
        for label, result in document["results"].items():
            errors = schema_errors(result)
            if errors:
                raise StorageError(f"{path}: corrupt result {label!r} inside the verdicts: {errors[0]}")
    loaded: dict[str, Any] = document
    return loaded


def write_report(documents: list[dict[str, Any]], out_dir: str | Path, *, labels: list[str] | None = None,
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
