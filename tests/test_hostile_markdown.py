"""Names from users are data in every Markdown and HTML output (issue 23, item 1).

One hostile name (a table pipe, newlines, a fake table row, backticks, ``<script>``, a
``javascript:`` link, a mention, issue references, emphasis, an autolink, a right-to-left override
and a terminal escape) goes, as a case name, a commit subject, a pass name, a reason and a note,
through the report (job summary, pull-request comment, annotations, HTML), the nightly summaries
and the history site. The Markdown is rendered by a real CommonMark renderer with GitHub's tables
(markdown-it-py, HTML passed through as GitHub does) and read back as HTML: the tables keep their
rows and columns, the name comes back as the same text (whitespace collapsed, hidden characters
shown as escapes, GitHub's link triggers broken by a zero-width space) and formats nothing. The
HTML pages and their SVG parse, and show the name as it is.
"""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from perfguard.bisect.document import bisect_from_json
from perfguard.flows.nightly.night import Finding, NightReport
from perfguard.history.site import build_site
from perfguard.names import visible
from perfguard.report.escape import html_value, md_code, md_text
from perfguard.report.html import render_html
from perfguard.report.markdown import job_summary, pr_comment, workflow_annotations
from perfguard.report.nightly import bisections_summary, markdown_summary
from perfguard.store import Change, Night, Series, Store
from perfguard.store.alert_rows import Alert, AlertExplanation, NodeChange, alert_change
from perfguard.store.extract import SeriesKey

from .conftest import run_cli
from .test_report import HOSTILE_MODEL, _entry, build_report, make_result, make_verdicts

GOLDEN = Path(__file__).parent / "golden"
NAME = ("a|b\n| x | y |\nc\\|d `e` ``f`` <script>alert(1)</script> [x](javascript:alert(1)) @team #123 "
        "GH-7 *b* _i_ ~~s~~ www.evil.example \u202eevil\x1b[31m")
PASS = "fold``it`"  # backticks, no pipe: shown as a code span
ZWSP = "\u200b"
# What GitHub would turn into a mention, an issue link or an autolink if nothing broke it.
TRIGGERS = ("@team", "#123", "GH-7", "www.evil")


def shown(text: str) -> str:
    """How a name reads in Markdown: one line, hidden characters as escapes."""
    return visible(" ".join(text.split()))


def as_html(text: str) -> str:
    """How a name reads in HTML: character for character, hidden characters but newlines as escapes."""
    return visible(text, keep_newlines=True)


# --- reading rendered Markdown and HTML back ------------------------------------------------------

class Page(HTMLParser):
    """The parts of an HTML page these tests look at: every start tag, the tables (rows of cells,
    each its text and the tags inside it) and the list items (text and tags)."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.tables: list[list[list[tuple[str, list[str]]]]] = []
        self.items: list[tuple[str, list[str]]] = []
        self.texts: list[str] = []
        self._open: list[tuple[str, list[str], list[str]]] = []  # cells and items being read
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        for _, _, inner in self._open:
            inner.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th", "li"):
            self._open.append((tag, [], []))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th", "li") and self._open and self._open[-1][0] == tag:
            _, text, inner = self._open.pop()
            part = ("".join(text), inner)
            if tag == "li":
                self.items.append(part)
            else:
                self.tables[-1][-1].append(part)

    def handle_data(self, data: str) -> None:
        self.texts.append(data)
        for _, text, _ in self._open:
            text.append(data)


def render_markdown(text: str) -> Page:
    """``text`` rendered as GitHub would lay it out (CommonMark, tables, strikethrough, raw HTML
    passed through), read back."""
    return Page(MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(text))


def plain(text: str) -> str:
    return text.replace(ZWSP, "")


def assert_inert(markdown: str, page: Page) -> None:
    """Nothing in ``markdown`` became HTML, a link, a mention, a reference or a hidden character."""
    assert not [t for t, _ in page.tags if t in ("script", "a", "img", "em", "del")], page.tags
    assert "\x1b" not in markdown and "\u202e" not in markdown
    text = "".join(page.texts)
    assert not [t for t in TRIGGERS if t in text], text


def assert_shape(table: list[list[tuple[str, list[str]]]], columns: int, rows: int) -> None:
    """A header and ``rows`` body rows, every one ``columns`` cells wide."""
    assert [len(row) for row in table] == [columns] * (1 + rows), [[c for c, _ in row] for row in table]


def cells_showing(table: list[list[tuple[str, list[str]]]], expected: str) -> list[list[str]]:
    """The tags inside each cell whose text reads ``expected``."""
    return [tags for row in table for text, tags in row if plain(text) == expected]


# --- documents with the hostile name --------------------------------------------------------------

def hostile_verdicts() -> dict[str, Any]:
    """The report tests' check (a regression, an undecided and a failed case...) with the hostile
    name as its model, its base commit's subject, the failed case's reason and a warning."""
    text = json.dumps(make_verdicts()).replace(json.dumps(HOSTILE_MODEL)[1:-1], json.dumps(NAME)[1:-1])
    document = json.loads(text)
    document["mode"]["base_subject"] = NAME
    broken = next(v for v in document["verdicts"] if v["decision"] == "failed")
    broken["comparison"]["reason"] = NAME
    document["warnings"].append(NAME)
    return document


def hostile_bisect() -> dict[str, Any]:
    bisect = json.loads((GOLDEN / "bisect-example.json").read_text())
    bisect["case"] = NAME
    bisect["culprits"][0]["commit"]["subject"] = NAME
    bisect["culprits"][0]["pass"]["name"] = PASS
    return bisect


LABEL = f"{NAME}/fast|`x`"  # model/pipeline of the hostile case, as the report labels it


# --- the report: Markdown ------------------------------------------------------------------------

def test_job_summary_keeps_its_table_shape_and_shows_the_name_literally():
    markdown = job_summary(build_report([hostile_verdicts(), hostile_bisect()]))
    page = render_markdown(markdown)
    assert_inert(markdown, page)
    (table,) = page.tables
    assert_shape(table, columns=10, rows=6)  # every latency row and every row that is not "same"
    assert cells_showing(table, shown(LABEL)) == [[], [], []]  # latency, node count, compile time
    culprit = next((text, tags) for text, tags in page.items if text.startswith("commit "))
    assert shown(NAME) in plain(culprit[0]) and PASS in culprit[0]
    assert set(culprit[1]) == {"code", "strong"}  # the commit, the pass and the effect, nothing from the name
    assert f"⚠️ {shown(NAME)}" in plain("".join(page.texts)).splitlines()


def test_pr_comment_keeps_its_table_shape_and_shows_the_name_literally():
    markdown = pr_comment(build_report([hostile_verdicts()]))
    page = render_markdown(markdown)
    assert_inert(markdown, page)
    (table,) = page.tables
    assert_shape(table, columns=5, rows=3)  # the failed case and the two regressions
    assert cells_showing(table, shown(f"{LABEL}/cpu")) == [[], []]  # the comment names the whole case
    failed = [(plain(text), tags) for text, tags in page.items if text.startswith("resnet_t/broken")]
    assert failed == [(f"resnet_t/broken/cpu: {shown(NAME)}", [])]


def test_run_summary_keeps_one_row_per_case_and_cuts_a_long_error_cleanly():
    error = ("x" * 195 + "|" * 10 + "<script>") * 3  # the cut falls inside a run of escaped pipes
    result = make_result("base", "1" * 40, [_entry(NAME, "p", 1e-3, 3, []),
                                            _entry("bad", "p", None, 3, [], error={"stage": "compile",
                                                                                     "message": error})])
    markdown = job_summary(build_report([result]))
    page = render_markdown(markdown)
    assert_inert(markdown, page)
    (table,) = page.tables
    assert_shape(table, columns=8, rows=2)
    assert cells_showing(table, shown(f"{NAME}/p/cpu")) == [[]]
    cut = table[2][2][0]
    assert cut.startswith("compile: xxx") and cut.endswith("…") and len(cut) <= 200


def test_annotations_stay_one_command_per_line_and_decode_to_the_name():
    lines = workflow_annotations(build_report([hostile_verdicts()]))
    assert len(lines) == 4 and all(line.startswith(("::error title=", "::warning title=")) for line in lines)
    assert not [line for line in lines if set(line) & {"\n", "\r", "\x1b", "\u202e"}]
    hostile = [line for line in lines if "::a|b%0A" in line]
    assert len(hostile) == 3  # the two regressions and the undecided compile time of the hostile case
    for line in hostile:
        message = line.split("::", 2)[2]
        decoded = message.replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")
        assert decoded.startswith(f"{visible(NAME, keep_newlines=True)}/fast|`x`/cpu: ")


def test_code_spans_take_a_fence_longer_than_any_backtick_run():
    for value in ("plain", "a`b", "``double``", "`edge", "tail`", "<script>@team #1", "x | y"):
        page = render_markdown(f"see {md_code(value)} here\n")
        codes = [t for t, _ in page.tags if t == "code"]
        text = "".join(page.texts)
        if "|" in value:  # a pipe would split a table cell even in a code span: plain text instead
            assert not codes and plain(text) == f"see {value} here\n"
        else:
            assert codes == ["code"] and text == f"see {value} here\n", (value, text)
    assert md_text("- item") == "\\- item" and md_text("1. one") == "1\\. one"  # no list starts inside an item


def test_report_command_writes_every_output_of_hostile_documents(tmp_path):
    """``perfguard report`` as a user runs it: exit 0, the files the functions above make, one
    workflow command per stdout line."""
    (tmp_path / "verdicts.json").write_text(json.dumps(hostile_verdicts()))
    (tmp_path / "bisect.json").write_text(json.dumps(hostile_bisect()))
    proc = run_cli("report", "verdicts.json", "bisect.json", "--out", "report", "--annotations", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    commands = [line for line in proc.stdout.splitlines() if line.startswith("::")]
    assert len(commands) == 4 and all(line.startswith(("::error title=", "::warning title=")) for line in commands)
    assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout
    report = tmp_path / "report"
    for name in ("summary.md", "comment.md"):
        markdown = (report / name).read_text(encoding="utf-8")
        assert_inert(markdown, render_markdown(markdown))
    assert as_html(NAME) in Page((report / "index.html").read_text(encoding="utf-8")).texts

# --- the nightly summaries -------------------------------------------------------------------------

def _change(change_id: int, key: SeriesKey, status: str, ratio: float = 1.2) -> Change:
    return Change(change_id, 1, key, "a" * 40, "b" * 40, "2026-03-02T03:00:00Z", ratio, ratio - 0.05, ratio + 0.05,
                  status, None, None, None, NAME)


def test_nightly_summaries_keep_their_table_and_items_and_show_the_name_literally():
    key = SeriesKey(NAME, f"{NAME}/p/cpu", "m" * 16, "p" * 16, "ort 1.20", "cpu", "latency", "ratio")
    series = Series(1, key, 3, "2026-03-01T03:00:00Z", "2026-03-02T03:00:00Z", 1.2)
    confirmed, pending, closed = (_change(1, key, "confirmed"), _change(2, key, "pending", 1.03),
                                  _change(3, key, "closed", 1.04))
    bisect = bisect_from_json(hostile_bisect(), "bisect.json")
    # Alerts first (issue 25): one row per alert, its changes inside one cell.
    alert = Alert(7, NAME, "cpu", "regression", "untriaged", "a" * 40, "b" * 40, changes=(alert_change(confirmed),),
                  explanation=AlertExplanation(NAME, NAME, (NAME,), (NodeChange(NAME, 1, 2),)))
    report = NightReport(NAME, Night(2, NAME, "b" * 40, "2026-03-02T03:00:00Z", 2),
                         Night(1, NAME, "a" * 40, "2026-03-01T03:00:00Z", 1), None,
                         findings=[Finding(confirmed, series, None), Finding(pending, series, None)],
                         closed=[closed], bisections={1: bisect}, alerts=[alert])
    markdown = markdown_summary(report)
    page = render_markdown(markdown)
    assert_inert(markdown, page)
    assert plain("".join(text for text in page.texts if text.startswith("perfguard nightly: "))) == \
        f"perfguard nightly: {shown(NAME)}"
    (table,) = page.tables
    assert_shape(table, columns=6, rows=1)
    assert plain(table[1][2][0]).startswith(f"{shown(NAME)}/p/cpu latency (ratio) +20.0%")
    culprit = plain(table[1][4][0])
    assert culprit == f"9f3c2a1b7e {shown(NAME)}, pass {PASS}" and table[1][4][1] == ["code", "code"]
    assert [plain(text).endswith(f": {shown(NAME)}") for text, _ in page.items] == [True, True]  # pending, closed
    assert all(tags == [] for _, tags in page.items)

    markdown = bisections_summary(NAME, [(confirmed, bisect), (confirmed, None)])
    page = render_markdown(markdown)
    assert_inert(markdown, page)
    assert [plain(text) for text, _ in page.items] == [
        f"{shown(NAME)}/p/cpu: +20.0% in aaaaaaaaaa..bbbbbbbbbb: 9f3c2a1b7e {shown(NAME)}, pass {PASS}",
        f"{shown(NAME)}/p/cpu: +20.0% in aaaaaaaaaa..bbbbbbbbbb: not run (see perfguard history changes)"]


# --- HTML: the report and the history site ---------------------------------------------------------

def _svgs(html: str) -> list[ET.Element]:
    return [ET.fromstring(svg) for svg in re.findall(r"<svg\b.*?</svg>", html, flags=re.S)]


def test_html_report_parses_and_shows_the_name_as_text():
    html = render_html(build_report([hostile_verdicts(), hostile_bisect()]))
    page = Page(html)
    assert [t for t, _ in page.tags].count("script") == 1  # perfguard's own, hashed in the CSP
    assert not [a for t, a in page.tags if t == "a" and not str(a.get("href", "")).startswith("#")]
    assert any(text == as_html(LABEL) for table in page.tables for row in table for text, _ in row)
    assert as_html(NAME) in page.texts  # the bisection's case, the commit subject
    assert "\x1b" not in html and "\u202e" not in html
    assert _svgs(html)  # every chart is well-formed XML


def test_history_site_pages_feed_and_charts_parse_and_show_the_name_as_text(tmp_path):
    template = (GOLDEN / "v1" / "verdicts-pipeline.json").read_text().replace("resnet_s", json.dumps(NAME)[1:-1])
    with Store.open(f"sqlite:///{tmp_path / 'history.sqlite'}") as store:
        for night in range(3):
            raw = json.loads(template)
            base, head = f"{night:040x}", f"{night + 1:040x}"
            raw["mode"].update(kind="base-ref", base_commit=base, head_commit=head)
            raw["created_at"] = stamp = f"2026-03-0{night + 1}T03:00:00.000000Z"
            raw["results"]["head"].update(started_at=stamp, finished_at=stamp)
            raw["results"]["head"]["compiler"].update(commit=head, subject=NAME)
            done = store.ingest_json(copy.deepcopy(raw), source=f"night {night}")
            store.record_night("smoke", head, done.document_id)
        hostile = next(s for s in store.series(kind="ratio") if s.key.case.startswith(NAME))
        store.upsert_change(hostile.id, good_commit=f"{1:040x}", bad_commit=f"{2:040x}", time=stamp, ratio=1.2,
                            ci_low=1.1, ci_high=1.3, status="confirmed", note=NAME)
        build_site(store, tmp_path / "site")
    site = tmp_path / "site"
    pages = {path.relative_to(site).as_posix(): path.read_text(encoding="utf-8") for path in site.rglob("*.html")}
    for name, html in pages.items():
        page = Page(html)
        assert [t for t, _ in page.tags].count("script") <= 1, name
        assert not [a for t, a in page.tags if t == "a" and str(a.get("href", "")).lower().startswith("javascript")]
        _svgs(html)
    index = Page(pages["index.html"])
    assert any(text.startswith(as_html(NAME)) for table in index.tables for row in table for text, _ in row)
    assert any(as_html(hostile.key.case) in text for text in Page(pages[f"series/{hostile.id}.html"]).texts)
    feed = ET.fromstring((site / "feed.atom").read_text(encoding="utf-8"))  # well-formed XML
    assert any(as_html(NAME) in (element.text or "") for element in feed.iter())


@pytest.mark.parametrize("value", [NAME, "plain_name", "a\u2028b", "\ud800"])
def test_md_text_is_one_line_and_encodable(value):
    text = md_text(value)
    assert "\n" not in text and "\u2028" not in text
    text.encode("utf-8")  # a lone surrogate is shown as an escape, not written


def test_html_fast_path_escapes_exactly_what_visible_escapes():
    """``html_value`` searches a regex before calling ``visible``: the two agree on every code point."""
    differ = [hex(c) for c in range(0x110000)
              if (html_value(chr(c)) != chr(c)) != (visible(chr(c), keep_newlines=True) != chr(c))]
    assert differ == []
