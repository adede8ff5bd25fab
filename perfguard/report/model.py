"""What a report shows, as plain data: built from documents, read by the HTML and Markdown writers.

The report reads documents only (results, verdicts, bisections), never backend internals. Any mix
is accepted, in order:

* a **verdict document** (``check``, ``compare``) becomes a comparison: every verdict row, and per
  case the two sides' entries, found in the embedded ``results`` (``base``/``head``,
  ``baseline``/``candidate``, or one ``head`` document whose reference pipeline is the baseline);
* **result documents** (``run``, ``baseline update``) become the run table, side by side when
  there are several, with no verdicts;
* **bisect documents** become narratives (:mod:`perfguard.report.bisect`).

Nothing here escapes text: the HTML writer autoescapes, the Markdown writer escapes its own way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from markupsafe import Markup

from perfguard.bisect.document import BisectResult
from perfguard.compare.verdicts import Geomean, Summary, Verdict, VerdictsDocument
from perfguard.jsonfields import JsonDict
from perfguard.report import format as fmt, svg
from perfguard.report.bisect import BisectView, bisect_view
from perfguard.report.cases import CaseDetail, SideView, case_detail, flatten_fingerprint
from perfguard.report.counted_why import CountedWhyView, counted_why
from perfguard.report.exact_why import ExactWhyView, exact_whys
from perfguard.report.pairs import entries_by_id, pair_entries, side_documents
from perfguard.report.reasons import latency_out_of_reach, row_reason
from perfguard.report.rows import SEVERITY, VerdictRow, state_of
from perfguard.report.tune import TuneView, tune_view
from perfguard.report.why import WhyView, why_views
from perfguard.results import CaseEntry, ResultDocument
from perfguard.results.documents import document_kind
from perfguard.results.explanation import Explanation
from perfguard.tune.document import TuneResult

#: What a report is built from: verdicts, results and bisections.
Document = VerdictsDocument | ResultDocument | BisectResult | TuneResult


def reported_kind(document: object) -> str | None:
    """``verdicts``, ``result``, ``bisect`` or ``tune`` for a perfguard document a report reads
    (with an integer version), else None; the kind itself is :func:`document_kind`'s."""
    kind = document_kind(document)
    if kind not in ("verdicts", "result", "bisect", "tune") or not isinstance(document, dict):
        return None
    return kind if isinstance(document.get("version"), int) else None


def _tone(state: str) -> str:
    return state if state in ("regression", "improvement") else "neutral"


@dataclass
class ForestRow:
    row: VerdictRow
    chart: Markup


@dataclass
class ComparisonView:
    """One verdict document."""

    title: str
    kind: str
    facts: list[tuple[str, str]]
    summary: Summary
    rows: list[VerdictRow]
    forest: list[ForestRow]
    forest_axis: Markup | None
    geomean_chart: Markup | None
    warnings: list[str]
    suite: str


@dataclass
class RunRow:
    case: str
    anchor: str
    cells: list[dict[str, str]]  # one per result document
    vs_first_file: list[str]


@dataclass
class RunView:
    """The run table of plain result documents (side by side when several)."""

    labels: list[str]
    rows: list[RunRow]
    facts: list[list[tuple[str, str]]]


@dataclass
class Headline:
    regressions: int = 0
    improvements: int = 0
    same: int = 0
    unknown: int = 0
    failed: int = 0
    geomean: Geomean | None = None
    not_gated: int = 0
    comparisons: int = 0
    cases_ok: int = 0
    cases_failed: int = 0

    @property
    def state(self) -> str:
        """The report's overall state: failed, regression, unknown, pass or run (no verdicts)."""
        if self.failed or self.cases_failed:
            return "failed"
        if self.regressions:
            return "regression"
        if not self.comparisons:
            return "run"
        return "unknown" if self.unknown else "pass"


@dataclass
class Report:
    title: str
    suite: str
    created_at: str
    tool_version: str
    headline: Headline
    comparisons: list[ComparisonView] = field(default_factory=list)
    run: RunView | None = None
    bisections: list[BisectView] = field(default_factory=list)
    cases: list[CaseDetail] = field(default_factory=list)
    environments: list[tuple[str, str, JsonDict]] = field(default_factory=list)  # fingerprints: free-form
    warnings: list[str] = field(default_factory=list)
    # ``check --explain``: (case, the dimension's one-line headline) per explained regression,
    # and the whole explanation as the HTML report's "why" section.
    why: list[tuple[str, str]] = field(default_factory=list)
    explanations: list[WhyView] = field(default_factory=list)
    # ``--counts``: each DIFFERENT ``instructions`` pair's change attributed to functions.
    counted_why: list[CountedWhyView] = field(default_factory=list)
    tunes: list[TuneView] = field(default_factory=list)
    # exact regressions (node count, size): what the two pass traces say (``perfguard.report.exact_why``)
    exact_why: list[ExactWhyView] = field(default_factory=list)
    # latency that this runner could not resolve at its floor, and the way out (``latency_out_of_reach``)
    out_of_reach: list[str] = field(default_factory=list)

    @property
    def verdict_rows(self) -> list[VerdictRow]:
        return [row for comparison in self.comparisons for row in comparison.rows]


# --- helpers over result documents -------------------------------------------------------------

def _case_parts(entry: CaseEntry | None, case_id: str) -> tuple[str, str]:
    """(model/pipeline, runner) from the entry's own fields; the whole id when they are missing."""
    if entry and entry.model and entry.pipeline and entry.runner:
        return f"{entry.model}/{entry.pipeline}", entry.runner
    return case_id, ""


# --- verdict documents ----------------------------------------------------------------------------

def _verdict_row(row: Verdict, baseline: CaseEntry | None, candidate: CaseEntry | None) -> VerdictRow:
    c = row.comparison
    case_label, runner = _case_parts(candidate, row.case)
    noisy = row.noisy
    return VerdictRow(
        case=row.case, case_label=case_label, runner=runner, metric=row.metric, unit=row.unit,
        noisy=noisy, state=state_of(row), baseline_label=row.baseline, candidate_label=row.candidate,
        baseline_value=fmt.finite(c.baseline_median), candidate_value=fmt.finite(c.candidate_median),
        ratio=fmt.finite(c.ratio), ci_low=fmt.finite(c.ci_low) if noisy else None,
        ci_high=fmt.finite(c.ci_high) if noisy else None, p_value=fmt.finite(c.p_value) if noisy else None,
        # Not timed (identical artifacts): nothing was detectable or undetectable.
        mde=(c.mde if not math.isnan(c.mde) else math.inf) if noisy and c.method != "identity" else None,
        floor=fmt.finite(c.floor), gate=row.gate, reason=row_reason(row, baseline, candidate),
        floor_note=c.floor_note if row.gated else "")


def verdict_reasons(document: VerdictsDocument) -> dict[tuple[str, str], str]:
    """Each verdict row's reason as every view shows it (``perfguard.report.reasons``), by
    (case, metric): the terminal table reads them here."""
    reasons = {}
    for row in document.verdicts:
        base, cand, _, _ = pair_entries(document, row)
        reasons[(row.case, row.metric)] = row_reason(row, base, cand)
    return reasons


def _comparison_title(document: VerdictsDocument) -> str:
    return f"{document.mode.candidate} vs {document.mode.baseline}"


def _mode_facts(document: VerdictsDocument) -> list[tuple[str, str]]:
    mode, settings = document.mode, document.settings
    facts = [("baseline", mode.baseline), ("candidate", mode.candidate)]
    if mode.base_commit:
        facts.append(("base commit", f"{mode.base_commit[:10]} {mode.base_subject or ''}".strip()))
    if mode.head_commit:
        facts.append(("head commit", mode.head_commit[:10]))
    if mode.baseline_created:
        facts.append(("baseline measured", fmt.timestamp(mode.baseline_created)))
    if settings.history:
        facts.append(("workers", " → ".join(str(h.workers) for h in settings.history) +
                      f" (looks planned: {settings.looks_planned})"))
    facts.append(("false-discovery level", f"{settings.alpha:g}"))
    facts.append(("created", fmt.timestamp(document.created_at)))
    return facts


def _suite_name(documents: Sequence[ResultDocument]) -> str:
    return next((d.suite.name for d in documents if d.suite.name), "")


def counted_why_views(documents: Sequence[VerdictsDocument]) -> list[CountedWhyView]:
    """Why, counted: one view per DIFFERENT ``instructions`` verdict whose sides kept functions."""
    views = []
    for document in documents:
        for row in document.verdicts:
            if row.metric != "instructions" or row.decision != "different":
                continue
            base, cand, _, _ = pair_entries(document, row)
            view = counted_why(row.case, (row.baseline, row.candidate), base, cand)
            if view is not None:
                views.append(view)
    return views


def comparison_view(document: VerdictsDocument, details: list[CaseDetail]) -> ComparisonView:
    """The comparison of one verdict document; appends its case details to ``details``."""
    sides_docs = side_documents(document)
    suite = _suite_name([d for _, d in sides_docs])
    by_case: dict[str, list[VerdictRow]] = {}
    pairs: dict[str, tuple[CaseEntry | None, CaseEntry | None, int, int, str, str]] = {}
    rows = []
    for raw in document.verdicts:
        base, cand, base_doc, cand_doc = pair_entries(document, raw)
        row = _verdict_row(raw, base, cand)
        rows.append(row)
        by_case.setdefault(row.case, []).append(row)
        pairs.setdefault(row.case, (base, cand, base_doc, cand_doc, row.baseline_label, row.candidate_label))
    for case, case_rows in by_case.items():
        anchor = f"case-{len(details) + 1}"
        for row in case_rows:
            row.anchor = anchor
        base, cand, base_doc, cand_doc, base_label, cand_label = pairs[case]
        latency = next((r for r in case_rows if r.metric == "latency"), None)
        sides = []
        if base is not None:
            sides.append(SideView(base_label, base, sides_docs[base_doc][1].environment, base_doc))
        if cand is not None:
            sides.append(SideView(cand_label, cand, sides_docs[cand_doc][1].environment, cand_doc,
                                  _tone(latency.state) if latency else "neutral"))
        details.append(case_detail(anchor, case, rows_runner(case_rows), case_rows, sides))
    rows.sort(key=lambda r: r.sort_key)
    latency_rows = [r for r in rows if r.metric == "latency"]
    latency_rows.sort(key=lambda r: (SEVERITY[r.state], -(r.ratio or 1.0)))
    summary = document.summary
    geomean = summary.latency_geomean
    forest: list[ForestRow] = []
    axis = geo_chart = None
    if latency_rows:
        values = [v for r in latency_rows for v in (r.ratio, r.ci_low, r.ci_high) if v]
        if geomean:
            values += [geomean.ci_low, geomean.ci_high]
        domain = svg.RatioDomain.covering([v for v in values if v], [r.floor or 0 for r in latency_rows])
        forest = [ForestRow(r, svg.interval(domain, r.ratio, r.ci_low, r.ci_high, r.floor, _tone(r.state)))
                  for r in latency_rows]
        axis = svg.interval_axis(domain)
        if geomean:
            geo_chart = svg.interval(domain, geomean.ratio, geomean.ci_low, geomean.ci_high, None, "neutral")
    return ComparisonView(_comparison_title(document), document.kind, _mode_facts(document), summary, rows, forest,
                          axis, geo_chart, list(document.warnings), suite)


def rows_runner(rows: list[VerdictRow]) -> str:
    return next((r.runner for r in rows if r.runner), "")


# --- result documents -----------------------------------------------------------------------------

def _median(entry: CaseEntry | None) -> float | None:
    latency = entry.metrics.latency_s if entry else None
    return fmt.finite(latency.median) if latency else None


def _run_cell(entry: CaseEntry | None, first_median: float | None) -> dict[str, str]:
    if entry is None:
        return {"status": "absent"}
    metrics = entry.metrics
    latency = metrics.latency_s
    cell = {"status": entry.status, "median": fmt.seconds(latency.median if latency else None),
            "p90": fmt.seconds(latency.p90 if latency else None), "cv": fmt.percent(latency.cv if latency else None),
            "nodes": fmt.quantity(metrics.node_count, "nodes"), "compile": fmt.seconds(metrics.compile_time_s),
            "size": fmt.quantity(metrics.artifact_size_bytes, "B"), "vs_first": ""}
    median = _median(entry)
    if median and first_median:
        cell["vs_first"] = fmt.change(median / first_median)
    if entry.error:
        cell["error"] = f"{entry.error.stage}: {entry.error.message}"
    cell["correctness"] = (entry.correctness.status or "") if entry.correctness else ""
    return cell


def _group(entry: CaseEntry | None) -> str | None:
    return entry.measurement.group if entry and entry.measurement else None


def _first_medians(document: ResultDocument) -> dict[str, float]:
    """The median of the first case of each measurement group (the table's 'vs first' reference)."""
    firsts: dict[str, float] = {}
    for entry in document.cases:
        group, median = _group(entry), _median(entry)
        if group and median and entry.ok:
            firsts.setdefault(group, median)
    return firsts


def run_view(documents: list[tuple[str, ResultDocument]], details: list[CaseDetail]) -> RunView:
    """The run table of result documents, one column group per document."""
    order: list[str] = []
    for _, document in documents:
        for entry in document.cases:
            if entry.id not in order:
                order.append(entry.id)
    entries = [entries_by_id(d) for _, d in documents]
    firsts = [_first_medians(d) for _, d in documents]
    rows = []
    for case in order:
        anchor = f"case-{len(details) + 1}"
        cells: list[dict[str, str]] = []
        sides: list[SideView] = []
        for index, ((label, document), by_id) in enumerate(zip(documents, entries, strict=True)):
            found = by_id.get(case)
            group = _group(found)
            cells.append(_run_cell(found, firsts[index].get(group) if group else None))
            if found is not None:
                sides.append(SideView(label, found, document.environment, index, "base" if not sides else "neutral"))
        medians = [_median(by_id.get(case)) for by_id in entries]
        vs_first = [fmt.change(m / first) if m and (first := medians[0]) else "" for m in medians[1:]]
        case_label, runner = _case_parts(next((by_id[case] for by_id in entries if case in by_id), None), case)
        details.append(case_detail(anchor, case, runner, [], sides))
        rows.append(RunRow(case, anchor, cells, vs_first))
    facts = [[("suite", d.suite.name), ("started", fmt.timestamp(d.started_at)),
              ("finished", fmt.timestamp(d.finished_at)),
              ("compiler", " ".join(x for x in ((d.compiler.commit or "")[:10] if d.compiler else "",
                                                d.compiler.subject if d.compiler else "") if x))]
             for _, d in documents]
    return RunView([label for label, _ in documents], rows, facts)


# --- the whole report -----------------------------------------------------------------------------

def build_report(documents: Sequence[Document], labels: list[str] | None = None) -> Report:
    """The report of ``documents`` (verdicts, results and bisections in any mix).

    ``labels`` name the documents (e.g. their file names) where the report needs a name for a
    result document; by default ``result 1``, ``result 2``, ..."""
    from perfguard import __version__

    labels = labels or [f"result {i + 1}" for i in range(len(documents))]
    details: list[CaseDetail] = []
    comparisons, results = [], []
    bisections: list[BisectView] = []
    tunes: list[TuneView] = []
    verdict_documents: list[VerdictsDocument] = []
    environments = []
    explain_warnings: list[str] = []
    for document, label in zip(documents, labels, strict=True):
        sources: list[tuple[str, ResultDocument]] = []
        if isinstance(document, VerdictsDocument):
            comparisons.append(comparison_view(document, details))
            verdict_documents.append(document)
            sources = side_documents(document)
        elif isinstance(document, ResultDocument):
            results.append((label, document))
            sources = [(label, document)]
        elif isinstance(document, TuneResult):
            tunes.append(tune_view(document))
            if document.proof is not None:  # the proof's rows join the verdict table
                comparisons.append(comparison_view(document.proof, details))
                verdict_documents.append(document.proof)
                sources = side_documents(document.proof)
        else:
            bisections.append(bisect_view(document, f"bisect-{len(bisections) + 1}-why", explain_warnings))
        for side_label, source in sources:
            for runner, fingerprint in source.environment.items():
                environments.append((side_label, str(runner), flatten_fingerprint(fingerprint)))
    run = run_view(results, details) if results else None
    headline = Headline(comparisons=len(comparisons))
    if verdict_documents:
        summary = (verdict_documents[0].summary if len(verdict_documents) == 1
                   else Summary.of(r for d in verdict_documents for r in d.verdicts))
        for key in ("regressions", "improvements", "same", "unknown", "failed", "not_gated"):
            setattr(headline, key, getattr(summary, key))
        headline.geomean = summary.latency_geomean
    for _, document in results:
        for entry in document.cases:
            if entry.ok:
                headline.cases_ok += 1
            else:
                headline.cases_failed += 1
    suite = next((c.suite for c in comparisons if c.suite), "") or _suite_name([d for _, d in results]) or next(
        (b.suite for b in bisections if b.suite), "")
    if comparisons:
        title = comparisons[0].title if len(comparisons) == 1 else f"{len(comparisons)} comparisons"
    elif results:
        title = "run" if len(results) == 1 else f"{len(results)} runs side by side"
    elif tunes:
        title = f"tune {tunes[0].case}"
    else:
        title = "bisection"
    created = max((d.created_at if isinstance(d, VerdictsDocument) else d.finished_at if isinstance(d, ResultDocument)
                   else d.proof.created_at if isinstance(d, TuneResult) and d.proof else "" for d in documents),
                  default="")
    warnings = [w for c in comparisons for w in c.warnings]
    explanations = why_views([e for d in verdict_documents for e in d.explanations], "why", warnings)
    warnings += explain_warnings
    blind = [f"{d.case} ({', '.join(b['label'] for b in d.blind)})" if len(d.sides) > 1 else d.case
             for d in details if d.blind]
    if blind:
        shown = ", ".join(blind[:10]) + (f" and {len(blind) - 10} more" if len(blind) > 10 else "")
        warnings.append(f"correctness not verified for {len(blind)} case{'' if len(blind) == 1 else 's'} (blind: "
                        f"the reference outputs are the same on two different inputs, so a wrong pass would pass "
                        f"the check): {shown}")
    why = [(e.case, e.dimension.headline) for d in verdict_documents for e in d.explanations
           if isinstance(e, Explanation) and e.dimension.headline]
    return Report(title=title, suite=suite, created_at=created, tool_version=__version__, headline=headline,
                  comparisons=comparisons, run=run, bisections=bisections, cases=details,
                  environments=environments, warnings=warnings, why=why, explanations=explanations, tunes=tunes,
                  counted_why=counted_why_views(verdict_documents),
                  exact_why=[view for d in verdict_documents for view in exact_whys(d)[0]],
                  out_of_reach=[line for d in verdict_documents if (line := latency_out_of_reach(d))])
