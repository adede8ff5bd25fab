"""Markdown for the night: what changed since the previous night (the job summary of the nightly
workflow) and what ``nightly --bisect-only`` bisected, beside the check's Markdown
(:mod:`perfguard.report.markdown`).

The night itself is :mod:`perfguard.flows.nightly.night`'s; this module reads what it declares of it
(:class:`NightOutcome`, met by :class:`perfguard.flows.nightly.night.NightReport`), so rendering
stays below the flow that computes. Names, commit subjects and notes are data
(:mod:`perfguard.report.escape`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from perfguard.report.escape import md_code, md_text

if TYPE_CHECKING:
    from perfguard.bisect.document import BisectResult
    from perfguard.compare.verdicts import Verdict, VerdictsDocument
    from perfguard.store import Change, Night, Series
    from perfguard.store.alert_rows import Alert
    from perfguard.store.edits import PipelineEdit


class NightFinding(Protocol):
    """A change point of one series as the night sees it."""

    @property
    def change(self) -> Change: ...

    @property
    def series(self) -> Series: ...


class NightOutcome(Protocol):
    """What the summary reads of one night: the night and the previous one, the check, the
    changes found and closed, the bisections, the counts of cases and the alerts."""

    @property
    def suite(self) -> str: ...

    @property
    def night(self) -> Night: ...

    @property
    def previous(self) -> Night | None: ...

    @property
    def verdicts(self) -> VerdictsDocument | None: ...

    @property
    def findings(self) -> Sequence[NightFinding]: ...

    @property
    def closed(self) -> Sequence[Change]: ...

    @property
    def bisections(self) -> Mapping[int, BisectResult]: ...

    @property
    def measured_cases(self) -> int: ...

    @property
    def failed_cases(self) -> int: ...

    @property
    def edited_pipelines(self) -> tuple[str, ...]: ...

    @property
    def pipeline_edits(self) -> Sequence[PipelineEdit]: ...

    @property
    def unraised_regressions(self) -> Sequence[Verdict]: ...

    @property
    def alerts(self) -> Sequence[Alert]: ...

    @property
    def broken(self) -> str | None: ...


class FixOutcome(Protocol):
    """One fixing range bisected: the alert after it and the note its event carries."""

    @property
    def alert(self) -> Alert: ...

    @property
    def note(self) -> str: ...


def _pct(ratio: float) -> str:
    return f"{ratio - 1:+.1%}"


def _interval(change: Change) -> str:
    if change.ci_low is None or change.ci_high is None:
        return ""
    return f"[{_pct(change.ci_low)}, {_pct(change.ci_high)}]"


def _commits(change: Change) -> str:
    good, bad = (change.good_commit or "?")[:10], (change.bad_commit or "?")[:10]
    return md_text(f"{good}..{bad}")


def _culprit(result: BisectResult) -> str:
    """The first culprit of a bisection as Markdown: commit, subject and pass, or its status."""
    first = next((c for c in result.culprits if c.commit), None)
    if first is None or first.commit is None:
        return md_text(result.status)
    text = f"{md_code(first.commit.sha[:10])} {md_text(first.commit.subject or '')}".strip()
    how = (f" (bisected on {md_text(result.metric)}: {result.total_probes} probes, each version once, untimed)"
           if result.metric != "latency" else "")
    return text + (f", pass {md_code(first.pass_.name)}" if first.pass_ else "") + how


def _series(f: NightFinding, kind: bool = True) -> str:
    key = f.series.key
    return f"{md_text(key.case)} {md_text(key.metric)}" + (f" ({md_text(key.kind)})" if kind else "")


def markdown_summary(report: NightOutcome) -> str:
    """What changed since the previous night, as Markdown (the job summary of the workflow). Names,
    commit subjects and notes are data (:mod:`perfguard.report.escape`)."""
    night, previous = report.night, report.previous
    lines = [f"## perfguard nightly: {md_text(report.suite)}", ""]
    if report.broken is not None:
        base = (f"the next night is checked against the last good night at {md_code(previous.commit[:10])}"
                if previous is not None else "no good night yet")
        lines += ["### Compiler broken", "",
                  f"The compiler at {md_code(night.commit[:10])} is broken ({report.failed_cases} case(s) failed): "
                  f"{md_text(report.broken)}", ""]
        lines += [f"- alert {a.id}, {_range(a)}: {md_text(a.status)}" for a in report.alerts]
        lines += ["", f"Nothing measured tonight; {base}.", ""]
        return "\n".join(lines)
    if previous is None:
        lines.append(f"First night at {md_code(night.commit[:10])}: {report.measured_cases} case(s) measured; "
                     "the next night is checked against this one.")
    else:
        lines.append(f"Night at {md_code(night.commit[:10])}, checked against the previous night at "
                     f"{md_code(previous.commit[:10])} ({md_text(previous.time)}) in the same job.")
        if report.verdicts is not None:
            rows = [v for v in report.verdicts.verdicts if v.metric == "latency"]
            identical = sum(1 for v in rows if v.comparison.method == "identity")
            counts: dict[str, int] = {}
            for v in rows:
                word = ("regression" if v.is_regression else "improvement" if v.decision == "different"
                        else v.decision)
                counts[word] = counts.get(word, 0) + 1
            under = sum(1 for v in rows if v.gated and v.comparison.under_floor)
            said = ", ".join(f"{n} {md_text(word)}" + (f" ({under} under the floor)" if word == "same" and under else "")
                             for word, n in sorted(counts.items()))
            lines.append(f"Latency of {len(rows)} case(s): {said}" +
                         (f" ({identical} identical artifact(s), not timed)." if identical else "."))
    lines.append("")
    regressions = [a for a in report.alerts if a.kind != "improvement" and a.is_open]
    if regressions:
        lines += ["### New confirmed regressions", "",
                  "One alert per culprit (a range while none is named): every case and metric it changed.", "",
                  "| alert | status | changes | commits | culprit | why |", "|---|---|---|---|---|---|"]
        lines += [_alert_row(report, a) for a in regressions]
        lines.append("")
        lines += _counted_why_lines(regressions)
    pending = [f for f in report.findings if f.change.status == "pending"]
    if pending:
        lines += ["### Seen tonight, not yet confirmed", ""]
        lines += [f"- {_series(f)}: {_pct(f.change.ratio)} {_interval(f.change)}, {_commits(f.change)}: "
                  f"{md_text(f.change.note)}" for f in pending]
        lines.append("")
    improvements = [a for a in report.alerts if a.kind == "improvement"]
    if improvements:
        lines += ["### Improvements (reported, not gated)", ""]
        lines += [f"- alert {a.id}, {_range(a)}: {_alert_changes(a, ', ')}" for a in improvements]
        lines.append("")
    settled = [a for a in report.alerts if a.kind != "improvement" and not a.is_open]
    if settled:
        lines += ["### Alerts closed", ""]
        lines += [f"- alert {a.id}, {_range(a)}: {md_text(a.status)}"
                  + (" (the compiler builds again)" if a.kind == "broken" else "")
                  + (f" (fixed in {md_text((a.fix_first_commit or '?')[:10])}..{md_text((a.fix_last_commit or '?')[:10])})"
                     if a.fix_last_commit else "") + _fixed_by(a) + f": {_alert_changes(a, ', ')}" for a in settled]
        lines.append("")
    dropped = [*report.closed, *(f.change for f in report.findings if f.change.status == "closed")]
    if dropped:
        lines += ["### Did not hold", ""]
        lines += [f"- {_commits(c)} {_pct(c.ratio)}: {md_text(c.note)}" for c in dropped]
        lines.append("")
    lines += _edit_lines(report)
    unraised = report.unraised_regressions
    if unraised:
        lines += ["### Regressions of tonight's check that no series holds", "",
                  "Exact metrics (no noise): tonight's check decided them against the previous night, but no "
                  "series of the store holds the step (a runner of another fingerprint, or a pipeline edited "
                  "outside the compiler's repository, starts a series of its own). They count as new "
                  "regressions.", ""]
        lines += [f"- {md_text(v.case)} {md_text(v.metric)}: {_value(v.comparison.baseline_median)} -> "
                  f"{_value(v.comparison.candidate_median)} ({_pct(v.comparison.ratio)})" for v in unraised]
        lines.append("")
    if previous is not None and not (report.alerts or pending or dropped or unraised):
        lines += ["Nothing new since the previous night.", ""]
    return "\n".join(lines)


def _value(number: float) -> str:
    return f"{number:.0f}" if float(number).is_integer() else f"{number:.4g}"


def _edit_lines(report: NightOutcome) -> list[str]:
    """The pipelines the suite file defined anew since the previous night: where (the commit, else
    the range and what the suite file's history says) and the pass lists before and after."""
    if not report.pipeline_edits:
        return []
    lines = ["### Pipelines edited since the previous night", "",
             "A code change: each pipeline's series continue across the edit, and its commit is the culprit of "
             "what moved.", ""]
    for edit in report.pipeline_edits:
        where = md_code(edit.commit[:10]) if edit.commit else md_text(f"{edit.good_commit[:10]}..{edit.bad_commit[:10]}")
        lines.append(f"- {md_code(edit.pipeline)} at {where}: {md_text(edit.passes)}"
                     + (f" ({md_text(edit.note)})" if edit.note else ""))
    return [*lines, ""]


def _counted_why_lines(alerts: Sequence[Alert]) -> list[str]:
    """Why, counted: per alert whose culprit was counted against its parent, the functions whose
    instructions moved most (the lines of the check's PR comment, the issue and the site)."""
    from perfguard.report.counted_why import pair_view

    lines = []
    for alert in alerts:
        if alert.explanation is not None and alert.explanation.counted is not None:
            lines += [f"Alert {alert.id}, its culprit counted against its parent:", "",
                      *pair_view(alert.explanation.counted).markdown(), ""]
    return lines


def _fixed_by(alert: Alert) -> str:
    """``, fixed by <commit> (<pass>)`` as Markdown when the fixing commit is known, else nothing."""
    if alert.fix_commit is None:
        return ""
    return f", fixed by {md_code(alert.fix_commit[:10])}" + (f" ({md_code(alert.fix_pass)})" if alert.fix_pass else "")


def _range(alert: Alert) -> str:
    return md_text(f"{(alert.first_commit or '?')[:10]}..{(alert.last_commit or '?')[:10]}")


def _alert_changes(alert: Alert, separator: str) -> str:
    """The changes of an alert, latency first: case, metric, size (bold for latency), interval."""
    out = []
    for c in alert.changes:
        size = f"**{_pct(c.ratio)}**" if c.metric == "latency" else _pct(c.ratio)
        interval = ("" if c.ci_low is None or c.ci_high is None
                    else " (exact)" if c.ci_low == c.ci_high  # no noise: a zero-width interval says nothing
                    else f" [{_pct(c.ci_low)}, {_pct(c.ci_high)}]")
        out.append(f"{md_text(c.case)} {md_text(c.metric)} ({md_text(c.kind)}) {size}{interval}")
    return separator.join(out)


def _alert_row(report: NightOutcome, alert: Alert) -> str:
    """One alert as a row of the summary's table: its changes inside one cell."""
    ids = {c.change_id for c in alert.changes}
    bisected = next((r for change_id, r in report.bisections.items() if change_id in ids), None)
    if bisected is not None:
        culprit = _culprit(bisected)
    elif alert.culprit_commit:
        culprit = md_code(alert.culprit_commit[:10]) + (f", pass {md_code(alert.culprit_pass)}"
                                                          if alert.culprit_pass else "")
        edit = next((e for e in _edits_of(report, alert) if e.commit == alert.culprit_commit), None)
        if edit is not None:
            culprit += f" (the suite's pipeline changed: {md_code(edit.pipeline)} {md_text(edit.passes)})"
    elif _edits_of(report, alert):  # no commit found: the range, and the commits that touched the suite file
        culprit = "; ".join(f"{md_code(e.pipeline)}: {md_text(e.note)}" if e.note else
                            f"the suite's pipeline changed: {md_code(e.pipeline)} {md_text(e.passes)}"
                            for e in _edits_of(report, alert))
    elif any(c.case.count("/") == 2 and c.case.split("/")[1] in report.edited_pipelines for c in alert.changes):
        culprit = "the suite's pipeline changed"
    else:
        culprit = "not bisected"
    why = ""
    if alert.explanation is not None:
        e = alert.explanation
        nodes = ", ".join(f"{md_text(n.op_type)} {n.before}→{n.after}" for n in e.node_changes[:3])
        why = f"{md_text(e.dimension)}: {md_text(e.headline)}" + (f" ({nodes})" if nodes else "")
    return (f"| {alert.id} | {md_text(alert.status)} | {_alert_changes(alert, '; ')} | {_range(alert)} | "
            f"{culprit} | {why} |")


def _edits_of(report: NightOutcome, alert: Alert) -> list[PipelineEdit]:
    """Tonight's pipeline edits of the alert's cases in its range."""
    pipelines = {c.case.split("/")[1] for c in alert.changes if c.case.count("/") == 2}
    return [e for e in report.pipeline_edits if e.pipeline in pipelines and e.bad_commit == alert.last_commit]


def bisections_summary(suite: str, done: Sequence[tuple[Change, BisectResult | None]],
                       fixes: Sequence[FixOutcome] = ()) -> str:
    """The bisections ``nightly --bisect-only`` ran (:func:`perfguard.flows.nightly.night.bisect_open_changes`, and of the fixing
    ranges, :func:`perfguard.flows.bisection.fix_search.bisect_fixes`), as Markdown."""
    lines = [f"## perfguard nightly: bisections ({md_text(suite)})", ""]
    for change, result in done:
        culprit = "not run (see `perfguard history changes`)" if result is None else _culprit(result)
        lines.append(f"- {md_text(change.key.case)}: {_pct(change.ratio)} in {_commits(change)}: {culprit}")
    for fix in fixes:
        a = fix.alert
        found = _fixed_by(a).removeprefix(", ") or md_text(fix.note)
        lines.append(f"- alert {a.id}, {_range(a)}: fixed in "
                     f"{md_text((a.fix_first_commit or '?')[:10])}..{md_text((a.fix_last_commit or '?')[:10])}: {found}")
    if not done and not fixes:
        lines.append("No confirmed regression waits for a bisection.")
    return "\n".join(lines) + "\n"
