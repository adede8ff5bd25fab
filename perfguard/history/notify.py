"""Alerts to people: one GitHub issue per alert, kept in step with the store, and a webhook.

``perfguard history notify --repo OWNER/NAME`` (:func:`notify`) syncs the store's alerts with the
repository's issues that carry the label ``perfguard``:

* an open regression or broken alert with no issue gets one: the title names the cases, the size,
  the commit and the pass; the body holds the table of changes, the culprit's explanation and links
  to the history site's pages (``--site-url``); its URL is recorded on the alert;
* an alert whose state (status, culprit, changes and their sizes in whole percent) differs from
  the one its issue last reported gets a comment (it grew, it was fixed);
* an alert fixed or triaged to a closed status gets that comment and its issue closed
  (``completed`` for fixed and backed-out, ``not_planned`` for wont-fix, expected and invalid);
* an issue a person closed as "not planned" makes its still-open alert ``wont-fix`` (the closer
  is who triaged it);
* when an open alert's issue is opened or updated and the alert has a culprit commit, the pull
  request that merged it gets one comment (marker ``<!-- perfguard-culprit:SUITE:ID -->``).

Improvement alerts file nothing, and a closed issue is never commented on or reopened: it was
closed by a person, or it was perfguard's last word.

Idempotent by markers, not by the store: every issue body holds ``<!-- perfguard-alert:SUITE:ID -->``
(the suite percent-encoded, so no name can end the comment) and every body or comment the state it
reports, ``<!-- perfguard-state:SUITE:ID:DIGEST -->``. An alert's issue is the one the store
records, else one perfguard opened that carries its marker (:mod:`perfguard.history.notify_issues`:
who counts as perfguard, and what may be read back); what is already said is not said again, so a
re-run, or a run on a store copy that lost the recorded issue URLs, posts nothing new.

Never fails the night: a failed request (HTTP error, redirect, unreachable, timeout, not JSON, too
deep or too large) is a warning line, and the command still exits 0. Every request is bounded in
time, size and destination by :mod:`perfguard.history.transport`. The token (``$GITHUB_TOKEN``) is
sent in a header only and masked in every message (:mod:`perfguard.history.github`).

``--webhook URL`` POSTs every alert that got a new issue or an update this run as JSON: ``text``
(one line, Slack-compatible), ``event`` (``new``, ``changed``, ``closed``), ``issue_url`` and
``alert`` (:meth:`~perfguard.history.alerts.Alert.to_json`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote

from perfguard.errors import ApiError
from perfguard.history.alerts import OPEN_STATUSES, Alert, current_user
from perfguard.history.github import GitHub
from perfguard.history.notify_issues import LABEL, IssueIndex
from perfguard.history.transport import post_json
from perfguard.jsonfields import JsonDict
from perfguard.report.escape import md_code, md_text

if TYPE_CHECKING:
    from perfguard.history.store import Store

#: How an issue is closed for each closed status of its alert.
CLOSE_REASON = {"fixed": "completed", "backed-out": "completed", "wont-fix": "not_planned",
                "expected": "not_planned", "invalid": "not_planned"}
#: Failed requests after which a run stops trying (an API that is down would cost one timeout per
#: alert otherwise).
MAX_FAILURES = 3
TITLE_LIMIT = 240  # GitHub refuses titles over 256 characters


@dataclass
class Outcome:
    """What one sync did: issue URLs created, commented on and closed, alert ids triaged from
    GitHub, pull requests told of their culprit commit, and the warnings (failed requests)."""

    created: list[str] = field(default_factory=list)
    commented: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    triaged: list[int] = field(default_factory=list)
    pulls: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def alert_marker(alert: Alert) -> str:
    return f"<!-- perfguard-alert:{quote(alert.suite, safe='')}:{alert.id} -->"


def state_marker(alert: Alert) -> str:
    """The marker of the state an issue or comment reports: a digest of what a reader would call a
    change (status, culprit, each change's size in whole percent), not of timestamps or notes."""
    state = {"status": alert.status, "culprit": [alert.culprit_commit, alert.culprit_pass],
             "changes": sorted([c.change_id, c.case, c.metric, round((c.ratio - 1.0) * 100)] for c in alert.changes)}
    digest = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:16]
    return f"<!-- perfguard-state:{quote(alert.suite, safe='')}:{alert.id}:{digest} -->"


def notify(store: Store, github: GitHub, *, site_url: str | None = None, webhook: str | None = None,
           suite: str | None = None, say: Callable[[str], None] = print) -> Outcome:
    """Sync the alerts of ``store`` (of ``suite``, else all) with ``github``'s issues (see the
    module docstring); ``say`` gets one line per action and per warning."""
    outcome = Outcome()
    failures = 0

    def warn(message: str) -> None:
        outcome.warnings.append(message)
        say(f"warning: notify: {message}")

    alerts = [a for a in sorted(store.alerts(suite=suite), key=lambda a: a.id) if a.kind != "improvement"]
    try:
        index = IssueIndex.build(github, alerts, say)
    except ApiError as exc:
        warn(f"{exc}; nothing posted")
        return outcome
    if not index.complete:
        warn(f"the listing of issues stopped at the run's page budget ({github.session.limits.pages} pages); "
             "an alert the store records no issue for gets none this run (it may have one further on)")
    for alert in alerts:
        if failures >= MAX_FAILURES:
            warn(f"{MAX_FAILURES} requests failed; the other alerts wait for the next run")
            break
        try:
            event = _sync_one(store, github, index, alert, site_url, outcome, say)
        except ApiError as exc:
            failures += 1
            warn(f"alert {alert.id}: {exc}")
            continue
        if event is not None and webhook:
            try:
                post_json(github.session, webhook, _webhook_document(*event))
            except ApiError as exc:
                failures += 1
                warn(str(exc))
    return outcome


def _sync_one(store: Store, github: GitHub, index: IssueIndex, alert: Alert, site_url: str | None,
              outcome: Outcome, say: Callable[[str], None]) -> tuple[str, Alert, str] | None:
    """One alert against its issue (None: it has none yet); the webhook's (event, alert, issue
    URL) when something was posted."""
    issue = index.issue_of(alert)
    if issue is None:
        if not alert.is_open or not index.complete:
            return None  # closed before anyone was told, or its issue may lie beyond the listing
        created = github.create_issue(issue_title(alert), issue_body(alert, site_url), [LABEL])
        url = created.html_url if created is not None else ""
        outcome.created.append(url)
        say(f"alert {alert.id}: opened {url or 'an issue (planned)'}")
        if url:  # a planned issue has none yet: the next run finds it by its marker
            store.triage(alert.id, issue_url=url, who=current_user())
        _tell_the_culprit(github, alert, url, outcome, say)
        return "new", alert, url
    url = issue.html_url
    if url and alert.issue_url != url:
        alert = store.triage(alert.id, issue_url=url, who=current_user())
    number = issue.number
    if issue.state == "closed":
        if issue.state_reason == "not_planned" and alert.status in OPEN_STATUSES and index.speaks_for(alert, issue):
            closer = github.issue(number).closed_by or "github"
            store.triage(alert.id, status="wont-fix", note=f"issue closed as not planned: {url}", who=closer)
            outcome.triaged.append(alert.id)
            say(f"alert {alert.id}: wont-fix ({url} was closed as not planned by {closer})")
        return None
    marker = state_marker(alert)
    if marker in issue.body or any(marker in c.body for c in github.comments(number) if index.trusted(c.author)):
        changed = False
    else:
        github.comment(number, update_comment(alert, site_url))
        outcome.commented.append(url)
        say(f"alert {alert.id}: commented on {url} ({alert.status})")
        changed = True
    reason = CLOSE_REASON.get(alert.status)
    if reason is not None:
        github.close(number, reason)
        outcome.closed.append(url)
        say(f"alert {alert.id}: closed {url} ({alert.status})")
        return "closed", alert, url
    if changed and alert.is_open:
        _tell_the_culprit(github, alert, url, outcome, say)
    return ("changed", alert, url) if changed else None


def culprit_marker(alert: Alert) -> str:
    return f"<!-- perfguard-culprit:{quote(alert.suite, safe='')}:{alert.id} -->"


def _tell_the_culprit(github: GitHub, alert: Alert, issue_url: str, outcome: Outcome,
                      say: Callable[[str], None]) -> None:
    """One comment on the pull request that merged the culprit commit, if there is one. Asked
    only when the issue is opened or updated (a culprit found later changes the alert's state), and
    the marker keeps it to one comment even then."""
    sha = alert.culprit_commit
    if not sha or not re.fullmatch(r"[0-9a-fA-F]{7,64}", sha):
        return
    try:
        _comment_on_pull(github, alert, sha, issue_url, outcome, say)
    except ApiError as exc:  # the issue is filed: this is a warning of its own, not the alert's failure
        outcome.warnings.append(f"alert {alert.id}: {exc}")
        say(f"warning: notify: alert {alert.id}: {exc}")


def _comment_on_pull(github: GitHub, alert: Alert, sha: str, issue_url: str, outcome: Outcome,
                     say: Callable[[str], None]) -> None:
    pulls = github.pulls_of(sha)
    merged = [p for p in pulls if p.merged_at] or pulls
    if not merged:
        return
    number = merged[0].number
    marker = culprit_marker(alert)
    if any(marker in c.body for c in github.comments(number)):
        return
    worst = alert.worst
    size = f": {md_text(worst.metric)} {_percent(worst.ratio)}" if worst else ""
    where = f" Tracked in {issue_url}." if issue_url else ""
    cases = f" in {len(alert.cases)} case(s)" if alert.cases else ""
    passed = f", pass {md_code(alert.culprit_pass)}" if alert.culprit_pass else ""
    github.comment(number, f"{marker}\n**perfguard**: commit {md_code(sha)} of this pull request is the culprit of a "
                           f"{md_text(alert.kind)} in suite {md_code(alert.suite)}{size}{cases}{passed}.{where}\n")
    outcome.pulls.append(number)
    say(f"alert {alert.id}: commented on pull request {number}, which merged the culprit")


# --- text -------------------------------------------------------------------------------------------

def _percent(ratio: float) -> str:
    return f"{ratio - 1.0:+.1%}"


def _short(commit: str | None) -> str:
    return (commit or "?")[:10]


def issue_title(alert: Alert) -> str:
    """One line naming the cases, the size, the commit and the pass (names escaped: they are data)."""
    cases = alert.cases
    named = ", ".join(cases[:3]) + (f" and {len(cases) - 3} more" if len(cases) > 3 else "")
    at = _short(alert.culprit_commit or alert.last_commit)
    if alert.kind == "broken":
        text = f"perfguard: the compiler is broken at {at}"
    else:
        worst = alert.worst
        size = f"{worst.metric} {_percent(worst.ratio)}" if worst else "regression"
        text = f"perfguard: {size} in {named or 'no case'} at {at}"
        if alert.culprit_pass:
            text += f" (pass {alert.culprit_pass})"
    return md_text(text, TITLE_LIMIT)


def _table(alert: Alert, site_url: str | None) -> list[str]:
    lines = ["| case | metric | change | interval |", "|---|---|---|---|"]
    for c in sorted(alert.changes, key=lambda c: (c.metric != "latency", c.case, c.metric)):
        interval = ("" if c.ci_low is None or c.ci_high is None
                    else f"[{_percent(c.ci_low)}, {_percent(c.ci_high)}]")
        size = _percent(c.ratio)
        if site_url:
            size = f"[{size}]({site_url.rstrip('/')}/changes/{c.change_id}.html)"
        lines.append(f"| {md_code(c.case)} | {md_text(c.metric)} | {size} | {interval} |")
    return lines


def _details(alert: Alert, site_url: str | None) -> list[str]:
    what = {"broken": "The compiler did not build, or its passes did not import",
            "regression": "Regression"}.get(alert.kind, alert.kind.capitalize())
    lines = [f"**{what}** in suite {md_code(alert.suite)} on runner class {md_code(alert.runner_class)}, "
             f"commits {md_code(_short(alert.first_commit))}..{md_code(_short(alert.last_commit))} "
             f"(alert {alert.id}, status {md_code(alert.status)}).", ""]
    if alert.culprit_commit:
        culprit = f"Culprit: commit {md_code(alert.culprit_commit)}"
        lines += [culprit + (f", pass {md_code(alert.culprit_pass)}." if alert.culprit_pass else "."), ""]
    if alert.changes:
        lines += [*_table(alert, site_url), ""]
    why = alert.explanation
    if why is not None:
        lines += [f"**Why** ({md_text(why.dimension)}): {md_text(why.headline)}", ""]
        if why.node_changes:
            lines += ["| op type | nodes before | nodes after |", "|---|---|---|"]
            lines += [f"| {md_code(n.op_type)} | {n.before} | {n.after} |" for n in why.node_changes]
            lines.append("")
    if site_url:
        lines += [f"History: {site_url.rstrip('/')}/index.html", ""]
    return lines


def issue_body(alert: Alert, site_url: str | None = None) -> str:
    footer = ("Triage with `perfguard history triage " + str(alert.id) + " --status STATUS`; closing this "
              "issue as *not planned* marks the alert `wont-fix` on the next run.")
    return "\n".join([alert_marker(alert), state_marker(alert), *_details(alert, site_url), footer, ""])


def update_comment(alert: Alert, site_url: str | None = None) -> str:
    worst = alert.worst
    if alert.status == "fixed":
        head = "**Fixed**: a later night shows the reverse step."
        if alert.fixed_by:  # the nightly bisected the fixing range
            head += f" Fixed by {md_code(alert.fixed_by)}."
    elif alert.status in CLOSE_REASON:
        head = f"**Closed as {md_code(alert.status)}** in the alert's triage."
    else:
        size = f", worst {md_text(worst.metric)} {_percent(worst.ratio)}" if worst else ""
        head = f"**Updated**: {len(alert.changes)} change(s){size}, status {md_code(alert.status)}."
    return "\n".join([state_marker(alert), head, "", *_details(alert, site_url)])


def _webhook_document(event: str, alert: Alert, url: str) -> JsonDict:
    title = issue_title(alert)
    return {"text": f"[{event}] {title} {url}".strip(), "event": event, "issue_url": url or None,
            "alert": alert.to_json()}


def parse_repo(text: str) -> str:
    """``OWNER/NAME`` as given, or :class:`~perfguard.errors.UserError`."""
    from perfguard.errors import UserError

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+", text):
        raise UserError(f"--repo: expected OWNER/NAME (e.g. octo/compiler), found {text!r}")
    return text


def summarise(outcome: Outcome) -> str:
    return (f"notify: {len(outcome.created)} issue(s) opened, {len(outcome.commented)} updated, "
            f"{len(outcome.closed)} closed, {len(outcome.triaged)} alert(s) marked wont-fix from GitHub, "
            f"{len(outcome.pulls)} culprit pull request(s) told, "
            f"{len(outcome.warnings)} warning(s)")

