"""``perfguard nightly`` over a real git history, a real SQLite store and real measurements.

The 20-night replay: a toy compiler's history of 40 commits in which commit 23 makes its pass
insert 24 no-op Mul/Add pairs (a real slowdown); every other commit only adds a note, so its
artifacts are byte-identical to the night before (SAME without timing). One night every two
commits: the change lands between night 11 (commit 22) and night 12 (commit 24).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from .conftest import run_cli
from .factories import compiler_suite, git, make_compiler_repo, pass_source

pytestmark = pytest.mark.slow

NIGHTS = 20
CULPRIT = 23


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    """Run the 20 nights once for the module; every test reads what they left."""
    tmp = tmp_path_factory.mktemp("nightly")
    versions = [("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)})]
    for i in range(1, 2 * NIGHTS + 1):
        files = {f"docs/n{i}.txt": f"note {i}\n"}
        if i == CULPRIT:
            files["mycc/passes.py"] = pass_source(24, f"c{i}")
        versions.append((f"commit {i}", files))
    repo, shas = make_compiler_repo(tmp / "cc", versions)
    suite = tmp / "suite.toml"
    suite.write_text(compiler_suite(repo, workers=8, max_workers=14))
    store = f"sqlite:///{tmp / 'history.sqlite'}"
    nights = []
    for night in range(1, NIGHTS + 1):
        sha = shas[2 * night]
        git(repo, "checkout", "-q", sha)
        summary = tmp / f"summary-{night}.md"
        proc = run_cli("nightly", str(suite), "--store", store, "--summary", str(summary), "--quiet",
                       cwd=tmp, timeout=1500)
        (tmp / f"night-{night}.txt").write_text(f"exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
        nights.append({"sha": sha, "code": proc.returncode, "out": proc.stdout + proc.stderr,
                       "summary": summary.read_text() if summary.exists() else ""})
    return {"tmp": tmp, "repo": repo, "shas": shas, "suite": suite, "store": store, "nights": nights}


def _json(replay, *args):
    out = replay["tmp"] / "answer.json"
    proc = run_cli("history", *args, "--store", replay["store"], "--json", str(out), cwd=replay["tmp"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


@pytest.mark.timing
def test_the_change_night_alone_exits_1_and_says_what_changed(replay):
    codes = [n["code"] for n in replay["nights"]]
    changed = 12 - 1  # night 12 is the first to contain commit 23
    assert codes[changed] == 1, replay["nights"][changed]["out"]
    assert [i for i, c in enumerate(codes) if c != 0] == [changed], [(i + 1, n["out"][-800:]) for i, n in
                                                                    enumerate(replay["nights"]) if n["code"] != 0]
    first = replay["nights"][0]["summary"]
    assert "First night" in first
    quiet = replay["nights"][5]["summary"]
    assert "Nothing new since the previous night" in quiet and "identical artifact" in quiet
    loud = replay["nights"][changed]["summary"]
    assert "New confirmed regressions" in loud and "r/mycc/cpu" in loud
    assert replay["shas"][CULPRIT][:10] in loud and "mycc.passes:extra_work" in loud


@pytest.mark.timing
def test_change_point_is_on_the_right_night_and_the_bisection_names_commit_and_pass(replay):
    shas = replay["shas"]
    answer, text = _json(replay, "changes")
    confirmed = [c for c in answer["changes"] if c["status"] == "confirmed" and c["metric"] == "latency"]
    assert len(confirmed) == 1, answer
    change = confirmed[0]
    assert change["kind"] == "ratio" and change["case"] == "r/mycc/cpu"
    assert (change["good_commit"], change["bad_commit"]) == (shas[22], shas[24])
    assert change["ci_low"] > 1.0  # the interval; its size is the machine's to dilute
    assert change["culprit_commit"] == shas[CULPRIT]
    assert change["culprit_pass"] == "mycc.passes:extra_work"
    assert change["bisect_document"] is not None
    assert shas[CULPRIT][:10] in text


@pytest.mark.timing
def test_the_changes_of_the_culprits_range_are_one_alert_with_its_commit_and_pass(replay):
    shas = replay["shas"]
    answer, text = _json(replay, "alerts")
    shown = [(a["first_commit"][:8], a["last_commit"][:8], a["status"],
              [(c["metric"], c["kind"], round(c["ratio"], 3)) for c in a["changes"]]) for a in answer["alerts"]]
    (alert,) = [a for a in answer["alerts"] if a["last_commit"] == shas[24]]
    assert (alert["first_commit"], alert["kind"], alert["status"]) == (shas[22], "regression", "untriaged"), shown
    # a noisy metric's change point a night off (compile time) raises no alert of its own
    assert all(a["last_commit"] == shas[24] for a in answer["alerts"] if a["kind"] == "regression"), shown
    assert (alert["culprit_commit"], alert["culprit_pass"]) == (shas[CULPRIT], "mycc.passes:extra_work")
    metrics = {(c["case"], c["metric"], c["kind"]) for c in alert["changes"]}
    assert ("r/mycc/cpu", "latency", "ratio") in metrics and ("r/mycc/cpu", "node_count", "absolute") in metrics
    # node count and size are inside the alert, with no culprit of their own: no separate alarm
    changes, _ = _json(replay, "changes")
    assert {c["alert"] for c in changes["changes"] if c["bad_commit"] == shas[24]} == {alert["id"]}
    assert shas[CULPRIT][:10] in text


@pytest.mark.timing
def test_history_show_marks_the_change_point_and_keeps_every_night(replay):
    answer, text = _json(replay, "show", "r/mycc/cpu", "--metric", "latency", "--kind", "ratio")
    (series,) = answer["series"]
    points = series["points"]
    assert len(points) == NIGHTS - 1  # the first night measured; every later night is a paired ratio
    marked = [i for i, p in enumerate(points) if p["change_point"]]
    assert marked == [10], [(p["commit"][:8], p["value"], p["change_point"]) for p in points]
    assert points[10]["commit"] == replay["shas"][24] and points[10]["decision"] == "different"
    assert points[10]["change"]["status"] == "confirmed" and [i for i, p in enumerate(points) if p["change"]] == [10]
    identical = [p for i, p in enumerate(points) if i != 10]
    assert all(p["value"] == 1.0 and p["decision"] == "same" for p in identical)
    assert points[-1]["level"] == pytest.approx(points[10]["value"])  # the chained index stays up
    assert "regression" in text


@pytest.mark.timing
def test_history_list_shows_every_series_with_its_trend(replay):
    answer, _ = _json(replay, "list")
    kinds = {(s["case"], s["metric"], s["kind"]) for s in answer["series"]}
    assert ("r/mycc/cpu", "latency", "ratio") in kinds and ("r/mycc/cpu", "latency", "absolute") in kinds
    assert ("r/mycc/cpu", "node_count", "absolute") in kinds
    ratio = next(s for s in answer["series"] if s["metric"] == "latency" and s["kind"] == "ratio")
    assert ratio["points"] == NIGHTS - 1 and ratio["latest"] > 1.0


def test_check_against_the_store_picks_the_latest_result_of_this_machine(replay):
    out = replay["tmp"] / "verdicts.json"
    proc = run_cli("check", str(replay["suite"]), "--baseline", f"store:{replay['store']}", "--json", str(out),
                   "--quiet", cwd=replay["tmp"], timeout=900)
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    document = json.loads(out.read_text())
    assert document["mode"]["kind"] == "baseline" and "store:" in document["mode"]["baseline"]
    assert not [w for w in document["warnings"] if "environments differ" in w]


def test_a_store_problem_is_one_line_and_exit_2(tmp_path):
    proc = run_cli("history", "list", "--store", "postgresql://perf:hunter2@127.0.0.1:1/none", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "hunter2" not in proc.stderr and "Traceback" not in proc.stderr
    missing = run_cli("history", "show", "x", "--store", str(tmp_path / "none.sqlite"), cwd=tmp_path)
    assert missing.returncode == 2 and "no history store" in missing.stderr


def test_nightly_refuses_a_suite_outside_git(tmp_path):
    suite = tmp_path / "s.toml"
    repo, _ = make_compiler_repo(tmp_path / "cc", [("v1", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)})])
    suite.write_text(compiler_suite(repo))
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    proc = run_cli("nightly", str(suite), "--store", str(tmp_path / "h.sqlite"), "--quiet", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.timing
def test_smoke_suite_twice_with_a_pipeline_edit_between(tmp_path):
    """The nightly guide's walk-through (docs/guides/nightly.md) on the shipped smoke suite (one model, to keep it short): the
    suite in its own git repository, a night, a commit that drops constant folding from a
    pipeline, another night. The second night checks the old pipeline (the suite at the first
    night's commit) against the new one, confirms the slowdown by a same-job re-check, and
    `history show` has the change."""
    from perfguard.suite.parse import builtin_suite_path

    repo = tmp_path / "project"
    text = builtin_suite_path().read_text()
    make_compiler_repo(repo, [("smoke suite", {"suites/smoke.toml": text})])
    store = f"sqlite:///{tmp_path / 'h.sqlite'}"
    args = ("nightly", str(repo / "suites" / "smoke.toml"), "--store", store, "--case", "resnet_s/*", "--quiet")
    first = run_cli(*args, cwd=tmp_path, timeout=900)
    assert first.returncode == 0 and "First night" in first.stdout, first.stdout + first.stderr
    slower = text.replace('passes = ["eliminate_nop_dropout", "fuse_bn_into_conv", "constant_folding", '
                          '"eliminate_duplicate_initializer"]', 'passes = ["fuse_bn_into_conv"]')
    assert slower != text
    (repo / "suites" / "smoke.toml").write_text(slower)
    git(repo, "commit", "-qam", "bn_fused_folded: no constant folding")
    second = run_cli(*args, cwd=tmp_path, timeout=900)
    assert second.returncode == 1, second.stdout + second.stderr
    assert "resnet_s/bn_fused_folded/cpu" in second.stdout and "the suite's pipeline changed" in second.stdout
    out = tmp_path / "show.json"
    show = run_cli("history", "show", "resnet_s/bn_fused_folded/cpu", "--store", store, "--metric", "latency",
                   "--kind", "ratio", "--json", str(out), cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    (series,) = json.loads(out.read_text())["series"]
    last = series["points"][-1]
    assert last["decision"] == "different" and last["value"] > 1.02
    assert last["change"]["status"] == "confirmed"  # the night's check and its same-job re-check agreed


def test_ingest_of_a_batch_with_one_bad_file_stores_nothing(tmp_path):
    from .conftest import REPO

    good = REPO / "tests" / "golden" / "v1" / "result-run.json"
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 2, "cases": "not a list"}')
    store = tmp_path / "h.sqlite"
    proc = run_cli("history", "ingest", str(good), str(bad), "--store", str(store), cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "bad.json" in proc.stderr and not store.exists()
    again = run_cli("history", "ingest", str(good), "--store", str(store), cwd=tmp_path)
    assert again.returncode == 0 and "result document 1, 20 point(s)" in again.stdout, again.stdout + again.stderr


def test_the_history_site_of_the_replay_shows_the_change_on_night_12_in_chromium(replay, tmp_path):
    """Issue 14's done-when: the site built from this store, opened in headless Chromium, marks
    the change point at night 12's commit (docs/history-replay.png with PERFGUARD_WRITE_DOCS=1)."""
    import os

    from perfguard.store import Store

    from .conftest import REPO
    from .test_report import Chromium, _chromium

    out = tmp_path / "site"
    proc = run_cli("history", "site", "--store", replay["store"], "--out", str(out), cwd=replay["tmp"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Store.open(replay["store"], create=False) as store:
        (series,) = store.series(kind="ratio", metric="latency")
    page = (out / "series" / f"{series.id}.html").resolve().as_uri()
    browser = Chromium(_chromium(), tmp_path / "profile")
    try:
        browser.open_page(page, width=1100)
        assert browser.problems(page) == []
        chart = browser.evaluate("""(() => { const svg = document.querySelector('svg.trend');
            const marker = svg.querySelector('g.marker.regression');
            return {dots: svg.querySelectorAll('circle.night').length, commit: marker.dataset.commit,
                    label: marker.textContent.trim()}; })()""")
        assert chart["dots"] == NIGHTS - 1 and chart["commit"] == replay["shas"][24], chart
        assert chart["label"].startswith("+")
        shot = tmp_path / "history-replay.png"
        browser.screenshot(shot, 980)
        assert shot.stat().st_size > 20_000 and browser.problems(page) == []
    finally:
        browser.close()
    if os.environ.get("PERFGUARD_WRITE_DOCS") == "1":
        (REPO / "docs" / "history-replay.png").write_bytes(shot.read_bytes())


def test_prune_drops_documents_older_than_keep_and_refuses_a_bad_age(tmp_path):
    from .conftest import REPO

    golden = REPO / "tests" / "golden" / "v1"
    store = str(tmp_path / "h.sqlite")
    assert run_cli("history", "ingest", str(golden / "result-run.json"), "--store", store).returncode == 0
    kept = run_cli("history", "prune", "--keep", "3650d", "--store", store)
    assert kept.returncode == 0 and "pruned 0 document(s)" in kept.stdout, kept.stdout + kept.stderr
    gone = run_cli("history", "prune", "--keep", "0.001h", "--store", store)  # the golden run is hours old
    assert gone.returncode == 0 and "pruned 1 document(s) and 20 point(s)" in gone.stdout, gone.stdout
    bad = run_cli("history", "prune", "--keep", "a year", "--store", store)
    assert bad.returncode == 2 and "--keep" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
