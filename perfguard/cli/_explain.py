"""The terminal form of an explanation (``perfguard profile``, ``perfguard check --explain``):
the op table of the profile diff, then the dimension with its evidence, on ``cuda`` a short
GPU block (launches and kernel time before -> after, the top kernels, the Nsight metrics or why
they were skipped), and for a counted pair the functions whose instructions moved most ("why,
counted", ``perfguard.report.counted_why``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfguard.compare.verdicts import VerdictsDocument
    from perfguard.results.explanation import Change, Explanation, StoredExplanation

#: Op rows shown; the rest are summed into one line.
TOP_OPS = 12


def _interval(change: Change) -> str:
    from perfguard.profile.dimension import us

    return f"[{us(change.delta_low)}, {us(change.delta_high)}]"


def print_explanations(explanations: Sequence[StoredExplanation], blank_line: bool = False) -> None:
    """Each explanation of a document (``blank_line``: one before each); one that did not read
    when the document was loaded is a warning on stderr, as the report shows it."""
    from perfguard.results.explanation import Explanation

    for explanation in explanations:
        if blank_line:
            print()
        if isinstance(explanation, Explanation):
            print_explanation(explanation)
        else:
            print(f"warning: the explanation of {explanation.case} does not read: {explanation.problem}",
                  file=sys.stderr)


def print_explanation(explanation: Explanation) -> None:
    from rich.table import Table
    from rich.text import Text

    from perfguard.cli._text import LOG_TABLE_WIDTH, cli_console, literal, print_title, print_wrapped
    from perfguard.profile.dimension import us

    console = cli_console(min_width=130, log_width=LOG_TABLE_WIDTH)
    diff = explanation.diff
    title = f"why {explanation.case} changed: {explanation.candidate} vs {explanation.baseline}"
    if diff is not None:
        print_title(console, f"{title} (per inference, {diff.workers_before}+{diff.workers_after} profiled workers)")
        table = Table()
        for column in ("op type", "provider", "nodes", "kernel before", "kernel after", "change", "workers", "share"):
            table.add_column(column, justify="left" if column in ("op type", "provider") else "right")
        for row in diff.ops[:TOP_OPS]:
            change = row.kernel_us
            share = f"{row.share * 100:.0f}%" if row.share is not None else ""
            nodes = (f"{row.nodes_before} -> {row.nodes_after}" if row.nodes_delta else str(row.nodes_after))
            table.add_row(literal(row.op_type), literal(row.provider.replace("ExecutionProvider", "")), nodes,
                          us(change.before.mean, False), us(change.after.mean, False), us(change.delta),
                          _interval(change), share)
        if len(diff.ops) > TOP_OPS:
            rest = diff.ops[TOP_OPS:]
            table.add_row(f"({len(rest)} more)", "", "", "", "", us(sum(r.kernel_us.delta for r in rest)), "", "")
        overhead = diff.overhead_us
        table.add_row("framework overhead", "", "", us(overhead.before.mean, False), us(overhead.after.mean, False),
                      us(overhead.delta), _interval(overhead),
                      f"{diff.overhead_share * 100:.0f}%" if diff.overhead_share is not None else "")
        run = diff.model_run_us
        table.add_row("[bold]model_run[/]", "", f"{diff.kernels.before.mean:.0f} -> {diff.kernels.after.mean:.0f} k",
                      us(run.before.mean, False), us(run.after.mean, False), us(run.delta), _interval(run), "100%")
        init = diff.session_init_us
        table.add_row("session init", "", "", us(init.before.mean, False), us(init.after.mean, False),
                      us(init.delta), _interval(init), "")
        console.print(table)
    else:
        print_title(console, title)
    dimension = explanation.dimension
    print_wrapped(console, f"dimension: {dimension.label} ({dimension.rule}): {dimension.headline}",
                  first=Text(f"dimension: {dimension.label}", "bold"))
    for line in dimension.evidence:
        print_wrapped(console, f"  - {line}")
    if explanation.gpu is not None:
        from perfguard.profile.gpu_diff import gpu_lines

        for line in gpu_lines(explanation.gpu, us):
            print_wrapped(console, line)
    pair = explanation.counted_pair
    if pair is not None:  # why, counted (--counts): the lines the reports and the alerts show
        from perfguard.report.counted_why import pair_view

        for line in pair_view(pair).text_lines():
            print_wrapped(console, line)
    for failure in explanation.failures:
        print_wrapped(console, f"warning: {failure}", first=Text("warning:", "yellow"))
    if explanation.trace_file:
        print_wrapped(console, f"trace written to {explanation.trace_file} (open in ui.perfetto.dev)")


def print_counted_why(documents: Sequence[VerdictsDocument]) -> None:
    """Why, counted (``--counts``): per pair whose instructions changed, the functions that moved
    most (``perfguard.report.counted_why``), as the PR comment lists them."""
    from perfguard.cli._text import LOG_TABLE_WIDTH, cli_console, print_wrapped
    from perfguard.report.model import counted_why_views

    console = cli_console(min_width=130, log_width=LOG_TABLE_WIDTH)
    for view in counted_why_views(documents):
        for line in view.text_lines():
            print_wrapped(console, line)


def print_exact_whys(document: VerdictsDocument) -> None:
    """``check --explain`` for exact regressions, which a profile does not explain: per case whose
    exact metrics regressed (node count, size), what the two pass traces say
    (``perfguard.report.exact_why``), or one line saying why nothing can; one line when nothing
    was explained at all. ``--explain`` never ends in silence."""
    from perfguard.cli._text import LOG_TABLE_WIDTH, cli_console, print_wrapped
    from perfguard.report.exact_why import exact_whys

    console = cli_console(min_width=130, log_width=LOG_TABLE_WIDTH)
    views, why_not = exact_whys(document)
    for view in views:
        for line in view.text_lines():
            print_wrapped(console, line)
    for line in why_not:
        print_wrapped(console, f"--explain: {line}")
    if not document.explanations and not views and not why_not:
        regressed = sorted({r.case for r in document.verdicts if r.is_regression})
        print_wrapped(console, "--explain: no regression to explain" if not regressed else
                      f"--explain: {len(regressed)} regressed case{'' if len(regressed) == 1 else 's'} not profiled "
                      "(see the warnings above)")
