"""``perfguard history notify``: alerts filed, updated and closed as GitHub issues, synced back.

The GitHub here is :class:`FakeGitHub`, a local HTTP server that fakes GitHub's REST API (the few
endpoints notify calls) and records every request. The alerts are real: a SQLite store of three
nights of the golden pipeline check, two confirmed changes upserted at one commit range and linked
to the golden bisect document, grouped by ``Store.raise_alerts`` into one alert.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from perfguard.history.github import GitHub
from perfguard.history.notify import LABEL, alert_marker, issue_title, notify, state_marker
from perfguard.store import Store
from perfguard.store.alert_rows import Alert

from .conftest import run_cli
from .test_history_site import GOLDEN, SUITE, commit_of, night_document

REPO_NAME = "octo/compiler"
TOKEN = "ghp_notARealTokenButLongEnough1234"
SITE = "https://octo.github.io/compiler/history"


class FakeGitHub:
    """Fakes the few endpoints of GitHub's REST API that ``perfguard history notify`` calls (list a
    label's issues, read an issue and its comments, create an issue, comment, update/close, the pull
    requests of a commit, the token's user), plus a
    webhook sink at ``/hook``, on 127.0.0.1 (an ``http.server`` in a thread, port 0). Issues live in
    memory and are listed newest first, as GitHub lists them; every request is recorded (method,
    path, JSON body, Authorization header). ``fail`` makes every API request answer with that HTTP
    status (``"not json"``: a 200 that is not JSON). ``user_login`` is the token's user: None answers
    ``GET /user`` with 403, as GitHub does for an installation token (Actions' ``GITHUB_TOKEN``),
    whose issues are opened as ``github-actions[bot]``. ``raw``, when set, answers a request itself
    (a hostile server: a redirect, a drip, an endless body) and returns True when it did."""

    def __init__(self) -> None:
        self.issues: list[dict[str, Any]] = []
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.authorizations: set[str] = set()
        self.hooks: list[Any] = []
        self.pulls: dict[str, list[dict[str, Any]]] = {}  # commit sha -> its pull requests
        self.fail: int | str | None = None
        self.user_login: str | None = None
        self.raw: Any = None  # Callable[[BaseHTTPRequestHandler, str], bool]
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _answer(self, status: int, body: Any) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                fake.requests.append((method, self.path, body))
                if fake.raw is not None and fake.raw(self, method):
                    return None
                if self.path == "/hook":
                    fake.hooks.append(body)
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                    return
                fake.authorizations.add(self.headers.get("Authorization", ""))
                if fake.fail == "not json":
                    self.send_response(200)
                    self.send_header("Content-Length", "6")
                    self.end_headers()
                    self.wfile.write(b"<html>")
                    return None
                if fake.fail is not None:
                    return self._answer(int(fake.fail), {"message": "Server Error"})
                status, answer = fake.route(method, urlsplit(self.path), body)
                self._answer(status, answer)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()

    def writes(self) -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] != "GET" and r[1] != "/hook"]

    @property
    def author(self) -> str:
        return self.user_login or "github-actions[bot]"

    def route(self, method: str, url: Any, body: Any) -> tuple[int, Any]:
        if url.path == "/user":
            if self.user_login is None:
                return 403, {"message": "Resource not accessible by integration"}
            return 200, {"login": self.user_login}
        commits = f"/repos/{REPO_NAME}/commits/"
        if url.path.startswith(commits) and url.path.endswith("/pulls") and method == "GET":
            return 200, self.pulls.get(url.path[len(commits):-len("/pulls")], [])
        prefix = f"/repos/{REPO_NAME}/issues"
        if not url.path.startswith(prefix):
            return 404, {"message": "Not Found"}
        rest = url.path[len(prefix):].strip("/").split("/") if url.path != prefix else []
        if not rest and method == "GET":
            query = parse_qs(url.query)
            label = query.get("labels", [""])[0]
            page, per_page = int(query.get("page", ["1"])[0]), int(query.get("per_page", ["30"])[0])
            creator = query.get("creator", [""])[0]
            found = [i for i in reversed(self.issues) if (not label or label in [lb["name"] for lb in i["labels"]])
                     and (not creator or i["user"]["login"] == creator)]
            return 200, found[(page - 1) * per_page: page * per_page]
        if not rest and method == "POST":
            number = len(self.issues) + 1
            issue = {"number": number, "title": body["title"], "body": body["body"], "state": "open",
                     "state_reason": None, "labels": [{"name": n} for n in body.get("labels", [])],
                     "html_url": f"https://github.example/{REPO_NAME}/issues/{number}", "closed_by": None,
                     "user": {"login": self.author}}
            self.issues.append(issue)
            return 201, issue
        if int(rest[0]) in self.pull_numbers():
            if rest[1:] == ["comments"] and method == "GET":
                return 200, self.comments.get(int(rest[0]), [])
            if rest[1:] == ["comments"] and method == "POST":
                self.comments.setdefault(int(rest[0]), []).append({"id": len(self.requests), "body": body["body"]})
                return 201, self.comments[int(rest[0])][-1]
            return 404, {"message": "Not Found"}
        issue = self.issues[int(rest[0]) - 1]
        if len(rest) == 1 and method == "GET":
            return 200, issue
        if len(rest) == 1 and method == "PATCH":
            issue.update(body)
            if body.get("state") == "closed":
                issue["closed_by"] = {"login": "perfguard-bot"}
            return 200, issue
        if rest[1:] == ["comments"] and method == "GET":
            return 200, self.comments.get(issue["number"], [])
        if rest[1:] == ["comments"] and method == "POST":
            comment = {"id": len(self.requests), "body": body["body"], "user": {"login": self.author}}
            self.comments.setdefault(issue["number"], []).append(comment)
            return 201, comment
        return 404, {"message": "Not Found"}

    def pull_numbers(self) -> set[int]:
        return {int(p["number"]) for found in self.pulls.values() for p in found}

    def close_by_person(self, number: int, reason: str, login: str) -> None:
        self.issues[number - 1].update(state="closed", state_reason=reason, closed_by={"login": login})


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    server = FakeGitHub()
    yield server
    server.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """Three nights; at night 2 the latency of two cases regresses (one bisected to a culprit)."""
    with Store.open(f"sqlite:///{tmp_path / 'history.sqlite'}") as opened:
        for night in range(3):
            done = opened.ingest_json(night_document(night), source=f"night {night}")
            opened.record_night(SUITE, commit_of(night), done.document_id)
        ratio = sorted(opened.series(kind="ratio", metric="latency"), key=lambda s: s.key.case)
        first = opened.upsert_change(ratio[0].id, good_commit=commit_of(1), bad_commit=commit_of(2),
                                     time="2026-03-03T03:00:00.000000Z", ratio=1.08, ci_low=1.06, ci_high=1.10,
                                     status="confirmed")
        bisect = json.loads((GOLDEN / "bisect-commits.json").read_text())
        linked = opened.ingest_json(bisect, source="bisect")
        culprit = bisect["culprits"][0]
        opened.link_bisect(first.id, linked.document_id, culprit["commit"]["sha"], culprit["pass"]["name"])
        opened.upsert_change(ratio[1].id, good_commit=commit_of(1), bad_commit=commit_of(2),
                             time="2026-03-03T03:00:00.000000Z", ratio=1.06, ci_low=1.04, ci_high=1.08,
                             status="confirmed")
        opened.raise_alerts(SUITE)
        yield opened


def github(fake: FakeGitHub, api_url: str | None = None) -> GitHub:
    return GitHub(REPO_NAME, TOKEN, api_url=api_url or fake.url)


def only_alert(store: Store) -> Alert:
    (alert,) = store.alerts(suite=SUITE)
    return alert


def test_one_issue_per_alert_with_title_table_explanation_links_label_and_marker(fake: FakeGitHub,
                                                                                store: Store) -> None:
    alert = only_alert(store)
    assert alert.culprit_commit and len(alert.changes) == 2
    done = notify(store, github(fake), site_url=SITE, webhook=fake.url + "/hook", who="ada", say=lambda _: None)
    assert done.warnings == [] and len(done.created) == 1 and fake.authorizations == {f"Bearer {TOKEN}"}
    (issue,) = fake.issues
    assert issue["labels"] == [{"name": LABEL}]
    assert issue["title"] == issue_title(alert)
    assert alert.culprit_commit[:10] in issue["title"] and "+8.0%" in issue["title"]
    body = issue["body"]
    assert alert_marker(alert) in body and state_marker(alert) in body
    assert "| case | metric | change | before → after | interval |" in body and "+6.0%" in body
    assert f"{SITE}/changes/{alert.changes[0].change_id}.html" in body
    # the alert's own page, not the site's index; the culprit's subject and author from its bisection
    assert f"{SITE}/alert-{alert.id}.html" in body and "index.html" not in body
    assert "“commit 5” by Test Author &lt;author@\u200bexample.com&gt;, pass `mycc.passes:extra_work`" in body
    assert "\\" not in issue["title"] and all(case in issue["title"] for case in alert.cases[:3])
    assert [e.to_status for e in only_alert(store).events] == ["untriaged"]  # linking the issue is no event
    if alert.explanation is not None:
        assert "**Why**" in body
    assert only_alert(store).issue_url == issue["html_url"]
    (hook,) = fake.hooks
    assert hook["event"] == "new" and hook["issue_url"] == issue["html_url"] and hook["alert"]["id"] == alert.id
    assert isinstance(hook["text"], str) and "\n" not in hook["text"]


def test_a_rerun_posts_nothing_new_even_when_the_store_forgot_the_issue(fake: FakeGitHub, store: Store) -> None:
    notify(store, github(fake), who="ada", say=lambda _: None)
    writes = len(fake.writes())
    notify(store, github(fake), who="ada", say=lambda _: None)
    assert len(fake.writes()) == writes
    store.triage(only_alert(store).id, issue_url="", who="test")  # a store copy that lost the link
    done = notify(store, github(fake), who="ada", say=lambda _: None)
    assert len(fake.writes()) == writes and done.created == [] and done.commented == []
    assert only_alert(store).issue_url == fake.issues[0]["html_url"]  # found again by its marker


def test_a_grown_alert_gets_one_update_comment_and_a_fixed_one_is_closed(fake: FakeGitHub, store: Store) -> None:
    notify(store, github(fake), who="ada", say=lambda _: None)
    series = sorted(store.series(kind="ratio", metric="latency"), key=lambda s: s.key.case)[2]
    store.upsert_change(series.id, good_commit=commit_of(1), bad_commit=commit_of(2),
                        time="2026-03-03T03:00:00.000000Z", ratio=1.09, ci_low=1.07, ci_high=1.11, status="confirmed")
    store.raise_alerts(SUITE)
    assert len(only_alert(store).changes) == 3
    done = notify(store, github(fake), webhook=fake.url + "/hook", who="ada", say=lambda _: None)
    assert len(done.commented) == 1 and done.closed == []
    (comment,) = fake.comments[1]
    assert state_marker(only_alert(store)) in comment["body"] and "3 change(s)" in comment["body"]
    assert [h["event"] for h in fake.hooks] == ["changed"]
    notify(store, github(fake), who="ada", say=lambda _: None)
    assert len(fake.comments[1]) == 1  # the same state is not reported twice

    store.triage(only_alert(store).id, status="fixed", note="reverse step at night 3", who="perfguard nightly")
    store.set_fix(only_alert(store).id, commit_of(3), "mycc.passes:revert", None, "fix bisection: found")
    done = notify(store, github(fake), who="ada", say=lambda _: None)
    assert len(done.closed) == 1 and len(fake.comments[1]) == 2 and "**Fixed**" in fake.comments[1][-1]["body"]
    assert f"Fixed by `{commit_of(3)[:10]} (mycc.passes:revert)`" in fake.comments[1][-1]["body"]
    assert fake.issues[0]["state"] == "closed" and fake.issues[0]["state_reason"] == "completed"
    writes = len(fake.writes())
    notify(store, github(fake), who="ada", say=lambda _: None)
    assert len(fake.writes()) == writes


def test_an_update_comment_says_what_changed_status_assignee_and_note(fake: FakeGitHub, store: Store) -> None:
    notify(store, github(fake), who="ada", say=lambda _: None)
    alert = only_alert(store)
    store.triage(alert.id, assignee="ada", note="looking at the <b>pass</b>", who="bob")
    assert only_alert(store).events == alert.events  # no acknowledged -> acknowledged: no self-transition
    done = notify(store, github(fake), who="ada", say=lambda _: None)
    assert len(done.commented) == 1
    (comment,) = fake.comments[1]
    said = comment["body"]
    assert "- assignee: ada (was nobody)" in said and "- note: looking at the &lt;b&gt;pass&lt;/b&gt;" in said
    assert "- status:" not in said  # the status did not move
    store.triage(alert.id, status="investigating", who="ada")
    notify(store, github(fake), who="ada", say=lambda _: None)
    second = fake.comments[1][-1]["body"]
    assert "- status: `untriaged` → `investigating`" in second
    assert "- assignee:" not in second and "- note:" not in second  # told already


def test_an_exact_change_shows_before_and_after_not_a_zero_width_interval(fake: FakeGitHub, store: Store) -> None:
    nodes = next(s for s in store.series(kind="absolute", metric="node_count")
                 if len({p.value for p in store.points(s.id)}) == 1)
    level = store.points(nodes.id)[0].value
    ratio = (level + 9) / level
    change = store.upsert_change(nodes.id, good_commit=commit_of(1), bad_commit=commit_of(2),
                                 time="2026-03-03T03:00:00.000000Z", ratio=ratio, ci_low=ratio, ci_high=ratio,
                                 status="confirmed")
    store.raise_alerts(SUITE)
    # the series' points say the same before and after: the levels shown are the store's, not derived
    from perfguard.history.notify import issue_facts

    facts = issue_facts(store, only_alert(store))
    (exact,) = facts.levels
    assert (exact.change_id, exact.before, exact.after) == (change.id, level, level)
    notify(store, github(fake), who="ada", say=lambda _: None)
    body = fake.issues[0]["body"]
    row = next(line for line in body.splitlines() if "node\\_count" in line and "| " in line)
    assert f"{level:g} → {level:g}" in row and row.rstrip().endswith("| exact |")
    pct = f"{ratio - 1:+.1%}"
    assert f"[{pct}, {pct}]" not in body


def test_who_is_the_actor_then_by_then_the_global_git_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from perfguard.cli._actor import current_user

    config = tmp_path / "global.gitconfig"
    config.write_text("[user]\n\tname = Global Person\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    folder = tmp_path / "compiler"
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run(["git", "-C", str(folder), "config", "user.name", "Folder Person"], check=True)
    monkeypatch.chdir(folder)
    monkeypatch.delenv("GITHUB_ACTOR", raising=False)
    assert current_user() == "Global Person"  # not the folder's repository identity
    assert current_user("carol") == "carol"
    monkeypatch.setenv("GITHUB_ACTOR", "octocat")
    assert current_user("carol") == "octocat"


@pytest.mark.parametrize(("status", "reason"), [("backed-out", "completed"), ("invalid", "not_planned"),
                                                ("expected", "not_planned")])
def test_an_alert_triaged_closed_closes_its_issue(fake: FakeGitHub, store: Store, status: str, reason: str) -> None:
    notify(store, github(fake), who="ada", say=lambda _: None)
    store.triage(only_alert(store).id, status=status, who="someone")
    notify(store, github(fake), who="ada", say=lambda _: None)
    assert fake.issues[0]["state"] == "closed" and fake.issues[0]["state_reason"] == reason
    assert only_alert(store).status == status  # closing it ourselves does not read back as wont-fix


def test_an_issue_closed_as_not_planned_makes_the_alert_wont_fix(fake: FakeGitHub, store: Store) -> None:
    notify(store, github(fake), who="ada", say=lambda _: None)
    fake.close_by_person(1, "not_planned", "maintainer-anna")
    done = notify(store, github(fake), who="ada", say=lambda _: None)
    alert = only_alert(store)
    assert done.triaged == [alert.id] and alert.status == "wont-fix"
    assert alert.events[-1].who == "maintainer-anna" and alert.events[-1].to_status == "wont-fix"
    assert not [r for r in fake.writes() if r[0] == "POST" and r[1].endswith("/comments")]
    notify(store, github(fake), who="ada", say=lambda _: None)
    assert len(only_alert(store).events) == len(alert.events)


def test_an_issue_closed_as_completed_by_a_person_leaves_the_alert_alone(fake: FakeGitHub, store: Store) -> None:
    notify(store, github(fake), who="ada", say=lambda _: None)
    fake.close_by_person(1, "completed", "maintainer-anna")
    notify(store, github(fake), who="ada", say=lambda _: None)
    assert only_alert(store).status == "untriaged"


def test_no_issue_for_an_alert_closed_before_anyone_was_told(fake: FakeGitHub, store: Store) -> None:
    store.triage(only_alert(store).id, status="invalid", who="someone")
    notify(store, github(fake), who="ada", say=lambda _: None)
    assert fake.issues == []


def test_hostile_names_are_data_in_the_title_and_the_marker() -> None:
    from perfguard.history.notify import issue_body
    from perfguard.store.alert_rows import AlertChange

    alert = Alert(7, "suite --> <b>x</b>", "cpu", "regression", "untriaged", "a" * 40, "b" * 40, "c" * 40,
                  "evil_pass @everyone", None,
                  (AlertChange(1, "m|o`d <img src=x>/p/cpu", "latency", "ratio", 1.25, None, None),))
    title = issue_title(alert)  # GitHub shows a title as plain text: names as they are, one line
    assert "evil_pass @everyone" in title and "m|o`d <img src=x>/p/cpu" in title and "\\" not in title
    bad = Alert(8, "s", "cpu", "regression", "untriaged", "a" * 40, "b" * 40, None, None, None,
                (AlertChange(1, "new\nline\x1b[31m" + "x" * 400, "latency", "ratio", 1.25, None, None),))
    hostile = issue_title(bad)
    assert "\n" not in hostile and "\x1b" not in hostile and "\\x1b" in hostile and len(hostile) <= 240 + 12
    body = issue_body(alert)
    assert [line.count("-->") for line in body.splitlines()[:2]] == [1, 1]  # no name ends a marker early
    assert "<img" not in body and "`suite --> <b>x</b>`" in body  # a code span shows HTML as text


def run_notify(fake: FakeGitHub, store: Store, monkeypatch: pytest.MonkeyPatch, *extra: str,
               api_url: str | None = None) -> Any:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    return run_cli("history", "notify", "--repo", REPO_NAME, "--store", store.url, "--api-url",
                   api_url or fake.url, *extra)


def test_the_command_files_the_issue_and_never_prints_the_token(fake: FakeGitHub, store: Store,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    proc = run_notify(fake, store, monkeypatch, "--site-url", SITE)
    assert proc.returncode == 0, proc.stderr
    assert len(fake.issues) == 1 and "1 issue(s) opened" in proc.stdout
    assert TOKEN not in proc.stdout + proc.stderr


@pytest.mark.parametrize("failure", ["500", "unreachable", "not json"])
def test_a_failing_api_is_a_warning_and_the_night_goes_on(fake: FakeGitHub, store: Store,
                                                           monkeypatch: pytest.MonkeyPatch, failure: str) -> None:
    api_url = fake.url
    if failure == "500":
        fake.fail = 500
    elif failure == "unreachable":
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            api_url = f"http://127.0.0.1:{free.getsockname()[1]}"
    else:
        fake.fail = "not json"
    proc = run_notify(fake, store, monkeypatch, api_url=api_url)
    assert proc.returncode == 0, proc.stderr
    assert "warning: notify:" in proc.stdout and "Traceback" not in proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    assert fake.issues == [] and only_alert(store).issue_url is None


def test_a_missing_token_is_a_warning_and_a_bad_repo_is_bad_input(fake: FakeGitHub, store: Store,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    proc = run_cli("history", "notify", "--repo", REPO_NAME, "--store", store.url, "--api-url", fake.url)
    assert proc.returncode == 0 and "GITHUB_TOKEN" in proc.stdout and fake.requests == []
    proc = run_cli("history", "notify", "--repo", "not a repo", "--store", store.url)
    assert proc.returncode == 2 and "--repo" in proc.stderr and "Traceback" not in proc.stderr


def test_a_plan_records_the_writes_for_a_job_that_runs_no_perfguard(fake: FakeGitHub, store: Store,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    """``--plan``: issues are read, nothing is written; the workflow's posting job sends the plan
    with ``gh api`` (done here with urllib); the next plan is empty and links the issue."""
    from perfguard.history.transport import Session

    plan = tmp_path / "plan.json"
    proc = run_notify(fake, store, monkeypatch, "--plan", str(plan))
    assert proc.returncode == 0, proc.stderr
    assert fake.writes() == [] and TOKEN not in plan.read_text()
    document = json.loads(plan.read_text())
    assert document["version"] == 1 and document["repo"] == REPO_NAME
    (create,) = document["requests"]
    assert create["method"] == "POST" and create["path"] == f"repos/{REPO_NAME}/issues"
    for request in document["requests"]:
        Session().json(request["method"], f"{fake.url}/{request['path']}", request["body"], {})
    proc = run_notify(fake, store, monkeypatch, "--plan", str(plan))
    assert proc.returncode == 0 and json.loads(plan.read_text())["requests"] == []
    assert only_alert(store).issue_url == fake.issues[0]["html_url"]


def test_the_pull_request_that_merged_the_culprit_gets_one_comment(fake: FakeGitHub, store: Store) -> None:
    alert = only_alert(store)
    assert alert.culprit_commit
    fake.pulls[alert.culprit_commit] = [{"number": 500, "merged_at": None},
                                        {"number": 501, "merged_at": "2026-03-02T10:00:00Z"}]
    done = notify(store, github(fake), who="ada", say=lambda _: None)
    assert done.pulls == [501] and done.warnings == [] and 500 not in fake.comments
    (comment,) = fake.comments[501]
    assert "<!-- perfguard-culprit:" in comment["body"] and fake.issues[0]["html_url"] in comment["body"]
    store.triage(alert.id, status="investigating", who="someone")  # an update: the culprit is asked again
    done = notify(store, github(fake), who="ada", say=lambda _: None)
    assert len(done.commented) == 1 and done.pulls == [] and len(fake.comments[501]) == 1


def test_a_culprit_github_does_not_know_is_a_warning_and_the_issue_stays_filed(fake: FakeGitHub,
                                                                               store: Store) -> None:
    alert = only_alert(store)
    assert alert.culprit_commit
    real_route = fake.route

    def route(method: str, url: Any, body: Any) -> tuple[int, Any]:
        if "/commits/" in url.path:
            return 422, {"message": "No commit found for SHA"}
        return real_route(method, url, body)

    fake.route = route  # type: ignore[method-assign]
    done = notify(store, github(fake), webhook=fake.url + "/hook", who="ada", say=lambda _: None)
    assert len(done.created) == 1 and len(fake.hooks) == 1
    assert len(done.warnings) == 1 and "HTTP 422" in done.warnings[0]
