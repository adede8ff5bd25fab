"""Alerts (issue 25): confirmed changes grouped per (suite, runner class, commit range), the
store's migration that adds them, triage with its event history, and the two commands."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from perfguard.cli._actor import current_user
from perfguard.errors import UserError
from perfguard.store import Change, SeriesKey, Store, schema
from perfguard.store.alert_rows import (
    STATUSES,
    Alert,
    AlertChange,
    AlertEvent,
    AlertExplanation,
    CommitFacts,
    NodeChange,
    group_changes,
)

from .conftest import run_cli

GOLDEN = Path(__file__).parent / "golden" / "v1"
GOOD, BAD, LATER = "a" * 40, "b" * 40, "c" * 40


def _key(case: str, metric: str, kind: str = "absolute", runner: str = "cpu") -> SeriesKey:
    return SeriesKey("smoke", case, "m" * 16, "p" * 16, "ort 1.20", runner, metric, kind)


def _change(change_id: int, key: SeriesKey, ratio: float, good: str = GOOD, bad: str = BAD,
            culprit: str | None = None) -> Change:
    return Change(change_id, change_id, key, good, bad, "2026-12-01T03:00:00.000000Z", ratio, None, None,
                  "confirmed", 9 if culprit else None, culprit, "mycc.passes:extra_work" if culprit else None, "")


# --- grouping (pure) --------------------------------------------------------------------------------

def test_two_models_latency_and_node_count_in_one_range_are_one_alert_with_four_changes():
    changes = [_change(1, _key("a/mycc/cpu", "node_count", runner="cpu:3f2a9c"), 1.5),  # absolute: fingerprinted
               _change(2, _key("a/mycc/cpu", "latency", "ratio"), 1.06, culprit="d" * 40),
               _change(3, _key("b/mycc/cpu", "node_count"), 1.4),
               _change(4, _key("b/mycc/cpu", "latency", "ratio"), 1.08),
               _change(5, _key("b/mycc/cpu", "latency", "ratio"), 0.9, good=BAD, bad=LATER),
               _change(6, _key("b/mycc/cpu", "latency", "ratio", runner="cuda"), 1.1)]
    groups = group_changes(changes)
    assert [(g.runner_class, g.last_commit, g.kind, len(g.changes)) for g in groups] == [
        ("cpu", BAD, "regression", 4), ("cpu", LATER, "improvement", 1), ("cuda", BAD, "regression", 1)]
    first = groups[0]
    assert [(c.key.case, c.key.metric) for c in first.changes] == [  # latency first, then by case
        ("a/mycc/cpu", "latency"), ("b/mycc/cpu", "latency"), ("a/mycc/cpu", "node_count"),
        ("b/mycc/cpu", "node_count")]
    # the one bisected latency change names the culprit of every change of its range
    assert (first.culprit_commit, first.culprit_pass, first.bisect_document_id) == (
        "d" * 40, "mycc.passes:extra_work", 9)
    assert groups[1].culprit_commit is None


def test_an_alert_round_trips_through_json_and_refuses_an_unknown_status():
    alert = Alert(3, "smoke", "cpu", "regression", "wont-fix", GOOD, BAD, "d" * 40, "mycc.passes:extra_work",
                  AlertExplanation("memory", "memory: +106 Transpose nodes", ("Transpose",),
                                   (NodeChange("Transpose", 2, 108),)),
                  (AlertChange(1, "a/mycc/cpu", "latency", "ratio", 1.06, 1.04, 1.08),),
                  "ada", "https://github.com/o/r/issues/1", "looked", "2026-12-01T03:00:00.000000Z",
                  "2026-12-02T03:00:00.000000Z", (AlertEvent("ada", "2026-12-02T03:00:00.000000Z", "untriaged",
                                                             "wont-fix", "looked"),),
                  culprit_facts=CommitFacts("commit 5", "Ann <ann@example.com>", "2026-01-01T00:00:00+00:00"))
    data = json.loads(json.dumps(alert.to_json()))
    assert Alert.from_json(data) == alert and not alert.is_open and alert.cases == ("a/mycc/cpu",)
    # written before the culprit's facts were recorded: read as none
    assert Alert.from_json({k: v for k, v in data.items() if k != "culprit_facts"}).culprit_facts is None
    with pytest.raises(ValueError, match="status.*one of untriaged, .*improvement, found 'later'"):
        Alert.from_json({**data, "status": "later"})
    assert "improvement" in STATUSES and len(STATUSES) == 9


def test_who_is_the_github_actor_else_gits_user_else_the_system_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTOR", "octocat")
    assert current_user() == "octocat"
    monkeypatch.delenv("GITHUB_ACTOR")
    assert current_user()


def test_the_store_starts_no_process() -> None:
    """Who acts on an alert is the front end's to learn (``perfguard.cli._actor``) and the store's
    callers pass it in: no module of the store imports ``subprocess`` or calls ``os``'s process
    functions."""
    import ast

    starters = {"system", "popen", "fork", "posix_spawn", "posix_spawnp"}
    found = []
    for path in sorted((Path(__file__).resolve().parent.parent / "perfguard" / "store").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "subprocess" for n in names):
                found.append(f"{path.name}:{node.lineno} imports subprocess")
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
                    and (node.attr in starters or node.attr.startswith(("exec", "spawn")))):
                found.append(f"{path.name}:{node.lineno} os.{node.attr}")
    assert found == []


# --- the store ----------------------------------------------------------------------------------------

def _old_migrations(tmp_path: Path) -> Path:
    """The migration scripts as revision 0001 shipped them (without 0002)."""
    old = tmp_path / "migrations-0001"
    shutil.copytree(schema.MIGRATIONS_DIR, old, ignore=shutil.ignore_patterns("__pycache__", "000[2-9]_*"))
    return old


CHANGED = [(case, metric, ratio) for case in ("resnet_s/none/cpu", "resnet_s/ort_all/cpu")
           for metric, ratio in (("latency", 1.07), ("node_count", 1.5))]


def _seed(store: Store) -> None:
    """The golden run's series, and two models' latency and node-count changes in one range."""
    store.ingest_file(GOLDEN / "result-run.json")
    ids = {(s.key.case, s.key.metric): s.id for s in store.series() if s.key.kind == "absolute"}
    for case, metric, ratio in CHANGED:
        store.upsert_change(ids[(case, metric)], good_commit=GOOD, bad_commit=BAD, time="2026-12-01T03:00:00Z",
                            ratio=ratio, ci_low=None, ci_high=None, status="confirmed")


def test_a_store_of_revision_0001_is_upgraded_with_its_data_and_then_raises_one_alert(tmp_path: Path) -> None:
    import sqlalchemy as sa

    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    with Store.open(url, migrations=_old_migrations(tmp_path)) as old:  # what perfguard wrote before 0002
        old.ingest_file(GOLDEN / "result-run.json")
        ids = {(s.key.case, s.key.metric): s.id for s in old.series() if s.key.kind == "absolute"}
        series = len(old.series())
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # the changes table of 0001 (this perfguard's Change reads alert_id)
        for case, metric, ratio in CHANGED:
            conn.exec_driver_sql(
                "INSERT INTO changes (series_id, good_commit, bad_commit, time, ratio, status, note) "
                f"VALUES ({ids[(case, metric)]}, '{GOOD}', '{BAD}', '2026-12-01T03:00:00.000000Z', {ratio}, "
                "'confirmed', '')")
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == "0001"
    engine.dispose()
    with Store.open(url) as store:  # the shipped scripts: 0001 -> 0002
        assert [(c.key.case, c.key.metric, c.ratio) for c in store.changes()] == CHANGED
        assert len(store.series()) == series and all(c.alert_id is None for c in store.changes())
        (alert,) = store.raise_alerts("smoke")
        assert (alert.kind, alert.status, alert.first_commit, alert.last_commit) == ("regression", "untriaged",
                                                                                     GOOD, BAD)
        assert len(alert.changes) == 4 and alert.cases == ("resnet_s/none/cpu", "resnet_s/ort_all/cpu")
        assert [e.to_status for e in alert.events] == ["untriaged"] and alert.events[0].from_status is None
        assert store.raise_alerts("smoke") == []  # nothing new: no second alert
        assert {c.alert_id for c in store.changes()} == {alert.id}


def test_a_store_of_revision_0005_gets_its_alerts_culprit_facts_from_their_bisections(tmp_path: Path) -> None:
    import sqlalchemy as sa

    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    old = tmp_path / "migrations-0005"
    shutil.copytree(schema.MIGRATIONS_DIR, old, ignore=shutil.ignore_patterns("__pycache__", "000[6-9]_*"))
    bisect = json.loads((GOLDEN / "bisect-commits.json").read_text())
    sha = bisect["culprits"][0]["commit"]["sha"]
    with Store.open(url, migrations=old) as store:  # what perfguard wrote before 0006
        _seed(store)
        changed = store.changes()
        store.link_bisect(changed[0].id, store.ingest_json(bisect, source="bisect").document_id, sha, None)
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # two alerts as 0005 kept them: one with that culprit, one with a sha none names
        for alert_id, culprit in ((1, sha), (2, "f" * 40)):
            conn.exec_driver_sql(
                "INSERT INTO alerts (id, suite, runner_class, good_commit, bad_commit, kind, status, culprit_commit, "
                f"notes, created_at, updated_at) VALUES ({alert_id}, 'smoke', 'cpu', '{GOOD}', '{alert_id}', "
                f"'regression', 'untriaged', '{culprit}', '', '2026-12-01T03:00:00.000000Z', "
                "'2026-12-01T03:00:00.000000Z')")
        conn.exec_driver_sql(f"UPDATE changes SET alert_id = 1 WHERE id = {changed[0].id}")
        conn.exec_driver_sql(f"UPDATE changes SET alert_id = 2 WHERE id = {changed[1].id}")
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == "0005_pipeline_edits"
    engine.dispose()
    with Store.open(url) as store:  # 0005 -> 0006: backfilled
        assert store.alert(1).culprit_facts == CommitFacts("commit 5", "Test Author <author@example.com>",
                                                           "2026-01-01T00:00:00+00:00")
        assert store.alert(2).culprit_facts is None


@pytest.fixture(params=["sqlite", "postgresql"])
def seeded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Store]]:
    """A store (SQLite, or a fresh PostgreSQL database) with one alert of four changes."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    else:
        import uuid

        from .pg import create_database

        url = create_database(request.getfixturevalue("postgres_url"), f"t_{uuid.uuid4().hex[:16]}")
    with Store.open(url) as store:
        _seed(store)
        store.raise_alerts("smoke")
        yield url, store


def test_a_bisected_change_gives_its_culprit_to_the_whole_alert(seeded: tuple[str, Store]) -> None:
    _, store = seeded
    latency = next(c for c in store.changes() if c.key.metric == "latency")
    store.link_bisect(latency.id, 1, "d" * 40, "mycc.passes:extra_work")  # document 1: no explanations
    (alert,) = store.raise_alerts("smoke")
    assert (alert.culprit_commit, alert.culprit_pass, alert.explanation) == ("d" * 40, "mycc.passes:extra_work",
                                                                             None)
    assert alert.culprit_facts is None  # the document names no such commit


def test_the_alert_records_its_culprits_commit_facts_when_the_culprit_is_attached(
        seeded: tuple[str, Store]) -> None:
    _, store = seeded
    latency = next(c for c in store.changes() if c.key.metric == "latency")
    bisect = json.loads((GOLDEN / "bisect-commits.json").read_text())
    culprit = bisect["culprits"][0]
    store.link_bisect(latency.id, store.ingest_json(bisect, source="bisect").document_id, culprit["commit"]["sha"],
                      culprit["pass"]["name"])
    (alert,) = store.raise_alerts("smoke")
    facts = CommitFacts("commit 5", "Test Author <author@example.com>", "2026-01-01T00:00:00+00:00")
    assert (alert.culprit_commit, alert.culprit_facts) == (culprit["commit"]["sha"], facts)
    assert store.alert(alert.id).culprit_facts == facts


def test_triage_changes_the_status_records_who_and_when_and_wont_fix_accepts_the_level(
        seeded: tuple[str, Store]) -> None:
    _, store = seeded
    (alert,) = store.alerts()
    seen = store.triage(alert.id, status="investigating", assignee="ada", who="bob")
    assert (seen.status, seen.assignee, seen.is_open) == ("investigating", "ada", True)
    done = store.triage(alert.id, status="wont-fix", note="the new layout is worth it",
                        issue_url="https://github.com/o/r/issues/7", who="ada")
    assert [(e.who, e.from_status, e.to_status) for e in done.events] == [
        ("perfguard nightly", None, "untriaged"), ("bob", "untriaged", "investigating"),
        ("ada", "investigating", "wont-fix")]
    assert done.events[-1].note == "the new layout is worth it" and done.notes == "the new layout is worth it"
    assert done.issue_url == "https://github.com/o/r/issues/7" and not done.is_open
    # accepted: its changes are closed (no longer red, not raised again), and listed by status
    assert store.changes() == [] and {c.status for c in store.changes(status="closed")} == {"closed"}
    assert [a.id for a in store.alerts(status="wont-fix")] == [alert.id] and store.alerts(status="untriaged") == []
    # reopened: its changes are confirmed again
    store.triage(alert.id, status="acknowledged", who="ada")
    assert len(store.changes(status="confirmed")) == 4


def test_an_unknown_alert_or_status_is_a_user_error_that_lists_the_valid_ones(seeded: tuple[str, Store]) -> None:
    _, store = seeded
    with pytest.raises(UserError, match=r"no alert 99 \(alerts: 1; `perfguard history alerts` lists them\)"):
        store.alert(99)
    with pytest.raises(UserError, match="unknown alert status 'done': valid statuses are untriaged, acknowledged"):
        store.triage(1, status="done", who="ada")
    with pytest.raises(UserError, match="valid statuses"):
        store.alerts(status="done")


# --- the commands -----------------------------------------------------------------------------------

def test_history_alerts_and_triage_commands(seeded: tuple[str, Store], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url, _ = seeded
    out = tmp_path / "alerts.json"
    proc = run_cli("history", "alerts", "--store", url, "--json", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    document = json.loads(out.read_text())
    assert document["kind"] == "alerts" and len(document["alerts"]) == 1
    alert = Alert.from_json(document["alerts"][0])
    assert alert.status == "untriaged" and len(alert.changes) == 4

    monkeypatch.setenv("GITHUB_ACTOR", "octocat")
    proc = run_cli("history", "triage", str(alert.id), "--status", "invalid", "--note", "noisy runner",
                   "--store", url, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"alert {alert.id}: untriaged -> invalid", proc.stderr
    proc = run_cli("history", "alerts", "--status", "invalid", "--store", url, "--json", str(out), cwd=tmp_path)
    (listed,) = json.loads(out.read_text())["alerts"]
    assert listed["events"][-1]["who"] == "octocat" and listed["events"][-1]["note"] == "noisy runner"

    changes = tmp_path / "changes.json"
    proc = run_cli("history", "changes", "--all", "--store", url, "--json", str(changes), cwd=tmp_path)
    answer = json.loads(changes.read_text())
    assert proc.stdout.index("alerts in") < proc.stdout.index("changes in")  # alerts first
    assert [a["id"] for a in answer["alerts"]] == [alert.id] and {c["alert"] for c in answer["changes"]} == {alert.id}

    for args, expected in ((("99", "--status", "fixed"), "no alert 99 (alerts: 1;"),
                           (("1", "--status", "done"), "valid statuses are untriaged, acknowledged, investigating"),
                           (("x", "--status", "fixed"), "an alert id is a number"),
                           # issue 32: out of SQL's range, or a digit only to str.isdigit (exit 70 before)
                           (("99999999999999999999999", "--status", "fixed"), "an alert id is a number from 0"),
                           (("9223372036854775808", "--status", "fixed"), "an alert id is a number from 0"),
                           (("\u00b2", "--status", "fixed"), "an alert id is a number from 0")):
        proc = run_cli("history", "triage", *args, "--store", url, cwd=tmp_path)
        assert proc.returncode == 2 and expected in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, \
            proc.stderr
    proc = run_cli("history", "alerts", "--status", "done", "--store", url, cwd=tmp_path)
    assert proc.returncode == 2 and "valid statuses are" in proc.stderr


def test_the_culprits_explanation_is_summarised_from_its_bisect_document():
    from perfguard.store.alert_rows import explanation_of

    document = json.loads((Path(__file__).parent / "golden" / "explained" /
                           "bisect-passes-pipelines-explain.json").read_text())
    found = explanation_of(document)
    assert found == AlertExplanation("memory", "+285 us in Transpose, +24 nodes: memory", ("Transpose",),
                                     (NodeChange("Transpose", 0, 24),))
    assert explanation_of({"explanations": [{"case": 1}]}) is None and explanation_of({}) is None


def test_the_nightly_summary_shows_one_row_per_alert_with_its_changes_inside():
    from perfguard.flows.nightly.night import NightReport
    from perfguard.report.nightly import markdown_summary
    from perfguard.store import Night

    alert = Alert(4, "smoke", "cpu", "regression", "untriaged", GOOD, BAD, "d" * 40, "mycc.passes:extra_work",
                  AlertExplanation("memory", "+106 Transpose nodes", ("Transpose",), (NodeChange("Transpose", 2, 108),)),
                  (AlertChange(1, "a/mycc/cpu", "latency", "ratio", 1.06, 1.04, 1.08),
                   AlertChange(2, "b/mycc/cpu", "latency", "ratio", 1.08, 1.05, 1.1),
                   AlertChange(3, "a/mycc/cpu", "node_count", "absolute", 1.5)))
    report = NightReport("smoke", Night(2, "smoke", BAD, "2026-12-02T03:00:00Z", 2),
                         Night(1, "smoke", GOOD, "2026-12-01T03:00:00Z", 1), None, alerts=[alert])
    text = markdown_summary(report)
    rows = [line for line in text.splitlines() if line.startswith("| 4 |")]
    assert len(rows) == 1 and "Nothing new" not in text
    row = rows[0]
    assert "a/mycc/cpu latency (ratio) **+6.0%**" in row and "b/mycc/cpu latency (ratio) **+8.0%**" in row
    assert "a/mycc/cpu node\\_count (absolute) +50.0%" in row or "a/mycc/cpu node_count (absolute) +50.0%" in row
    assert "`dddddddddd`, pass `mycc.passes:extra_work`" in row and "Transpose 2→108" in row


def test_a_later_reverse_step_of_at_least_half_marks_the_alert_fixed_with_the_fixing_range(
        seeded: tuple[str, Store]) -> None:
    _, store = seeded
    (alert,) = store.alerts()
    ids = {(s.key.case, s.key.metric): s.id for s in store.series() if s.key.kind == "absolute"}

    def step(case: str, ratio: float, good: str, bad: str) -> None:
        store.upsert_change(ids[(case, "latency")], good_commit=good, bad_commit=bad, time="2026-12-03T03:00:00Z",
                            ratio=ratio, ci_low=None, ci_high=None, status="confirmed")

    # one case back by more than half (+7 % -> at most 1/1.035 = 0.966), the other not at all: not fixed
    step("resnet_s/none/cpu", 0.95, BAD, LATER)
    (improvement,) = store.raise_alerts("smoke")
    assert improvement.status == "improvement" and store.alert(alert.id).status == "untriaged"
    step("resnet_s/none/cpu", 0.95, LATER, "e" * 40)  # both cases in one later range: the revert
    step("resnet_s/ort_all/cpu", 0.96, LATER, "e" * 40)
    raised = {a.id: a for a in store.raise_alerts("smoke")}
    fixed = raised[alert.id]
    assert (fixed.status, fixed.fix_first_commit, fixed.fix_last_commit) == ("fixed", LATER, "e" * 40)
    assert fixed.events[-1].who == "perfguard nightly" and "reverse step" in fixed.events[-1].note


def test_an_alert_fixed_tonight_is_listed_as_closed_not_as_a_new_regression():
    from perfguard.flows.nightly.night import NightReport
    from perfguard.report.nightly import markdown_summary
    from perfguard.store import Night

    fixed = Alert(4, "smoke", "cpu", "regression", "fixed", GOOD, BAD,
                  changes=(AlertChange(1, "a/mycc/cpu", "latency", "ratio", 1.06),),
                  fix_first_commit=BAD, fix_last_commit=LATER)
    report = NightReport("smoke", Night(3, "smoke", LATER, "2026-12-03T03:00:00Z", 3),
                         Night(2, "smoke", BAD, "2026-12-02T03:00:00Z", 2), None, alerts=[fixed])
    text = markdown_summary(report)
    assert "New confirmed regressions" not in text
    assert "- alert 4, aaaaaaaaaa..bbbbbbbbbb: fixed (fixed in bbbbbbbbbb..cccccccccc): a/mycc/cpu latency" in text


def test_a_range_of_compile_time_changes_alone_raises_no_alert_but_joins_one(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        store.ingest_file(GOLDEN / "result-run.json")
        ids = {(s.key.case, s.key.metric): s.id for s in store.series() if s.key.kind == "absolute"}
        for bad in (BAD, LATER):
            store.upsert_change(ids[("resnet_s/none/cpu", "compile_time")], good_commit=GOOD, bad_commit=bad,
                                time="2026-12-01T03:00:00Z", ratio=1.3, ci_low=None, ci_high=None, status="confirmed")
        assert store.raise_alerts("smoke", alarm_metrics=("latency", "node_count")) == []
        store.upsert_change(ids[("resnet_s/none/cpu", "node_count")], good_commit=GOOD, bad_commit=BAD,
                            time="2026-12-01T03:00:00Z", ratio=1.5, ci_low=None, ci_high=None, status="confirmed")
        (alert,) = store.raise_alerts("smoke", alarm_metrics=("latency", "node_count"))
        assert [c.metric for c in alert.changes] == ["compile_time", "node_count"] and alert.last_commit == BAD
