"""What `history list` and the history site show of a series (issue 43, item 6 of its smaller items):
series of one case and metric told apart by pipeline and nights; chart points labelled by commit;
the alert tables inside a 1280-pixel window.

The store is the site test's nights (:func:`tests.test_history_site.night_document`: real verdicts
documents of a base-ref check), nine of them, the pipeline of one case defined anew twice (its
``sha256`` changed at nights 3 and 6), so that case has three series per metric, one per definition,
each with three nights.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from perfguard.history.site import build_site
from perfguard.store import Store

from .test_history_site import SUITE, commit_of, night_document
from .test_report import Chromium, _chromium

EDITED = "resnet_s/bn_fused_folded/cpu"
DEFINITIONS = ("d" * 64, "e" * 64, "f" * 64)  # the case's pipeline at nights 0-2, 3-5, 6-8


def build_edited_store(folder: Path) -> str:
    url = f"sqlite:///{folder / 'history.sqlite'}"
    with Store.open(url) as store:
        for night in range(9):
            document = night_document(night)
            for case in document["results"]["head"]["cases"]:
                if case["id"] == EDITED:
                    case["key"]["pipeline"]["sha256"] = DEFINITIONS[night // 3]
            done = store.ingest_json(document, source=f"night {night}")
            store.record_night(SUITE, commit_of(night), done.document_id)
    return url


def _piped(cwd: Path, *args: str) -> list[str]:
    """``perfguard ARGS`` as a CI job runs it: stdout a file, no COLUMNS."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run([sys.executable, "-m", "perfguard", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()


def test_history_list_tells_the_series_of_one_case_and_metric_apart_in_a_log(tmp_path: Path) -> None:
    url = build_edited_store(tmp_path)
    lines = _piped(tmp_path, "history", "list", "--store", url, "--case", EDITED, "--metric", "node_count")
    assert [line for line in lines if len(line) > 120] == []
    header = next(line for line in lines if "case" in line and "metric" in line)
    assert "pipeline" in header and "first..last" in header, header
    rows = [line for line in lines if line.startswith("│") and EDITED in line]
    assert len(rows) == 3, "\n".join(lines)
    assert all(row.rstrip().endswith("│") for row in rows), rows  # fits, not cropped at the log's width
    for row, definition, dates in zip(rows, DEFINITIONS, ("03-01..03-03", "03-04..03-06", "03-07..03-09"),
                                      strict=True):
        assert f" {definition[:8]} " in row and f" 3 2026-{dates} " in row, row
    assert len(set(rows)) == 3


def test_history_list_folds_a_long_case_id_rather_than_cut_off_the_columns_after_it(tmp_path: Path) -> None:
    from .test_history_site import HOSTILE_MODEL, build_store

    url = build_store(tmp_path, hostile=True).url  # case ids of 44 characters, escaped
    for columns in (None, "100", "200"):
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | ({"COLUMNS": columns} if columns else {})
        proc = subprocess.run([sys.executable, "-m", "perfguard", "history", "list", "--store", url], env=env,
                              capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
        width = int(columns or 120)
        table = [line for line in proc.stdout.splitlines() if line[:1] in "┏┃┡│└"]
        assert table and all(len(line) <= width and line[-1] in "┓┃┩│┘" for line in table), proc.stdout
        heads = [line.split("┃")[1:-1] for line in table if line.startswith("┃")]
        names = [" ".join(cell.strip() for cell in column).strip() for column in zip(*heads, strict=True)]
        assert names[:1] + names[5:] == ["case", "latest", "trend"] + (["last nights"] if width == 200 else [])
        assert HOSTILE_MODEL in "".join(line.split("│")[1].strip() for line in table if line.startswith("│"))


def test_the_site_index_tells_the_series_of_one_case_and_metric_apart(tmp_path: Path) -> None:
    url = build_edited_store(tmp_path)
    with Store.open(url, create=False) as store:
        build_site(store, tmp_path / "out")
    index = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    table = index[index.index('<table class="series">'):]
    rows = [row for row in re.findall(r"<tr class=\"state-.*?</tr>", table[:table.index("</table>")], re.S)
            if f">{EDITED}</a>" in row and "<td>node_count</td><td>absolute</td>" in row]
    assert len(rows) == 3
    texts = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", row.replace("<td", " <td"))) + " " for row in rows]
    for definition, dates in zip(DEFINITIONS, ("03-01..03-03", "03-04..03-06", "03-07..03-09"), strict=True):
        assert sum(f" {definition[:8]} " in text and f"2026-{dates}" in text for text in texts) == 1, texts


# --- chart points: labelled by commit and subject, not "working tree" -------------------------------

def subject_of(night: int) -> str:
    return f"Fuse <b>bn</b> & conv, step {night}"


def build_nightly_store(folder: Path, nights: int = 6) -> tuple[str, int]:
    """Nights as `perfguard nightly` stored them before issue 43: the head side of each night's
    check labelled "working tree", the base commit's subject in the check's mode."""
    url = f"sqlite:///{folder / 'history.sqlite'}"
    with Store.open(url) as store:
        for night in range(nights):
            document = night_document(night)
            document["results"]["head"]["compiler"]["subject"] = "working tree"
            document["mode"]["base_subject"] = subject_of(night - 1)
            done = store.ingest_json(document, source=f"night {night}")
            store.record_night(SUITE, commit_of(night), done.document_id)
        ratio = next(s for s in store.series(kind="ratio") if s.key.case == EDITED)
    return url, ratio.id


def test_chart_points_and_night_pages_name_the_commit_s_subject_where_the_store_knows_it(tmp_path: Path) -> None:
    import html

    url, series_id = build_nightly_store(tmp_path)
    with Store.open(url, create=False) as store:
        build_site(store, tmp_path / "out")
    page = (tmp_path / "out" / "series" / f"{series_id}.html").read_text(encoding="utf-8")
    assert "working tree" not in page
    titles = [html.unescape(t) for t in re.findall(r'<circle class="night[^"]*"[^>]*><title>([^<]*)</title>', page)]
    assert len(titles) == 6
    for night, title in enumerate(titles[:-1]):  # each a later night's base: its subject is known
        assert title.startswith(f"2026-03-{night + 1:02d} · {commit_of(night)[:10]} · {subject_of(night)} · "), title
    assert titles[-1].startswith(f"2026-03-06 · {commit_of(5)[:10]} · ") and "step" not in titles[-1]
    page_of_night = next(p for p in (tmp_path / "out" / "nights").iterdir()
                         if commit_of(2) in p.read_text(encoding="utf-8"))
    text = page_of_night.read_text(encoding="utf-8")
    assert "working tree" not in text and html.escape(subject_of(2), quote=False) in text


@pytest.mark.slow
def test_a_night_records_the_subject_of_the_commit_it_checked(tmp_path: Path) -> None:
    """The night's own check names its head side by the commit's subject, so a new store needs
    no later night to label a point (a real compiler repository, two real nights)."""
    import json

    from .conftest import run_cli
    from .factories import compiler_suite, git, make_compiler_repo, pass_source

    repo, (first, second) = make_compiler_repo(tmp_path / "cc", [
        ("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)}),
        ("Fold the <b>extra</b> work", {"mycc/passes.py": pass_source(4)}),
    ])
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo, workers=2, max_workers=4))
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    for commit in (first, second):
        git(repo, "checkout", "-q", commit)
        night = run_cli("nightly", str(suite), "--store", url, "--quiet", "--no-bisect", "--no-recheck", cwd=tmp_path,
                        timeout=900)
        assert night.returncode in (0, 1), night.stdout + night.stderr
    with Store.open(url, create=False) as store:
        last = store.last_night("toy")
        assert last is not None and last.commit == second and last.document_id is not None
        document = store.document(last.document_id)
    document = json.loads(json.dumps(document))
    assert document["results"]["candidate"]["compiler"]["subject"] == "Fold the <b>extra</b> work"
    assert document["mode"]["base_subject"] == "initial"


# --- the site at 1280 pixels: no table wider than the page ------------------------------------------

@pytest.fixture(scope="module")
def alerted_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The alerts test's site (:mod:`tests.test_site_alerts`: hostile names, seven alerts, notes)."""
    from .test_history_site import build_store
    from .test_site_alerts import NOW, _fill

    folder = tmp_path_factory.mktemp("alerted")
    built = build_store(folder, hostile=True)
    _fill(built.url)
    with Store.open(built.url, create=False) as store:
        build_site(store, folder / "out", now=NOW)
    return folder / "out"


@pytest.mark.slow
def test_the_alert_tables_and_the_index_fit_a_1280_pixel_window(alerted_site: Path, tmp_path: Path) -> None:
    """Issue 43: the alert tables overflowed at 1280 px. Every table of the index, the alerts page
    and an alert's page fits its container there, and no page scrolls sideways."""
    pages = ["index.html", "alerts.html", *sorted(p.name for p in alerted_site.glob("alert-*.html"))[:2]]
    browser = Chromium(_chromium(), tmp_path / "profile")
    try:
        _fits_1280(browser, alerted_site, pages)
    finally:
        browser.close()


def _fits_1280(browser: Chromium, site: Path, pages: list[str]) -> None:
    for name in pages:
        url = (site / name).resolve().as_uri()
        browser.open_page(url, width=1280)
        assert browser.problems(url) == []
        found = browser.evaluate("""(() => ({
            page: document.documentElement.scrollWidth,
            tables: Array.from(document.querySelectorAll('table')).map(t => ({
                table: t.className, width: Math.ceil(t.getBoundingClientRect().width), scroll: t.scrollWidth,
                room: t.parentElement.clientWidth }))}))()""")
        assert found["page"] <= 1280, (name, found)
        wide = [t for t in found["tables"] if max(t["width"], t["scroll"]) > t["room"]]
        assert wide == [], (name, wide)
        assert any(t["table"] == "alerts" for t in found["tables"]) or name.startswith("alert-"), (name, found)
