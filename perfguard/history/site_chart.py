"""The geometry of the history site's charts: a trend over nights and a sparkline, from numbers.

As in the report (:mod:`perfguard.report.svg`), no text of a document is ever put into an SVG
string here. :func:`sparkline` is numbers only and returns ``Markup``; :func:`trend` returns a
:class:`TrendChart`, coordinates as formatted numbers plus the labels (dates, commits, commit
subjects, change sizes) as plain strings, and the site's Jinja macro (``_chart.html.j2``) writes
the SVG, autoescaping every label.

The trend chart: one slot per night on the x axis (nights, not time: a missing night takes no
room), the level as a line with a dot per night (each dot a link to its night's page), each
night's interval as a band, and vertical markers between two nights: a change point (its size
and interval) or an environment change (the fingerprint fields that differ).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from markupsafe import Markup

from perfguard.report.svg import nice_ticks

WIDTH, HEIGHT = 960, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 16, 40, 44
#: Marker tones (CSS classes of the site's stylesheet).
MARKER_TONES = ("regression", "improvement", "environment")


def _n(value: float) -> str:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"non-finite coordinate {value!r}")
    return f"{value:.1f}"


@dataclass(frozen=True)
class Night:
    """One night of a trend: its level, its interval (either end None: no band), the labels of
    its x position and of its dot, and the page its dot links to."""

    level: float
    low: float | None
    high: float | None
    date: str
    commit: str
    title: str
    href: str


@dataclass(frozen=True)
class Marker:
    """A vertical marker before night ``index``: ``tone`` one of :data:`MARKER_TONES`."""

    index: int
    tone: str
    label: str
    href: str = ""
    commit: str = ""


@dataclass(frozen=True)
class Dot:
    x: str
    y: str
    title: str
    href: str
    tone: str


@dataclass(frozen=True)
class Tick:
    position: str
    label: str
    sublabel: str = ""


@dataclass(frozen=True)
class PlacedMarker:
    x: str
    label_x: str
    label_y: str
    anchor: str
    marker: Marker


@dataclass(frozen=True)
class TrendChart:
    """What the chart macro draws; every coordinate is already a formatted number."""

    width: int
    height: int
    plot_top: int
    plot_bottom: int
    plot_left: int
    plot_right: int
    line: str
    bands: list[str]
    dots: list[Dot]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    markers: list[PlacedMarker] = field(default_factory=list)
    baseline: str = ""


def trend(nights: Sequence[Night], markers: Sequence[Marker], format_tick: Callable[[float], str],
          reference: float | None = None, width: int = WIDTH, height: int = HEIGHT) -> TrendChart:
    """The trend chart of ``nights`` with ``markers``; ``format_tick`` labels the y axis and
    ``reference`` (1.0 for a chained index) is drawn as a dashed horizontal line."""
    plot_w, top, bottom = width - _LEFT - _RIGHT, _TOP, height - _BOTTOM
    count = max(len(nights), 1)
    values = [v for n in nights for v in (n.level, n.low, n.high) if v is not None and math.isfinite(v)]
    if reference is not None:
        values.append(reference)
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
    low, high = low - pad, high + pad

    def x(index: float) -> float:
        return _LEFT + (index + 0.5) * plot_w / count

    def y(value: float) -> float:
        return bottom - (value - low) / (high - low) * (bottom - top)

    segments: list[list[str]] = [[]]
    for i, night in enumerate(nights):
        if math.isfinite(night.level):
            segments[-1].append(f"{_n(x(i))} {_n(y(night.level))}")
        elif segments[-1]:
            segments.append([])
    line = " ".join("M" + " L".join(s) for s in segments if s)

    bands, run = [], []  # one polygon per run of consecutive nights that have an interval
    for i, maybe in enumerate([*nights, None]):
        if (maybe is not None and maybe.low is not None and maybe.high is not None
                and math.isfinite(maybe.low) and math.isfinite(maybe.high)):
            run.append((i, maybe.low, maybe.high))
            continue
        if run:
            half = 0.35 * plot_w / count if len(run) == 1 else 0.0
            upper = [f"{_n(x(i) - half)} {_n(y(h))}" for i, _, h in run] + (
                [f"{_n(x(run[0][0]) + half)} {_n(y(run[0][2]))}"] if half else [])
            lower = ([f"{_n(x(run[0][0]) + half)} {_n(y(run[0][1]))}"] if half else []) + [
                f"{_n(x(i) - half)} {_n(y(lo))}" for i, lo, _ in reversed(run)]
            bands.append("M" + " L".join(upper + lower) + " Z")
            run = []

    tones = {m.index: m.tone for m in markers if m.tone != "environment"}
    after = ""
    dots = []
    for i, night in enumerate(nights):
        after = tones.get(i, after)
        if math.isfinite(night.level):
            dots.append(Dot(_n(x(i)), _n(y(night.level)), night.title, night.href, after or "base"))

    y_ticks = [Tick(_n(y(t)), format_tick(t)) for t in nice_ticks(low, high, 5) if low <= t <= high]
    every = max(1, math.ceil(count / max(plot_w // 84, 1)))
    x_ticks = [Tick(_n(x(i)), n.date, n.commit) for i, n in enumerate(nights) if i % every == 0]

    placed = []
    for row, marker in enumerate(sorted(markers, key=lambda m: m.index)):
        if marker.tone not in MARKER_TONES:
            raise ValueError(f"unknown marker tone {marker.tone!r}; expected one of {', '.join(MARKER_TONES)}")
        mx = _LEFT + marker.index * plot_w / count
        right_half = mx > _LEFT + plot_w * 0.6
        placed.append(PlacedMarker(_n(mx), _n(mx - 4 if right_half else mx + 4), _n(12 + 13 * (row % 2)),
                                   "end" if right_half else "start", marker))
    baseline = _n(y(reference)) if reference is not None else ""
    return TrendChart(width, height, top, bottom, _LEFT, width - _RIGHT, line, bands, dots, y_ticks, x_ticks,
                      placed, baseline)


def sparkline(values: Sequence[float], tone: str = "base", width: int = 120, height: int = 24) -> Markup:
    """The last nights' levels as a small line (numbers only); an empty box without two finite values."""
    if tone not in ("base", "regression", "improvement"):
        raise ValueError(f"unknown sparkline tone {tone!r}")
    finite = [(i, v) for i, v in enumerate(values) if math.isfinite(v)]
    head = (f'<svg class="spark {tone}" role="img" aria-hidden="true" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">')
    if len(finite) < 2:
        return Markup(head + "</svg>")
    low, high = min(v for _, v in finite), max(v for _, v in finite)
    flat = high - low <= 1e-12 * max(abs(high), 1.0)
    step = (width - 4) / max(len(values) - 1, 1)

    def y(v: float) -> float:
        return height / 2 if flat else height - 3 - (v - low) / (high - low) * (height - 6)

    points = " ".join(f"{_n(2 + i * step)},{_n(y(v))}" for i, v in finite)
    last_i, last_v = finite[-1]
    return Markup(f'{head}<polyline points="{points}"/><circle cx="{_n(2 + last_i * step)}" cy="{_n(y(last_v))}" '
                  'r="2"/></svg>')
