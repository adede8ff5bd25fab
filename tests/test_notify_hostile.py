"""``history notify`` against a hostile or broken GitHub (issue 32, items 3 to 9): every size bounded,
no redirect followed, one deadline per request and per run, bad URLs refused before any request,
no secret on stderr or in any file, GitHub's strings escaped, and no duplicate or silenced alert.

The GitHub is :class:`tests.test_notify.FakeGitHub` (a local HTTP server faking the REST API's
few endpoints notify calls); its ``raw`` hook turns it hostile: a redirect, a body dripped one
byte at a time, an endless body, JSON nested 100,000 deep. The alerts are real: the SQLite store
of :func:`tests.test_notify.store`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from perfguard.history.github import GitHub
from perfguard.history.notify import LABEL, alert_marker, notify
from perfguard.history.transport import Limits, Session, check_url, url_problem
from perfguard.store import Store

from .conftest import REPO, run_cli
from .test_notify import REPO_NAME, TOKEN, FakeGitHub, fake, only_alert, run_notify, store  # noqa: F401

SECRET = "S3CRETwebhookPath"


def github(server: FakeGitHub, **limits: Any) -> GitHub:
    return GitHub(REPO_NAME, TOKEN, api_url=server.url, session=Session(Limits(**limits)))


def no_control_characters(text: str) -> None:
    """Nothing GitHub sent can move the cursor or start a GitHub Actions workflow command."""
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text), text
    assert not any(line.lstrip().startswith("::") for line in text.splitlines()), text


# --- URLs: validated before any request ---------------------------------------------------------------

@pytest.mark.parametrize("url", [":abc", "http://[::1", "http://h:abc/x", "ftp://h/x", "file:///etc/passwd",
                                 "http:///nohost", f"http://h/services/{SECRET} x", "http://h/\x1b[31m",
                                 "http://user:pw@h/x", "http://h/caf\u00e9", "http://h:0/x", "http://h:99999/x"])
def test_a_url_notify_cannot_use_is_named_by_its_host_only(url: str) -> None:
    assert url_problem(url) is not None
    with pytest.raises(Exception, match="--webhook: the URL at host") as refused:
        check_url(url, "--webhook")
    assert SECRET not in str(refused.value) and "\x1b" not in str(refused.value) and "pw" not in str(refused.value)
    assert url_problem("https://hooks.example/services/T0/B0/x?y=1") is None


@pytest.mark.parametrize(("option", "url"), [("--api-url", ":abc"), ("--api-url", "http://[::1"),
                                             ("--webhook", f"http://hooks.example/services/T0/B0/{SECRET} x")])
def test_a_malformed_url_is_exit_2_with_one_line_before_any_request(fake: FakeGitHub, store: Store,  # noqa: F811
                                                                    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                    option: str, url: str) -> None:
    """Was exit 70 (``:abc``, ``http://[::1``); a webhook with a space was exit 70 after the issue was
    opened, with the whole URL on stderr and in the traceback file."""
    extra = ["--webhook", url] if option == "--webhook" else []
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    proc = run_notify(fake, store, monkeypatch, *extra, api_url=url if option == "--api-url" else None)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"perfguard: error: {option}: the URL at host ")
    assert len(proc.stderr.strip().splitlines()) == 1 and SECRET not in proc.stderr + proc.stdout
    assert fake.requests == [] and fake.issues == []
    assert not list(tmp_path.glob("perfguard-traceback-*"))


# --- redirects: never followed ------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["other-host", "ftp"])
def test_a_redirect_is_a_warning_and_its_answer_is_not_trusted(fake: FakeGitHub, store: Store,  # noqa: F811
                                                               target: str) -> None:
    """A POST answered by a 302 to another host recorded that host's issue #99; urllib also
    followed a redirect to ftp://. Now nothing is followed and the token goes nowhere else."""
    other = FakeGitHub()
    elsewhere = json.dumps({"number": 99, "title": "elsewhere", "body": "", "state": "open", "state_reason": None,
                            "labels": [], "html_url": "https://elsewhere.example/x/y/issues/99"}).encode()

    def answer_99(handler: BaseHTTPRequestHandler, method: str) -> bool:
        handler.send_response(201)
        handler.send_header("Content-Length", str(len(elsewhere)))
        handler.end_headers()
        handler.wfile.write(elsewhere)
        return True

    other.raw = answer_99
    location = f"{other.url}/repos/{REPO_NAME}/issues/99" if target == "other-host" else "ftp://127.0.0.1/x"

    def redirect(handler: BaseHTTPRequestHandler, method: str) -> bool:
        if method != "POST":
            return False
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
        return True

    fake.raw = redirect
    try:
        done = notify(store, github(fake), who="ada", say=lambda _: None)
    finally:
        other.close()
    assert done.created == [] and len(done.warnings) == 1 and "HTTP 302: a redirect" in done.warnings[0]
    assert other.requests == [] and other.authorizations == set()
    assert only_alert(store).issue_url is None


# --- sizes: bounded before allocation -----------------------------------------------------------------

ENDLESS_PAGES = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GiB: a failure is MemoryError, not the OOM killer
from perfguard.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_300_mb_pages_are_a_warning_under_a_1_gib_memory_cap(fake: FakeGitHub, store: Store,  # noqa: F811
                                                             tmp_path: Path) -> None:
    """Each page of the listing is a 300 MB JSON list of 100+ issues (no Content-Length): notify
    read every body whole and kept paging (23.9 GB before the OOM killer). Run in a child capped
    at 1 GiB of address space."""
    item = json.dumps({"number": 7, "title": "x" * 900, "body": "", "state": "open", "labels": []}).encode()

    def endless(handler: BaseHTTPRequestHandler, method: str) -> bool:
        if not handler.path.startswith(f"/repos/{REPO_NAME}/issues?"):
            return False
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        block = b"[" + b",".join([item] * 1000) + b","
        try:
            for _ in range(300 * 2**20 // len(block)):
                handler.wfile.write(block)
            handler.wfile.write(item + b"]")
        except OSError:  # the reader hung up: what it should do
            pass
        handler.close_connection = True
        return True

    fake.raw = endless
    env = dict(os.environ, GITHUB_TOKEN=TOKEN, TMPDIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", ENDLESS_PAGES, "history", "notify", "--repo", REPO_NAME,
                           "--store", store.url, "--api-url", fake.url], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "warning: notify:" in proc.stdout and "at most 10485760 are read" in proc.stdout
    assert "MemoryError" not in proc.stderr and fake.issues == []


@pytest.mark.parametrize("status", [200, 500])
def test_json_nested_100000_deep_is_a_warning(fake: FakeGitHub, store: Store,  # noqa: F811
                                              monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    """A deeply nested answer, 200 or 500, was a RecursionError: exit 70."""
    def deep(handler: BaseHTTPRequestHandler, method: str) -> bool:
        raw = b"[" * 100_000 + b"]" * 100_000
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)
        return True

    fake.raw = deep
    proc = run_notify(fake, store, monkeypatch)
    assert proc.returncode == 0 and "warning: notify:" in proc.stdout, proc.stderr
    assert "Traceback" not in proc.stderr and fake.issues == []
    if status == 200:
        assert "nested deeper than" in proc.stdout


def test_a_body_larger_than_the_cap_is_refused_by_its_content_length(fake: FakeGitHub) -> None:  # noqa: F811
    def announced(handler: BaseHTTPRequestHandler, method: str) -> bool:
        handler.send_response(200)
        handler.send_header("Content-Length", str(300 * 2**20))
        handler.end_headers()
        return True

    fake.raw = announced
    with pytest.raises(Exception, match=f"the answer is {300 * 2**20} bytes; at most 1000 are read"):
        github(fake, body_bytes=1000).issue(1)


# --- deadlines: per request and per run ---------------------------------------------------------------

def dripping(where: str) -> Any:
    """A server that sends one byte every 0.3 s, in its status line or in its body."""
    def drip(handler: BaseHTTPRequestHandler, method: str) -> bool:
        head = b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n"
        body = b" " * 200
        try:
            if where == "body":
                handler.wfile.write(head)
            for byte in (head + body if where == "head" else body):
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(0.3)
        except OSError:
            pass
        handler.close_connection = True
        return True
    return drip


@pytest.mark.parametrize("where", ["head", "body"])
def test_a_dripping_server_cannot_hold_a_request_past_its_deadline(fake: FakeGitHub,  # noqa: F811
                                                                   where: str) -> None:
    """A byte every 0.3 s never trips a socket timeout; the request's 2 s deadline ends it (the whole
    drip takes 60 s or more)."""
    fake.raw = dripping(where)
    start = time.monotonic()
    with pytest.raises(Exception, match="no whole answer within 2 s"):
        github(fake, request_s=2.0).issue(1)
    assert time.monotonic() - start < 30


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_the_deadline_holds_over_https(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GitHub is HTTPS: the timer shuts the TLS connection's socket too. A local TLS server with a
    self-signed certificate, trusted through ``SSL_CERT_FILE``, drips its body."""
    import ssl
    import threading
    from http.server import ThreadingHTTPServer

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   capture_output=True, check=True, timeout=60)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    drip = dripping("body")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            drip(self, "GET")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        start = time.monotonic()
        with pytest.raises(Exception, match="no whole answer within 2 s"):
            Session(Limits(request_s=2.0)).send("GET", f"https://127.0.0.1:{server.server_address[1]}/x", None, {})
        assert time.monotonic() - start < 30
    finally:
        server.shutdown()
        server.server_close()


def test_the_run_has_one_deadline_for_all_its_requests(fake: FakeGitHub, store: Store) -> None:  # noqa: F811
    """Requests of 20 s each in a run of 2 s: the first (the token's user) is cut at 2 s, the next
    is not sent."""
    fake.raw = dripping("body")
    start = time.monotonic()
    done = notify(store, github(fake, request_s=20.0, run_s=2.0), who="ada", say=lambda _: None)
    assert time.monotonic() - start < 30
    assert done.created == [] and done.warnings == [
        "GET octo/compiler/issues: the run's 2 s for requests are spent; nothing posted"]


# --- the page budget ----------------------------------------------------------------------------------

def filler(server: FakeGitHub, count: int) -> None:
    """``count`` labelled issues that are not perfguard's alerts (newer than any before)."""
    for _ in range(count):
        number = len(server.issues) + 1
        server.issues.append({"number": number, "title": "other", "body": "", "state": "open", "state_reason": None,
                              "labels": [{"name": LABEL}], "html_url": f"https://github.example/{REPO_NAME}/issues/"
                              f"{number}", "closed_by": None, "user": {"login": "someone"}})


def test_a_listing_cut_by_the_page_budget_is_a_warning_and_opens_no_duplicate(fake: FakeGitHub,  # noqa: F811
                                                                              store: Store) -> None:  # noqa: F811
    """More labelled issues than the budget lists were cut silently, and an alert whose issue lay
    beyond got a second one; the store's record still finds it."""
    notify(store, github(fake), who="ada", say=lambda _: None)
    filler(fake, 250)
    done = notify(store, github(fake, pages=2), who="ada", say=lambda _: None)
    assert any("page budget (2 pages)" in w for w in done.warnings)
    assert len(fake.issues) == 251 and done.created == []
    store.triage(only_alert(store).id, issue_url="", who="test")  # a store copy that lost the link
    done = notify(store, github(fake, pages=2), who="ada", say=lambda _: None)
    assert done.created == [] and len(fake.issues) == 251 and only_alert(store).issue_url is None


def test_the_answers_of_a_run_are_bounded_together(fake: FakeGitHub, store: Store) -> None:  # noqa: F811
    """Each answer under the cap, but 100 pages of them would be 1 GiB kept: the run's answers
    share a byte budget, and its end is a warning that posts nothing."""
    filler(fake, 250)
    page = len(json.dumps(list(reversed(fake.issues))[:100]).encode())
    done = notify(store, github(fake, run_bytes=page + page // 2), who="ada", say=lambda _: None)
    assert done.created == [] and len(done.warnings) == 1
    assert f"the run's answers passed {page + page // 2} bytes" in done.warnings[0]


# --- dedupe and who speaks for an alert -----------------------------------------------------------------

def test_an_issue_whose_label_was_removed_is_still_the_alerts(fake: FakeGitHub, store: Store) -> None:  # noqa: F811
    """Removing the label made notify open a second issue, though the store recorded the first."""
    notify(store, github(fake), who="ada", say=lambda _: None)
    fake.issues[0]["labels"] = []
    store.triage(only_alert(store).id, status="investigating", who="someone")  # an update is due
    done = notify(store, github(fake), who="ada", say=lambda _: None)
    assert len(fake.issues) == 1 and done.created == [] and done.commented == [fake.issues[0]["html_url"]]


@pytest.mark.parametrize("user_login", ["perfguard-bot", None])
def test_a_copied_marker_neither_silences_nor_duplicates_an_alert(fake: FakeGitHub, store: Store,  # noqa: F811
                                                                  user_login: str | None) -> None:
    """A labelled issue opened by someone else, carrying the alert's marker and closed as not
    planned, turned the alert to wont-fix "by" its author. ``user_login`` None: the token's user is
    unknown (an installation token); perfguard's own issues are known by the store's record."""
    fake.user_login = user_login
    notify(store, github(fake), who="ada", say=lambda _: None)
    alert = only_alert(store)
    fake.issues.append({"number": 2, "title": "copy", "body": alert_marker(alert), "state": "closed",
                        "state_reason": "not_planned", "labels": [{"name": LABEL}], "closed_by": {"login": "mallory"},
                        "html_url": f"https://github.example/{REPO_NAME}/issues/2", "user": {"login": "mallory"}})
    done = notify(store, github(fake), who="ada", say=lambda _: None)
    assert done.triaged == [] and only_alert(store).status == "untriaged"
    assert only_alert(store).issue_url == fake.issues[0]["html_url"]
    store.triage(alert.id, issue_url="", who="test")  # the store lost its record: the copy still does not count
    done = notify(store, github(fake), who="ada", say=lambda _: None)
    assert done.triaged == [] and only_alert(store).status == "untriaged" and done.created == []
    assert only_alert(store).issue_url == fake.issues[0]["html_url"]


# --- escaping and secrets -----------------------------------------------------------------------------

HOSTILE_URL = f"https://github.example/{REPO_NAME}/issues/1\x1b[2J\x1b]8;;https://evil.example\x07\n::warning::pwned"


def test_github_strings_reach_the_terminal_and_ci_log_escaped(fake: FakeGitHub, store: Store,  # noqa: F811
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An html_url with ANSI escapes and a newline before ``::warning::`` was printed raw by notify
    and later by ``history triage``: workflow-command injection in a GitHub Actions log."""
    real_route = fake.route

    def route(method: str, url: Any, body: Any) -> tuple[int, Any]:
        status, answer = real_route(method, url, body)
        if method == "POST" and isinstance(answer, dict) and "html_url" in answer:
            answer = {**answer, "html_url": HOSTILE_URL}
        return status, answer

    fake.route = route  # type: ignore[method-assign]
    proc = run_notify(fake, store, monkeypatch)
    assert proc.returncode == 0 and "opened https://github.example/" in proc.stdout, proc.stderr
    no_control_characters(proc.stdout + proc.stderr)
    assert only_alert(store).issue_url == HOSTILE_URL  # stored as data, shown escaped
    proc = run_cli("history", "triage", str(only_alert(store).id), "--note", "seen", "--store", store.url)
    assert proc.returncode == 0 and "\\x1b[2J" in proc.stdout, proc.stderr
    no_control_characters(proc.stdout + proc.stderr)


CRASH_IN_NOTIFY = """
import sys
import perfguard.history.notify as notify
def crash(*args, **kwargs):
    hook = sys.argv[sys.argv.index("--webhook") + 1]
    raise RuntimeError(f"exploded posting to {hook} (path {hook.split('/', 3)[3]})")
notify._sync_one = crash
from perfguard.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_an_internal_error_during_notify_writes_the_webhook_secret_nowhere(fake: FakeGitHub,  # noqa: F811
                                                                           store: Store,  # noqa: F811
                                                                           tmp_path: Path) -> None:
    """Any internal error wrote the whole command line, webhook included, into the traceback
    file; the exception's message (which echoes the URL and its path) reached stderr too."""
    webhook = f"{fake.url}/services/T0/B0/{SECRET}"
    env = dict(os.environ, GITHUB_TOKEN=TOKEN, TMPDIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", CRASH_IN_NOTIFY, "history", "notify", "--repo", REPO_NAME,
                           "--store", store.url, "--api-url", fake.url, "--webhook", webhook],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)
    assert proc.returncode == 70 and "perfguard: internal error: RuntimeError: exploded posting to" in proc.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    traceback_file = Path(proc.stderr.rsplit("traceback written to ", 1)[1].strip())
    assert traceback_file in written and "--webhook 'http://127.0.0.1:" in traceback_file.read_text()
    for text in [proc.stderr, proc.stdout, *(p.read_text(errors="replace") for p in written)]:
        assert SECRET not in text and "services/T0" not in text and TOKEN not in text
