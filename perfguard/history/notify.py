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
``alert`` (:meth:`~perfguard.store.alert_rows.Alert.to_json`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from perfguard.errors import ApiError, StorageError
from perfguard.history.github import GitHub
from perfguard.history.notify_issues import LABEL, IssueIndex
from perfguard.history.transport import post_json
from perfguard.jsonfields import JsonDict
from perfguard.names import visible
from perfguard.report.escape import md_code, md_text
from perfguard.store.alert_rows import OPEN_STATUSES, Alert, AlertChange

if TYPE_CHECKING:
    from perfguard.store import Store

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
    change (status, culprit, each change's size in whole percent, assignee, notes), not of
    timestamps."""
    state = {"status": alert.status, "culprit": [alert.culprit_commit, alert.culprit_pass],
             "changes": sorted([c.change_id, c.case, c.metric, round((c.ratio - 1.0) * 100)] for c in alert.changes),
             "assignee": alert.assignee, "notes": alert.notes}
    digest = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:16]
    return f"<!-- perfguard-state:{quote(alert.suite, safe='')}:{alert.id}:{digest} -->"


def notify(store: Store, github: GitHub, *, who: str, site_url: str | None = None, webhook: str | None = None,
           suite: str | None = None, say: Callable[[str], None] = print) -> Outcome:
    """Sync the alerts of ``store`` (of ``suite``, else all) with ``github``'s issues (see the
    module docstring); ``who`` is who runs it (recorded with each issue link it stores: the front
    end learns it, :func:`perfguard.cli._actor.current_user`); ``say`` gets one line per action
    and per warning."""
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
            event = _sync_one(store, github, index, alert, site_url, outcome, say, who)
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
              outcome: Outcome, say: Callable[[str], None], who: str) -> tuple[str, Alert, str] | None:
    """One alert against its issue (None: it has none yet); the webhook's (event, alert, issue
    URL) when something was posted."""
    issue = index.issue_of(alert)
    if issue is None:
        if not alert.is_open or not index.complete:
            return None  # closed before anyone was told, or its issue may lie beyond the listing
        created = github.create_issue(issue_title(alert), issue_body(alert, site_url, issue_facts(store, alert)),
                                      [LABEL])
        url = created.html_url if created is not None else ""
        outcome.created.append(url)
        say(f"alert {alert.id}: opened {url or 'an issue (planned)'}")
        if url:  # a planned issue has none yet: the next run finds it by its marker
            store.triage(alert.id, issue_url=url, who=who)
        _tell_the_culprit(github, alert, url, outcome, say)
        return "new", alert, url
    url = issue.html_url
    if url and alert.issue_url != url:
        alert = store.triage(alert.id, issue_url=url, who=who)
    number = issue.number
    if issue.state == "closed":
        if issue.state_reason == "not_planned" and alert.status in OPEN_STATUSES and index.speaks_for(alert, issue):
            closer = github.issue(number).closed_by or "github"
            store.triage(alert.id, status="wont-fix", note=f"issue closed as not planned: {url}", who=closer)
            outcome.triaged.append(alert.id)
            say(f"alert {alert.id}: wont-fix ({url} was closed as not planned by {closer})")
        return None
    marker = state_marker(alert)
    # only perfguard's own comments say what was reported: a planted marker must not silence an update
    said = [issue.body, *(c.body for c in github.comments(number) if index.trusted(c.author))]
    if any(marker in text for text in said):
        changed = False
    else:
        github.comment(number, update_comment(alert, site_url, issue_facts(store, alert), last_reported(said)))
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
    """One line naming the cases, the size, the commit and the pass: plain text (GitHub shows a
    title as it is, so a Markdown escape would show as ``bert\\_t``), whitespace folded to single
    spaces, control and bidi characters shown as escapes, at most :data:`TITLE_LIMIT` characters."""
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
    return _plain_line(text, TITLE_LIMIT)


def _plain_line(value: str, limit: int) -> str:
    text = " ".join(value.split())
    if len(text) > limit:
        text = text[:limit - 1] + "…"  # cut before escaping, so no escape is cut in half
    return visible(text)


@dataclass(frozen=True)
class ChangeLevels:
    """An exact change's series level at its good and its bad commit's nights (node count, size)."""

    change_id: int
    before: float
    after: float
    metric: str
    kind: str


@dataclass(frozen=True)
class IssueFacts:
    """What an issue says beyond the alert record, read from the store: the levels of its exact
    changes. (The culprit's subject and author are the alert's own: ``Alert.culprit_facts``.)"""

    levels: tuple[ChangeLevels, ...] = ()

    def level(self, change_id: int) -> ChangeLevels | None:
        return next((x for x in self.levels if x.change_id == change_id), None)


def _is_exact(change: AlertChange) -> bool:
    """A change measured without noise (node count, artifact size): its interval has no width."""
    return change.ci_low is not None and change.ci_low == change.ci_high


def issue_facts(store: Store, alert: Alert) -> IssueFacts:
    """The :class:`IssueFacts` of ``alert``: the before -> after levels of its exact changes of
    absolute series."""
    levels = []
    for ac in alert.changes:
        change = store.change(ac.change_id)
        if change is None:
            continue
        if _is_exact(ac) and change.key.kind == "absolute":
            at = {p.commit: p.value for p in store.points(change.series_id) if p.commit}
            if change.good_commit in at and change.bad_commit in at:
                levels.append(ChangeLevels(ac.change_id, at[change.good_commit], at[change.bad_commit], ac.metric,
                                           change.key.kind))
    return IssueFacts(tuple(levels))


def _table(alert: Alert, site_url: str | None, facts: IssueFacts) -> list[str]:
    from perfguard.report.format import series_level

    lines = ["| case | metric | change | before → after | interval |", "|---|---|---|---|---|"]
    for c in sorted(alert.changes, key=lambda c: (c.metric != "latency", c.case, c.metric)):
        level = facts.level(c.change_id)
        moved = ("" if level is None else
                 f"{series_level(level.metric, level.kind, level.before)} → "
                 f"{series_level(level.metric, level.kind, level.after)}")
        if _is_exact(c):
            interval = "exact"  # no noise: a zero-width [+78.5 %, +78.5 %] says nothing
        elif c.ci_low is None or c.ci_high is None:
            interval = ""
        else:
            interval = f"[{_percent(c.ci_low)}, {_percent(c.ci_high)}]"
        size = _percent(c.ratio)
        if site_url:
            size = f"[{size}]({site_url.rstrip('/')}/changes/{c.change_id}.html)"
        lines.append(f"| {md_code(c.case)} | {md_text(c.metric)} | {size} | {moved} | {interval} |")
    return lines


def _culprit_line(alert: Alert) -> str:
    line = f"Culprit: commit {md_code(alert.culprit_commit)}"
    commit = alert.culprit_facts
    if commit is not None and commit.subject:
        line += f" “{md_text(commit.subject, 200)}”"
    if commit is not None and commit.author:
        line += f" by {md_text(commit.author, 100)}"
    return line + (f", pass {md_code(alert.culprit_pass)}." if alert.culprit_pass else ".")


def _details(alert: Alert, site_url: str | None, facts: IssueFacts) -> list[str]:
    what = {"broken": "The compiler did not build, or its passes did not import",
            "regression": "Regression"}.get(alert.kind, alert.kind.capitalize())
    lines = [f"**{what}** in suite {md_code(alert.suite)} on runner class {md_code(alert.runner_class)}, "
             f"commits {md_code(_short(alert.first_commit))}..{md_code(_short(alert.last_commit))} "
             f"(alert {alert.id}, status {md_code(alert.status)}"
             + (f", assigned to {md_text(alert.assignee, 100)}" if alert.assignee else "") + ").", ""]
    if alert.culprit_commit:
        lines += [_culprit_line(alert), ""]
    if alert.changes:
        lines += [*_table(alert, site_url, facts), ""]
    why = alert.explanation
    if why is not None:
        lines += [f"**Why** ({md_text(why.dimension)}): {md_text(why.headline)}", ""]
        if why.node_changes:
            lines += ["| op type | nodes before | nodes after |", "|---|---|---|"]
            lines += [f"| {md_code(n.op_type)} | {n.before} | {n.after} |" for n in why.node_changes]
            lines.append("")
        if why.counted is not None:  # why, counted: as the nightly's summary and the history site say it
            from perfguard.report.counted_why import pair_view

            lines += ["**Why, counted**: the culprit's inferences under Valgrind against its parent's, by function", "",
                      *pair_view(why.counted).markdown(), ""]
    if site_url:
        lines += [f"The alert on the history site: {site_url.rstrip('/')}/alert-{alert.id}.html", ""]
    return lines


def issue_body(alert: Alert, site_url: str | None = None, facts: IssueFacts | None = None) -> str:
    footer = ("Triage with `perfguard history triage " + str(alert.id) + " --status STATUS`; closing this "
              "issue as *not planned* marks the alert `wont-fix` on the next run.")
    return "\n".join([alert_marker(alert), state_marker(alert), reported_marker(alert),
                      *_details(alert, site_url, facts or IssueFacts()), footer, ""])


@dataclass(frozen=True)
class Reported:
    """What an issue body or comment last told its readers (in a ``perfguard-reported`` marker), so
    the next comment can say what changed since: status, assignee, how much of the notes, changes."""

    status: str
    assignee: str | None
    notes_length: int
    changes: int

    def to_json(self) -> JsonDict:
        return {"status": self.status, "assignee": self.assignee, "notes_length": self.notes_length,
                "changes": self.changes}


def _reported(alert: Alert) -> Reported:
    return Reported(alert.status, alert.assignee, len(alert.notes), len(alert.changes))


def reported_marker(alert: Alert) -> str:
    # percent-encoded JSON: no name can end the HTML comment
    return f"<!-- perfguard-reported:{quote(json.dumps(_reported(alert).to_json(), sort_keys=True), safe='')} -->"


_REPORTED_MARKER = re.compile(r"<!-- perfguard-reported:([^\s>]*) -->")


def last_reported(texts: list[str]) -> Reported | None:
    """The state the last of ``texts`` (an issue body, then its comments, oldest first) with a
    ``perfguard-reported`` marker reported; None when none has one (an issue of an older perfguard)."""
    from perfguard.results.documents import parse_json

    for text in reversed(texts):
        found = _REPORTED_MARKER.findall(text)
        if not found:
            continue
        try:
            data = parse_json(unquote(found[-1]), "the perfguard-reported marker")
            if not isinstance(data, dict):
                return None
            return Reported(str(data["status"]), None if data["assignee"] is None else str(data["assignee"]),
                            int(data["notes_length"]), int(data["changes"]))
        except (ValueError, KeyError, TypeError, StorageError):  # nested 50,000 deep: StorageError
            return None  # a marker someone edited: say the current state, not a difference
    return None


def _what_changed(alert: Alert, before: Reported | None) -> list[str]:
    """A line per thing that moved since ``before`` (status, assignee, new notes, changes); the
    current status and assignee when nothing was reported before."""
    lines = []
    if before is None or before.status != alert.status:
        lines.append(f"- status: {md_code(before.status) + ' → ' if before else ''}{md_code(alert.status)}")
    if before is None or before.assignee != alert.assignee:
        was = "" if before is None else f" (was {md_text(before.assignee, 100) if before.assignee else 'nobody'})"
        lines.append(f"- assignee: {md_text(alert.assignee, 100) if alert.assignee else 'nobody'}{was}")
    new_notes = alert.notes[before.notes_length:] if before is not None else alert.notes
    if new_notes.strip():
        lines.append(f"- note: {md_text(new_notes, 500)}")
    if before is not None and before.changes != len(alert.changes):
        lines.append(f"- changes: {len(alert.changes)} (was {before.changes})")
    return lines


def update_comment(alert: Alert, site_url: str | None = None, facts: IssueFacts | None = None,
                   before: Reported | None = None) -> str:
    """The comment for an alert whose state moved since ``before`` (what the issue last reported):
    a headline, what changed (status, assignee, note, changes), then the alert as the body has it."""
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
    changed = _what_changed(alert, before)
    return "\n".join([state_marker(alert), reported_marker(alert), head, "", *changed, *([""] if changed else []),
                      *_details(alert, site_url, facts or IssueFacts())])


def _webhook_document(event: str, alert: Alert, url: str) -> JsonDict:
    # Slack-compatible receivers read &, < and > as markup: the documented entities keep names data.
    title = issue_title(alert).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
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

