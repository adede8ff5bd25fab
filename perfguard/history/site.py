"""The history site: ``perfguard history site --store URL --out DIR``, a static site of the store.

Pages (every link relative, so the folder works from disk and on GitHub Pages):

* ``index.html`` - the open alerts (one row per alert: kind, status, assignee, age, suite and
  runner class, commit range, culprit, cases, size; the longest waiting first), the open changes
  outside them (regressions first), then every series (model x pipeline x
  runner x metric x kind; its pipeline's hash shown, so series of an edited pipeline differ) with a
  sparkline, its latest level, its change over the last 7 and 30 nights and its nights (how many,
  first..last), series with an open regression first. Filters: every model, pipeline, runner, metric
  and backend links to a pre-rendered page of its series (``filter/<dimension>-<n>.html``); where
  JavaScript runs, a filter box narrows the table in place;
* ``series/<id>.html`` - the trend over nights (the value, or the chained index of a ratio
  series) with each night's interval as a band (the paired interval of a ratio; the min..max of
  the per-worker values of an absolute point), the change points :func:`detect` finds, with size
  and interval, linked to their change pages, and vertical markers where the runner's
  environment changed (a ratio series' nights on machines whose fingerprints differ; for an
  absolute series, whose key holds the fingerprint, the series of the same case on the previous
  fingerprint); each dot links to its night;
* ``nights/<document id>.html`` - one stored result or verdicts document: its verdicts, values,
  failed cases and environment;
* ``changes/<id>.html`` - a change: commit range, size with interval, status, note, and the
  bisection narrative of its bisect document;
* ``alerts.html`` - the team's figures (:mod:`perfguard.history.site_alerts`: open alerts by age
  with status and assignee, the median time to triage over the last 30 days, alerts by final
  status and the false-alarm rate ``invalid / closed``), then every alert;
* ``alert-<id>.html`` - one alert: its changes (case, metric, level before -> after, effect), the
  culprit and its explanation, the status history, the linked issue (a link only for http(s)),
  the fixing range; a series page lists its past alerts, a change page links to its alert;
* ``feed.atom`` - the regression and broken alerts (one entry each, its changes in the text, most
  recently changed first), then the confirmed regressions (ratio > 1) outside them, newest first.

Like the report (:mod:`perfguard.report.html`), every page is one self-contained file: Jinja
autoescape on every name (its control and bidi characters shown as escapes), inline CSS and SVG, a Content-Security-Policy that loads nothing and
runs only the one inline script it names by hash (on the index pages; the pages are complete
without it). The site is built in a folder beside ``DIR`` and renamed into place, so ``DIR`` is
either the old site or the new one, never half of one; a folder that is not a site is never
replaced.

Scale (``benchmarks/history_site.py``: 500 series x 60 nights, 2 busy cores): the build takes
4.3 s (reading the store and its 60 documents 1.4 s, rendering 680 pages 2.2 s, writing 38 MB
0.8 s) and the index (500 rows, 0.8 MB) loads in headless Chromium in 0.7 s. The swap is two
renames: for an instant between them ``DIR`` does not exist (a server may answer 404 once).
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.errors import StorageError, UserError
from perfguard.history.site_alerts import span
from perfguard.history.site_chart import Marker, Night as ChartNight, TrendChart, trend
from perfguard.history.site_model import (
    DIMENSIONS,
    AlertView,
    ChangeView,
    DocumentView,
    SeriesView,
    Site,
    SiteCounts,
    collect,
)
from perfguard.report.format import series_level
from perfguard.store import Store

if TYPE_CHECKING:
    import jinja2
    from markupsafe import Markup

__all__ = ["MARKER_FILE", "SiteCounts", "SiteSummary", "build_site", "collect", "render"]

#: The file that marks a folder as a site this command may replace.
MARKER_FILE = ".perfguard-site"


@dataclass(frozen=True)
class SiteSummary:
    """What a build wrote: the folder, its pages and the counts its pages print."""

    out: Path
    pages: int
    counts: SiteCounts


# --- rendering --------------------------------------------------------------------------------------

def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _asset(package: str, name: str) -> str:
    from importlib import resources

    return resources.files(package).joinpath("templates", name).read_text(encoding="utf-8")


@cache
def _environment() -> jinja2.Environment:
    import jinja2

    from perfguard.report import format as fmt
    from perfguard.report.escape import html_value
    from perfguard.report.rows import STATE_LABELS

    env = jinja2.Environment(loader=jinja2.PackageLoader("perfguard.history", "templates"), autoescape=True,
                             finalize=html_value, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters.update({"change": fmt.change, "interval": fmt.interval, "timestamp": fmt.timestamp,
                        "state_label": lambda state: STATE_LABELS.get(state, state), "short": _short,
                        "value": lambda v, series: series_level(series.key.metric, series.key.kind, v),
                        "env_text": _env_text, "span": span, "days": _days, "night_range": _night_range})
    return env


def _night_range(first: str, last: str) -> Markup:
    """A series' first..last night (:func:`perfguard.report.format.night_range`), a line break
    allowed after the ".." and nowhere inside a date (each date escaped)."""
    from markupsafe import Markup

    from perfguard.report.format import night_range

    return Markup("..<wbr>").join(Markup('<span class="date">%s</span>') % part
                                  for part in night_range(first, last).split(".."))


def _short(commit: str | None) -> str:
    return (commit or "")[:10]


def _days(value: float | None) -> str:
    """An alert's age: ``0.3 days``; ``—`` when it has no creation time."""
    return "—" if value is None else f"{value:.1f} day{'' if round(value, 1) == 1 else 's'}"


def _env_text(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_env_text(v)}" for k, v in sorted(value.items()))
    if isinstance(value, list):
        return ", ".join(_env_text(v) for v in value)
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _chart(view: SeriesView, documents: dict[int, DocumentView]) -> TrendChart:
    nights = []
    for index, (point, level) in enumerate(zip(view.points, view.levels, strict=True)):
        if view.key.kind == "ratio":
            before = view.levels[index - 1] if index and math.isfinite(view.levels[index - 1]) else 1.0
            low = before * point.ci_low if point.ci_low is not None else None
            high = before * point.ci_high if point.ci_high is not None else None
        else:
            low, high = (min(point.values), max(point.values)) if len(point.values) > 1 else (None, None)
        document = documents.get(point.document_id)
        subject = document.subject if document else ""
        shown = series_level(view.key.metric, view.key.kind, level)
        if view.key.kind == "ratio":
            shown += f" (night {point.value - 1:+.2%})"
        title = " · ".join(x for x in (point.time[:10], _short(point.commit), subject, shown) if x)
        nights.append(ChartNight(level, low, high, point.time[:10], (point.commit or "")[:7], title,
                                 f"../nights/{point.document_id}.html"))
    from perfguard.report import format as fmt

    stored = {c.change.bad_commit: c for c in view.changes}
    markers = list(view.markers)
    marked = set()
    for cp in view.change_points:
        commit = view.points[cp.index].commit or ""
        change = stored.get(commit) if commit else None
        marked.add(commit)
        markers.append(Marker(cp.index, cp.direction if cp.direction in ("regression", "improvement") else "regression",
                              f"{fmt.change(cp.ratio)} {fmt.interval(cp.ci_low, cp.ci_high)}",
                              f"../{change.href}" if change else "", commit))
    commits = [p.commit for p in view.points]
    for change in view.changes:  # a stored change detect() no longer sees (closed, or more nights since)
        bad = change.change.bad_commit
        if bad and bad not in marked and bad in commits:
            c = change.change
            markers.append(Marker(commits.index(bad), change.tone,
                                  f"{fmt.change(c.ratio)} {fmt.interval(c.ci_low, c.ci_high)} ({c.status})",
                                  f"../{change.href}", bad))
    return trend(nights, markers, lambda v: series_level(view.key.metric, view.key.kind, v),
                 reference=1.0 if view.key.kind == "ratio" else None)


def render(site: Site) -> dict[str, str]:
    """Every file of the site: relative path -> text."""
    from perfguard import __version__

    env = _environment()
    style = _asset("perfguard.report", "report.css") + _asset("perfguard.history", "site.css")
    script = _asset("perfguard.history", "site.js")
    common = {"site": site, "style": style, "style_hash": _csp_hash(style), "version": __version__,
              "dimensions": DIMENSIONS, "counts": site.counts}
    from markupsafe import Markup

    common["style"] = Markup(style)  # perfguard's own file, verbatim so that its hash matches
    scripted = {"script": Markup(script), "script_hash": _csp_hash(script)}
    plain = {"script": None, "script_hash": None}
    index = env.get_template("index.html.j2")
    files = {"index.html": index.render(root="", rows=site.series, filter=None, **common, **scripted)}
    for dimension, values in site.filters.items():
        for value, page, _ in values:
            rows = [v for v in site.series if v.values[dimension] == value]
            files[page] = index.render(root="../", rows=rows, filter=(dimension, value), **common, **plain)
    series_page = env.get_template("series.html.j2")
    for view in site.series:
        files[view.href] = series_page.render(root="../", view=view, trend=_chart(view, site.documents),
                                              **common, **plain)
    night_page = env.get_template("night.html.j2")
    for document in site.documents.values():
        files[document.href] = night_page.render(root="../", doc=document, **common, **plain)
    change_page = env.get_template("change.html.j2")
    for change in site.changes:
        files[change.href] = change_page.render(root="../", view=change, **common, **plain)
    files["alerts.html"] = env.get_template("alerts.html.j2").render(root="", **common, **plain)
    alert_page = env.get_template("alert.html.j2")
    for alert in site.alerts:
        files[alert.href] = alert_page.render(root="", view=alert, **common, **plain)
    alerts, entries = site.feed_alerts, site.feed_changes
    updated = max([a.alert.updated_at for a in alerts] + [c.change.time for c in entries], default="")
    files["feed.atom"] = env.get_template("feed.atom.j2").render(
        site=site, alerts=alerts, entries=entries, updated=updated or site.last_time or "1970-01-01T00:00:00Z",
        version=__version__, feed_id=_urn("feed", *site.suites), entry_id=_entry_urn, alert_id=_alert_urn)
    files[".nojekyll"] = ""  # GitHub Pages: serve the files as they are
    files[MARKER_FILE] = "a site written by `perfguard history site`; --out replaces this folder as a whole\n"
    return files


def _urn(*parts: str) -> str:
    return f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, 'perfguard-history:' + chr(0).join(parts))}"


def _entry_urn(change: ChangeView) -> str:
    """A regression's id: stable across rebuilds and stores (its series key and bad commit)."""
    return _urn("change", change.change.key.hash(), change.change.bad_commit or "")


def _alert_urn(view: AlertView) -> str:
    """An alert's id: stable across rebuilds and stores (its suite, runner class and commit range)."""
    a = view.alert
    return _urn("alert", a.suite, a.runner_class, a.first_commit or "", a.last_commit or "")


# --- writing ----------------------------------------------------------------------------------------

def build_site(store: Store, out: str | Path, *, suite: str | None = None,
               now: datetime | None = None) -> SiteSummary:
    """Write the site of ``store`` (of ``suite``, if given) into the folder ``out``: built beside
    it and renamed into place. An existing ``out`` is replaced only if it is empty or a site this
    function wrote (it holds ``.perfguard-site``); otherwise ``UserError``. ``now`` (aware; by
    default the current time): when the alerts' ages and the team's figures are taken."""
    target = Path(os.path.abspath(out))
    if target.exists() and not target.is_dir():
        raise UserError(f"--out {out}: a file, not a folder")
    if target.exists() and any(target.iterdir()) and not (target / MARKER_FILE).exists():
        raise UserError(f"--out {out}: the folder exists and is not a perfguard history site (no {MARKER_FILE}); "
                        "name a new or empty folder")
    site = collect(store, suite, now=now)
    files = render(site)
    _publish(target, files)
    return SiteSummary(target, _pages(files), site.counts)


def _publish(target: Path, files: dict[str, str]) -> None:
    """Write ``files`` into a staging folder beside ``target``, then swap it in."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    except OSError as exc:
        raise StorageError(f"{target}: cannot write the site beside it: {exc.strerror or exc}") from None
    try:
        for name in sorted({str(Path(n).parent) for n in files} - {"."}):
            (staging / name).mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (staging / name).write_text(text, encoding="utf-8")
        os.chmod(staging, 0o755)  # mkdtemp's 0700 would hide the site from a web server's user
        old = None
        if target.exists():
            old = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.old"
            os.rename(target, old)
        try:
            os.rename(staging, target)
        except OSError:
            if old is not None:
                os.rename(old, target)
            raise
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError):
            raise StorageError(f"{target}: cannot write the site: {exc.strerror or exc}") from None
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _pages(files: Iterable[str]) -> int:
    return sum(1 for name in files if name.endswith(".html"))
