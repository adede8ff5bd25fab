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


def print_verdicts(document: VerdictsDocument, verbose: bool = False) -> None:
    """Latency rows of every case, plus every other row that is not 'same'."""
    from rich.table import Table
    from rich.text import Text

    from perfguard.cli._text import cli_console, literal

    mode = document.mode
    table = Table(title=literal(f"perfguard check: {mode.candidate} vs {mode.baseline} ({mode.kind})"))
    for column in ("case", "metric", "change", "interval", "p", "mde", "verdict"):
        table.add_column(column, justify="left" if column in ("case", "metric", "verdict") else "right")
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
        if row.decision in ("failed", "unknown") or (row.decision == "different" and verbose):
            table.add_row("", "", "", "", "", "", literal(c.reason[:150], "dim"))
    console = cli_console(min_width=130)
    console.print(table)
    s = document.summary
    geo = s.latency_geomean
    geo_text = (f"; latency geometric mean {_pct(geo.ratio)} [{_pct(geo.ci_low)}, {_pct(geo.ci_high)}] "
                f"over {geo.cases} cases") if geo else ""
    console.print(f"{s.regressions} regressions, {s.improvements} improvements, {s.same} same, "
                  f"{s.unknown} undecided, {s.failed} failed{geo_text}", highlight=False)
    identical = sorted({r.case for r in document.verdicts if r.comparison.method == "identity"})
    if identical:
        console.print(f"{len(identical)} of {len({r.case for r in document.verdicts})} comparisons had identical "
                      "artifacts on both sides: SAME without timing (--measure-identical times them)", highlight=False)
    ungated = [r for r in document.verdicts if not r.gated]
    if ungated:
        metrics = ", ".join(sorted({r.metric.replace("_", " ") for r in ungated}))
        console.print(literal(f"{metrics} not gated in {len(ungated)} case(s): too few or too noisy samples to "
                              f"decide the floor ({ungated[0].comparison.reason.rpartition('not gated: ')[2]}); "
                              "--verbose shows them"), highlight=False)
    for warning in document.warnings:
        console.print(Text("warning:", "yellow"), literal(warning), highlight=False)


def write_verdicts(path: str | None, document: VerdictsDocument) -> None:
    if path:
        from perfguard.results import write_json_atomic

        write_json_atomic(path, document.to_json())
        print(f"verdicts written to {path}")
