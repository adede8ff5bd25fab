"""What the history site shows, read from a store: each series with its levels, change points and
environment markers, each stored change with its bisection, each night's document.

:func:`collect` reads it all in a few queries (the series, every point in one, the nights, the
changes, each document once); :mod:`perfguard.history.site` renders it. Pure reading: nothing
here writes to the store or to disk.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from perfguard.history.site_alerts import TeamFigures, age_days, team_figures, time_to_triage
from perfguard.history.site_chart import Marker, sparkline
from perfguard.jsonfields import JsonDict
from perfguard.store import Change, Night, Point, Series, SeriesKey, Store
from perfguard.store.alert_rows import Alert, AlertChange

if TYPE_CHECKING:
    from perfguard.compare.verdicts import Verdict
    from perfguard.history.changepoints import ChangePoint
    from perfguard.report.bisect import BisectView
    from perfguard.report.counted_why import CountedWhyView
    from perfguard.store.edits import PipelineEdit

#: The filter dimensions of the index, in display order.
DIMENSIONS = ("model", "pipeline", "runner", "metric", "backend")
#: Nights a sparkline shows.
SPARK_NIGHTS = 60


@dataclass
class SeriesView:
    """A series as the site shows it: its points, levels, change points and markers."""

    series: Series
    values: dict[str, str]  # DIMENSIONS -> value
    points: list[Point]
    levels: list[float]
    change_points: list[ChangePoint] = field(default_factory=list)
    changes: list[ChangeView] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    siblings: list[tuple[SeriesView, str]] = field(default_factory=list)  # (other, what differs)
    alerts: list[AlertView] = field(default_factory=list)  # the alerts some change of it belongs to

    @property
    def id(self) -> int:
        return self.series.id

    @property
    def href(self) -> str:
        return f"series/{self.series.id}.html"

    @property
    def key(self) -> SeriesKey:
        return self.series.key

    @property
    def latest(self) -> float:
        return self.levels[-1] if self.levels else math.nan

    def change_over(self, nights: int) -> float | None:
        """The latest level against the level ``nights`` nights before it (None: too few)."""
        if len(self.levels) <= nights:
            return None
        before, now = self.levels[-1 - nights], self.levels[-1]
        return now / before if before and math.isfinite(before) and math.isfinite(now) else None

    @property
    def open_changes(self) -> list[ChangeView]:
        return [c for c in self.changes if c.change.status != "closed"]

    @property
    def state(self) -> str:
        """``regression`` (an open change that got worse), ``improvement`` or ``same``."""
        tones = {c.tone for c in self.open_changes}
        return "regression" if "regression" in tones else "improvement" if tones else "same"

    def spark(self) -> Markup:
        return sparkline(self.levels[-SPARK_NIGHTS:], self.state if self.state != "same" else "base")


@dataclass
class ChangeView:
    """A stored change with its series, the nights of its good and bad commits, its bisection."""

    change: Change
    series: SeriesView | None = None
    good_night: str = ""
    bad_night: str = ""
    bisect: BisectView | None = None
    alert: AlertView | None = None  # the alert it belongs to
    before: float | None = None  # the series' level at the good commit's night
    after: float | None = None  # ... and at the bad commit's

    @property
    def href(self) -> str:
        return f"changes/{self.change.id}.html"

    @property
    def tone(self) -> str:
        return "regression" if self.change.ratio > 1 else "improvement"


@dataclass
class AlertView:
    """An alert as the site shows it: its age at the build, its time to triage, and each of its
    changes with the change's page (None when the site does not show that change's series)."""

    alert: Alert
    age_days: float | None
    time_to_triage: float | None
    changes: list[tuple[AlertChange, ChangeView | None]] = field(default_factory=list)

    @property
    def id(self) -> int:
        return self.alert.id

    @property
    def href(self) -> str:
        return f"alert-{self.alert.id}.html"

    @property
    def tone(self) -> str:
        """``regression`` (red while open), ``improvement``, or ``closed``."""
        if self.alert.kind == "improvement":
            return "improvement"
        return "regression" if self.alert.is_open else "closed"

    @property
    def issue_link(self) -> str | None:
        """The linked issue's URL when it may be a link (http or https), else None (shown as text)."""
        url = (self.alert.issue_url or "").strip()
        return url if url.lower().startswith(("https://", "http://")) else None

    @property
    def counted(self) -> CountedWhyView | None:
        """Why, counted: its culprit's instruction change by function, where the night counted it."""
        from perfguard.report.counted_why import pair_view

        explanation = self.alert.explanation
        return None if explanation is None or explanation.counted is None else pair_view(explanation.counted)

    @property
    def series(self) -> list[SeriesView]:
        """The series of its changes, each once, in the order of its changes."""
        found: dict[int, SeriesView] = {}
        for _, view in self.changes:
            if view is not None and view.series is not None:
                found.setdefault(view.series.id, view.series)
        return list(found.values())


@dataclass
class DocumentView:
    """A stored result or verdicts document (one night's page)."""

    id: int
    kind: str
    suite: str
    time: str
    commit: str | None
    subject: str
    environment: dict[str, JsonDict]  # runner fingerprints: free-form
    night: Night | None = None
    base: tuple[str, str] | None = None  # a check's base: (commit, subject)
    points: list[tuple[SeriesView, Point]] = field(default_factory=list)
    verdicts: list[tuple[Verdict, str, SeriesView | None]] = field(default_factory=list)  # (row, state, series)
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (case, stage, message)
    previous: DocumentView | None = None
    next: DocumentView | None = None

    @property
    def href(self) -> str:
        return f"nights/{self.id}.html"


@dataclass(frozen=True)
class SiteCounts:
    """The counts every page header, banner, the feed and ``history site``'s line print: one
    source, so the index never says "6 open changes" above "no open change" and the command
    never counts a feed entry the feed does not hold.

    ``open_changes``: every change not closed; ``loose_changes``/``loose_regressions``: those of
    them outside an open alert (listed in the index's changes section; the others are listed with
    their alert); ``feed_alerts``/``feed_changes``: the feed's alert entries and its confirmed
    regressions outside them."""

    series: int
    nights: int
    changes: int
    alerts: int
    open_alerts: int
    open_changes: int
    loose_changes: int
    loose_regressions: int
    feed_alerts: int
    feed_changes: int

    @property
    def changes_in_open_alerts(self) -> int:
        return self.open_changes - self.loose_changes

    @property
    def feed_entries(self) -> int:
        return self.feed_alerts + self.feed_changes


@dataclass
class Site:
    """Everything the pages show."""

    suites: list[str]
    series: list[SeriesView]
    changes: list[ChangeView]
    documents: dict[int, DocumentView]
    filters: dict[str, list[tuple[str, str, int]]]  # dimension -> (value, page, series count)
    last_time: str
    alerts: list[AlertView]  # every alert, oldest first
    figures: TeamFigures

    @property
    def open_changes(self) -> list[ChangeView]:
        found = [c for c in self.changes if c.change.status != "closed"]
        return sorted(found, key=lambda c: (c.tone != "regression", c.change.status != "confirmed",
                                            -abs(math.log(c.change.ratio)) if c.change.ratio > 0 else 0.0))

    @property
    def loose_changes(self) -> list[ChangeView]:
        """The open changes that are not inside an open alert (those are listed with their alert)."""
        return [c for c in self.open_changes if c.alert is None or not c.alert.alert.is_open]

    @property
    def open_alerts(self) -> list[AlertView]:
        """The alerts nobody closed, oldest first (by age: the longest waiting leads)."""
        return [a for a in self.alerts if a.alert.is_open]

    @property
    def feed(self) -> list[ChangeView]:
        """Confirmed regressions, newest first."""
        found = [c for c in self.changes if c.change.status == "confirmed" and c.change.ratio > 1]
        return sorted(found, key=lambda c: (c.change.time, c.change.id), reverse=True)

    @property
    def feed_alerts(self) -> list[AlertView]:
        """The feed's alerts: every regression and broken alert, whatever its status (the entry
        says it), most recently changed first."""
        found = [a for a in self.alerts if a.alert.kind != "improvement"]
        return sorted(found, key=lambda a: (a.alert.updated_at, a.id), reverse=True)

    @property
    def feed_changes(self) -> list[ChangeView]:
        """The feed's confirmed regressions that are not inside one of its alerts."""
        return [c for c in self.feed if c.alert is None]

    @property
    def counts(self) -> SiteCounts:
        loose = self.loose_changes
        return SiteCounts(len(self.series), len(self.documents), len(self.changes), len(self.alerts),
                          len(self.open_alerts), len(self.open_changes), len(loose),
                          sum(1 for c in loose if c.tone == "regression"), len(self.feed_alerts),
                          len(self.feed_changes))


# --- collecting -------------------------------------------------------------------------------------

def _dimensions(series: Series) -> dict[str, str]:
    key = series.key
    case_id = key.case_id
    model, pipeline = (case_id.model, case_id.pipeline) if case_id is not None else (key.case, "")
    return {"model": model, "pipeline": pipeline, "runner": key.runner_class.split(":", 1)[0],
            "metric": key.metric, "backend": key.backend.split(" ", 1)[0]}


def levels(series: Series, points: Sequence[Point]) -> list[float]:
    """The level of each night: the value (absolute) or the chained index of the paired ratios
    (the site and ``perfguard history`` both draw these)."""
    from perfguard.history.changepoints import chained_index

    values = [p.value for p in points]
    if series.key.kind != "ratio":
        return values
    try:
        return chained_index(values)
    except ValueError:  # a non-positive ratio: no index, the ratios themselves
        return values


def _change_points(series: Series, points: Sequence[Point]) -> list[ChangePoint]:
    from perfguard.history.changepoints import detect
    from perfguard.history.series_changes import MIN_STEP

    ci = [(p.ci_low, p.ci_high) for p in points] if series.key.kind == "ratio" else None
    try:
        return detect([p.value for p in points], kind=series.key.kind, ci=ci,
                      min_size=MIN_STEP.get(series.key.metric, 0.01))
    except ValueError:  # a zero value (an empty artifact): no change points rather than no site
        return []


def _stored_document(document_id: int, data: Any) -> Any:
    """A stored document, typed. The store validated it against its schema when it was
    ingested (after migrating it), so it is migrated and not validated again: the schema check
    was 85 % of reading the nights of a store. A verdicts document of an older version (1:
    results by side label) goes through its parser, which owns its migrations."""
    from perfguard.compare.verdicts import VERDICTS_VERSION, VerdictsDocument
    from perfguard.report import parse_document
    from perfguard.results.result import ResultDocument, current_result_json
    from perfguard.store.extract import stored_kind

    source = f"stored document {document_id}"
    kind = stored_kind(data, source)
    if kind == "result":
        return ResultDocument.from_json(current_result_json(data, source))
    if kind == "verdicts" and data.get("version") == VERDICTS_VERSION:
        results = data.get("results") or {}
        return VerdictsDocument.from_json({**data, "results": {label: current_result_json(r, source)
                                                               for label, r in results.items()}})
    return parse_document(data, source)


def _document_view(document_id: int, data: Any) -> DocumentView | None:
    """The page of a stored result or verdicts document (None for a bisect document)."""
    from perfguard.compare.verdicts import VerdictsDocument
    from perfguard.report.rows import state_of
    from perfguard.results.result import ResultDocument

    document = _stored_document(document_id, data)
    rows: list[tuple[Verdict, str, SeriesView | None]] = []
    if isinstance(document, VerdictsDocument) and document.results is not None:
        result, commit = document.results.candidate, document.mode.head_commit
        time = document.created_at or result.finished_at
        rows = [(row, state_of(row), None) for row in document.verdicts]
        kind = "verdicts"
    elif isinstance(document, ResultDocument):
        result, commit, time, kind = document, None, document.finished_at, "result"
    else:
        return None
    compiler = result.compiler
    view = DocumentView(document_id, kind, result.suite.name, time, commit or (compiler.commit if compiler else None),
                        compiler.commit_subject if compiler else "", dict(result.environment), verdicts=rows)
    if isinstance(document, VerdictsDocument) and document.mode.base_commit and document.mode.base_subject:
        view.base = (document.mode.base_commit, document.mode.base_subject)
    view.failed = [(c.id, c.error.stage if c.error else c.status, c.error.message if c.error else "")
                   for c in result.cases if not c.ok]
    return view


def _name_subjects(documents: Iterable[DocumentView]) -> None:
    """Give a night whose document names no subject for its commit the subject another document
    knows: a check's head side is labelled "working tree" (``perfguard.flows.check``), and the
    next night's check names the same commit as its base, with its subject."""
    documents = list(documents)
    known = {d.commit: d.subject for d in documents if d.commit and d.subject}
    known.update({d.base[0]: d.base[1] for d in documents if d.base and d.base[0] not in known})
    for document in documents:
        if not document.subject and document.commit:
            document.subject = known.get(document.commit, "")


def _runner_environment(document: DocumentView | None, runner: str) -> JsonDict | None:
    if document is None:
        return None
    found = document.environment.get(runner)
    return found if isinstance(found, dict) else None


def _environment_markers(view: SeriesView, documents: dict[int, DocumentView]) -> list[Marker]:
    """A marker before each night whose runner fingerprint differs from the night before's."""
    from perfguard.runners.fingerprint import fingerprint_differences

    markers = []
    runner = view.values["runner"]
    before = None
    for index, point in enumerate(view.points):
        now = _runner_environment(documents.get(point.document_id), runner)
        if before is not None and now is not None:
            fields = fingerprint_differences(before, now)
            if fields:
                markers.append(Marker(index, "environment", "environment changed: " + ", ".join(sorted(fields)),
                                      commit=point.commit or ""))
        before = now if now is not None else before
    return markers


def _continue_across_edits(views: Sequence[SeriesView], every: Mapping[int, Sequence[Point]],
                           edits: Sequence[PipelineEdit]) -> set[frozenset[int]]:
    """The series a pipeline edit of the suite joins (:func:`perfguard.store.edits.lineages`):
    the newest one's view shows the whole lineage, its levels and change points across the edit,
    with a marker at each edit that moved it (the commit and both pass lists: a code change, not a
    new environment); an older one's view ends with a marker that says where it continues. Returns
    the pairs of series ids joined (no "environment changed" marker between them)."""
    from perfguard.store.edits import lineages

    by_id = {v.id: v for v in views}
    joined: set[frozenset[int]] = set()
    for lineage in lineages([v.series for v in views], every, edits):
        if len(lineage.series) < 2:
            continue
        newest = by_id[lineage.newest.id]
        ids = [s.id for s in lineage.series]
        joined |= {frozenset((a, b)) for a in ids for b in ids if a != b}
        newest.points = list(lineage.points)
        newest.levels = levels(newest.series, newest.points)
        newest.change_points = _change_points(newest.series, newest.points)
        for index, edit in sorted(lineage.edits.items()):
            before, after = newest.levels[index - 1], newest.levels[index]
            tone = "regression" if after > before else "improvement"
            commit = edit.commit or newest.points[index].commit or ""
            if before != after:  # an edit that moved nothing leaves the series as it was: no marker
                newest.markers.append(Marker(index, tone, edit.describe(), commit=commit))
            older = by_id.get(lineage.series_at(index - 1).id)
            if older is not None and older is not newest:
                older.markers.append(Marker(len(older.points), tone,
                                            f"{edit.describe()}; continues in #{newest.id}",
                                            href=f"../{newest.href}", commit=commit))
    return joined


def _link_siblings(views: Sequence[SeriesView], documents: dict[int, DocumentView],
                   joined: Collection[frozenset[int]] = ()) -> None:
    """Series of the same case, metric and runner under another fingerprint, backend or model
    hash (each is its own series): list them on each other's page, and mark where this series
    took over from the one before it (``joined``: pairs a pipeline edit joins, marked by
    :func:`_continue_across_edits` instead)."""
    from perfguard.runners.fingerprint import fingerprint_differences

    groups: dict[tuple[str, ...], list[SeriesView]] = {}
    for view in views:
        k = view.key
        groups.setdefault((k.suite, k.case, k.metric, k.kind, view.values["runner"]), []).append(view)
    for group in groups.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda v: (v.series.first_time, v.id))
        for view in group:
            for other in group:
                if other is view or not view.points or not other.points:
                    continue
                fields = set(fingerprint_differences(
                    _runner_environment(documents.get(other.points[-1].document_id), view.values["runner"]) or {},
                    _runner_environment(documents.get(view.points[0].document_id), view.values["runner"]) or {}))
                fields |= {name for name, a, b in (("backend", other.key.backend, view.key.backend),
                                                   ("model", other.key.model_hash, view.key.model_hash),
                                                   ("pipeline", other.key.pipeline_hash, view.key.pipeline_hash))
                           if a != b}
                differs = ", ".join(sorted(fields)) or "runner class"
                view.siblings.append((other, differs))
            differs_from = {o.id: d for o, d in view.siblings}
            before = [o for o in group if o is not view and o.series.last_time <= view.series.first_time]
            if before and frozenset((before[-1].id, view.id)) not in joined:
                previous = before[-1]
                view.markers.append(Marker(0, "environment", f"environment changed: {differs_from[previous.id]}",
                                           href=f"../{previous.href}", commit=view.points[0].commit or ""))
            after = [o for o in group if o is not view and o.series.first_time >= view.series.last_time]
            if after and frozenset((after[0].id, view.id)) not in joined:
                following = after[0]
                view.markers.append(Marker(len(view.points), "environment",
                                           f"environment changed: {differs_from[following.id]}; continues in "
                                           f"#{following.id}", href=f"../{following.href}",
                                           commit=following.points[0].commit or ""))


def _alert_views(alerts: Sequence[Alert], changes: Sequence[ChangeView], now: datetime) -> list[AlertView]:
    """The views of ``alerts``, each linked both ways with its changes' views and their series."""
    by_id = {c.change.id: c for c in changes}
    views = []
    for alert in alerts:
        view = AlertView(alert, age_days(alert, now), time_to_triage(alert),
                         [(c, by_id.get(c.change_id)) for c in alert.changes])
        for _, change in view.changes:
            if change is not None:
                change.alert = view
        for series in view.series:
            series.alerts.append(view)
        views.append(view)
    return views


def collect(store: Store, suite: str | None = None, *, now: datetime | None = None) -> Site:
    """Read what the site shows from ``store`` (of ``suite`` only, if given); ``now`` (aware; by
    default the current time) is when the alerts' ages and the team's figures are taken."""
    from perfguard.bisect.document import bisect_from_json
    from perfguard.report.bisect import bisect_view
    from perfguard.store.schema import STATUSES

    found = store.series(suite=suite)
    every = store.all_points()
    views = []
    for series in found:
        points = every.get(series.id, [])
        views.append(SeriesView(series, _dimensions(series), points, levels(series, points),
                                _change_points(series, points)))
    by_id = {v.id: v for v in views}
    suites = sorted({v.key.suite for v in views} | ({suite} if suite else set()))
    nights = {n.document_id: n for s in suites for n in store.nights(s) if n.document_id is not None}

    documents: dict[int, DocumentView] = {}
    for document_id in sorted({p.document_id for v in views for p in v.points} | set(nights)):
        document = _document_view(document_id, store.document(document_id))
        if document is not None:
            document.night = nights.get(document_id)
            documents[document_id] = document
    _name_subjects(documents.values())
    for view in views:
        for point in view.points:
            if point.document_id in documents:
                documents[point.document_id].points.append((view, point))
    joined = _continue_across_edits(views, every, store.pipeline_edits(suite))
    ordered = sorted(documents.values(), key=lambda d: (d.suite, d.time, d.id))
    for earlier, later in zip(ordered, ordered[1:], strict=False):
        if earlier.suite == later.suite:
            earlier.next, later.previous = later, earlier
    for document in documents.values():
        own = {(v.key.case, v.key.metric, v.key.kind): v for v, _ in document.points}
        document.verdicts = [(row, state, own.get((row.case, row.metric, "ratio")) or
                              own.get((row.case, row.metric, "absolute"))) for row, state, _ in document.verdicts]

    changes = []
    for status in STATUSES:
        for change in store.changes(status=status, suite=suite):
            linked = ChangeView(change, by_id.get(change.series_id))
            if change.bisect_document_id is not None:
                linked.bisect = bisect_view(bisect_from_json(store.document(change.bisect_document_id),
                                                             f"bisect document {change.bisect_document_id}"))
            if linked.series is not None:
                linked.series.changes.append(linked)
                at = {p.commit: p.document_id for p in linked.series.points if p.commit}
                linked.good_night = f"nights/{at[change.good_commit]}.html" if change.good_commit in at else ""
                linked.bad_night = f"nights/{at[change.bad_commit]}.html" if change.bad_commit in at else ""
                index = {p.commit: i for i, p in enumerate(linked.series.points) if p.commit}
                if change.good_commit in index:
                    linked.before = linked.series.levels[index[change.good_commit]]
                if change.bad_commit in index:
                    linked.after = linked.series.levels[index[change.bad_commit]]
            changes.append(linked)
    changes.sort(key=lambda c: (c.change.time, c.change.id))

    for view in views:
        view.markers += _environment_markers(view, documents)
    _link_siblings([v for v in views if v.key.kind == "absolute"], documents, joined)

    filters = {}
    for dimension in DIMENSIONS:
        counts: dict[str, int] = {}
        for view in views:
            counts[view.values[dimension]] = counts.get(view.values[dimension], 0) + 1
        filters[dimension] = [(value, f"filter/{dimension}-{n}.html", counts[value])
                              for n, value in enumerate(sorted(counts))]
    moment = now or datetime.now(timezone.utc)
    found_alerts = store.alerts(suite=suite)
    alerts = _alert_views(found_alerts, changes, moment)
    times = [v.series.last_time for v in views] + [c.change.time for c in changes] + [n.time for n in nights.values()]
    views.sort(key=lambda v: (v.state != "regression", v.state != "improvement", v.key.suite, v.key.case,
                              v.key.metric, v.key.kind, v.id))
    return Site(suites, views, changes, documents, filters, max(times, default=""), alerts,
                team_figures(found_alerts, moment))
