"""The history store: every result, verdict and bisection document, and the series they make.

  perfguard history ingest FILE...        store documents (the same document twice is one record)
  perfguard history ingest --format asv|pytest-benchmark FILE|FOLDER...
                                          store other tools' runs as series of their own
  perfguard history list                  series: latest value, trend over the last nights
  perfguard history show CASE             one case's series as a table, with its change points
  perfguard history changes [--all]       alerts first, then regressions: commit range, size, culprit
  perfguard history alerts [--status S]   alerts: one per commit range, its changes, culprit, status
  perfguard history triage ALERT --status S [--note TEXT] [--assign WHO] [--issue URL]
                                          change an alert's status, assignee, notes, linked issue
  perfguard history prune --keep 365d     drop documents older than that (open changes are kept)
  perfguard history site --out DIR        a static site: every series' trend, nights, changes, an Atom feed
  perfguard history notify --repo O/N     one GitHub issue per alert, updated and closed with it; a webhook

The store is ``--store URL``, else ``$PERFGUARD_STORE``, else the SQLite file
``.perfguard/history.sqlite`` in the current folder; ``postgresql://user:password@host/db`` for a
fleet of runners. Exit codes: 0 done; 2 bad input, a bad or unreachable store (one line; a
password is never printed).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.exit_codes import ExitCode
from perfguard.jsonfields import JsonDict

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from perfguard.store import Change, Point, Series, Store
    from perfguard.store.alert_rows import Alert

HELP = "the history store: ingest documents, list series, show trends and change points, prune"
SPARK = "▁▂▃▄▅▆▇█"


def store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="URL",
                        help="history store: sqlite:///PATH, a file path, or postgresql://... "
                             "(default: $PERFGUARD_STORE, else .perfguard/history.sqlite)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(parser))
    from perfguard.formats import FORMATS

    ingest = sub.add_parser("ingest", help="store result, verdict or bisection documents, or other tools' runs")
    ingest.add_argument("files", nargs="+", metavar="FILE")
    ingest.add_argument("--format", choices=("perfguard", *FORMATS), default="perfguard",
                        help="what the files are: perfguard documents (default), pytest-benchmark JSON runs "
                             "(--benchmark-json, .benchmarks/; a folder: every *.json under it) or asv results "
                             "(results/<machine>/<commit>-<env>.json; a folder: the asv project or results folder)")
    ingest.add_argument("--project", metavar="NAME",
                        help="pytest-benchmark and asv: the suite is <format>:NAME (default: the project the "
                             "files or asv.conf.json name)")
    store_option(ingest)
    listing = sub.add_parser("list", help="every series with its latest value and trend")
    show = sub.add_parser("show", help="one case's series, night by night, with change points")
    show.add_argument("case", metavar="CASE", help="case id or pattern (model/pipeline/runner)")
    changes = sub.add_parser("changes", help="regressions found in the history")
    changes.add_argument("--all", action="store_true", help="also closed changes (default: pending and confirmed)")
    alerts = sub.add_parser("alerts", help="alerts: the changes of one commit range, their culprit and status")
    alerts.add_argument("--status", metavar="S", help="only alerts with this status (untriaged, acknowledged, "
                                                      "investigating, fixed, backed-out, wont-fix, expected, "
                                                      "invalid, improvement)")
    triage = sub.add_parser("triage", help="change an alert: status, assignee, notes, linked issue")
    triage.add_argument("alert", metavar="ALERT", help="the alert's id (`history alerts`)")
    triage.add_argument("--status", metavar="S", help="new status; wont-fix and expected accept the new level, "
                                                      "invalid records a false alarm")
    triage.add_argument("--note", metavar="TEXT", help="a note, kept with the alert and its status change")
    triage.add_argument("--assign", metavar="WHO", help="assignee ('' clears it)")
    triage.add_argument("--issue", metavar="URL", help="the linked issue's URL ('' unlinks it)")
    triage.add_argument("--by", metavar="WHO", help="who triages, recorded with the status change (in a GitHub "
                                                    "workflow $GITHUB_ACTOR wins; default: the global git user.name)")
    store_option(triage)
    for query in (listing, show, changes, alerts):
        store_option(query)
        query.add_argument("--suite", help="only this suite")
        query.add_argument("--json", metavar="PATH", help="also write the answer as JSON")
    for query in (listing, show):
        query.add_argument("--metric", help="only this metric (latency, compile_time, memory, artifact_size, "
                                            "node_count; track:UNIT from asv)")
        query.add_argument("--kind", choices=("absolute", "ratio"), help="only this kind of series")
    listing.add_argument("--case", metavar="PATTERN", help="only cases matching (glob or text)")
    prune = sub.add_parser("prune", help="delete documents older than --keep")
    prune.add_argument("--keep", required=True, metavar="AGE", help="how much history to keep, e.g. 365d, 12w, 48h")
    store_option(prune)
    site = sub.add_parser("site", help="write a static site of the history (GitHub Pages, or open from disk)")
    site.add_argument("--out", required=True, metavar="DIR",
                      help="folder of the site (replaced as a whole; refused if it holds anything but a site)")
    site.add_argument("--suite", help="only this suite")
    store_option(site)
    notify = sub.add_parser("notify", help="file one GitHub issue per alert, comment on changes, close on fix "
                                           "($GITHUB_TOKEN; an API error is a warning, exit 0)")
    notify.add_argument("--repo", required=True, metavar="OWNER/NAME", help="the repository the issues go to")
    notify.add_argument("--api-url", metavar="URL", default=None,
                        help="REST API root (default https://api.github.com; GitHub Enterprise: https://HOST/api/v3); "
                             "http(s) only, checked before any request (exit 2)")
    notify.add_argument("--site-url", metavar="URL", help="where `history site` is published: issues link its pages")
    notify.add_argument("--webhook", metavar="URL",
                        help="also POST each new or changed alert as JSON with a Slack-compatible `text` field "
                             "(http(s) only, checked before any request: exit 2 naming its host, never its path)")
    notify.add_argument("--suite", help="only this suite's alerts")
    notify.add_argument("--plan", metavar="FILE",
                        help="read issues from the API but write the requests that would post, comment and close "
                             "to FILE (JSON) instead of sending them: for a workflow whose posting job runs no "
                             "perfguard (docs/guides/alerts-notify.md)")
    store_option(notify)


def open_store(url_arg: str | None, create: bool) -> Store:
    from perfguard.store import Store, store_url

    return Store.open(store_url(url_arg), create=create)


def parse_age(text: str) -> float:
    """Seconds in an age like ``365d``, ``12w``, ``48h``, ``30min`` (``UserError`` otherwise)."""
    from perfguard.errors import UserError
    from perfguard.units import parse_duration

    units = {"d": 86400.0, "w": 7 * 86400.0, "h": 3600.0}
    stripped = text.strip().lower()
    for suffix, seconds in units.items():
        number = stripped[: -len(suffix)]
        if stripped.endswith(suffix) and number.replace(".", "", 1).isdigit() and float(number) > 0:
            return float(number) * seconds
    try:
        return parse_duration(stripped, "--keep")
    except UserError:
        raise UserError(f"--keep: expected an age like 365d, 12w or 48h, found {text!r}") from None


def format_value(metric: str, kind: str, value: float) -> str:
    """A value or level as the commands print it (as the site and the issues do)."""
    from perfguard.report.format import series_level

    return series_level(metric, kind, value)


def sparkline(values: Sequence[float], width: int = 24) -> str:
    tail = [v for v in values[-width:] if math.isfinite(v)]
    if not tail:
        return ""
    low, high = min(tail), max(tail)
    if high - low <= 1e-12 * max(abs(high), 1.0):
        return SPARK[3] * len(tail)
    return "".join(SPARK[min(len(SPARK) - 1, int((v - low) / (high - low) * len(SPARK)))] for v in tail)


#: Why one case's ``absolute`` and ``ratio`` series may move in opposite directions.
LIST_CAPTION = ("trend: the latest level against the median of up to ten nights before it. An absolute series "
                "is the time measured on its runner (it moves with the compiler, the machine and its load); a "
                "ratio series is head / base measured in the same job, against the same-job reference pipeline "
                "(it moves with the compiler only), so the two may differ, even in sign.")


def trend(values: Sequence[float]) -> float | None:
    """The latest level against the median of up to ten nights before it (a relative change)."""
    if len(values) < 2:
        return None
    before = sorted(values[-11:-1])
    middle = before[len(before) // 2] if len(before) % 2 else (before[len(before) // 2 - 1] + before[len(before) // 2]) / 2
    return values[-1] / middle - 1.0 if middle else None


def _decision_word(point: Point) -> str:
    """The night's decision; a ``same`` whose interval excludes no change is a real change the floor
    let through (the floor itself is not stored with the point), and says so."""
    decision = point.decision or ""
    low, high = point.ci_low, point.ci_high
    if decision == "same" and low is not None and high is not None and (low > 1.0 or high < 1.0):
        return f"same ({point.value - 1:+.1%}, under the floor)"
    return decision


def _key_json(series: Series) -> JsonDict:
    k = series.key
    return {"id": series.id, "suite": k.suite, "case": k.case, "metric": k.metric, "kind": k.kind,
            "runner_class": k.runner_class, "model_hash": k.model_hash, "pipeline_hash": k.pipeline_hash,
            "backend": k.backend}


def _write_json(path: str | None, document: object) -> None:
    if path:
        from perfguard.atomic import write_json_atomic

        write_json_atomic(path, document)
        print(f"written to {path}")


def _check_json(path: str | None) -> None:
    if path:
        from perfguard.results import check_writable

        check_writable(path, "--json")


def run(args: argparse.Namespace) -> ExitCode:
    return {"ingest": _ingest, "list": _list, "show": _show, "changes": _changes, "prune": _prune,
            "site": _site, "notify": _notify, "alerts": _alerts, "triage": _triage}[args.action](args)


def _ingest(args: argparse.Namespace) -> ExitCode:
    from perfguard.errors import UserError
    from perfguard.results import read_json

    if args.format != "perfguard":
        return _ingest_foreign(args)
    if args.project:
        raise UserError("history ingest: --project names the suite of --format pytest-benchmark or asv files")

    from perfguard.store.extract import parse_stored

    # Every file is read and validated before the first write: a missing or broken one stores nothing.
    documents = []
    for path in args.files:
        data = read_json(Path(path), missing="{path}: file not found", not_json="{path}: not a JSON document ({exc})")
        documents.append((path, data, parse_stored(data, str(path))))
    with open_store(args.store, create=True) as store:
        for path, data, document in documents:
            done = store.ingest(document, source=str(path), as_read=data if isinstance(data, dict) else None)
            what = f"{done.points} point(s)" if done.new else "already stored"
            print(f"{path}: {done.kind} document {done.document_id}, {what}")
    return ExitCode.OK


def _ingest_foreign(args: argparse.Namespace) -> ExitCode:
    from perfguard.formats import read_files
    from perfguard.names import visible

    # Every file is read and validated before the first write: a bad one stores nothing.
    imported = read_files(args.format, args.files, project=args.project)
    with open_store(args.store, create=True) as store:
        for item in imported:
            done = store.ingest(item, source=str(item.path))
            what = f"{done.points} point(s)" if done.new else "already stored"
            print(f"{item.path}: {done.kind} document {done.document_id} ({visible(item.extracted.suite)}), {what}")
    return ExitCode.OK


def _list(args: argparse.Namespace) -> ExitCode:
    from perfguard.cli._text import LOG_TABLE_WIDTH, cli_console, print_title
    from perfguard.history.site_model import levels

    _check_json(getattr(args, "json", None))
    rows, out = [], []
    with open_store(args.store, create=False) as store:
        found = store.series(suite=args.suite, case=args.case, metric=args.metric, kind=args.kind)
        title = f"history in {store.url}: {len(found)} series"
        every = store.all_points(kind=args.kind)  # one query, not one per series
        for series in found:
            points = every.get(series.id, [])
            level = levels(series, points)
            change = trend(level)
            latest = level[-1] if level else math.nan
            rows.append((series, len(points), level, latest, change))
            out.append({**_key_json(series), "points": len(points), "latest": latest, "trend": change,
                        "first_time": series.first_time, "last_time": series.last_time})
    console = cli_console(min_width=130, log_width=LOG_TABLE_WIDTH)
    print_title(console, title)
    console.print(_list_table(console, rows))
    _write_json(args.json, {"series": out})
    return ExitCode.OK


#: The columns of ``history list``: what tells two series of one case and metric apart (the kind, in
#: the metric column; the runner's fingerprint; the pipeline's definition; when its nights were)
#: comes before the sparkline, which gets what room is left (none in a 120-column CI log).
LIST_COLUMNS = ("case", "metric", "runner", "pipeline", "nights first..last", "latest", "trend")


def _list_table(console: Console, rows: Sequence[tuple[Series, int, list[float], float, float | None]]) -> Table:
    """The series as one table: the metric says ``(ratio)`` for a ratio series, the runner its
    fingerprint's first 8 digits, the pipeline the first 8 of its definition's hash, nights the
    count and the UTC dates of the first and last. Every column but the case is as wide as its
    widest cell; the case gets the room left, up to its own width (at most 48: a folded case id
    reads as two cases), so no column is cut off at the console's width; the sparkline of the last
    nights comes last, where room is left after that."""
    from rich.table import Table
    from rich.text import Text

    from perfguard.cli._text import literal
    from perfguard.report.format import night_range

    body: list[tuple[list[Text | str], list[float]]] = []
    for series, nights, level, latest, change in rows:
        k = series.key
        body.append(([literal(k.case), literal(k.metric + (" (ratio)" if k.kind == "ratio" else "")),
                      literal(_short_runner(k.runner_class)), literal(k.pipeline_hash[:8]),
                      literal(f"{nights} {night_range(series.first_time, series.last_time)}"),
                      format_value(k.metric, k.kind, latest), "" if change is None else f"{change:+.1%}"], level))

    def width(index: int) -> int:
        return max([len(LIST_COLUMNS[index])] + [Text(str(cells[index])).cell_len for cells, _ in body])

    # A cell's padding and border are 3 columns; the table's first and last cells have no outer padding.
    room = console.width - 2 - sum(width(i) + 3 for i in range(1, len(LIST_COLUMNS)))
    case = max(16, min(width(0), 48, room))
    spark = min(24, room - case - 3)
    table = Table(caption=LIST_CAPTION, caption_justify="left", pad_edge=False)
    for column in LIST_COLUMNS + (("last nights",) if spark >= len("last nights") else ()):
        table.add_column(column, justify="right" if column in ("latest", "trend") else "left", overflow="fold",
                         min_width=case if column == "case" else None)
    for cells, level in body:
        table.add_row(*cells, *((sparkline(level, spark),) if spark >= len("last nights") else ()))
    return table


def _short_runner(runner_class: str) -> str:
    """``cpu:8b7c0876006612df`` (an absolute series' runner and fingerprint) as ``cpu:8b7c0876``."""
    name, _, fingerprint = runner_class.rpartition(":")
    if name and len(fingerprint) > 8 and all(c in "0123456789abcdef" for c in fingerprint):
        return f"{name}:{fingerprint[:8]}"
    return runner_class


def _show(args: argparse.Namespace) -> ExitCode:
    from rich.table import Table
    from rich.text import Text

    from perfguard.cli._text import LOG_TABLE_WIDTH, cli_console, literal, print_title
    from perfguard.errors import UserError
    from perfguard.history.series_changes import series_changes
    from perfguard.history.site_model import levels

    _check_json(args.json)
    console = cli_console(min_width=130, log_width=LOG_TABLE_WIDTH)
    out = []
    with open_store(args.store, create=False) as store:
        found = store.series(suite=args.suite, case=args.case, metric=args.metric, kind=args.kind)
        if not found:
            raise UserError(f"history show: no series of a case matching {args.case!r} in {store.url} "
                            "(`perfguard history list` shows what is there)")
        # Changes the nightly recorded (also those too early in a series for detection: a night the
        # check and its re-check decided), by series and the commit they appeared at; one query.
        recorded_by_series: dict[int, dict[str | None, Change]] = {}
        for c in store.changes(suite=args.suite):
            recorded_by_series.setdefault(c.series_id, {})[c.bad_commit] = c
        for series in found:
            points = store.points(series.id)
            level = levels(series, points)
            at = {c.index: c for c in series_changes(series, points)}
            recorded = recorded_by_series.get(series.id, {})
            k = series.key
            title = (f"{k.case} {k.metric} ({k.kind}, runner {k.runner_class}): "
                     f"{len(points)} night(s)")
            table = Table()
            columns = ["time", "commit", "level" if k.kind == "ratio" else "value"]
            columns += ["ratio", "interval", "decision"] if k.kind == "ratio" else ["workers"]
            columns.append("change point")
            for column in columns:
                table.add_column(column, overflow="fold")
            rows = []
            for i, (point, value) in enumerate(zip(points, level, strict=True)):
                cp = at.get(i)
                change = recorded.get(point.commit) if point.commit else None
                mark = f"{cp.direction} {cp.ratio - 1:+.1%}" if cp else ""
                if change is not None:
                    mark = (mark or f"{'regression' if change.ratio > 1 else 'improvement'} "
                                    f"{change.ratio - 1:+.1%}") + f" ({change.status}, change {change.id})"
                cells: list[Text | str] = [literal(point.time), literal((point.commit or "")[:10]),
                                           format_value(k.metric, k.kind, value)]
                if k.kind == "ratio":
                    interval = ("" if point.ci_low is None or point.ci_high is None
                                else f"[{point.ci_low - 1:+.1%}, {point.ci_high - 1:+.1%}]")
                    cells += [f"{point.value - 1:+.2%}", interval, literal(_decision_word(point))]
                else:
                    cells.append(str(len(point.values)))
                loud = (cp and cp.direction == "regression") or (change is not None and change.ratio > 1)
                table.add_row(*cells, literal(mark, "bold red" if loud else ""))
                rows.append({"time": point.time, "commit": point.commit, "base_commit": point.base_commit,
                             "value": point.value, "level": value, "ci_low": point.ci_low, "ci_high": point.ci_high,
                             "decision": point.decision, "values": list(point.values),
                             "change_point": None if cp is None else {"ratio": cp.ratio, "ci_low": cp.ci_low,
                                                                       "ci_high": cp.ci_high,
                                                                       "direction": cp.direction},
                             "change": None if change is None else {"id": change.id, "status": change.status,
                                                                    "ratio": change.ratio}})
            print_title(console, title)
            console.print(table)
            out.append({**_key_json(series), "points": rows})
    _write_json(args.json, {"series": out})
    return ExitCode.OK


def _changes(args: argparse.Namespace) -> ExitCode:
    from rich.table import Table

    from perfguard.cli._text import LOG_TABLE_WIDTH, cli_console, literal, print_title

    _check_json(args.json)
    with open_store(args.store, create=False) as store:
        found = store.changes(suite=args.suite) if not args.all else [
            c for status in ("pending", "confirmed", "closed") for c in store.changes(status=status, suite=args.suite)]
        every = store.alerts(suite=args.suite)
        shown = every if args.all else [a for a in every if a.is_open or any(c.alert_id == a.id for c in found)]
        console = cli_console(min_width=130, log_width=LOG_TABLE_WIDTH)
        if shown:
            print_alerts(console, f"alerts in {store.url}: {len(shown)}", shown)
        title = f"changes in {store.url}: {len(found)}"
        table = Table()
        for column in ("id", "alert", "status", "case", "metric", "kind", "change", "interval", "commits", "culprit",
                       "note"):
            table.add_column(column, overflow="fold")
        out = []
        for c in found:
            interval = "" if c.ci_low is None or c.ci_high is None else f"[{c.ci_low - 1:+.1%}, {c.ci_high - 1:+.1%}]"
            culprit = " ".join(x for x in ((c.culprit_commit or "")[:10], c.culprit_pass or "") if x)
            table.add_row(str(c.id), "" if c.alert_id is None else str(c.alert_id), literal(c.status),
                          literal(c.key.case), literal(c.key.metric),
                          literal(c.key.kind), f"{c.ratio - 1:+.1%}", interval,
                          literal(f"{(c.good_commit or '?')[:10]}..{(c.bad_commit or '?')[:10]}"), literal(culprit),
                          literal(c.note))
            out.append({"id": c.id, "status": c.status, "series": c.series_id, "case": c.key.case,
                        "metric": c.key.metric, "kind": c.key.kind, "suite": c.key.suite, "ratio": c.ratio,
                        "ci_low": c.ci_low, "ci_high": c.ci_high, "good_commit": c.good_commit,
                        "bad_commit": c.bad_commit, "time": c.time, "culprit_commit": c.culprit_commit,
                        "culprit_pass": c.culprit_pass, "bisect_document": c.bisect_document_id, "note": c.note,
                        "alert": c.alert_id})
    print_title(console, title)
    console.print(table)
    _write_json(args.json, {"alerts": [a.to_json() for a in shown], "changes": out})
    return ExitCode.OK


def print_alerts(console: Console, title: str, alerts: Sequence[Alert]) -> None:
    """One row per alert (commits, culprit); under the table, each alert's changes, the
    explanation's headline and who holds it, on lines of their own, so the table fits a CI log."""
    from rich.table import Table

    from perfguard.cli._text import literal, print_title, print_wrapped

    table = Table()
    for column in ("alert", "status", "kind", "suite/runner", "commits", "changes", "culprit"):
        table.add_column(column, overflow="fold", no_wrap=column == "commits")
    details = []
    for a in alerts:
        culprit = " ".join(x for x in ((a.culprit_commit or "")[:10], a.culprit_pass or "") if x)
        table.add_row(str(a.id), literal(a.status, "bold red" if a.is_open else ""), literal(a.kind),
                      literal(f"{a.suite}/{a.runner_class}" if a.runner_class else a.suite),
                      literal(f"{(a.first_commit or '?')[:10]}..{(a.last_commit or '?')[:10]}"),
                      str(len(a.changes)), literal(culprit))
        details.append((a.id, alert_details(a)))
    print_title(console, title)
    console.print(table)
    for alert_id, lines in details:
        if lines:
            console.print(literal(f"alert {alert_id}:"), highlight=False)
            for line in lines:
                print_wrapped(console, f"  {line}")


def alert_details(alert: Alert) -> list[str]:
    """An alert's lines under the table: one per change (the case whole), why, why counted, fixed
    by, assignee. Each name is escaped where it is printed, so a newline in a case id stays visible."""
    lines = [f"{c.case} {c.metric} ({c.kind}) {c.ratio - 1:+.1%}" for c in alert.changes]
    if alert.explanation is not None:
        lines.append(f"why: {alert.explanation.dimension}: {alert.explanation.headline}")
        if alert.explanation.counted is not None:  # why, counted: its headline
            from perfguard.report.counted_why import pair_view

            lines.append(pair_view(alert.explanation.counted).text_lines()[0])
    if alert.fixed_by:  # the commit (and pass) the nightly's bisection of the fixing range found
        lines.append(f"fixed by {alert.fixed_by}")
    if alert.assignee:
        lines.append(f"assignee: {alert.assignee}")
    return lines


def _alerts(args: argparse.Namespace) -> ExitCode:
    from perfguard.cli._text import LOG_TABLE_WIDTH, cli_console

    _check_json(args.json)
    with open_store(args.store, create=False) as store:
        found = store.alerts(suite=args.suite, status=args.status)
        title = f"alerts in {store.url}: {len(found)}" + (f" {args.status}" if args.status else "")
    print_alerts(cli_console(min_width=130, log_width=LOG_TABLE_WIDTH), title, found)
    _write_json(args.json, {"version": 1, "kind": "alerts", "alerts": [a.to_json() for a in found]})
    return ExitCode.OK


def _triage(args: argparse.Namespace) -> ExitCode:
    from perfguard.cli._actor import current_user
    from perfguard.errors import UserError
    from perfguard.names import visible
    from perfguard.store.alerts import check_alert_status

    if args.status is None and args.note is None and args.assign is None and args.issue is None:
        raise UserError("history triage: nothing to change; give --status, --note, --assign or --issue")
    alert_id = _alert_id(args.alert)
    if args.status is not None:
        check_alert_status(args.status)  # before the store is opened: a typo changes nothing
    with open_store(args.store, create=False) as store:
        before = store.alert(alert_id)
        after = store.triage(alert_id, status=args.status, note=args.note, assignee=args.assign,
                             issue_url=args.issue, who=current_user(args.by))
    moved = f"{before.status} -> {after.status}" if before.status != after.status else after.status
    # The issue URL may have come from GitHub's answer (notify records it): shown escaped, so no
    # control character or line-start "::" (a workflow command) reaches a terminal or a CI log.
    print(visible(f"alert {after.id}: {moved}" + (f", assigned to {after.assignee}" if after.assignee else "")
                  + (f", issue {after.issue_url}" if after.issue_url else "")))
    return ExitCode.OK


def _alert_id(text: str) -> int:
    """An alert id given on the command line: ASCII digits within SQL's 64-bit integers (``²`` is a
    digit to ``str.isdigit`` but not to ``int``; 2**63 overflows the store's column)."""
    from perfguard.errors import UserError
    from perfguard.jsonfields import MAX_COUNT

    digits = text.strip()
    if not (digits.isascii() and digits.isdigit()) or len(digits) > len(str(MAX_COUNT)) or int(digits) > MAX_COUNT:
        raise UserError(f"history triage: an alert id is a number from 0 to {MAX_COUNT} (`perfguard history alerts` "
                        f"lists them), found {text[:40]!r}")
    return int(digits)


def _prune(args: argparse.Namespace) -> ExitCode:
    from datetime import datetime, timedelta, timezone

    seconds = parse_age(args.keep)
    cutoff = (datetime.now(timezone.utc) - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with open_store(args.store, create=False) as store:
        counts = store.prune(cutoff)
    print(f"pruned {counts.get('documents', 0)} document(s) and {counts.get('points', 0)} point(s) older than "
          f"{cutoff}")
    return ExitCode.OK


def _site(args: argparse.Namespace) -> ExitCode:
    from perfguard.history.site import build_site
    from perfguard.results import check_writable

    check_writable(args.out, "--out", directory=True)
    with open_store(args.store, create=False) as store:
        done = build_site(store, args.out, suite=args.suite)
    n = done.counts
    print(f"history site: {n.series} series, {n.nights} night(s), {n.changes} change(s) ({n.open_changes} open), "
          f"{n.alerts} alert(s) ({n.open_alerts} open), {n.feed_entries} entr{'y' if n.feed_entries == 1 else 'ies'} "
          f"in feed.atom ({n.feed_alerts} alert(s), {n.feed_changes} regression(s) outside them); "
          f"open {done.out / 'index.html'}")
    return ExitCode.OK


def _notify(args: argparse.Namespace) -> ExitCode:
    import os

    from perfguard.cli._actor import current_user
    from perfguard.history.github import DEFAULT_API_URL, GitHub, PlannedGitHub
    from perfguard.history.notify import notify, parse_repo, summarise
    from perfguard.history.transport import check_url
    from perfguard.names import visible

    repo = parse_repo(args.repo)
    # Before the store is opened or anything is sent: a URL that cannot be used is bad input
    # (exit 2), named by its host only (a webhook's path is its secret).
    api_url = check_url(args.api_url, "--api-url") if args.api_url is not None else DEFAULT_API_URL
    webhook = check_url(args.webhook, "--webhook") if args.webhook else None
    _check_json(args.plan)
    token = os.environ.get("GITHUB_TOKEN", "").strip()
    with open_store(args.store, create=False) as store:
        if not token:  # never fails the night: a workflow without the token still succeeds
            print("warning: notify: $GITHUB_TOKEN is not set; nothing posted")
            return ExitCode.OK
        github = (PlannedGitHub if args.plan else GitHub)(repo, token, api_url=api_url)
        # Lines hold GitHub's answers (issue URLs, error messages): escaped, so no control character
        # or line-start "::" (a GitHub Actions workflow command) reaches a terminal or a CI log.
        outcome = notify(store, github, who=current_user(), site_url=args.site_url, webhook=webhook,
                         suite=args.suite, say=lambda line: print(visible(github.safe(line))))
    print(summarise(outcome))
    if isinstance(github, PlannedGitHub):
        _write_json(args.plan, github.plan())
    return ExitCode.OK
