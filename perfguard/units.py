"""The one vocabulary of units: durations and sizes, parsed and formatted.

Every amount a user writes goes through these tables: suite durations ("20ms", "300s"), threshold
amounts ("p90:0.5ms", "max:2MiB", ``stats.thresholds``) and sizes in backend options
(``ir_dump_limit = "1GiB"``, ``backends.iree``).

Time units: s, ms, us, µs (micro sign U+00B5) or μs (Greek mu U+03BC), ns, min or m (minutes), h.

Size units: B; KB, MB, GB are decimal (10**3, 10**6, 10**9 bytes, as the SI and disk vendors count);
KiB, MiB, GiB are binary (2**10, 2**20, 2**30). "MB" means 10**6 bytes wherever perfguard reads
it; write MiB for 2**20. (``$PERFGUARD_IREE_CACHE_MAX_MB`` is a bare number of MiB, as it always
was; its name predates this rule.) Thresholds spell units exactly as above; backend sizes ignore
case and read a bare number as bytes, as they always have.

A bare number is refused for a duration: "0.02" could be seconds or milliseconds, and a suite
that silently means the wrong one measures the wrong thing.
"""

from __future__ import annotations

import math
import re

from perfguard.errors import UserError

# Seconds per unit as a fraction (numerator, denominator): dividing by 1000 keeps "0.5ms" equal to
# 0.0005 exactly as written, where multiplying by 1e-3 can be off in the last bit.
_SECONDS: dict[str, tuple[int, int]] = {
    "s": (1, 1), "ms": (1, 10**3), "us": (1, 10**6), "\u00b5s": (1, 10**6), "\u03bcs": (1, 10**6),
    "ns": (1, 10**9), "min": (60, 1), "m": (60, 1), "h": (3600, 1),
}
#: Every time unit perfguard reads.
TIME_UNITS: tuple[str, ...] = tuple(_SECONDS)
#: Bytes per size unit (see the module docstring: MB is 10**6, MiB is 2**20).
SIZE_UNITS: dict[str, int] = {
    "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
}
_SIZE_UNITS_ANY_CASE = {unit.lower(): size for unit, size in SIZE_UNITS.items()}

#: The longest duration perfguard reads anywhere (about 31 years): "1e400s" would be infinity,
#: and a wait longer than ``threading.TIMEOUT_MAX`` (about 292 years) raises ``OverflowError``.
#: Suite keys set tighter bounds of their own (``perfguard.suite.parse``).
MAX_DURATION_S = 1e9
#: The largest size perfguard reads (2**63 bytes).
MAX_SIZE_BYTES = 2**63
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
_DURATION = re.compile(
    r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*("
    + "|".join(sorted(TIME_UNITS, key=len, reverse=True))
    + r")\s*$"
)


def to_seconds(number: float, unit: str) -> float:
    """Seconds in ``number`` of ``unit`` (``to_seconds(0.5, "ms") == 0.0005``); ``KeyError`` for a
    unit not in :data:`TIME_UNITS`."""
    numerator, denominator = _SECONDS[unit]
    return number * numerator / denominator


def to_bytes(number: float, unit: str) -> float:
    """Bytes in ``number`` of ``unit``, spelled as in :data:`SIZE_UNITS`; ``KeyError`` otherwise."""
    return number * SIZE_UNITS[unit]


def parse_duration(text: object, where: str, *, at_most: float = MAX_DURATION_S) -> float:
    """Return seconds for a duration string like ``"20ms"``: positive, finite and at most
    ``at_most`` seconds; ``where`` names the suite key."""
    if isinstance(text, bool) or not isinstance(text, str):
        raise UserError(f"{where}: expected a duration with a unit such as \"20ms\" or \"5s\", found {text!r}")
    match = _DURATION.match(text)
    if not match:
        raise UserError(
            f"{where}: cannot read duration {text!r}; write a number and one of the units s, ms, us, ns, min (or m), h"
        )
    value = to_seconds(float(match.group(1)), match.group(2))
    if value <= 0:
        raise UserError(f"{where}: duration must be positive, found {text!r}")
    if not math.isfinite(value) or value > at_most:
        raise UserError(f"{where}: duration must be at most {_plain_duration(at_most)}, found {text!r}")
    return value


def _plain_duration(seconds: float) -> str:
    """A bound as a user would write it in a suite: 24h, 1h, 5min (years past a year)."""
    for size, unit in ((365 * DAY, " years"), (HOUR, "h"), (MINUTE, "min")):
        if seconds >= size:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def parse_size(value: object, where: str) -> int:
    """Return bytes for a positive size: an integer (bytes) or a string like ``"512MiB"``, ``"2GB"``
    or ``"4096"``, in any case, spaces allowed; ``where`` names the option."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    text = str(value).strip().lower().replace(" ", "")
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(number):]
    try:
        size = float(number) * (1 if unit == "" else _SIZE_UNITS_ANY_CASE[unit])
    except (ValueError, KeyError, OverflowError):
        raise UserError(f"{where}: expected a size like \"512MiB\" or \"2GB\", found {value!r}") from None
    if not math.isfinite(size) or size > MAX_SIZE_BYTES:  # "nan", "inf", "1e400GB"
        raise UserError(f"{where}: expected a finite size of at most 8 EiB, found {value!r}")
    if size <= 0:
        raise UserError(f"{where}: expected a positive size, found {value!r}")
    return int(size)


def format_duration(seconds: float) -> str:
    """Human form with three significant digits: 4.21 ms, 812 us, 1.50 s; never an exponent
    (999.6 us rounds to ``1 ms``, not ``1e+03 us``; 1234 s is ``1234 s``)."""
    if seconds != seconds:  # NaN
        return "n/a"
    if abs(seconds) == math.inf:
        return f"{seconds} s"
    scales = ((1e-9, "ns"), (1e-6, "us"), (1e-3, "ms"), (1.0, "s"))
    index = max((i for i, (scale, _) in enumerate(scales) if abs(seconds) >= scale), default=0)
    scale, unit = scales[index]
    if abs(float(f"{seconds / scale:.3g}")) >= 1000 and unit != "s":  # rounded up into the next unit
        scale, unit = scales[index + 1]
    value = seconds / scale
    return f"{value:.0f} {unit}" if abs(float(f"{value:.3g}")) >= 1000 else f"{value:.3g} {unit}"


def format_bytes(size: float) -> str:
    """Human form in binary units: 12.3 MiB."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - loop always returns
