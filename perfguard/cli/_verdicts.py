"""Shared by the deciding commands: the terminal table of verdicts and the JSON output (the
environment rule they apply is ``perfguard.compare.documents.environment_warnings``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfguard.compare.verdicts import Verdict, VerdictsDocument

BADGES = {"regression": "[bold red]REGRESSION[/]", "improvement": "[green]improvement[/]",
          "same": "same", "unknown": "[yellow]unknown[/]", "failed": "[bold red]FAILED[/]"}


def badge(row: Verdict) -> str:
    if row.decision == "different":
        return BADGES[row.direction]
    if row.gated and row.comparison.under_floor:  # real but small: say so, the verdict stays same
        return f"same ({row.comparison.floor_note})"
    return BADGES.get(row.decision, str(row.decision))


def _pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{(value - 1) * 100:+.{digits}f}%"


#: Rows shown even when SAME: time, and the counted evidence beside it (``--counts``).
ALWAYS_SHOWN = ("latency", "instructions")


#: The longest reason printed under the table (a failed compile's message can be a traceback).
REASON_CHARS = 600


def print_verdicts(document: VerdictsDocument, verbose: bool = False) -> None:
    """Latency rows of every case, plus every other row that is not 'same'; under the table, the
    reason of each row that is not 'same' (before -> after, floor), on lines of its own so the
    table fits a CI log (``perfguard.cli._text.LOG_TABLE_WIDTH``)."""
    from rich.table import Table
    from rich.text import Text

    from perfguard.cli._text import LOG_TABLE_WIDTH, cli_console, literal, print_title, print_wrapped
    from perfguard.report.format import plural
    from perfguard.report.model import verdict_reasons
    from perfguard.report.reasons import latency_out_of_reach

    mode = document.mode
    reasons = verdict_reasons(document)
    table = Table()
    longest = max((len(row.case) for row in document.verdicts), default=4)
    for column in ("case", "metric", "change", "interval", "p", "mde", "verdict"):
        # the case keeps its width where it can (a folded case id reads as two cases)
        table.add_column(column, justify="left" if column in ("case", "metric", "verdict") else "right",
                         overflow="fold", min_width=min(longest, 48) if column == "case" else None)
    why = []
    for row in document.verdicts:
        quiet = row.decision == "same" and not row.comparison.under_floor
        if not verbose and row.metric not in ALWAYS_SHOWN and (quiet or not row.gated):
            continue
        c = row.comparison
        interval = f"[{_pct(c.ci_low)}, {_pct(c.ci_high)}]" if math.isfinite(c.ci_low) and row.noisy else ""
        p_value = f"{c.p_value:.2g}" if math.isfinite(c.p_value) and row.noisy else ""
        mde = f"{c.mde * 100:.1f}%" if math.isfinite(c.mde) and row.noisy else ""
        change = _pct(c.ratio, 1 if row.noisy else 2)  # a counted 0.5 % floor shows in the second decimal
        table.add_row(literal(row.case), literal(row.metric), change, interval, p_value, mde, badge(row))
        if row.decision in ("failed", "unknown", "different"):
            reason = reasons[(row.case, row.metric)]
            reason = reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS - 1] + "…"
            why.append(f"{row.case} {row.metric}: {reason}")
    console = cli_console(min_width=130, log_width=LOG_TABLE_WIDTH)
    print_title(console, f"perfguard check: {mode.candidate} vs {mode.baseline} ({mode.kind})")
    console.print(table)
    for line in why:
        print_wrapped(console, line)
    s = document.summary
    print_wrapped(console, f"{plural(s.regressions, 'regression')}, {plural(s.improvements, 'improvement')}, "
                           f"{s.same} same, {s.unknown} undecided, {s.failed} failed")
    geo = s.latency_geomean
    if geo:  # a line of its own: the counts above never wrap where the interval is wide
        print_wrapped(console, f"latency geometric mean {_pct(geo.ratio)} [{_pct(geo.ci_low)}, {_pct(geo.ci_high)}] "
                               f"over {plural(geo.cases, 'case')}")
    out_of_reach = latency_out_of_reach(document)
    if out_of_reach:
        print_wrapped(console, out_of_reach)
    identical = sorted({r.case for r in document.verdicts if r.comparison.method == "identity"})
    if identical:
        print_wrapped(console, f"{len(identical)} of {len({r.case for r in document.verdicts})} comparisons had "
                                "identical artifacts on both sides: SAME without timing (--measure-identical "
                                "times them)")
    ungated = [r for r in document.verdicts if not r.gated]
    if ungated:
        metrics = ", ".join(sorted({r.metric.replace("_", " ") for r in ungated}))
        print_wrapped(console, f"{metrics} not gated in {plural(len(ungated), 'case')}: too few or too noisy samples "
                                "to decide the floor "
                                f"({ungated[0].comparison.reason.rpartition('not gated: ')[2]}); --verbose shows them")
    for warning in document.warnings:
        print_wrapped(console, f"warning: {warning}", first=Text("warning:", "yellow"))


def write_verdicts(path: str | None, document: VerdictsDocument) -> None:
    if path:
        from perfguard.results import write_json_atomic

        write_json_atomic(path, document.to_json())
        print(f"verdicts written to {path}")
