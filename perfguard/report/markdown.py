"""Markdown for GitHub: the job summary, the pull-request comment, and workflow annotations.

* :func:`job_summary` - for ``$GITHUB_STEP_SUMMARY``: headline, every latency row and every row
  that is not "same" (capped), bisection narratives, warnings, a link to the HTML report.
* :func:`pr_comment` - short on purpose: the headline, the worst few rows and a link. Starts with
  :data:`COMMENT_MARKER` so a workflow can find and update its own comment instead of adding one
  per push.
* :func:`workflow_annotations` - ``::error`` lines for regressions and failed cases, ``::warning`` for
  undecided ones (GitHub shows at most 10 of each per step; the rest are counted in a notice).

Text from documents (case names, pipeline labels, commit subjects, reasons) goes through
:func:`~perfguard.report.escape.md_text` or :func:`~perfguard.report.escape.md_code`, and
annotation text through :func:`~perfguard.report.escape.command_data`: the one escaping of
:mod:`perfguard.report.escape` (no formatting, HTML, link, mention or extra line from a name).
"""

from __future__ import annotations

from perfguard.report import format as fmt
from perfguard.report.bisect import BisectView
from perfguard.report.escape import command_data, command_property, md_code, md_text
from perfguard.report.model import Report
from perfguard.report.rows import SEVERITY, VerdictRow

COMMENT_MARKER = "<!-- perfguard-report -->"
ICONS = {"regression": "🔴", "failed": "❌", "unknown": "🟡", "improvement": "🟢", "same": "⚪", "ungated": "⚪"}
WORDS = {"regression": "regression", "failed": "failed", "unknown": "undecided", "improvement": "improvement",
         "same": "same", "ungated": "not gated"}
#: Listed even when SAME: time, and the counted evidence beside it (``--counts``; a pair that was
#: not counted has no such row).
ALWAYS_LISTED = ("latency", "instructions")
#: Rows a summary lists: every latency row and every other row that says something.
QUIET = ("same", "ungated")


def _counts(report: Report) -> str:
    h = report.headline
    if not h.comparisons:
        return f"{fmt.plural(h.cases_ok, 'case')} ok, {h.cases_failed} failed"
    parts = [f"**{fmt.plural(h.regressions, 'regression')}**" if h.regressions else "0 regressions",
             fmt.plural(h.improvements, "improvement"), f"{h.same} unchanged", f"{h.unknown} undecided"]
    if h.failed:
        parts.append(f"**{h.failed} failed**")
    if h.not_gated:
        parts.append(f"{h.not_gated} not gated (compile time too noisy to decide its floor)")
    text = " · ".join(parts)
    if h.geomean:
        g = h.geomean
        text += (f" — latency geometric mean **{fmt.change(g.ratio)}** "
                 f"{fmt.interval(g.ci_low, g.ci_high)} over {fmt.plural(g.cases, 'case')}")
    return text


def headline_text(report: Report) -> str:
    h = report.headline
    state = h.state
    regressions = f"🔴 {fmt.plural(h.regressions, 'regression')}"
    if state == "failed":
        failed = f"❌ {h.failed or h.cases_failed} failed"
        return f"{regressions} · {failed}" if h.regressions else failed
    if state == "regression":
        return regressions
    if state == "unknown":
        return f"🟡 no regression found, {h.unknown} undecided"
    if state == "pass":
        return "✅ no regression"
    return f"{h.cases_ok} cases measured"


def _title(report: Report) -> str:
    suite = f" · {md_text(report.suite)}" if report.suite else ""
    return f"perfguard{suite}: {headline_text(report)}"


def _verdict_table(rows: list[VerdictRow], full: bool) -> list[str]:
    if full:
        lines = ["| verdict | case | runner | metric | baseline | candidate | change | interval (95%) | p | MDE |",
                 "| --- | --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: |"]
    else:
        lines = ["| verdict | case | metric | change | interval (95%) |", "| --- | --- | --- | ---: | --- |"]
    for row in rows:
        verdict = f"{ICONS[row.state]} {WORDS[row.state]}" + (f": {row.floor_note}" if row.floor_note else "")
        change = fmt.change(row.ratio) if row.ratio is not None else ""
        interval = fmt.interval(row.ci_low, row.ci_high)
        if full:
            lines.append(f"| {verdict} | {md_text(row.case_label)} | {md_text(row.runner)} | {row.metric} | "
                         f"{fmt.quantity(row.baseline_value, row.unit)} | {fmt.quantity(row.candidate_value, row.unit)} | "
                         f"{change} | {interval} | {fmt.p_value(row.p_value)} | {fmt.mde(row.mde)} |")
        else:
            lines.append(f"| {verdict} | {md_text(row.case)} | {row.metric} | {change} | {interval} |")
    return lines


def _link(report_url: str | None, text: str = "Full report") -> str:
    if not report_url:
        return f"{text}: `index.html` in the perfguard report folder (the run's `perfguard-report` artifact in CI)."
    # A URL is ours (the workflow's artifact or run page); still refuse anything that would end the link.
    if any(c in report_url for c in " <>()[]\"'`\n"):
        return f"{text}: {md_text(report_url)}"
    return f"[{text}]({report_url}) (HTML, self-contained: download and open)."


def _bisect_lines(view: BisectView) -> list[str]:
    case = f" of {md_text(view.case)}" if view.case else ""
    if view.mode == "pipelines":
        head = (f"**Bisection{case}** between pipelines {md_text(view.good_pipeline)} and "
                f"{md_text(view.bad_pipeline)}: ")
        if view.found and view.minimal:
            effect = f" ({view.effect.change} {view.effect.interval})" if view.effect else ""
            return [head + "the regression comes from " + "; ".join(md_text(m) for m in view.minimal) + effect + "."]
        return [head + ("no regression." if view.status == "no-regression" else f"{md_text(view.status)}.")]
    probes = f" in {view.total_probes} probes" if view.total_probes is not None else ""
    wall = f", {view.wall_time}" if view.wall_time else ""
    span = ""
    if view.good and view.bad:
        span = f" between {md_code(view.good.short)} and {md_code(view.bad.short)}"
    lines = [f"**Bisection{case}**{span}{probes}{wall}:" + _outcome(view)]
    for culprit in view.culprits:
        parts = []
        if culprit.commit:
            subject = f" “{md_text(culprit.commit.subject)}”" if culprit.commit.subject else ""
            author = f" by {md_text(culprit.commit.author)}" if culprit.commit.author else ""
            parts.append(f"commit {md_code(culprit.commit.short)}{subject}{author}")
        if culprit.effect:
            parts.append(f"costs **{culprit.effect.change}** {culprit.effect.interval}")
        if culprit.pass_name:
            position = f" #{culprit.pass_position}" if culprit.pass_position is not None else ""
            parts.append(f"pass{position} {md_text(culprit.pass_name)}")
        confirmed = "" if culprit.confirmed else " (not confirmed)"
        lines.append("- " + "; ".join(parts) + confirmed)
    return lines


def _outcome(view: BisectView) -> str:
    """What a commits bisection came to when it names no culprit (empty when it does)."""
    if view.status == "no-regression":
        return " no regression between these commits."
    if view.status == "undecided":
        deciding = "".join(f"; {md_text(change)}: {md_code('--metric ' + change.split()[0])} decides it"
                           for change in view.exact_changes)
        return f" undecided: the ends could not be told from noise, nothing bisected{deciding}."
    return "" if view.culprits else f" no culprit isolated ({md_text(view.status)})."


def _interesting(report: Report) -> list[VerdictRow]:
    """Latency rows of every case and every other row that is not 'same', worst first."""
    return [r for r in report.verdict_rows if r.metric in ALWAYS_LISTED or r.state not in QUIET or r.floor_note]


def job_summary(report: Report, report_url: str | None = None, max_rows: int = 40) -> str:
    """Markdown for ``$GITHUB_STEP_SUMMARY``."""
    lines = [f"## {_title(report)}", "", _counts(report), "", *_out_of_reach_lines(report)]
    for comparison in report.comparisons:
        rows = [r for r in comparison.rows if r.metric in ALWAYS_LISTED or r.state not in QUIET or r.floor_note]
        lines += [f"**{md_text(comparison.title)}** ({md_text(comparison.kind)})", ""]
        lines += _verdict_table(rows[:max_rows], full=True)
        hidden = len(comparison.rows) - len(rows[:max_rows])
        if hidden:
            lines += ["", f"{fmt.plural(hidden, 'more row')} (unchanged, or past the first {max_rows}) in the full report."]
        lines.append("")
    if report.run:
        lines += _run_lines(report, max_rows)
    lines += _why_lines(report)
    lines += _exact_why_lines(report)
    lines += _counted_why_lines(report)
    for view in report.bisections:
        lines += _bisect_lines(view) + [""]
    for warning in report.warnings:
        lines.append(f"> ⚠️ {md_text(warning)}")
    if report.warnings:
        lines.append("")
    lines.append(_link(report_url))
    return "\n".join(lines) + "\n"


def _run_lines(report: Report, max_rows: int) -> list[str]:
    run = report.run
    assert run is not None
    label = run.labels[0]
    lines = [f"**Run** ({md_text(label)})" + (f", vs {', '.join(md_text(x) for x in run.labels[1:])}"
                                               if len(run.labels) > 1 else ""), "",
             "| case | status | median | p90 | cv | vs first | nodes | compile |" +
             "".join(f" {md_text(x)} vs {md_text(label)} |" for x in run.labels[1:]),
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |" + " ---: |" * (len(run.labels) - 1)]
    for row in run.rows[:max_rows]:
        cell = row.cells[0]
        failed = [label for label, c in zip(run.labels, row.cells, strict=True) if c["status"] not in ("ok", "absent")]
        status = "✅ ok" if cell["status"] == "ok" else ("—" if cell["status"] == "absent" else "❌ failed")
        if cell["status"] == "ok" and cell.get("correctness") == "blind":
            status = "⚠️ ok, correctness blind"
        if failed and (len(run.labels) > 1 or cell["status"] == "ok"):
            status = f"❌ failed in {', '.join(md_text(x) for x in failed)}"
        extra = "".join(f" {v} |" for v in row.vs_first_file)
        if cell["status"] == "ok":
            lines.append(f"| {md_text(row.case)} | {status} | {cell['median']} | {cell['p90']} | {cell['cv']} | "
                         f"{cell['vs_first']} | {cell['nodes']} | {cell['compile']} |{extra}")
        else:
            lines.append(f"| {md_text(row.case)} | {status} | {md_text(cell.get('error', ''), limit=200)} | | | | | |{extra}")
    if len(run.rows) > max_rows:
        lines += ["", f"{len(run.rows) - max_rows} more cases are in the full report."]
    return lines + [""]


def pr_comment(report: Report, report_url: str | None = None, worst: int = 5) -> str:
    """A short pull-request comment: headline, the worst few rows, a link to the full report."""
    lines = [COMMENT_MARKER, f"### {_title(report)}", "", _counts(report), "", *_out_of_reach_lines(report)]
    attention = [r for r in _interesting(report) if r.state in ("failed", "regression")
                 or (r.state == "unknown" and r.metric == "latency")]
    # real changes under the floor: listed after those, so "same" never hides a measured change
    under = [r for r in _interesting(report) if r.floor_note and r.metric == "latency"]
    attention.sort(key=lambda r: (SEVERITY[r.state], r.sort_key[1:]))
    if attention:
        lines += _verdict_table(attention[:worst], full=False)
        if len(attention) > worst:
            lines += ["", f"…and {len(attention) - worst} more that need attention."]
        lines.append("")
        explained = [row for row in attention[:worst] if row.state in ("failed", "regression") and row.reason]
        for row in explained:  # the why of each: before -> after and the floor, or the failure
            metric = "" if row.state == "failed" else f" {row.metric}"
            lines.append(f"- {md_text(row.case)}{metric}: {md_text(row.reason, limit=300)}")
        if explained:
            lines.append("")
    elif report.run and report.headline.cases_failed:
        failed = [r.case for r in report.run.rows if r.cells[0]["status"] not in ("ok", "absent")]
        lines += [f"Failed: {', '.join(md_text(c) for c in failed[:worst])}"
                  + (f" and {len(failed) - worst} more" if len(failed) > worst else ""), ""]
    if under:
        lines += ["Under the floor (real, too small to gate on):", "", *_verdict_table(under[:worst], full=False), ""]
    lines += _why_lines(report)
    lines += _exact_why_lines(report)
    lines += _counted_why_lines(report)
    for view in report.bisections:
        lines += _bisect_lines(view)[:2] + [""]
    lines.append(_link(report_url))
    return "\n".join(lines) + "\n"


def _out_of_reach_lines(report: Report) -> list[str]:
    """Latency this runner could not resolve: one quoted line each, with the way out."""
    return [*(f"> 🟡 {md_text(line)}" for line in report.out_of_reach), ""] if report.out_of_reach else []


def _why_lines(report: Report) -> list[str]:
    """One line per regression ``check --explain`` profiled: the dimension's headline."""
    if not report.why:
        return []
    return [f"- why {md_text(case)}: {md_text(headline)}" for case, headline in report.why] + [""]


def _exact_why_lines(report: Report, shown: int = 3) -> list[str]:
    """Exact regressions: the pass trace's highlight and the op-type diff of each case (the first
    ``shown``), as the nightly's alert shows them."""
    return [line for view in report.exact_why[:shown] for line in view.markdown()]


def _counted_why_lines(report: Report, shown: int = 5) -> list[str]:
    """Why, counted (``--counts``): per pair whose instructions changed, the functions that moved."""
    lines = [line for view in report.counted_why for line in view.markdown(shown)]
    return [*lines, ""] if lines else []


def annotation(level: str, title: str, message: str) -> str:
    """One workflow command (``::error title=...::message``), escaped."""
    return f"::{level} title={command_property(title)}::{command_data(message)}"


def workflow_annotations(report: Report, limit: int = 10) -> list[str]:
    """``::error`` for regressions and failures, ``::warning`` for undecided rows, worst first."""
    errors: list[str] = []
    warnings: list[str] = []
    for row in sorted(report.verdict_rows, key=lambda r: r.sort_key):
        if row.state not in ("regression", "failed", "unknown"):
            continue
        if row.ratio is None:
            message = f"{row.case}: {row.reason}"
        else:
            detail = f"{row.metric} {fmt.change(row.ratio)} {fmt.interval(row.ci_low, row.ci_high)}".rstrip()
            message = f"{row.case}: {detail} vs {row.baseline_label}. {row.reason}".strip()
        if row.state == "unknown":
            warnings.append(annotation("warning", f"perfguard: undecided {row.metric}", message))
        else:
            word = "regression" if row.state == "regression" else "failed"
            errors.append(annotation("error", f"perfguard: {row.metric} {word}", message))
    if report.run:
        for run_row in report.run.rows:
            for label, cell in zip(report.run.labels, run_row.cells, strict=True):
                if cell["status"] not in ("ok", "absent"):
                    errors.append(annotation("error", "perfguard: case failed",
                                             f"{run_row.case} ({label}): {cell.get('error', 'failed')}"))
    lines = errors[:limit] + warnings[:limit]
    hidden = max(len(errors) - limit, 0) + max(len(warnings) - limit, 0)
    if hidden:
        lines.append(f"::notice title=perfguard::{hidden} more annotations; see the job summary and the report")
    return lines
