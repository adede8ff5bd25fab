"""Alerts on the history site (issue 25, item 6): the index and the feed lead with the alerts, a
page per alert, the team's figures on the alerts page, past alerts on series pages.

The store is the site test's (:func:`tests.test_history_site.build_store`: 20 real verdicts
documents, hostile case names, stored changes, the golden bisection), and alerts raised and
triaged on it through the Store API under a fake clock (the store's ``utc_now``), so every
figure is known exactly. Seven alerts, created oldest first:

====  ===========  ==========  =============================================================
name  created      kind        its life
====  ===========  ==========  =============================================================
G     10-01 00:00  regression  invalid at 01:00 (outside the 30-day window of the median)
B     12-01 00:00  improvement never untriaged
A     12-01 00:00  regression  investigating at 06:00 (6 h), assigned to a hostile name
C     12-02 00:00  regression  invalid at 12-03 00:00 (24 h), a hostile note
D     12-03 00:00  regression  acknowledged at 02:00 (2 h), wont-fix two days later, an https issue,
                               bisected with an explanation
E     12-04 00:00  regression  untriaged, a ``javascript:`` issue URL (never a link)
F     12-05 00:00  broken      fixed by the nightly at 12-06 00:00 (24 h), with the fixing range
====  ===========  ==========  =============================================================

The site is built at 12-10 12:00: median time to triage over A, C, D, F = median(6, 24, 2, 24 h)
= 15 h; false alarms = invalid / closed = 2 / 4 (C, G of C, D, F, G).
"""

from __future__ import annotations

import dataclasses
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from perfguard.history.site import build_site, render
from perfguard.history.site_alerts import span, team_figures, time_to_triage
from perfguard.history.site_model import Site, collect
from perfguard.store import Store, schema
from perfguard.store.alert_rows import Alert, AlertEvent

from .test_history_site import HOSTILE_MODEL, NEW_CPU_FROM, STEP, SUITE, build_store, commit_of
from .test_report import Chromium, _chromium

NOW = datetime(2026, 12, 10, 12, 0, tzinfo=timezone.utc)
HOSTILE_WHO = "[bold]ada[/bold] <script>alert('who')</script>"
HOSTILE_NOTE = "<script>alert(4)</script> noisy [bold]runner[/bold] & more"
HOSTILE_PASS = "mycc.passes:<b>fold</b>"
BAD_URL = "javascript:alert(5)"
ISSUE = "https://github.com/o/r/issues/7?a=1&b=2"
BROKEN, FIXED = "f" * 40, "9" * 40
EXPLAINED = Path(__file__).parent / "golden" / "explained" / "bisect-passes-pipelines-explain.json"


@dataclass
class Alerts:
    url: str
    ids: dict[str, int]  # G, B, A, C, D, E, F -> alert id
    series: dict[str, int]  # the series some alert's change is in


def _at(monkeypatch: pytest.MonkeyPatch, stamp: str) -> None:
    """The store's clock reads ``stamp`` (``MM-DDTHH:MM`` of 2026)."""
    monkeypatch.setattr(schema, "utc_now", lambda: f"2026-{stamp}:00.000000Z")


def _fill(url: str) -> Alerts:
    with Store.open(url, create=False) as store, pytest.MonkeyPatch.context() as clock:
        ratio = [s for s in store.series(kind="ratio")]
        stepped = next(s for s in ratio if s.key.case.endswith("/bn_fused_folded/cpu"))
        other = next(s for s in ratio if s.key.case != stepped.key.case)  # has changes at nights 2, 5, 8
        third = next(s for s in ratio if s.id not in (stepped.id, other.id))
        nodes = [s for s in store.series(kind="absolute", metric="node_count") if s.points == NEW_CPU_FROM][:2]

        def change(series_id: int, night: int, ratio: float) -> int:
            return store.upsert_change(series_id, good_commit=commit_of(night - 1), bad_commit=commit_of(night),
                                       time=f"2026-03-{night + 1:02d}T03:00:00.000000Z", ratio=ratio,
                                       ci_low=ratio - 0.02, ci_high=ratio + 0.02, status="confirmed").id

        def raised(stamp: str) -> dict[str, Alert]:
            _at(clock, stamp)
            return {a.last_commit or "": a for a in store.raise_alerts(SUITE)}

        ids = {}
        first = raised("12-01T00:00")  # build_store's confirmed changes: the step (2 changes), an improvement
        ids["A"], ids["B"] = first[commit_of(STEP)].id, first[commit_of(8)].id
        change(third.id, 18, 1.05)  # raised later, dated earlier: the clock says when
        ids["G"] = raised("10-01T00:00")[commit_of(18)].id
        _at(clock, "10-01T01:00")
        store.triage(ids["G"], status="invalid", note="a noisy runner", who="bob")
        _at(clock, "12-01T06:00")
        store.triage(ids["A"], status="investigating", assignee=HOSTILE_WHO, who="bob")
        for series in nodes:
            change(series.id, 14, 1.5)
        ids["C"] = raised("12-02T00:00")[commit_of(14)].id
        _at(clock, "12-03T00:00")
        store.triage(ids["C"], status="invalid", note=HOSTILE_NOTE, who=HOSTILE_WHO)
        explained = store.ingest_json(json.loads(EXPLAINED.read_text()), source="explained").document_id
        store.link_bisect(change(third.id, 15, 1.1), explained, "e" * 40, HOSTILE_PASS)
        ids["D"] = raised("12-03T00:00")[commit_of(15)].id
        _at(clock, "12-03T02:00")
        store.triage(ids["D"], status="acknowledged", who="carol")
        _at(clock, "12-05T04:00")
        store.triage(ids["D"], status="wont-fix", note="the new layout is worth it", issue_url=ISSUE, who="carol")
        change(other.id, 17, 1.07)
        ids["E"] = raised("12-04T00:00")[commit_of(17)].id
        store.triage(ids["E"], issue_url=BAD_URL, who="bob")
        _at(clock, "12-05T00:00")
        ids["F"] = store.raise_broken(SUITE, commit_of(19), BROKEN, "ImportError: <b>half-merged</b>").id
        _at(clock, "12-06T00:00")
        store.fix_broken(SUITE, BROKEN, FIXED)
        return Alerts(url, ids, {"stepped": stepped.id, "other": other.id, "third": third.id})


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Alerts, Site, Path]]:
    folder = tmp_path_factory.mktemp("site-alerts")
    built = build_store(folder, hostile=True)
    alerts = _fill(built.url)
    with Store.open(built.url, create=False) as store:
        site = collect(store, now=NOW)
        build_site(store, folder / "out", now=NOW)
    yield alerts, site, folder / "out"


def _read(out: Path, name: str) -> str:
    return (out / name).read_text(encoding="utf-8")


# --- the figures ------------------------------------------------------------------------------------

def test_the_team_figures_are_computed_exactly(filled: tuple[Alerts, Site, Path]) -> None:
    alerts, site, _ = filled
    ids = alerts.ids
    by_id = {a.id: a for a in site.alerts}
    assert [a.id for a in site.alerts] == [ids[n] for n in "GBACDEF"]  # oldest first
    assert {n: by_id[ids[n]].alert.status for n in ids} == {
        "G": "invalid", "B": "improvement", "A": "investigating", "C": "invalid", "D": "wont-fix",
        "E": "untriaged", "F": "fixed"}
    hours = {n: by_id[ids[n]].time_to_triage for n in ids}
    assert hours == {"G": 3600.0, "B": None, "A": 6 * 3600.0, "C": 24 * 3600.0, "D": 2 * 3600.0, "E": None,
                     "F": 24 * 3600.0}
    f = site.figures
    assert f.now == "2026-12-10T12:00:00.000000Z" and f.window_days == 30
    assert f.triage_times == (6 * 3600.0, 24 * 3600.0, 2 * 3600.0, 24 * 3600.0)  # A, C, D, F: not G (October)
    assert f.median_time_to_triage == 15 * 3600.0 and span(f.median_time_to_triage) == "15.0 h"
    assert f.by_status == (("untriaged", 1), ("investigating", 1), ("fixed", 1), ("wont-fix", 1), ("invalid", 2),
                           ("improvement", 1))
    assert (f.closed, f.invalid, f.false_alarm_rate, f.total) == (4, 2, 0.5, 7)
    # open, the longest waiting first, with their ages at the build
    assert [(a.id, a.age_days) for a in site.open_alerts] == [(ids["A"], 9.5), (ids["E"], 6.5)]
    assert by_id[ids["A"]].alert.assignee == HOSTILE_WHO


def test_time_to_triage_counts_the_first_move_out_of_untriaged_only() -> None:
    def alert(*events: AlertEvent, status: str = "acknowledged") -> Alert:
        return Alert(1, "s", "cpu", "regression", status, "a", "b", created_at="2026-12-01T00:00:00.000000Z",
                     events=events)

    raised = AlertEvent("perfguard nightly", "2026-12-01T00:00:00.000000Z", None, "untriaged")
    still = AlertEvent("perfguard nightly", "2026-12-01T05:00:00.000000Z", "untriaged", "untriaged", "still broken")
    moved = AlertEvent("ada", "2026-12-01T07:30:00.000000Z", "untriaged", "acknowledged")
    later = AlertEvent("ada", "2026-12-02T07:30:00.000000Z", "acknowledged", "invalid")
    assert time_to_triage(alert(raised, still, moved, later)) == 7.5 * 3600
    assert time_to_triage(alert(raised, still, status="untriaged")) is None
    empty = team_figures([], NOW)
    assert (empty.median_time_to_triage, empty.false_alarm_rate, empty.by_status, empty.total) == (None, None, (), 0)
    assert span(None) == "no data" and span(1800) == "30 min" and span(3 * 86400) == "3.0 days"
    old = alert(raised, moved)  # created 9.5 days before NOW: inside 30 days, outside 7
    assert team_figures([old], NOW).triage_times == (7.5 * 3600,)
    assert team_figures([old], NOW, window_days=7).triage_times == ()


# --- the pages --------------------------------------------------------------------------------------

def test_the_index_shows_the_open_alerts_first_one_row_each(filled: tuple[Alerts, Site, Path]) -> None:
    alerts, _, out = filled
    ids = alerts.ids
    index = _read(out, "index.html")
    assert index.index('id="alerts"') < index.index('id="changes"') < index.index('id="series"')
    section = index[index.index('id="alerts"'):index.index('id="changes"')]
    rows = re.findall(r'<tr class="alert-row state-(\w+)" data-alert="(\d+)" data-status="([\w-]+)">', section)
    assert rows == [("regression", str(ids["A"]), "investigating"), ("regression", str(ids["E"]), "untriaged")]
    row_a = section[section.index(f'data-alert="{ids["A"]}"'):section.index(f'data-alert="{ids["E"]}"')]
    assert "&lt;script&gt;alert(&#39;who&#39;)&lt;/script&gt;" in row_a and "[bold]ada[/bold]" in row_a
    assert "9.5 days" in row_a and "+20.0%" in row_a and "2 changes" in row_a
    assert f"{commit_of(STEP - 1)[:10]}..<wbr>{commit_of(STEP)[:10]}" in row_a  # a line may break after ".."
    assert "&lt;script&gt;alert(1)&lt;/script&gt;/bn_fused_folded/cpu" in row_a  # the case, as text
    assert f'<a href="alert-{ids["A"]}.html">alert {ids["A"]}</a>' in row_a
    # the changes inside open alerts are not listed again; the improvement's change links to its alert
    changes = index[index.index('id="changes"'):index.index('id="series"')]
    assert "+20.0%" not in changes and f'<a href="alert-{ids["B"]}.html">alert {ids["B"]}</a>' in changes
    assert "2 open alerts" in index


def test_the_header_the_index_the_feed_and_the_command_count_alike(filled: tuple[Alerts, Site, Path]) -> None:
    """One source of counts: the header's open changes are the ones in open alerts plus the ones the
    changes section lists; the feed holds as many entries as the counts (and the command) say."""
    _, site, out = filled
    counts = site.counts
    index = _read(out, "index.html")
    assert counts.open_changes > counts.loose_changes  # some open changes sit inside the open alerts
    assert (f"{counts.open_changes} open change{'s' if counts.open_changes != 1 else ''} "
            f"({counts.changes_in_open_alerts} in open alerts)") in index
    changes = index[index.index('id="changes"'):index.index('id="series"')]
    assert len(re.findall(r"<tr[ >]", changes)) - 1 == counts.loose_changes  # rows less the heading row
    assert f"{counts.loose_regressions} open regression" in changes and "no open change" not in changes
    feed = _read(out, "feed.atom")
    assert feed.count("<entry>") == counts.feed_entries == counts.feed_alerts + counts.feed_changes
    assert counts.feed_alerts == len(site.feed_alerts) and counts.feed_changes == len(site.feed_changes)


def test_the_changes_section_says_where_the_open_changes_are_when_all_sit_in_alerts(
        filled: tuple[Alerts, Site, Path]) -> None:
    """Every open change inside an open alert (the night of one culprit): the header counts them and
    the changes section says they are listed with their alert, not "no open regression"."""
    _, site, _ = filled
    inside = [c for c in site.changes if c.change.status == "closed" or (c.alert is not None and c.alert.alert.is_open)]
    only = dataclasses.replace(site, changes=inside)
    assert only.counts.loose_changes == 0 and only.counts.open_changes > 0
    index = render(only)["index.html"]
    changes = index[index.index('id="changes"'):index.index('id="series"')]
    n = only.counts.open_changes
    assert f"{n} open changes ({n} in open alerts)" in index
    assert "no open change outside the open alerts" in changes and f"the {n} open changes are listed" in changes
    assert "no open regression" not in index


def test_the_alerts_page_shows_the_figures_and_every_alert(filled: tuple[Alerts, Site, Path]) -> None:
    alerts, _, out = filled
    html = _read(out, "alerts.html")
    assert re.search(r'id="figure-triage">.*?<div class="n">15.0 h</div>.*?over 4 alerts created in the last 30 days',
                     html, re.S)
    assert re.search(r'id="figure-false-alarms">.*?<div class="n">50.0%</div>.*?2 invalid of 4 closed alerts', html,
                     re.S)
    by_age = html[html.index('id="open-by-age"'):html.index('id="by-status"')]
    assert re.findall(r'data-alert="(\d+)"', by_age) == [str(alerts.ids["A"]), str(alerts.ids["E"])]
    assert "9.5 days" in by_age and "6.5 days" in by_age and "investigating" in by_age and "nobody" in by_age
    statuses = re.findall(r'<tr data-status="([\w-]+)"><td><span class="alert-status [\w-]+">[\w-]+</span></td>'
                          r'<td class="num">(\d+)</td>', html)
    # final statuses only: the open ones (untriaged, investigating) are counted by age above
    assert statuses == [("fixed", "1"), ("wont-fix", "1"), ("invalid", "2")]
    assert '<tfoot><tr><td>all closed</td><td class="num">4</td></tr></tfoot>' in html
    every = html[html.index('id="every-alert"'):]
    assert re.findall(r'data-alert="(\d+)"', every) == [str(alerts.ids[n]) for n in "FEDCABG"]  # newest first


def test_an_alert_page_shows_changes_culprit_explanation_history_issue_and_fix(
        filled: tuple[Alerts, Site, Path]) -> None:
    alerts, site, out = filled
    ids = alerts.ids
    for view in site.alerts:
        assert (out / f"alert-{view.id}.html").exists()
    a = _read(out, f"alert-{ids['A']}.html")
    assert a.count('<tr class="state-regression">') == 2  # its two latency changes: ratio and absolute
    assert re.search(r"1\.0\d{3} → 1\.2\d{3}", a)  # the ratio series' chained index before -> after
    assert re.search(r"\d+(\.\d+)? [mu]?s → \d+(\.\d+)? [mu]?s", a)  # the absolute latency before -> after
    assert a.count(f'<a href="series/{alerts.series["stepped"]}.html">') == 1
    assert "[bold]ada[/bold] &lt;script&gt;" in a and "No explanation: the culprit's bisection" in a
    # the culprit's subject and author, as the alert recorded them from its bisection
    assert '<span class="subject">commit 5</span> <span class="dim">by Test Author &lt;author@example.com&gt;</span>' in a
    assert re.search(r'<td class="who">bob</td><td><span class="alert-status untriaged">untriaged</span></td>'
                     r'<td><span class="alert-status investigating">investigating</span></td>', a)
    d = _read(out, f"alert-{ids['D']}.html")
    assert '<a class="issue" href="https://github.com/o/r/issues/7?a=1&amp;b=2" rel="noreferrer">' in d
    assert "mycc.passes:&lt;b&gt;fold&lt;/b&gt;" in d and "<code>eeeeeeeeee</code>" in d
    assert "<dd>memory</dd>" in d and "+285 us in Transpose, +24 nodes: memory" in d
    assert '<td class="mono">Transpose</td><td class="num">0</td><td class="num">24</td><td class="num">+24</td>' in d
    assert [w for w in re.findall(r'<td class="who">([^<]*)</td>', d)] == ["perfguard nightly", "carol", "carol"]
    assert "the new layout is worth it" in d and "2026-12-05 04:00:00 UTC" in d
    e = _read(out, f"alert-{ids['E']}.html")
    assert 'href="javascript' not in e and '<span class="issue-text">javascript:alert(5)</span>' in e
    c = _read(out, f"alert-{ids['C']}.html")
    assert "&lt;script&gt;alert(4)&lt;/script&gt; noisy [bold]runner[/bold] &amp; more" in c
    assert re.search(r"\d+ → \d+", c)  # node counts before -> after
    f = _read(out, f"alert-{ids['F']}.html")
    assert f'<dd class="fix-range"><code>{BROKEN[:10]}</code> .. <code>{FIXED[:10]}</code></dd>' in f
    assert "No measured change: the compiler did not build" in f and "&lt;b&gt;half-merged" in f


def test_series_and_change_pages_link_to_their_alerts(filled: tuple[Alerts, Site, Path]) -> None:
    alerts, site, out = filled
    ids = alerts.ids
    other = _read(out, f"series/{alerts.series['other']}.html")
    section = other[other.index('<section id="alerts">'):]
    section = section[:section.index("</section>")]
    assert re.findall(r'<a href="../alert-(\d+).html">', section) == [str(ids["B"]), str(ids["E"])]
    step = next(c for c in site.changes if c.alert is not None and c.alert.id == ids["A"])
    page = _read(out, step.href)
    assert f'<a class="alert-link" href="../alert-{ids["A"]}.html">alert {ids["A"]}</a>' in page
    loose = next(c for c in site.changes if c.alert is None)
    assert "<dt>alert</dt>" not in _read(out, loose.href) and "<dt>alert</dt>" in page


def test_the_feed_lists_the_alerts_first_with_their_changes_inside(filled: tuple[Alerts, Site, Path]) -> None:
    alerts, _, out = filled
    atom = "{http://www.w3.org/2005/Atom}"
    root = ET.fromstring((out / "feed.atom").read_bytes())
    entries = root.findall(f"{atom}entry")
    links = [e.find(f"{atom}link").get("href") for e in entries]  # type: ignore[union-attr]
    # every regression and broken alert (not the improvement), most recently changed first; the
    # confirmed regressions are all inside them
    assert links == [f"alert-{alerts.ids[n]}.html" for n in "FDECAG"]
    assert root.findtext(f"{atom}updated") == entries[0].findtext(f"{atom}updated") == "2026-12-06T00:00:00.000000Z"
    a = entries[links.index(f"alert-{alerts.ids['A']}.html")]
    summary = a.findtext(f"{atom}summary") or ""
    assert summary.count(f"{HOSTILE_MODEL}/bn_fused_folded/cpu latency") == 2 and "investigating" in summary
    assert "[bold]ada[/bold]" in summary  # the XML carries the names as text, escaped
    assert len({e.findtext(f"{atom}id") for e in entries}) == len(entries)
    assert "<script>" not in (out / "feed.atom").read_text()


def test_every_page_escapes_the_hostile_names_and_keeps_its_policy(filled: tuple[Alerts, Site, Path]) -> None:
    _, _, out = filled
    pages = {str(p.relative_to(out)): p.read_text(encoding="utf-8") for p in sorted(out.rglob("*.html"))}
    for name, html in {**pages, "feed.atom": _read(out, "feed.atom")}.items():
        assert "<script>alert" not in html and "<b>fold" not in html and "<b>half" not in html, name
        assert len(re.findall(r"<script>", html)) == (1 if name == "index.html" else 0), name
    for name in ("alerts.html", *(n for n in pages if n.startswith("alert-"))):
        assert "script-src 'none'" in pages[name], name
    broken = [f"{name}: {href}" for name, html in pages.items() for href in re.findall(r'href="([^"]*)"', html)
              if not href.startswith("https://") and href.split("#")[0]
              and not (out / name).parent.joinpath(href.split("#")[0]).exists()]
    assert broken == []


def test_an_empty_history_says_no_data(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        store.ingest_file(Path(__file__).parent / "golden" / "v1" / "result-run.json")
        files = render(collect(store, now=NOW))
    html = files["alerts.html"]
    assert html.count("no data") == 5 and "no alert is open" in html
    assert "no open alert" in files["index.html"] and not [n for n in files if n.startswith("alert-")]


# --- a real browser ---------------------------------------------------------------------------------

@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chromium]:
    chromium = Chromium(_chromium(), tmp_path / "profile")
    yield chromium
    chromium.close()


def test_the_alert_pages_in_headless_chromium(browser: Chromium, filled: tuple[Alerts, Site, Path]) -> None:
    alerts, _, out = filled
    ids = alerts.ids
    index = (out / "index.html").resolve().as_uri()
    browser.open_page(index)
    assert browser.problems(index) == []  # nothing fetched, nothing blocked by the policy, no error
    dom = browser.evaluate("""(() => {
        const rows = Array.from(document.querySelectorAll('#alerts tr.alert-row'));
        return {rows: rows.map(r => r.dataset.alert), text: rows.map(r => r.innerText),
                links: rows.map(r => r.querySelector('a').href.split('/').pop()),
                scripts: document.scripts.length,
                first: document.querySelector('main section').id}; })()""")
    assert dom["rows"] == [str(ids["A"]), str(ids["E"])] and dom["first"] == "alerts"
    assert dom["links"] == [f"alert-{ids['A']}.html", f"alert-{ids['E']}.html"] and dom["scripts"] == 1
    assert HOSTILE_WHO in dom["text"][0] and HOSTILE_MODEL in dom["text"][0]  # shown as text, not run

    page = (out / "alerts.html").resolve().as_uri()
    browser.open_page(page)
    assert browser.problems(page) == []
    dom = browser.evaluate("""(() => ({
        triage: document.querySelector('#figure-triage .n').innerText,
        falseAlarms: document.querySelector('#figure-false-alarms .n').innerText,
        open: document.querySelector('#figure-open .n').innerText,
        byAge: Array.from(document.querySelectorAll('table.by-age tbody tr')).map(r => r.innerText),
        statuses: Array.from(document.querySelectorAll('table.by-status tbody tr')).map(r => r.innerText),
        every: Array.from(document.querySelectorAll('#every-alert tr.alert-row a')).map(a => a.href.split('/').pop()),
        scripts: document.scripts.length }))()""")
    assert (dom["triage"], dom["falseAlarms"], dom["open"], dom["scripts"]) == ("15.0 h", "50.0%", "2", 0)
    assert "9.5 days" in dom["byAge"][0] and HOSTILE_WHO in dom["byAge"][0] and "untriaged" in dom["byAge"][1]
    # final statuses only: an untriaged, investigating or improvement alert has not ended
    assert [s.split() for s in dom["statuses"]] == [["fixed", "1"], ["wont-fix", "1"], ["invalid", "2"]]
    assert dom["every"] == [f"alert-{ids[n]}.html" for n in "FEDCABG"]

    alert = (out / f"alert-{ids['C']}.html").resolve().as_uri()
    browser.open_page(alert)
    assert browser.problems(alert) == []
    notes = browser.evaluate("document.querySelector('dd.notes').innerText")
    assert notes == HOSTILE_NOTE
