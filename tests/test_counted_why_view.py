"""Why, counted, where most of the change is in a stripped library (ONNX Runtime ships its own so):
the view says the change is not split by function and what to read instead, rather than showing
"100 % in a stripped library" as if that were an explanation; where the functions with symbols
hold most of it, they are the explanation as before. Attributions built by hand, as
``perfguard.results.counted_functions.attribute`` builds them from two counts."""

from __future__ import annotations

from perfguard.report.counted_why import UNATTRIBUTED_SHARE, CountedWhyView
from perfguard.results.counted_functions import NO_SYMBOL, CountedWhy, FunctionCount, attribute

ORT = "onnxruntime_pybind11_state.so"


def _view(stripped: float, named: float) -> CountedWhyView:
    before = [FunctionCount(NO_SYMBOL, ORT, 100_000.0), FunctionCount("memcpy", "libc.so.6", 1_000.0)]
    after = [FunctionCount(NO_SYMBOL, ORT, 100_000.0 + stripped), FunctionCount("memcpy", "libc.so.6", 1_000.0 + named)]
    why: CountedWhy = attribute(before, after, stripped + named)
    return CountedWhyView("r/tp/cpu", "none", "transposes", why)


def test_a_change_mostly_in_stripped_code_is_not_attributed_by_function() -> None:
    view = _view(stripped=8_200.0, named=1_800.0)
    assert view.stripped_share == 0.82 and not view.attributed
    assert view.headline == "+10,000 instructions per inference (transposes vs none), not attributed by function"
    first, *rest = view.lines()
    assert first.startswith(f"82% of the change is in {ORT}, which has no symbols")
    assert "the op-type diff and the pass trace say what changed" in first
    assert rest == ["+1,800 (18% of the change) memcpy (libc.so.6): changed, +180.0%"]
    markdown = view.markdown()
    assert markdown[0].startswith("- why, counted, r/tp/cpu: \\+10,000") and "not attributed by function" in markdown[0]
    assert len(markdown) == 3 and "82% of the change is in" in markdown[1]


def test_a_change_mostly_in_named_functions_is_attributed_to_them() -> None:
    view = _view(stripped=2_000.0, named=8_000.0)
    assert view.attributed and view.stripped_share < UNATTRIBUTED_SHARE
    assert view.headline.endswith("(transposes vs none), by function")
    assert view.lines()[0].startswith("+8,000 (80% of the change) memcpy (libc.so.6)")
    assert "which has no symbols (stripped): no per-function counts there" in view.lines()[1]
