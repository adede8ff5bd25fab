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

#: The part of a change in stripped code from which "why, counted" no longer names functions as
#: the explanation (half: the functions shown would explain less than the library they cannot split).
UNATTRIBUTED_SHARE = 0.5


@dataclass(frozen=True)
class CountedWhyView:
    """One pair's counted attribution: its case and sides, and the attribution."""

    case: str
    baseline: str
    candidate: str
    why: CountedWhy

    @property
    def stripped_share(self) -> float:
        """The part of the whole change in code without symbols (ONNX Runtime's stripped library)."""
        if not self.why.total_delta:
            return 0.0
        return sum(d.delta for d in self.why.functions if d.name == NO_SYMBOL) / self.why.total_delta

    @property
    def attributed(self) -> bool:
        """Whether the functions say where most of the change is: not when at least
        :data:`UNATTRIBUTED_SHARE` of it is in stripped code, where one line says so instead."""
        return self.stripped_share < UNATTRIBUTED_SHARE

    @property
    def headline(self) -> str:
        whose = f"{self.why.total_delta:+,.0f} instructions per inference ({self.candidate} vs {self.baseline})"
        return f"{whose}, by function" if self.attributed else f"{whose}, not attributed by function"

    def lines(self) -> list[str]:
        """The headline's detail: one line per function that moved most, then the stripped objects;
        where most of the change is stripped code, that first, in one line that says what to read
        instead, then the functions with symbols."""
        return self._detail([function_line(d) for d in self.why.functions if d.name != NO_SYMBOL])

    def _detail(self, named: list[str]) -> list[str]:
        """``named`` (the function lines shown) with the stripped code's line(s), in their place."""
        if not self.attributed:
            return [unattributed_line(self.stripped_share, self.why.stripped), *named]
        return [*named, *(stripped_line(d) for d in self.why.functions if d.name == NO_SYMBOL)]

    def text_lines(self) -> list[str]:
        """Plain text (terminal, CI log): ``why, counted, CASE: headline``, then each line indented."""
        return [f"why, counted, {self.case}: {self.headline}", *(f"  {line}" for line in self.lines())]

    def markdown(self, shown: int = 5) -> list[str]:
        """A Markdown list item (PR comment, nightly summary, GitHub issue), names escaped as data;
        the stripped-library line is always kept, with the ``shown`` largest functions."""
        shown_lines = self._detail([function_line(d) for d in self.why.functions if d.name != NO_SYMBOL][:shown])
        return [f"- why, counted, {md_text(self.case)}: {md_text(self.headline)}",
                *(f"  - {md_text(line)}" for line in shown_lines)]


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


def unattributed_line(share: float, objects: tuple[str, ...]) -> str:
    """The line of a change mostly in code without symbols: where it is, and what to read instead."""
    where = ", ".join(objects) or "code without symbols"
    return (f"{share:.0%} of the change is in {where}, which has no symbols (stripped: ONNX Runtime ships its "
            "library so), so it is not split by function; the op-type diff and the pass trace say what changed")


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
