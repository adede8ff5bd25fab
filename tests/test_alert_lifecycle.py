"""The alert a team acts on (issue 33, items 1-3): the nightly explains each new culprit once, a
revert closes an open (even acknowledged) alert as ``fixed`` with no improvement alert of its own,
and an exact change (node count, artifact size) is bisected by compiling only.

The store-level rules first, on the golden run's series; then one replay of a small real compiler
history (a slowdown, its triage, the revert, an exact-only change) through ``perfguard nightly``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfguard.history.series_changes import EXACT_METRICS
from perfguard.store import Store

GOLDEN = Path(__file__).parent / "golden" / "v1"
GOOD, BAD, LATER, OTHER = "a" * 40, "b" * 40, "c" * 40, "e" * 40
CASES = ("resnet_s/none/cpu", "resnet_s/ort_all/cpu")


def _store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}")


def _step(store: Store, case: str, metric: str, ratio: float, good: str, bad: str) -> None:
    ids = {(s.key.case, s.key.metric): s.id for s in store.series() if s.key.kind == "absolute"}
    store.upsert_change(ids[(case, metric)], good_commit=good, bad_commit=bad, time="2026-12-02T03:00:00Z",
                        ratio=ratio, ci_low=None, ci_high=None, status="confirmed")


def _slowed(store: Store) -> int:
    """One case slowed (+7 % latency, +50 % nodes) in GOOD..BAD, raised and acknowledged."""
    store.ingest_file(GOLDEN / "result-run.json")
    _step(store, CASES[0], "latency", 1.07, GOOD, BAD)
    _step(store, CASES[0], "node_count", 1.5, GOOD, BAD)
    (alert,) = store.raise_alerts("smoke")
    store.triage(alert.id, status="acknowledged", who="ada")
    return alert.id


def test_a_revert_closes_an_acknowledged_alert_as_fixed_and_opens_no_improvement_alert(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        alert_id = _slowed(store)
        _step(store, CASES[0], "latency", 0.95, BAD, LATER)  # the revert: latency and nodes back
        _step(store, CASES[0], "node_count", 1 / 1.5, BAD, LATER)
        raised = store.raise_alerts("smoke")
        assert [(a.id, a.status) for a in raised] == [(alert_id, "fixed")]  # no improvement alert
        alert = store.alert(alert_id)
        assert (alert.fix_first_commit, alert.fix_last_commit) == (BAD, LATER)
        assert [(e.from_status, e.to_status) for e in alert.events][-1] == ("acknowledged", "fixed")
        fix = [c for c in store.changes(status="closed") if c.bad_commit == LATER]
        assert len(fix) == 2 and all(c.alert_id is None and c.note.startswith(f"the fix of alert {alert_id}")
                                     for c in fix)
        assert store.raise_alerts("smoke") == [] and [a.id for a in store.alerts()] == [alert_id]


def test_node_count_back_to_its_level_fixes_the_alert_when_latency_stayed_undecided(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        alert_id = _slowed(store)
        _step(store, CASES[0], "node_count", 1 / 1.5, BAD, LATER)  # exact: no noise; latency not decided
        assert store.alert(alert_id).status == "acknowledged" and [a.kind for a in store.raise_alerts("smoke")] == [
            "improvement"]  # without knowing node count is exact: an improvement of its own
        _step(store, CASES[0], "node_count", 1 / 1.5, LATER, OTHER)
        (fixed,) = store.raise_alerts("smoke", exact_metrics=EXACT_METRICS)
        assert (fixed.id, fixed.status) == (alert_id, "fixed")


def test_a_half_taken_back_is_no_fix_and_an_unrelated_improvement_still_raises_its_alert(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        alert_id = _slowed(store)
        _step(store, CASES[0], "node_count", 1 / 1.1, BAD, LATER)  # +50 % nodes, 10 % back: not a revert
        _step(store, CASES[1], "latency", 0.9, BAD, LATER)  # another case got faster
        (improvement,) = store.raise_alerts("smoke")
        assert improvement.kind == "improvement" and len(improvement.changes) == 2
        assert store.alert(alert_id).status == "acknowledged"
        _step(store, CASES[0], "latency", 0.95, LATER, OTHER)  # the revert, beside an unrelated speed-up
        _step(store, CASES[1], "latency", 0.9, LATER, OTHER)
        raised = {a.id: a for a in store.raise_alerts("smoke", exact_metrics=EXACT_METRICS)}
        assert raised[alert_id].status == "fixed"
        (other,) = [a for a in raised.values() if a.id != alert_id]
        assert other.kind == "improvement" and [c.case for c in other.changes] == [CASES[1]]


def test_nightly_explains_new_culprits_unless_told_not_to() -> None:
    from perfguard.cli import build_parser
    from perfguard.cli.nightly import _explain
    from perfguard.profile.explain import ProfileSettings

    parse = build_parser().parse_args
    assert _explain(parse(["nightly", "s.toml"])) == ProfileSettings()
    assert _explain(parse(["nightly", "s.toml", "--profile-runs", "5"])) == ProfileSettings(runs=5)
    assert _explain(parse(["nightly", "s.toml", "--no-explain"])) is None


def test_one_exact_bisection_per_range_that_timing_did_not_attribute() -> None:
    from perfguard.bisect.document import BisectResult
    from perfguard.flows.nightly.exact_bisections import exact_to_bisect
    from perfguard.store import Change, Series, SeriesKey

    def found(change_id: int, case: str, metric: str, ratio: float, bad: str = BAD) -> tuple[Change, Series]:
        key = SeriesKey("smoke", case, "m" * 16, "p" * 16, "ort", "cpu:3f2a" if metric != "latency" else "cpu",
                        metric, "absolute" if metric != "latency" else "ratio")
        return (Change(change_id, change_id, key, GOOD, bad, "2026-12-02T03:00:00Z", ratio, None, None, "confirmed",
                       None, None, None, ""), Series(change_id, key, 3, "", "", 1.0))

    nodes, size = found(1, "a/mycc/cpu", "node_count", 1.08), found(2, "b/mycc/cpu", "node_count", 1.12)
    artifact = found(3, "b/mycc/cpu", "artifact_size", 1.02)
    latency, later = found(4, "a/mycc/cpu", "latency", 1.05, LATER), found(5, "a/mycc/cpu", "node_count", 1.3, LATER)
    edited = found(6, "a/edited/cpu", "node_count", 1.5, OTHER)
    # the largest exact step of the range; none where a latency bisection found the culprit; none
    # where the suite's own pipeline changed between the nights
    picked = exact_to_bisect([nodes, size, artifact, latency, later, edited],
                             {4: BisectResult("commits", "found")}, {"edited"})
    assert [c.id for c, _ in picked] == [2]
    # a latency bisection that found nothing leaves the range to the exact one
    assert [c.id for c, _ in exact_to_bisect([latency, later], {4: BisectResult("commits", "no-regression")}, ())] == [5]


# --- a small real compiler history -------------------------------------------------------------------

#: The toy compiler's passes: ``extra_work`` inserts WORK no-op Mul(1)/Add(0) pairs after the input
#: (real extra work: a slowdown), ``tag_output`` TAG pairs on the 10 logits at the output
#: (``tests/data/regression_passes.py:tiny_ops``: nodes that ORT keeps and that cost a few
#: microseconds: an exact change under the latency floor).
REGRESSION_PASSES = Path(__file__).parent / "data" / "regression_passes.py"


def passes_source(work: int, tag: int) -> str:
    from .factories import pass_source

    return (f"{pass_source(work)}\n{REGRESSION_PASSES.read_text()}\n\nTAG = {tag}\n\n\n"
            "def tag_output(model):\n    return tiny_ops(model, TAG) if TAG else model\n")


def toy_suite(repo: Path) -> str:
    """Two passes on a small ResNet; a 30 % latency floor, so the tagged logits (+10-20 %: four tiny
    kernels on a 160 us model) are never a latency regression while the slowdown (96 pairs) is far
    above it."""
    from .factories import compiler_suite

    return compiler_suite(repo, max_workers=12, passes=("mycc.passes:extra_work", "mycc.passes:tag_output"),
                          extra='[thresholds]\nlatency = "median:30%"\n')


@pytest.mark.slow
def test_bisect_on_node_count_names_commit_and_pass_by_compiling_only(tmp_path: Path) -> None:
    import json

    from .conftest import run_cli
    from .factories import make_compiler_repo

    versions: list[tuple[str, dict[str, str | None]]] = [
        ("initial", {"mycc/__init__.py": "", "mycc/passes.py": passes_source(0, 0)})]
    for i in range(1, 7):
        versions.append((f"commit {i}", {"mycc/passes.py": passes_source(0, 2)} if i == 4 else
                         {f"docs/n{i}.txt": f"note {i}\n"}))
    repo, shas = make_compiler_repo(tmp_path / "cc", versions)
    suite = tmp_path / "suite.toml"
    suite.write_text(toy_suite(repo))
    out = tmp_path / "bisect.json"
    proc = run_cli("bisect", "commits", "--suite", str(suite), "--case", "r/mycc/cpu", "--good", shas[0],
                   "--bad", shas[6], "--metric", "node_count", "--no-explain", "--json", str(out), cwd=tmp_path,
                   timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(out.read_text())
    assert (document["status"], document["metric"], document["commits"]) == ("found", "node_count", 6)
    (culprit,) = document["culprits"]
    assert culprit["commit"]["sha"] == shas[4] and culprit["pass"]["name"] == "mycc.passes:tag_output"
    # one probe for the two ends, then at most ceil(log2 6) = 3 commits (at least 2), each compiled once
    kinds = [p["kind"] for p in document["probes"]]
    assert kinds[0] == "endpoints" and set(kinds[1:]) == {"exact"} and 2 <= len(kinds) - 1 <= 3, kinds
    assert document["total_probes"] == len(kinds) and len({c for p in document["probes"] for c in p["commits"]}) == \
        len(kinds) + 1
    assert all(p["looks"] == [] and p["verdicts"] == {} for p in document["probes"])
    before, after = (document["probes"][0]["values"][s[:10]] for s in (shas[0], shas[6]))
    assert after == before + 4 and culprit["effect"]["ratio"] == after / before
    assert f"commit {shas[4][:10]}" in proc.stdout and "each version compiled once" in proc.stdout
    bad = run_cli("bisect", "commits", "--suite", str(suite), "--case", "r/mycc/cpu", "--good", shas[0],
                  "--bad", shas[6], "--metric", "speed", cwd=tmp_path)
    assert bad.returncode == 2 and "node_count, artifact_size" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_an_exact_only_alert_has_its_fixing_range_bisected_on_its_exact_metric(tmp_path: Path) -> None:
    from perfguard.flows.bisection.fix_search import bisect_fixes
    from perfguard.progress import Progress
    from perfguard.suite import load_suite
    from perfguard.suite.gates import CheckSettings

    from .factories import make_compiler_repo

    versions: list[tuple[str, dict[str, str | None]]] = [
        ("initial", {"mycc/__init__.py": "", "mycc/passes.py": passes_source(0, 2)}),
        ("commit 1", {"docs/n1.txt": "1\n"}), ("untag the logits", {"mycc/passes.py": passes_source(0, 0)}),
        ("commit 3", {"docs/n3.txt": "3\n"})]
    repo, shas = make_compiler_repo(tmp_path / "cc", versions)
    suite_path = tmp_path / "suite.toml"  # the golden run's case id, resnet_s/none/cpu, on the toy compiler
    suite_path.write_text(toy_suite(repo).replace("[models.r]", "[models.resnet_s]")
                          .replace("[pipelines.mycc]", "[pipelines.none]"))
    suite = load_suite(suite_path)
    with _store(tmp_path) as store:
        store.ingest_file(GOLDEN / "result-run.json")
        _step(store, CASES[0], "node_count", 1.17, GOOD, BAD)  # node count alone: timing saw nothing
        store.raise_alerts("smoke")
        _step(store, CASES[0], "node_count", 1 / 1.17, shas[0], shas[3])  # back, somewhere in 3 commits
        (alert,) = store.raise_alerts("smoke", exact_metrics=EXACT_METRICS)
        assert (alert.status, alert.fix_first_commit, alert.fix_last_commit) == ("fixed", shas[0], shas[3])
        (found,) = bisect_fixes(suite, suite.select(None), store, CheckSettings(), Progress(), [alert])
    assert found.result is not None and found.result.metric == "node_count"
    assert (found.alert.fix_commit, found.alert.fix_pass) == (shas[2], "mycc.passes:tag_output"), found.note


#: The replay's history: commit 2 makes extra_work insert 96 pairs (a slowdown far above the 10 %
#: floor), commit 3 reverts it, commit 5 makes tag_output add 2 pairs on the logits (+4 nodes, no
#: latency change to detect); the others add a note. Nights at commits 1, 2, 3 and 6.
SLOW, REVERT, TAGGED = 2, 3, 5
REPLAY_NIGHTS = (1, 2, 3, 6)


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Four nights over the history, with the team acknowledging the slowdown's alert after night 2.
    Each night's output is kept beside the store (night-N.txt) for a failure's diagnosis."""
    from .conftest import run_cli
    from .factories import git, make_compiler_repo

    tmp = tmp_path_factory.mktemp("lifecycle")
    versions: list[tuple[str, dict[str, str | None]]] = [
        ("initial", {"mycc/__init__.py": "", "mycc/passes.py": passes_source(0, 0)})]
    for i in range(1, 7):
        files: dict[str, str | None] = {f"docs/n{i}.txt": f"note {i}\n"}
        if i in (SLOW, REVERT, TAGGED):
            files["mycc/passes.py"] = passes_source(96 if i == SLOW else 0, 2 if i >= TAGGED else 0)
        versions.append(({SLOW: "extra work", REVERT: "revert the extra work", TAGGED: "tag the logits"}.get(
            i, f"commit {i}"), files))
    repo, shas = make_compiler_repo(tmp / "cc", versions)
    suite = tmp / "suite.toml"
    suite.write_text(toy_suite(repo))
    store = f"sqlite:///{tmp / 'history.sqlite'}"
    nights = []
    for n, commit in enumerate(REPLAY_NIGHTS, start=1):
        git(repo, "checkout", "-q", shas[commit])
        summary = tmp / f"summary-{n}.md"
        proc = run_cli("nightly", str(suite), "--store", store, "--summary", str(summary), "--profile-workers", "1",
                       "--profile-runs", "5", cwd=tmp, timeout=1200)
        (tmp / f"night-{n}.txt").write_text(f"exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
        nights.append({"code": proc.returncode, "out": proc.stdout + proc.stderr,
                       "summary": summary.read_text() if summary.exists() else ""})
        if n == 2:  # the team acknowledges the slowdown
            with Store.open(store, create=False) as opened:
                alerts = [a.id for a in opened.alerts(suite="toy")]
            for alert_id in alerts:
                triaged = run_cli("history", "triage", str(alert_id), "--status", "acknowledged", "--store", store,
                                  cwd=tmp)
                assert triaged.returncode == 0, triaged.stderr
    return {"tmp": tmp, "shas": shas, "store": store, "nights": nights}


@pytest.mark.slow
@pytest.mark.timing
def test_replay_an_explained_alert_fixed_on_revert_and_an_exact_change_bisected_to_commit_and_pass(replay):
    import json

    from markupsafe import escape

    from .conftest import run_cli

    shas, nights = replay["shas"], replay["nights"]
    assert [n["code"] for n in nights] == [0, 1, 0, 1], [n["out"][-2000:] for n in nights]
    with Store.open(replay["store"], create=False) as store:
        alerts = store.alerts(suite="toy")
        assert len(alerts) == 2, [(a.kind, a.status, a.first_commit, a.last_commit,
                                   [(c.case, c.metric, c.kind, c.ratio) for c in a.changes]) for a in alerts]
        slow, tagged = alerts  # nothing else: no improvement alert for the revert
        # night 2: the slowdown's alert, its culprit explained once (the profile of parent and culprit)
        assert (slow.first_commit, slow.last_commit, slow.culprit_commit, slow.culprit_pass) == (
            shas[1], shas[SLOW], shas[SLOW], "mycc.passes:extra_work")
        assert slow.explanation is not None and slow.explanation.headline
        assert "| 1 | untriaged |" in nights[1]["summary"] and slow.explanation.dimension in nights[1]["summary"]
        # night 3: the revert closes the acknowledged alert as fixed, with its fixing commit
        assert [(e.from_status, e.to_status) for e in slow.events if e.from_status != e.to_status] == [
            (None, "untriaged"), ("untriaged", "acknowledged"), ("acknowledged", "fixed")]
        assert slow.events[-1].note.startswith(f"fix bisection: fixed by {shas[REVERT][:10]}")
        assert (slow.status, slow.fix_first_commit, slow.fix_last_commit, slow.fix_commit) == (
            "fixed", shas[SLOW], shas[REVERT], shas[REVERT])
        assert "### Alerts closed" in nights[2]["summary"] and "Improvements" not in nights[2]["summary"]
        # night 4: latency under its floor, node count up: bisected on node count by compiling only
        assert (tagged.kind, tagged.first_commit, tagged.last_commit) == ("regression", shas[REVERT], shas[6])
        assert {c.metric for c in tagged.changes} >= {"node_count"} and "latency" not in {
            c.metric for c in tagged.changes}
        assert (tagged.culprit_commit, tagged.culprit_pass) == (shas[TAGGED], "mycc.passes:tag_output")
        # the node count bisected; the range's other exact changes tested at its culprit (attributed)
        (change,) = [c for c in store.changes(suite="toy") if c.alert_id == tagged.id and c.bisect_document_id
                     and c.key.metric == "node_count"]
        bisection = store.document(change.bisect_document_id)
    assert (bisection["metric"], bisection["status"], bisection["commits"]) == ("node_count", "found", 3)
    assert len(bisection["probes"]) - 1 <= 2 and all(p["looks"] == [] for p in bisection["probes"])  # ceil(log2 3)
    assert "not bisected" not in nights[3]["summary"] and "bisected on node\\_count" in nights[3]["summary"]
    out = replay["tmp"] / "alerts.json"
    listed = run_cli("history", "alerts", "--store", replay["store"], "--json", str(out), cwd=replay["tmp"])
    assert listed.returncode == 0 and slow.explanation.dimension in listed.stdout, listed.stdout + listed.stderr
    shown = {a["id"]: a["explanation"] for a in json.loads(out.read_text())["alerts"]}
    assert shown[slow.id]["headline"] == slow.explanation.headline and shown[tagged.id] is not None
    site = replay["tmp"] / "site"  # the alert's own page says why
    built = run_cli("history", "site", "--store", replay["store"], "--out", str(site), cwd=replay["tmp"])
    assert built.returncode == 0, built.stdout + built.stderr
    page = (site / f"alert-{tagged.id}.html").read_text()
    assert str(escape(tagged.explanation.headline)) in page and "No explanation" not in page


@pytest.mark.slow
def test_bisect_on_instructions_counts_each_version_once_and_names_the_commit(tmp_path: Path) -> None:
    """Issue 34: a counted metric bisects like node count, one count under Valgrind per version
    (endpoints, then one commit of three), no timing and no confirmation round."""
    import json
    import shutil

    from .conftest import run_cli
    from .factories import make_compiler_repo

    if shutil.which("valgrind") is None:
        if os.environ.get("CI"):
            pytest.fail("valgrind is missing under CI=true (.ci/run installs it)")
        pytest.skip("valgrind is not installed (.ci/run installs it in CI)")
    versions: list[tuple[str, dict[str, str | None]]] = [
        ("initial", {"mycc/__init__.py": "", "mycc/passes.py": passes_source(0, 0)}),
        ("notes", {"docs/n1.txt": "note\n"}),
        ("tag the logits", {"mycc/passes.py": passes_source(0, 2)}),
        ("more notes", {"docs/n2.txt": "note\n"})]
    repo, shas = make_compiler_repo(tmp_path / "cc", versions)
    suite = tmp_path / "suite.toml"
    suite.write_text(toy_suite(repo))
    out = tmp_path / "bisect.json"
    proc = run_cli("bisect", "commits", "--suite", str(suite), "--case", "r/mycc/cpu", "--good", shas[0],
                   "--bad", shas[3], "--metric", "instructions", "--no-explain", "--json", str(out), cwd=tmp_path,
                   timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(out.read_text())
    assert (document["status"], document["metric"]) == ("found", "instructions"), document
    (culprit,) = document["culprits"]
    assert culprit["commit"]["sha"] == shas[2]
    kinds = [p["kind"] for p in document["probes"]]
    assert kinds[0] == "endpoints" and set(kinds[1:]) <= {"exact"} and len(kinds) - 1 <= 2, kinds
    assert all(p["looks"] == [] and p["verdicts"] == {} for p in document["probes"])
    before, after = (document["probes"][0]["values"][s[:10]] for s in (shas[0], shas[3]))
    assert after > before * 1.0025  # four more kernels per inference: far above the 0.25 % step
