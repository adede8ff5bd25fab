"""Inline SVG charts for the HTML report, built from numbers only.

No text from a result or verdict document ever reaches an SVG string: case names, labels and
commit subjects live in the surrounding HTML (escaped by Jinja). What goes in here is floats,
ints, tick labels formatted from floats, and CSS class names from the fixed set ``TONES``; anything
else is refused. So the charts need no escaping, and the functions return ``Markup``.

Charts:

* :func:`distribution` - every raw value of each side as a dot (one lane per worker process, so
  process-level effects show), a box from p25 to p75, whiskers p10-p90 and the median;
* :func:`interval` and :func:`interval_axis` - one row of a forest plot: the change of a ratio with
  its confidence interval on a log scale, the practical floor as a band, and the shared axis;
* :func:`bar` - a small horizontal bar (pass time relative to the slowest pass);
* :func:`delta_bar` - one bar of a diverging bar chart: a signed change on a domain shared by the
  rows of one table (kernel time gained or lost per op type), drawn from a zero line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup

#: CSS classes a chart element may carry (styled in the report's stylesheet).
TONES = ("base", "regression", "improvement", "same", "unknown", "failed", "neutral")


def _n(value: float) -> str:
    """A coordinate: finite, two decimals (never text from a document)."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"non-finite coordinate {value!r}")
    return f"{value:.2f}"


def _tone(tone: str) -> str:
    if tone not in TONES:
        raise ValueError(f"unknown tone {tone!r}; expected one of {', '.join(TONES)}")
    return tone


def _label(text: str) -> str:
    """Tick labels are formatted numbers; refuse anything that could be markup."""
    if any(c in text for c in "<>&\"'"):
        raise ValueError(f"tick label {text!r} is not a formatted number")
    return text


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 5 x 10^k steps) covering ``[low, high]``."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low] if math.isfinite(low) else []
    raw = (high - low) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


@dataclass(frozen=True)
class Samples:
    """One side of a distribution chart: raw values grouped by worker process, and a tone."""

    per_worker: Sequence[Sequence[float]]
    tone: str = "base"


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def distribution(sides: Sequence[Samples], format_tick: Callable[[float], str], width: int = 640) -> Markup:
    """Strip-and-box chart of each side's raw values on one shared linear axis."""
    lane_h, gap, left, right, axis_h = 34, 10, 8, 12, 22
    values = [v for side in sides for worker in side.per_worker for v in worker if math.isfinite(v)]
    height = len(sides) * (lane_h + gap) + axis_h
    if not values:
        return Markup(f'<svg class="chart" role="img" width="{width}" height="{height}" '
                      f'viewBox="0 0 {width} {height}"></svg>')
    low, high = min(values), max(values)
    pad = (high - low) * 0.06 or abs(high) * 0.05 or 1.0
    low, high = low - pad, high + pad

    def x(value: float) -> float:
        return left + (value - low) / (high - low) * (width - left - right)

    parts = [f'<svg class="chart distribution" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">']
    for index, side in enumerate(sides):
        tone = _tone(side.tone)
        top = index * (lane_h + gap)
        middle = top + lane_h / 2
        flat = [v for worker in side.per_worker for v in worker if math.isfinite(v)]
        parts.append(f'<rect class="lane" x="{left}" y="{_n(top)}" width="{width - left - right}" height="{lane_h}"/>')
        if not flat:
            continue
        p10, p25, p50, p75, p90 = (_percentile(flat, q) for q in (0.10, 0.25, 0.50, 0.75, 0.90))
        parts.append(f'<line class="whisker {tone}" x1="{_n(x(p10))}" x2="{_n(x(p90))}" '
                     f'y1="{_n(middle)}" y2="{_n(middle)}"/>')
        parts.append(f'<rect class="box {tone}" x="{_n(x(p25))}" y="{_n(top + 6)}" '
                     f'width="{_n(max(x(p75) - x(p25), 1.0))}" height="{lane_h - 12}"/>')
        lanes = max(len(side.per_worker), 1)
        for w, worker in enumerate(side.per_worker):
            # One thin lane per worker process inside the band, so a slow process is visible.
            y = top + 4 + (lane_h - 8) * (w + 0.5) / lanes
            for v in worker:
                if math.isfinite(v):
                    parts.append(f'<circle class="dot {tone}" cx="{_n(x(v))}" cy="{_n(y)}" r="1.8"/>')
        parts.append(f'<line class="median {tone}" x1="{_n(x(p50))}" x2="{_n(x(p50))}" '
                     f'y1="{_n(top + 2)}" y2="{_n(top + lane_h - 2)}"/>')
    base = len(sides) * (lane_h + gap)
    parts.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{base}" y2="{base}"/>')
    for tick in nice_ticks(low, high, 6):
        tx = x(tick)
        if left <= tx <= width - right:
            parts.append(f'<line class="tick" x1="{_n(tx)}" x2="{_n(tx)}" y1="{base}" y2="{base + 4}"/>')
            parts.append(f'<text class="ticklabel" x="{_n(tx)}" y="{base + 16}" text-anchor="middle">'
                         f'{_label(format_tick(tick))}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


@dataclass(frozen=True)
class RatioDomain:
    """A log-scale domain for ratios, shared by the rows of one forest plot."""

    low: float
    high: float
    width: int = 300

    @classmethod
    def covering(cls, values: Sequence[float], floors: Sequence[float] = (), width: int = 300) -> RatioDomain:
        """The smallest pleasant domain holding 1, the floors and ``values`` (clamped to [1/8, 8])."""
        finite = [v for v in values if v and math.isfinite(v) and v > 0]
        logs = [math.log(v) for v in finite] + [0.0]
        for floor in floors:
            if floor and math.isfinite(floor) and 0 < floor < 1:
                logs += [math.log(1 - floor), math.log(1 + floor)]
        low, high = max(min(logs), math.log(1 / 8)), min(max(logs), math.log(8))
        span = max(high - low, 0.04)
        return cls(math.exp(low - span * 0.08), math.exp(high + span * 0.08), width)

    def x(self, ratio: float) -> float:
        lo, hi = math.log(self.low), math.log(self.high)
        value = min(max(math.log(ratio), lo), hi)
        return 4 + (value - lo) / (hi - lo) * (self.width - 8)


_TICK_CHANGES = (-0.9, -0.75, -0.5, -0.25, -0.1, -0.05, -0.02, 0.0, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 7.0)


def _ratio_ticks(domain: RatioDomain) -> list[float]:
    """No change, then round percent changes that fit, kept at least 34 px apart."""
    ticks = [1.0]
    for change in sorted(_TICK_CHANGES, key=abs):
        ratio = 1 + change
        if domain.low <= ratio <= domain.high and all(abs(domain.x(ratio) - domain.x(t)) >= 34 for t in ticks):
            ticks.append(ratio)
    return sorted(ticks)


def interval(domain: RatioDomain, ratio: float | None, ci_low: float | None, ci_high: float | None,
             floor: float | None, tone: str, height: int = 18) -> Markup:
    """One forest-plot row: the floor band, no-change line, the interval and the estimate."""
    tone = _tone(tone)
    w = domain.width
    parts = [f'<svg class="chart interval" role="img" width="{w}" height="{height}" viewBox="0 0 {w} {height}">']
    if floor and math.isfinite(floor) and 0 < floor < 1:
        a, b = domain.x(1 - floor), domain.x(1 + floor)
        parts.append(f'<rect class="floor" x="{_n(a)}" y="0" width="{_n(b - a)}" height="{height}"/>')
    for tick in _ratio_ticks(domain):
        parts.append(f'<line class="grid" x1="{_n(domain.x(tick))}" x2="{_n(domain.x(tick))}" y1="0" y2="{height}"/>')
    parts.append(f'<line class="zero" x1="{_n(domain.x(1))}" x2="{_n(domain.x(1))}" y1="0" y2="{height}"/>')
    middle = height / 2
    if ci_low and ci_high and math.isfinite(ci_low) and math.isfinite(ci_high) and ci_low > 0 and ci_high > 0:
        parts.append(f'<line class="ci {tone}" x1="{_n(domain.x(ci_low))}" x2="{_n(domain.x(ci_high))}" '
                     f'y1="{_n(middle)}" y2="{_n(middle)}"/>')
        for end, beyond in ((ci_low, ci_low < domain.low), (ci_high, ci_high > domain.high)):
            ex = domain.x(end)
            if beyond:  # clipped: an arrow head says the interval goes on
                direction = -1 if end < 1 else 1
                parts.append(f'<path class="arrow {tone}" d="M{_n(ex)} {_n(middle)} l{_n(-5 * direction)} -4 '
                             f'v8 z"/>')
            else:
                parts.append(f'<line class="ci {tone}" x1="{_n(ex)}" x2="{_n(ex)}" y1="{_n(middle - 4)}" '
                             f'y2="{_n(middle + 4)}"/>')
    if ratio and math.isfinite(ratio) and ratio > 0:
        parts.append(f'<circle class="point {tone}" cx="{_n(domain.x(ratio))}" cy="{_n(middle)}" r="4"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


def interval_axis(domain: RatioDomain, height: int = 20) -> Markup:
    """The shared axis of a forest plot: tick labels as percent changes."""
    w = domain.width
    parts = [f'<svg class="chart axis" role="img" width="{w}" height="{height}" viewBox="0 0 {w} {height}">']
    for tick in _ratio_ticks(domain):
        change = (tick - 1) * 100
        text = "0" if abs(change) < 1e-9 else f"{change:+.0f}%"
        parts.append(f'<line class="tick" x1="{_n(domain.x(tick))}" x2="{_n(domain.x(tick))}" y1="0" y2="4"/>')
        parts.append(f'<text class="ticklabel" x="{_n(domain.x(tick))}" y="15" text-anchor="middle">'
                     f'{_label(text)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def bar(fraction: float, tone: str = "neutral", width: int = 80, height: int = 10) -> Markup:
    """A small bar: ``fraction`` (0..1) of ``width``."""
    tone = _tone(tone)
    fraction = min(max(float(fraction) if math.isfinite(fraction) else 0.0, 0.0), 1.0)
    return Markup(f'<svg class="chart bar" role="img" width="{width}" height="{height}" '
                  f'viewBox="0 0 {width} {height}"><rect class="track" x="0" y="0" width="{width}" '
                  f'height="{height}"/><rect class="fill {tone}" x="0" y="0" width="{_n(max(fraction * width, 0.5))}" '
                  f'height="{height}"/></svg>')


def delta_bar(value: float, low: float, high: float, width: int = 220, height: int = 12) -> Markup:
    """One row of a diverging bar chart: ``value`` on the shared domain ``[low, high]`` (which
    holds 0), from the zero line rightwards in the regression tone when it grew, leftwards in the
    improvement tone when it shrank. The labels of the rows live in the surrounding table."""
    low, high = min(float(low), 0.0), max(float(high), 0.0)
    value = float(value) if math.isfinite(value) else 0.0
    span = (high - low) or 1.0

    def x(v: float) -> float:
        return (min(max(v, low), high) - low) / span * width

    zero, end = x(0.0), x(value)
    tone = "regression" if value > 0 else "improvement"
    left, length = min(zero, end), max(abs(end - zero), 0.5)
    return Markup(f'<svg class="chart delta" role="img" width="{width}" height="{height}" '
                  f'viewBox="0 0 {width} {height}"><rect class="track" x="0" y="0" width="{width}" '
                  f'height="{height}"/><rect class="fill {tone}" x="{_n(left)}" y="1" width="{_n(length)}" '
                  f'height="{height - 2}"/><line class="zero" x1="{_n(zero)}" x2="{_n(zero)}" y1="0" '
                  f'y2="{height}"/></svg>')


def trajectory(screens: Sequence[tuple[int, float]], best: Sequence[tuple[int, float]], tried: int,
               width: int = 640, height: int = 220) -> Markup:
    """A search trajectory (``perfguard tune``): the best-so-far confirmed effect against the start
    as a step line over candidates tried, and each screened candidate's estimate as a dot, both as
    percent changes (below 0 is faster). ``screens`` and ``best`` are (candidate index, ratio)."""
    values = [(r - 1) * 100 for _, r in [*screens, *best] if math.isfinite(r) and r > 0] or [0.0]
    low, high = min(min(values), 0.0), max(max(values), 0.0)
    pad = max((high - low) * 0.08, 1.0)
    low, high = low - pad, high + pad
    left, right, top, bottom = 48, 12, 10, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    count = max(int(tried), 1)

    def x(index: float) -> float:
        return left + min(max(float(index), 0.0), count) / count * plot_w

    def y(change: float) -> float:
        return top + (high - min(max(change, low), high)) / (high - low) * plot_h

    parts = [f'<svg class="chart trajectory" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">']
    for tick in nice_ticks(low, high, 5):
        parts.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{_n(y(tick))}" y2="{_n(y(tick))}"/>')
        text = "0" if abs(tick) < 1e-9 else f"{tick:+.0f}%"
        parts.append(f'<text class="ticklabel" x="{left - 4}" y="{_n(y(tick) + 4)}" text-anchor="end">'
                     f'{_label(text)}</text>')
    for tick in nice_ticks(0, count, 6):
        parts.append(f'<text class="ticklabel" x="{_n(x(tick))}" y="{height - 8}" text-anchor="middle">'
                     f'{_label(f"{tick:.0f}")}</text>')
    parts.append(f'<line class="zero" x1="{left}" x2="{width - right}" y1="{_n(y(0))}" y2="{_n(y(0))}"/>')
    for index, ratio in screens:
        if math.isfinite(ratio) and ratio > 0:
            tone = "improvement" if ratio < 1 else "regression" if ratio > 1 else "same"
            parts.append(f'<circle class="point {tone}" cx="{_n(x(index))}" cy="{_n(y((ratio - 1) * 100))}" r="3"/>')
    steps = [(0, 1.0), *[(i, r) for i, r in best if math.isfinite(r) and r > 0]]
    path, level = [f"M{_n(x(0))},{_n(y(0))}"], 0.0
    for index, ratio in steps[1:]:
        path.append(f"H{_n(x(index))}")
        level = (ratio - 1) * 100
        path.append(f"V{_n(y(level))}")
    path.append(f"H{_n(x(count))}")
    parts.append(f'<path class="best" d="{"".join(path)}"/>')
    parts.append("</svg>")
    return Markup("".join(parts))
