"""Parsing of durations and sizes written in suite files ("20ms", "300s", "64MiB").

A bare number is refused for a duration: "0.02" could be seconds or milliseconds, and a suite
that silently means the wrong one measures the wrong thing.
"""

from __future__ import annotations

import re

from perfguard.errors import UserError

_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(min|ms|us|µs|ns|s)\s*$")


def parse_duration(text: object, where: str) -> float:
    """Return seconds for a duration string like ``"20ms"``; ``where`` names the suite key."""
    if isinstance(text, bool) or not isinstance(text, str):
        raise UserError(f"{where}: expected a duration with a unit such as \"20ms\" or \"5s\", found {text!r}")
    match = _DURATION.match(text)
    if not match:
        raise UserError(
            f"{where}: cannot read duration {text!r}; write a number and one of the units s, ms, us, ns, min"
        )
    value = float(match.group(1)) * _TIME_UNITS[match.group(2)]
    if value <= 0:
        raise UserError(f"{where}: duration must be positive, found {text!r}")
    return value


def format_duration(seconds: float) -> str:
    """Human form with three significant digits: 4.21 ms, 812 us, 1.50 s."""
    if seconds != seconds:  # NaN
        return "n/a"
    magnitude = abs(seconds)
    if magnitude >= 1.0:
        return f"{seconds:.3g} s"
    if magnitude >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if magnitude >= 1e-6:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e9:.3g} ns"


def format_bytes(size: float) -> str:
    """Human form in binary units: 12.3 MiB."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - loop always returns
