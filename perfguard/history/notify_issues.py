"""Which GitHub issue is an alert's: the rules that keep ``history notify`` from opening a second
issue for an alert, and anyone else's issue from speaking for one (issue 32).

1. **The store's record first.** An alert whose recorded ``issue_url`` names an issue of this
   repository (``…/OWNER/NAME/issues/N``) has that issue, whatever its label, author or marker;
   it is read by number when the listing did not hold it (its label removed). A recorded issue
   that cannot be read is a warning, never a reason to open another (``perfguard history triage
   ID --issue ''`` unlinks it).
2. **Then the marker, on an issue perfguard opened.** ``<!-- perfguard-alert:SUITE:ID -->`` in
   the body of a listed issue counts only when perfguard opened that issue: its author is the
   token's user (``GET /user``) or the author of an issue the store records for an alert and that
   carries that alert's marker. Anyone who can open an issue can copy a marker. The listing is of
   the issues the token's user opened, whatever their label, when ``GET /user`` answers; else (an
   installation token, such as GitHub Actions' ``GITHUB_TOKEN``, is refused it) of the issues
   labelled ``perfguard``; and when no author is known at all (the first run of a store), the
   label (which only people with triage access can set) is what marks an issue as perfguard's.
3. **Never a duplicate.** A listing cut by the run's page budget is a warning, and an alert found
   neither way then gets no new issue this run: its issue may be one the budget did not reach.

An issue is read back (closed as *not planned* makes its alert ``wont-fix``) only when it is the
alert's by the store's record and carries that alert's own marker (:meth:`IssueIndex.speaks_for`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from perfguard.errors import ApiError
from perfguard.history.github import GitHub, Issue
from perfguard.store.alert_rows import Alert

LABEL = "perfguard"
_ALERT_MARKER = re.compile(r"<!-- perfguard-alert:([^:\s]*):(\d{1,18}) -->")


def alert_key(alert: Alert) -> tuple[str, int]:
    """The (suite percent-encoded, id) an alert's marker holds."""
    return quote(alert.suite, safe=""), alert.id


def marker_key(issue: Issue) -> tuple[str, int] | None:
    """The (suite, id) of the alert marker in ``issue``'s body, or None."""
    found = _ALERT_MARKER.search(issue.body)
    return None if found is None else (found.group(1), int(found.group(2)))


def recorded_number(alert: Alert, repo: str) -> int | None:
    """The number of the issue the store records for ``alert``, when its URL names an issue of
    ``repo`` (``https://HOST/OWNER/NAME/issues/N``, any host: GitHub Enterprise too)."""
    try:
        path = urlsplit(alert.issue_url or "").path
    except ValueError:
        return None
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if len(parts) < 4 or parts[-2] != "issues" or not (parts[-1].isascii() and parts[-1].isdigit()):
        return None
    if "/".join(parts[-4:-2]).lower() != repo.lower() or len(parts[-1]) > 18:
        return None
    return int(parts[-1])


@dataclass
class IssueIndex:
    """The issues one notify run knows, and who perfguard is on this repository."""

    github: GitHub
    listed: dict[int, Issue]
    authors: set[str]
    complete: bool

    @classmethod
    def build(cls, github: GitHub, alerts: Sequence[Alert], say: Callable[[str], None]) -> IssueIndex:
        """List the issues (see the module docstring); an :class:`ApiError` when the listing fails."""
        try:
            me: str | None = github.login()
        except ApiError as exc:
            me = None
            say(f"notify: the token's user is unknown ({exc}); issues are listed by the label {LABEL!r}")
        listing = github.issues(creator=me) if me else github.issues(label=LABEL)
        listed = {issue.number: issue for issue in listing.issues}
        authors = {me} if me else set()
        for alert in alerts:  # an issue the store records, carrying its alert's marker, is perfguard's
            number = recorded_number(alert, github.repo)
            issue = listed.get(number) if number is not None else None
            if issue is not None and issue.author and marker_key(issue) == alert_key(alert):
                authors.add(issue.author)
        return cls(github, listed, authors, listing.complete)

    def trusted(self, author: str | None) -> bool:
        """Whether an issue or comment by ``author`` counts as perfguard's (see the docstring)."""
        return not self.authors or author in self.authors

    def issue_of(self, alert: Alert) -> Issue | None:
        """``alert``'s issue: the store's record (read by number if not listed), else the oldest
        listed issue perfguard opened that carries its marker; None when it has none."""
        number = recorded_number(alert, self.github.repo)
        if number is not None:
            found = self.listed.get(number)
            if found is not None:
                return found
            try:
                return self.github.issue(number)
            except ApiError as exc:
                raise ApiError(f"{exc}; the issue the store records for it cannot be read (`perfguard history "
                               f"triage {alert.id} --issue ''` unlinks it)") from None
        key = alert_key(alert)
        marked = [i for i in self.listed.values() if marker_key(i) == key and self.trusted(i.author)]
        return min(marked, key=lambda i: i.number) if marked else None

    def speaks_for(self, alert: Alert, issue: Issue) -> bool:
        """Whether ``issue`` may change ``alert`` (be read back): it is the issue the store records
        for the alert, and it carries the alert's own marker."""
        return recorded_number(alert, self.github.repo) == issue.number and marker_key(issue) == alert_key(alert)
