"""Typed thresholds parsed from strings such as ``median:3%``, ``p90:0.5ms`` or ``max:0``.

Grammar::

    threshold  := [statistic ":"] amount
    statistic  := "median" | "mean" | "min" | "max" | "p1" .. "p99"      (default: median)
    amount     := number "%"            relative, stored as a FRACTION ("3%" -> 0.03)
                | number time-unit      s, ms, us, µs, ns, min             -> seconds
                | number memory-unit    B, KB, MB, GB (10**3), KiB, MiB, GiB (2**10) -> bytes
                | number                only for count metrics (node count), or the number 0

Units are the vocabulary of ``perfguard.units``, spelled exactly as there ("10mb" is refused).

A percentage is never confused with a fraction: ``"0.03"`` for a time metric is an error that
asks for a percentage or a unit ("write 3% or 0.5ms"; a real TorchBench bug compared 7 with 0.07). The bare number 0 is
accepted for every kind because it means the same in every unit ("any increase fails").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from perfguard.errors import UserError
from perfguard.stats.estimators import check_statistic
from perfguard.units import SIZE_UNITS, TIME_UNITS, to_bytes, to_seconds

MetricKind = Literal["time", "memory", "count"]

#: The smallest latency floor of a comparison across separate runs (a stored baseline,
#: ``perfguard compare``): two runs minutes apart differ by more than their own process spread
#: (medians of separate processes 4-8 % apart on the 2-core CI machine, a +35 % burst that came and
#: went), so a suite's paired floor (2 %) would cry wolf there. ``[thresholds] across_runs``
#: lowers it for a stable self-hosted machine.
ACROSS_RUNS_FLOOR = 0.10

_KINDS = ("time", "memory", "count")
_AMOUNT = re.compile(
    r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*(%|[A-Za-z\u00b5\u03bc]+)?$"
)


@dataclass(frozen=True)
class Threshold:
    """A gate for one metric: which statistic, and how large a change is allowed.

    Exactly one of ``relative`` (a fraction: 0.03 means 3 %) and ``absolute`` (seconds for time
    units, bytes for memory units, raw units for counts) is set. ``unit`` records the base unit of
    an absolute amount (``"s"``, ``"B"``, or ``""`` for counts and zero) so that ``str()`` gives
    back canonical text that parses to the same threshold (``median:3%``, ``p90:0.0005s``).
    """

    statistic: str
    relative: float | None = None
    absolute: float | None = None
    unit: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        check_statistic(self.statistic)
        if (self.relative is None) == (self.absolute is None):
            raise UserError("a threshold sets exactly one of a relative (3%) or an absolute (0.5ms) amount")
        amount = self.relative if self.relative is not None else self.absolute
        if amount is None or not math.isfinite(amount) or amount < 0:
            raise UserError(f"threshold amount must be a finite number >= 0, got {amount!r}")
        if self.unit not in ("", "s", "B") or (self.unit and self.absolute is None):
            raise UserError(f"threshold unit must be 's' or 'B' for an absolute amount, got {self.unit!r}")

    def __str__(self) -> str:
        if self.relative is not None:
            return f"{self.statistic}:{self.relative * 100:.15g}%"
        return f"{self.statistic}:{self.absolute:.15g}{self.unit}" if self.absolute else f"{self.statistic}:0"


def parse_threshold(text: str, *, kind: MetricKind | None = None) -> Threshold:
    """Parse ``text`` (see the module grammar) into a :class:`Threshold`.

    ``kind`` restricts the accepted units: ``"time"`` (s, ms, us, µs, ns, min), ``"memory"``
    (B .. GiB), ``"count"`` (bare numbers, for node counts and other deterministic integers).
    ``None`` accepts time and memory units but, like ``"time"``, refuses bare numbers other than 0.
    Raises ``UserError`` naming the offending text and what is expected.
    """
    if kind is not None and kind not in _KINDS:
        raise UserError(f"unknown metric kind {kind!r}; valid: {', '.join(_KINDS)}")
    if not isinstance(text, str):
        raise UserError(f'threshold must be a string like "median:3%" or "p90:0.5ms", got {text!r}')
    raw = text.strip()
    statistic, sep, amount_text = raw.rpartition(":")
    statistic = statistic.strip().lower() if sep else "median"
    amount_text = amount_text.strip()
    try:
        check_statistic(statistic)
    except UserError as exc:
        raise UserError(f"threshold {text!r}: {exc}") from None
    match = _AMOUNT.match(amount_text)
    if not match:
        raise UserError(
            f"threshold {text!r}: cannot read the amount {amount_text!r}; "
            f"expected a percentage or a number with a unit, {_examples(kind)}"
        )
    number = float(match.group(1))
    unit = match.group(2)
    if number < 0 or not math.isfinite(number):
        raise UserError(
            f"threshold {text!r}: the amount must be >= 0 (the allowed change), got {amount_text!r}"
        )
    if unit == "%":
        return Threshold(statistic, relative=number / 100.0)
    if unit is None:
        if number == 0 or kind == "count":
            return Threshold(statistic, absolute=number)
        raise UserError(
            f"threshold {text!r}: the bare number {amount_text} is ambiguous; "
            f"{_examples(kind)} (a percentage is written with %, so 3% and not 0.03)"
        )
    if unit in TIME_UNITS and kind in (None, "time"):
        return Threshold(statistic, absolute=to_seconds(number, unit), unit="s")
    if unit in SIZE_UNITS and kind in (None, "memory"):
        return Threshold(statistic, absolute=to_bytes(number, unit), unit="B")
    raise UserError(f"threshold {text!r}: unit {unit!r} is not valid here; {_examples(kind)}")


def _examples(kind: MetricKind | None) -> str:
    if kind == "memory":
        return "write 3% or 10MB (units: " + ", ".join(SIZE_UNITS) + ")"
    if kind == "count":
        return "write 3% or a count such as 0 or 5 (no unit)"
    if kind == "time":
        return "write 3% or 0.5ms (units: s, ms, us, \u00b5s, ns, min)"
    return (
        "write 3% or 0.5ms (time units: s, ms, us, \u00b5s, ns, min; memory units: "
        + ", ".join(SIZE_UNITS)
        + ")"
    )
