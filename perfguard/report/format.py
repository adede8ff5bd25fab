"""Number formatting shared by the HTML and Markdown reports, the history site, ``perfguard
history`` and the issues of alerts (plain text, no markup).

Changes are ``ratio - 1`` in percent with a sign; intervals are the change at both ends of the
ratio's confidence interval; a missing number (JSON ``null``, NaN) prints as an empty string or
``n/a`` so a table never shows ``None``.
"""

from __future__ import annotations

import math

from perfguard.units import format_bytes, format_duration


def finite(value: object) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def change(ratio: object, digits: int = 1) -> str:
    """``1.123`` -> ``+12.3%``."""
    value = finite(ratio)
    return "n/a" if value is None else f"{(value - 1) * 100:+.{digits}f}%"


def interval(low: object, high: object) -> str:
    """``[+1.2%, +3.4%]``, or empty when either end is missing."""
    if finite(low) is None or finite(high) is None:
        return ""
    return f"[{change(low)}, {change(high)}]"


def plural(count: int, word: str) -> str:
    """``1 regression``, ``2 regressions``, ``0 regressions``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def p_value(value: object) -> str:
    number = finite(value)
    if number is None:
        return ""
    return f"{number:.2g}" if number >= 0.001 else "<0.001"


def mde(value: object) -> str:
    """Minimum detectable effect, a fraction, as ``±4.2%`` (``∞`` when nothing was detectable)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isinf(value):
        return "∞"
    number = finite(value)
    return "" if number is None else f"±{number * 100:.1f}%"


def series_level(metric: str, kind: str, value: float) -> str:
    """A level of a history series as the site, ``perfguard history`` and an alert's issue print it:
    a chained index (``ratio`` series) to 4 places, latency and compile time as durations, memory and
    artifact size in binary units, other counts as they are; ``n/a`` when not finite."""
    if not math.isfinite(value):
        return "n/a"
    if kind == "ratio":
        return f"{value:.4f}"
    if metric in ("latency", "compile_time"):
        return format_duration(value)
    if metric in ("memory", "artifact_size"):
        return format_bytes(value)
    return f"{value:g}"


def quantity(value: object, unit: str) -> str:
    """A metric value in its unit: seconds as a duration, bytes in binary units, plain counts."""
    number = finite(value)
    if number is None:
        return ""
    if unit == "s":
        return format_duration(number)
    if unit == "B":
        return format_bytes(number)
    if unit in COUNTED_UNITS:
        return counted(number)
    if unit == "nodes" or float(number).is_integer():
        return f"{number:,.0f}"
    return f"{number:.3g}"


#: The units of the counted metrics (``--counts``): instructions and estimated cycles.
COUNTED_UNITS = ("instr", "cycles")


def counted(number: float) -> str:
    """A count of instructions or cycles with four significant digits: ``153.8 M``, ``806.4 k``
    (a change of 0.5 % shows in the fourth digit)."""
    for scale, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(number) >= scale:
            return f"{number / scale:.4g}{suffix}"
    return f"{number:.4g}"


def percent(value: object, digits: int = 1) -> str:
    """A fraction as a percentage: ``0.031`` -> ``3.1%``."""
    number = finite(value)
    return "" if number is None else f"{number * 100:.{digits}f}%"


def seconds(value: object) -> str:
    number = finite(value)
    return "" if number is None else format_duration(number)


def duration_long(value: object) -> str:
    """Wall time of a job: ``42 s``, ``12 min 5 s``, ``2 h 3 min``."""
    number = finite(value)
    if number is None:
        return ""
    if number < 60:
        return f"{number:.0f} s"
    minutes, secs = divmod(int(round(number)), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def timestamp(value: object) -> str:
    """``2026-11-30T07:44:10.284410Z`` -> ``2026-11-30 07:44:10 UTC``; anything else unchanged."""
    text = str(value or "")
    if len(text) >= 19 and text[10] == "T" and text.endswith("Z"):
        return f"{text[:10]} {text[11:19]} UTC"
    return text


def night_range(first: object, last: object) -> str:
    """The UTC dates of a series' first and last night: ``2026-03-01..03-20`` (the year said once
    when both share it), ``2026-03-01`` for one day; what is not a timestamp is shown as it is."""
    start, end = str(first or "")[:10], str(last or "")[:10]
    if not end or start == end:
        return start
    if start[:5] == end[:5] and start[4:5] == "-":
        return f"{start}..{end[5:]}"
    return f"{start}..{end}"
