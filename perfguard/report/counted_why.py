"""Why, counted, as the reports show it: for each pair whose ``instructions`` verdict is
DIFFERENT and whose two counts carry their largest functions (``Counts.functions``), the change
attributed to functions (``perfguard.results.counted_functions.attribute``), in lines the
terminal, the PR comment and the HTML report share. The same view renders the attribution an
explanation carries (``perfguard profile --counts``, a counted bisection's culprit) and the one
an alert keeps of its culprit's (the nightly's summary, its GitHub issue, the history site)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfguard.report import format as fmt
from perfguard.report.escape import md_text
from perfguard.results.counted_functions import NO_SYMBOL, CountedPair, CountedWhy, FunctionDelta, attribute

if TYPE_CHECKING:
    from perfguard.results import CaseEntry


@dataclass(frozen=True)
class CountedWhyView:
    """One pair's counted attribution: its case and sides, and the attribution."""

    case: str
    baseline: str
    candidate: str
    why: CountedWhy

    @property
    def headline(self) -> str:
        return (f"{self.why.total_delta:+,.0f} instructions per inference ({self.candidate} vs {self.baseline}), "
                f"by function")

    def lines(self) -> list[str]:
        """The headline's detail: one line per function that moved most, then the stripped objects."""
        return [*(function_line(d) for d in self.why.functions if d.name != NO_SYMBOL),
                *(stripped_line(d) for d in self.why.functions if d.name == NO_SYMBOL)]

    def text_lines(self) -> list[str]:
        """Plain text (terminal, CI log): ``why, counted, CASE: headline``, then each line indented."""
        return [f"why, counted, {self.case}: {self.headline}", *(f"  {line}" for line in self.lines())]

    def markdown(self, shown: int = 5) -> list[str]:
        """A Markdown list item (PR comment, nightly summary, GitHub issue), names escaped as data;
        the stripped-library line is always kept, after the ``shown`` largest functions."""
        functions = [function_line(d) for d in self.why.functions if d.name != NO_SYMBOL][:shown]
        stripped = [stripped_line(d) for d in self.why.functions if d.name == NO_SYMBOL]
        return [f"- why, counted, {md_text(self.case)}: {md_text(self.headline)}",
                *(f"  - {md_text(line)}" for line in [*functions, *stripped])]


def pair_view(pair: CountedPair) -> CountedWhyView:
    """The view of an attribution kept with its case and sides (an explanation's, an alert's)."""
    return CountedWhyView(pair.case, pair.baseline or "baseline", pair.candidate or "candidate", pair.why)


def function_line(delta: FunctionDelta) -> str:
    """``+120,400 (71% of the change) fused_conv2d_add_relu_compute_ (model.so), added``."""
    share = f" ({delta.share:.0%} of the change)" if delta.share is not None else ""
    was = "" if delta.kind != "changed" or not delta.baseline else f", {fmt.change(delta.delta / delta.baseline + 1)}"
    return f"{delta.delta:+,.0f}{share} {delta.label}: {delta.kind}{was}"


def stripped_line(delta: FunctionDelta) -> str:
    """The line of an object whose code has no symbols (ONNX Runtime's library is stripped)."""
    share = f" ({delta.share:.0%} of the change)" if delta.share is not None else ""
    return (f"{delta.delta:+,.0f}{share} in {delta.object}, which has no symbols (stripped): no per-function "
            "counts there")


def counted_why(case: str, labels: tuple[str, str], baseline: CaseEntry | None,
                candidate: CaseEntry | None) -> CountedWhyView | None:
    """The view of one pair, or None when a side was not counted or kept no functions."""
    if baseline is None or candidate is None:
        return None
    before, after = baseline.metrics.counts, candidate.metrics.counts
    if before is None or after is None or not before.functions or not after.functions:
        return None
    why = attribute(before.functions, after.functions, after.instructions - before.instructions)
    return CountedWhyView(case, labels[0], labels[1], why) if why.functions else None
