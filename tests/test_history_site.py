"""The history site (``perfguard history site``): built from a store of real documents, no measurement.

The store: 20 nights of the golden pipeline check relabelled as a check of two compiler versions
(``_as_base_ref``: its paired rows give ratio points), each night's numbers edited: latency of one
case 20 % higher from night 12 on (its ratio that night 1.2), small deterministic noise elsewhere,
the runner's CPU replaced from night 16 (a new fingerprint), hostile names in a case id and the
commit subjects. Changes are upserted by hand and one is linked to the golden bisect document.
The site is then read back as files (HTML, SVG, Atom as XML) and in a real headless Chromium.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from perfguard.bisect.document import bisect_from_json
from perfguard.history.site import MARKER_FILE, build_site
from perfguard.report.bisect import bisect_view
from perfguard.store import Store

from .conftest import REPO, run_cli
from .test_report import Chromium, _chromium

GOLDEN = Path(__file__).parent / "golden" / "v1"
HOSTILE_MODEL = "<script>alert(1)</script>"
HOSTILE_SUBJECT = 'fuse <b>conv</b> & "bn" <img src=x onerror=alert(2)>'
STEPPED = "resnet_s/bn_fused_folded/cpu"  # the case whose latency steps up at night STEP
STEP = 12
NIGHTS = 20
NEW_CPU_FROM = 16
SUITE = "smoke"  # the golden documents' suite


def commit_of(night: int) -> str:
    return hashlib.sha1(f"night {night}".encode()).hexdigest()


def _scale(value: Any, factor: float) -> Any:
    """Every latency number of a case's ``latency_s`` times ``factor`` (not its count or cv)."""
    if isinstance(value, dict):
        return {k: v if k in ("n", "cv") else _scale(v, factor) for k, v in value.items()}
    if isinstance(value, list):
        return [_scale(v, factor) for v in value]
    return value * factor if isinstance(value, float) else value


def _noise(night: int, salt: int) -> float:
    """A small deterministic wobble, +-0.3 %."""
    return 1 + 0.003 * (((night * 7919 + salt * 104729) % 11) - 5) / 5


def night_document(night: int, *, hostile: bool = False) -> dict[str, Any]:
    """Night ``night``'s verdicts document: a base-ref check of ``commit_of(night)`` against the night before."""
    text = (GOLDEN / "verdicts-pipeline.json").read_text()
    if hostile:
        text = text.replace("resnet_s", json.dumps(HOSTILE_MODEL)[1:-1])
    raw = json.loads(text)
    raw["mode"].update(kind="base-ref", base_commit=commit_of(night - 1), head_commit=commit_of(night))
    stamp = f"2026-03-{night + 1:02d}T03:00:00.000000Z"
    raw["created_at"] = stamp
    head = raw["results"]["head"]
    head["started_at"] = head["finished_at"] = stamp
    subject = HOSTILE_SUBJECT if hostile else "Fold batch norms into convolutions"
    head["compiler"].update(commit=commit_of(night), subject=f"{subject} (night {night})")
    if night >= NEW_CPU_FROM:
        head["environment"]["cpu"]["cpu_model"] = "AMD EPYC 9004 (new runner)"
    for salt, case in enumerate(head["cases"]):
        stepped = case["id"].endswith("/bn_fused_folded/cpu")
        factor = _noise(night, salt) * (1.2 if stepped and night >= STEP else 1.0)
        case["metrics"]["latency_s"] = _scale(case["metrics"]["latency_s"], factor)
    for salt, row in enumerate(raw["verdicts"]):
        if row["metric"] != "latency" or not row["paired"]:
            continue
        stepped = row["case"].endswith("/bn_fused_folded/cpu")
        ratio = 1.2 if stepped and night == STEP else _noise(night, salt + 7)
        decision = "different" if abs(ratio - 1) > 0.02 else "same"
        row["comparison"].update(ratio=ratio, ci_low=ratio * 0.985, ci_high=ratio * 1.015, decision=decision,
                                 direction="regression" if decision == "different" else "none")
        row["decision"], row["direction"] = decision, row["comparison"]["direction"]
    return raw


@dataclass
class Built:
    url: str
    store_path: Path
    ratio_series: int
    absolute_series: int
    regression: int  # the confirmed regression linked to the bisection
    bisect: dict[str, Any]


def build_store(folder: Path, *, hostile: bool = False) -> Built:
    url = f"sqlite:///{folder / 'history.sqlite'}"
    with Store.open(url) as store:
        for night in range(NIGHTS):
            done = store.ingest_json(night_document(night, hostile=hostile), source=f"night {night}")
            store.record_night(SUITE, commit_of(night), done.document_id)
        stepped = STEPPED.replace("resnet_s", HOSTILE_MODEL) if hostile else STEPPED
        ratio = next(s for s in store.series(kind="ratio") if s.key.case == stepped)
        absolute = next(s for s in store.series(kind="absolute", metric="latency") if s.key.case == stepped
                        and s.points == NEW_CPU_FROM)
        time = f"2026-03-{STEP + 1:02d}T03:00:00.000000Z"
        change = store.upsert_change(ratio.id, good_commit=commit_of(STEP - 1), bad_commit=commit_of(STEP), time=time,
                                     ratio=1.2, ci_low=1.18, ci_high=1.22, status="confirmed",
                                     note=f"seen by the nightly; {HOSTILE_SUBJECT if hostile else 'bisected'}")
        store.upsert_change(absolute.id, good_commit=commit_of(STEP - 1), bad_commit=commit_of(STEP), time=time,
                            ratio=1.19, ci_low=1.17, ci_high=1.21, status="confirmed")
        other = next(s for s in store.series(kind="ratio") if s.key.case != stepped)
        store.upsert_change(other.id, good_commit=commit_of(4), bad_commit=commit_of(5),
                            time="2026-03-06T03:00:00.000000Z", ratio=1.04, ci_low=1.01, ci_high=1.07, status="pending")
        store.upsert_change(other.id, good_commit=commit_of(7), bad_commit=commit_of(8),
                            time="2026-03-09T03:00:00.000000Z", ratio=0.95, ci_low=0.93, ci_high=0.97,
                            status="confirmed")
        store.upsert_change(other.id, good_commit=commit_of(1), bad_commit=commit_of(2),
                            time="2026-03-03T03:00:00.000000Z", ratio=1.05, ci_low=1.02, ci_high=1.08, status="closed",
                            note="a noisy night")
        bisect = json.loads((GOLDEN / "bisect-commits.json").read_text())
        linked = store.ingest_json(bisect, source="bisect")
        culprit = bisect["culprits"][0]
        store.link_bisect(change.id, linked.document_id, culprit["commit"]["sha"], culprit["pass"]["name"])
    return Built(url, folder / "history.sqlite", ratio.id, absolute.id, change.id, bisect)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Built, Path]]:
    folder = tmp_path_factory.mktemp("site")
    built = build_store(folder, hostile=True)
    with Store.open(built.url, create=False) as store:
        build_site(store, folder / "out")
    yield built, folder / "out"


def _read(out: Path, name: str) -> str:
    return (out / name).read_text(encoding="utf-8")


def _pages(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): p.read_text(encoding="utf-8") for p in sorted(out.rglob("*.html"))}


def _series_rows(html: str) -> list[str]:
    """The series table's rows of an index page, in order (their class and first link)."""
    table = html[html.index('<table class="series">'):]
    table = table[:table.index("</table>")]
    return re.findall(r'<tr class="(state-\w+)"[^>]*>\s*<td class="case-cell"><a href="([^"]+)"', table)


# --- the files --------------------------------------------------------------------------------------

def test_the_site_has_a_page_for_every_series_night_and_change(site: tuple[Built, Path]) -> None:
    built, out = site
    with Store.open(built.url, create=False) as store:
        series = store.series()
        changes = [c for status in ("pending", "confirmed", "closed") for c in store.changes(status=status)]
        nights = store.nights(SUITE)
    assert len(series) == 43  # 4 cases x 5 metrics on each CPU (nights 0-15, 16-19), and 3 ratio series
    assert {p.name for p in (out / "series").iterdir()} == {f"{s.id}.html" for s in series}
    assert {p.name for p in (out / "changes").iterdir()} == {f"{c.id}.html" for c in changes}
    assert {p.name for p in (out / "nights").iterdir()} == {f"{n.document_id}.html" for n in nights}
    assert (out / MARKER_FILE).exists() and (out / ".nojekyll").exists()
    index = _read(out, "index.html")
    rows = _series_rows(index)
    assert sorted(href for _, href in rows) == sorted(f"series/{s.id}.html" for s in series)
    # Open regressions first: the changes section comes before the series, and in it a regression
    # before the improvement; in the series table the rows of series with an open regression lead.
    assert index.index('id="changes"') < index.index('id="series"')
    opened = index[index.index('id="changes"'):index.index('id="series"')]
    assert opened.index("regression") < opened.index("improvement") and "a noisy night" not in opened
    states = [state for state, _ in rows]
    assert states[:3] == ["state-regression"] * 3
    assert f"series/{built.ratio_series}.html" in [href for _, href in rows[:3]]
    assert "state-regression" not in states[3:]
    # Every filter value has its page, each listing only its own series.
    model_pages = sorted((out / "filter").glob("metric-*.html"))
    assert len(model_pages) == 5
    counted = sum(len(_series_rows(p.read_text())) for p in model_pages)
    assert counted == len(series)


def test_every_link_is_relative_and_leads_to_a_file_of_the_site(site: tuple[Built, Path]) -> None:
    _, out = site
    broken = []
    for name, html in _pages(out).items():
        for href in re.findall(r'href="([^"]*)"', html):
            target = href.split("#", 1)[0]
            if re.match(r"^[a-z][a-z0-9+.-]*:|^/", href) or (target and not (out / name).parent.joinpath(target).exists()):
                broken.append(f"{name}: {href}")
    assert broken == []


def test_every_page_is_self_contained_with_a_strict_content_security_policy(site: tuple[Built, Path]) -> None:
    _, out = site
    pages = _pages(out)
    assert len(pages) > 80
    for name, html in pages.items():
        csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
        assert csp and csp.group(1).startswith("default-src 'none'; style-src 'sha256-"), name
        assert not re.search(r"(src|href)=\"(https?:)?//", html), name
        scripts = re.findall(r"<script>", html)
        assert len(scripts) == (1 if name == "index.html" else 0), name
        assert ("script-src 'sha256-" in csp.group(1)) == bool(scripts), name


def test_the_series_page_marks_the_change_point_at_the_night_of_the_step(site: tuple[Built, Path]) -> None:
    built, out = site
    html = _read(out, f"series/{built.ratio_series}.html")
    markers = re.findall(r'<g class="marker (\w+)" data-night="(\d+)" data-commit="(\w*)">\s*(?:<a href="([^"]+)">)?',
                         html)
    regression = [m for m in markers if m[0] == "regression"]
    assert regression == [("regression", str(STEP), commit_of(STEP), f"../changes/{built.regression}.html")]
    assert "+20.0% [+18.2%, +21.8%]" in html  # its size and the night's paired interval
    # The runner's new CPU is marked as what it is, not mistaken for a code change.
    assert ("environment", str(NEW_CPU_FROM), commit_of(NEW_CPU_FROM), "") in markers
    assert "environment changed: cpu_model" in html
    # A dot per night, each linking to its night's page; the nightly ratios are listed too.
    assert len(re.findall(r'<a href="../nights/\d+.html"><circle class="night', html)) == NIGHTS
    assert html.count("<tr class=\"changepoint") == 1 and "+20.00%" in html
    # The absolute series of the same case ends where the new fingerprint's begins: both say so.
    absolute = _read(out, f"series/{built.absolute_series}.html")
    assert re.search(r'<g class="marker regression" data-night="12" data-commit="' + commit_of(STEP), absolute)
    follow = re.search(r'<g class="marker environment" data-night="16" data-commit="\w+">\s*<a href="../series/(\d+)'
                       r'.html">', absolute)
    assert follow and "environment changed: cpu_model; continues in" in absolute
    successor = _read(out, f"series/{follow.group(1)}.html")
    assert f'<a href="../series/{built.absolute_series}.html">' in successor
    assert re.search(r'<g class="marker environment" data-night="0"', successor)


def test_the_change_page_shows_the_range_size_status_and_bisection(site: tuple[Built, Path]) -> None:
    built, out = site
    html = _read(out, f"changes/{built.regression}.html")
    culprit = built.bisect["culprits"][0]
    assert f'<code class="culprit-commit">{culprit["commit"]["sha"][:10]}</code>' in html
    assert f'<code class="culprit-pass">{culprit["pass"]["name"]}</code>' in html
    assert culprit["commit"]["subject"] in html and "+20.0%" in html and "[+18.0%, +22.0%]" in html
    probes = bisect_view(bisect_from_json(built.bisect, "golden")).probes  # a probe row per pair it compared
    assert "confirmed" in html and html.count('<tr class="state-') == len(probes) > len(built.bisect["probes"])
    assert f"Evidence: {len(probes)} probes" in html
    assert f'<a href="../series/{built.ratio_series}.html">' in html
    night = re.search(r'bad <a href="../(nights/\d+.html)"><code>' + commit_of(STEP)[:10], html)
    assert night and commit_of(STEP) in _read(out, night.group(1))
    pending = next(p for p in (out / "changes").iterdir() if "pending" in p.read_text())
    assert "No bisection is linked" in pending.read_text()


def test_the_feed_is_atom_with_one_entry_per_confirmed_regression_newest_first(site: tuple[Built, Path]) -> None:
    built, out = site
    root = ET.fromstring((out / "feed.atom").read_bytes())
    atom = "{http://www.w3.org/2005/Atom}"
    assert root.tag == f"{atom}feed"
    for required in ("id", "title", "updated", "author"):
        assert root.find(f"{atom}{required}") is not None, required
    entries = root.findall(f"{atom}entry")
    assert len(entries) == 2  # confirmed with ratio > 1: not the pending, the improvement or the closed one
    times = [e.findtext(f"{atom}updated") or "" for e in entries]
    assert times == sorted(times, reverse=True) and all(re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", t) for t in times)
    ids = [e.findtext(f"{atom}id") or "" for e in entries]
    assert len(set(ids)) == 2 and all(re.fullmatch(r"urn:uuid:[0-9a-f-]{36}", i) for i in ids)
    links = [e.find(f"{atom}link").get("href") for e in entries]  # type: ignore[union-attr]
    assert f"changes/{built.regression}.html" in links and all((out / str(link)).exists() for link in links)
    titles = [e.findtext(f"{atom}title") or "" for e in entries]
    assert all(t.startswith(HOSTILE_MODEL) for t in titles)  # the XML carries the name as text, escaped
    assert HOSTILE_MODEL not in (out / "feed.atom").read_text()


def test_hostile_case_names_and_commit_subjects_are_escaped_everywhere(site: tuple[Built, Path]) -> None:
    _, out = site
    for name, text in {**_pages(out), "feed.atom": _read(out, "feed.atom")}.items():
        assert "<script>alert" not in text and "<img src=x" not in text and "<b>conv" not in text, name
    assert "&lt;script&gt;alert(1)&lt;/script&gt;/bn_fused_folded/cpu" in _read(out, "index.html")
    night = _read(out, f"nights/{sorted((out / 'nights').iterdir())[0].name}")
    assert "fuse &lt;b&gt;conv&lt;/b&gt; &amp; &#34;bn&#34; &lt;img src=x onerror=alert(2)&gt;" in night


# --- the command ------------------------------------------------------------------------------------

def test_history_list_says_why_absolute_and_ratio_series_differ(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    proc = run_cli("history", "list", "--store", built.url)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "ratio series is head / base measured in the same job, against the same-job reference pipeline" in text
    assert "so the two may differ, even in sign" in text


def test_the_command_builds_replaces_and_refuses_in_one_line(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    out = tmp_path / "pages"
    proc = run_cli("history", "site", "--store", built.url, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert ("43 series, 20 night(s), 5 change(s) (4 open), 0 alert(s) (0 open), 2 entries in feed.atom "
            "(0 alert(s), 2 regression(s) outside them)") in proc.stdout
    assert (out / "feed.atom").read_text(encoding="utf-8").count("<entry>") == 2  # what the line says it holds
    assert "4 open changes" in (out / "index.html").read_text(encoding="utf-8")
    (out / "stale.html").write_text("from an older build")
    again = run_cli("history", "site", "--store", built.url, "--out", str(out), "--suite", SUITE)
    assert again.returncode == 0, again.stderr
    assert not (out / "stale.html").exists() and (out / "index.html").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pages")] == []  # no staging left
    other = run_cli("history", "site", "--store", built.url, "--out", str(out), "--suite", "nothing-here")
    assert other.returncode == 0 and "0 series" in other.stdout
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    for bad, expected in ((blocker, "is not writable: it is a file, not a folder"),
                          (mine, "is not a perfguard history site")):
        proc = run_cli("history", "site", "--store", built.url, "--out", str(bad))
        assert proc.returncode == 2 and expected in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, \
            proc.stderr
    assert (mine / "notes.txt").read_text() == "keep me"
    missing = run_cli("history", "site", "--store", str(tmp_path / "none.sqlite"), "--out", str(tmp_path / "x"))
    assert missing.returncode == 2 and "no history store" in missing.stderr


def test_a_failed_build_leaves_the_old_site_and_no_staging_folder(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from perfguard.errors import StorageError

    built = build_store(tmp_path)
    out = tmp_path / "pages"
    with Store.open(built.url, create=False) as store:
        build_site(store, out)
        before = _read(out, "index.html")
        written = []
        real = Path.write_text

        def fail_later(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
            written.append(self)
            if len(written) > 30:
                raise OSError(28, "No space left on device")
            return real(self, text, *args, **kwargs)

        monkeypatch.setattr(Path, "write_text", fail_later)
        with pytest.raises(StorageError, match="cannot write the site: No space left on device"):
            build_site(store, out)
    monkeypatch.undo()
    assert _read(out, "index.html") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.sqlite", "pages"]


# --- a real browser ---------------------------------------------------------------------------------

@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chromium]:
    chromium = Chromium(_chromium(), tmp_path / "profile")
    yield chromium
    chromium.close()


@pytest.mark.slow
def test_the_site_in_headless_chromium(browser: Chromium, site: tuple[Built, Path], tmp_path: Path) -> None:
    built, out = site
    url = (out / "index.html").resolve().as_uri()
    browser.open_page(url)
    assert browser.problems(url) == []
    state = browser.evaluate("""(() => {
        const rows = () => Array.from(document.querySelectorAll('table.series tbody tr')).filter(r => !r.hidden);
        const first = rows()[0].innerText, all = rows().length;
        const metric = document.querySelector('select[data-dim=metric]');
        metric.value = 'node_count'; metric.dispatchEvent(new Event('change', {bubbles: true}));
        const nodes = rows().length;
        metric.value = ''; metric.dispatchEvent(new Event('change', {bubbles: true}));
        const box = document.querySelector('input[data-text-filter]');
        box.value = 'ort_all'; box.dispatchEvent(new Event('input', {bubbles: true}));
        const ort = rows().length, shown = document.getElementById('shown').textContent;
        box.value = ''; box.dispatchEvent(new Event('input', {bubbles: true}));
        return {first, all, nodes, ort, shown, controls: !document.getElementById('filter-box').hidden}; })()""")
    assert state["all"] == 43 and state["nodes"] == 8 and state["ort"] == 11 and state["shown"] == "11 of 43 series"
    assert state["controls"] and state["first"].startswith(HOSTILE_MODEL)
    height = min(int(browser.evaluate("document.documentElement.scrollHeight")), 4000)
    browser.screenshot(tmp_path / "index.png", height)
    assert (tmp_path / "index.png").stat().st_size > 20_000
    assert browser.problems(url) == []

    page = (out / "series" / f"{built.ratio_series}.html").resolve().as_uri()
    browser.open_page(page)
    assert browser.problems(page) == []
    chart = browser.evaluate("""(() => { const svg = document.querySelector('svg.trend');
        const marker = svg.querySelector('g.marker.regression'); const box = marker.getBoundingClientRect();
        return {width: svg.getBoundingClientRect().width, dots: svg.querySelectorAll('circle.night').length,
                marker: marker.textContent.trim(), visible: box.height > 100,
                commit: marker.dataset.commit}; })()""")
    assert chart["width"] > 900 and chart["dots"] == NIGHTS and chart["visible"]
    assert chart["marker"].startswith("+20.0%") and chart["commit"] == commit_of(STEP)
    height = min(int(browser.evaluate("document.documentElement.scrollHeight")), 4000)
    browser.screenshot(tmp_path / "series.png", height)
    assert (tmp_path / "series.png").stat().st_size > 20_000
    assert browser.problems(page) == []


@pytest.mark.slow
def test_the_index_without_javascript_is_complete(browser: Chromium, site: tuple[Built, Path]) -> None:
    _, out = site
    url = (out / "index.html").resolve().as_uri()
    browser.open_page(url, javascript=False)
    assert browser.problems(url) == []
    state = browser.evaluate("""(() => ({
        rows: Array.from(document.querySelectorAll('table.series tbody tr')).filter(r => r.offsetHeight > 0).length,
        controls: document.getElementById('filter-box').offsetHeight,
        filters: document.querySelectorAll('details.filter a').length }))()""")
    assert state == {"rows": 43, "controls": 0, "filters": state["filters"]} and state["filters"] >= 12


@pytest.mark.slow
def test_docs_screenshot(browser: Chromium, tmp_path: Path) -> None:
    """docs/history-site.png: a series page with a visible change point (written with PERFGUARD_WRITE_DOCS=1)."""
    built = build_store(tmp_path)
    with Store.open(built.url, create=False) as store:
        build_site(store, tmp_path / "out")
    page = (tmp_path / "out" / "series" / f"{built.ratio_series}.html").resolve().as_uri()
    browser.open_page(page, width=1100)
    assert browser.problems(page) == []
    shot = tmp_path / "history-site.png"
    browser.screenshot(shot, 980)
    assert shot.stat().st_size > 20_000
    if os.environ.get("PERFGUARD_WRITE_DOCS") == "1":
        (REPO / "docs" / "history-site.png").write_bytes(shot.read_bytes())
