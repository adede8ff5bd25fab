"""A small client of GitHub's REST API (github.com or GitHub Enterprise), over urllib.

Only what ``perfguard history notify`` uses: the token's user, list the issues of a label or an
author, read one issue and its comments, create an issue, comment, close, the pull requests of a
commit (the webhook's ``POST`` is :func:`perfguard.history.transport.post_json`). No third party
client: a few endpoints do not justify a dependency, and urllib ships with Python.

Every failure of a request (an HTTP error status, a redirect, a refused connection, a timeout, a
body that is not JSON or too large, an answer of the wrong shape) is one :class:`ApiError` whose
message names the method and path and never holds the token: it is masked with
:func:`perfguard.redact.redact` and then replaced wherever it appears. The token travels in the
``Authorization`` header only, never in a URL, and never to another host (no redirect is followed).
How every request is bounded (time, size, pages, where it may go) is
:mod:`perfguard.history.transport`'s; one :class:`~perfguard.history.transport.Session` holds a
run's deadline and page budget.

What perfguard reads of an answer is a frozen dataclass (:class:`Issue`, :class:`Comment`,
:class:`PullRequest`), each read in one place (its ``from_json``) with :mod:`perfguard.jsonfields`;
what it sends (request bodies, webhook documents, the recorded plan) is a
:data:`~perfguard.jsonfields.JsonDict`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote, urlencode

from perfguard import jsonfields as jf
from perfguard.errors import ApiError, FieldError
from perfguard.history.transport import Session
from perfguard.jsonfields import JsonDict, JsonValue
from perfguard.redact import MASK, redact

DEFAULT_API_URL = "https://api.github.com"
#: Items per page of a listing (GitHub's largest).
PER_PAGE = 100
#: Format of :meth:`PlannedGitHub.plan` (``history notify --plan``). History: 1 (2026-12) first version.
PLAN_VERSION = 1


@dataclass(frozen=True)
class Issue:
    """What perfguard reads of an issue: ``body`` and ``html_url`` are ``""`` when absent or null,
    ``closed_by`` the closer's login (None: open, or not known), ``labels`` their names, ``author``
    the login that opened it (None when not given)."""

    number: int
    title: str
    body: str
    state: str
    state_reason: str | None
    html_url: str
    closed_by: str | None
    labels: tuple[str, ...]
    author: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Issue:
        kind = "GitHub issue"
        closer = jf.opt_obj(data, "closed_by", kind)
        labels = data.get("labels")
        return cls(number=jf.integer(data, "number", kind), title=jf.string(data, "title", kind),
                   body=jf.opt_string(data, "body", kind) or "", state=jf.string(data, "state", kind),
                   state_reason=jf.opt_string(data, "state_reason", kind),
                   html_url=jf.opt_string(data, "html_url", kind) or "",
                   closed_by=None if closer is None else jf.opt_string(closer, "login", f"{kind} closed_by"),
                   labels=() if labels is None else tuple(jf.string(label, "name", f"{kind} label")
                                                          for label in jf.objects(data, "labels", kind)),
                   author=_login(data, kind))


def _login(data: Mapping[str, JsonValue], kind: str) -> str | None:
    """The login of an answer's ``user`` (who opened an issue, wrote a comment)."""
    user = jf.opt_obj(data, "user", kind)
    return None if user is None else jf.opt_string(user, "login", f"{kind} user")


@dataclass(frozen=True)
class Comment:
    """What perfguard reads of an issue's (or a pull request's) comment; ``body`` ``""`` when null,
    ``author`` None when not given."""

    id: int
    body: str
    author: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Comment:
        kind = "GitHub comment"
        return cls(id=jf.integer(data, "id", kind), body=jf.opt_string(data, "body", kind) or "",
                   author=_login(data, kind))


@dataclass(frozen=True)
class PullRequest:
    """What perfguard reads of a pull request: ``merged_at`` None while unmerged, ``html_url``
    ``""`` when absent."""

    number: int
    merged_at: str | None
    html_url: str

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> PullRequest:
        kind = "GitHub pull request"
        return cls(number=jf.integer(data, "number", kind), merged_at=jf.opt_string(data, "merged_at", kind),
                   html_url=jf.opt_string(data, "html_url", kind) or "")


_Read = TypeVar("_Read")


@dataclass(frozen=True)
class Listing:
    """The issues of a listing; ``complete`` False when the run's page budget ended it early."""

    issues: list[Issue]
    complete: bool


class GitHub:
    """The REST API of one repository ``owner/name`` at ``api_url``, authenticated with ``token``;
    ``session`` bounds the run's requests (a fresh one by default)."""

    def __init__(self, repo: str, token: str, *, api_url: str = DEFAULT_API_URL, session: Session | None = None) -> None:
        owner, _, name = repo.partition("/")
        self.repo = repo
        self.session = session or Session()
        self._root = api_url.rstrip("/")
        self._base = f"{self._root}/repos/{quote(owner, safe='')}/{quote(name, safe='')}"
        self._token = token

    def safe(self, text: str) -> str:
        """``text`` with the token and any URL credentials masked."""
        masked = redact(text)
        return masked.replace(self._token, MASK) if len(self._token) >= 4 else masked

    def login(self) -> str:
        """The login of the token's user (``GET /user``; an installation token, such as GitHub
        Actions' ``GITHUB_TOKEN``, is refused it: an :class:`ApiError`)."""
        answer = self._object("GET", "/user", root=True)
        try:
            return jf.string(answer, "login", "GitHub user")
        except FieldError as exc:
            raise ApiError(self.safe(f"GET /user: {exc}")) from None

    def issues(self, *, label: str | None = None, creator: str | None = None) -> Listing:
        """Every issue (open and closed, pull requests left out) that carries ``label`` or was
        opened by ``creator``, as far as the run's page budget reaches."""
        found: list[Issue] = []
        what = f"issues labelled {label}" if label is not None else f"issues opened by {creator}"
        selector = {"labels": label} if label is not None else {"creator": creator or ""}
        for page in range(1, self.session.limits.pages + 1):
            if not self.session.take_page():
                return Listing(found, complete=False)
            query = urlencode({**selector, "state": "all", "per_page": PER_PAGE, "page": page})
            batch = self._list("GET", f"/issues?{query}", what)
            found += self._read("GET", "/issues", Issue.from_json, [i for i in batch if "pull_request" not in i])
            if len(batch) < PER_PAGE:
                return Listing(found, complete=True)
        return Listing(found, complete=False)

    def issue(self, number: int) -> Issue:
        path = f"/issues/{number}"
        return self._read("GET", path, Issue.from_json, [self._object("GET", path)])[0]

    def comments(self, number: int) -> list[Comment]:
        """Every comment of issue (or pull request) ``number``; an :class:`ApiError` when the run's
        page budget ends before the last: a marker missed would post its comment twice."""
        found: list[Comment] = []
        path = f"/issues/{number}/comments"
        for page in range(1, self.session.limits.pages + 1):
            if not self.session.take_page():
                break
            batch = self._list("GET", f"{path}?per_page={PER_PAGE}&page={page}", f"issue {number} comments")
            found += self._read("GET", path, Comment.from_json, batch)
            if len(batch) < PER_PAGE:
                return found
        raise ApiError(f"GET {self.repo}{path}: the run's page budget ({self.session.limits.pages} pages) is spent "
                       "before the last comment; nothing more is posted on it this run")

    def pulls_of(self, sha: str) -> list[PullRequest]:
        """The pull requests that hold commit ``sha`` (the one that merged it among them)."""
        path = f"/commits/{quote(sha, safe='')}/pulls"
        return self._read("GET", path, PullRequest.from_json, self._list("GET", path, "commit pulls"))

    def create_issue(self, title: str, body: str, labels: list[str]) -> Issue | None:
        """The new issue (None from a :class:`PlannedGitHub`: it is only recorded)."""
        answer = self._object("POST", "/issues", {"title": title, "body": body, "labels": list(labels)})
        return self._read("POST", "/issues", Issue.from_json, [answer])[0]

    def comment(self, number: int, body: str) -> Comment | None:
        path = f"/issues/{number}/comments"
        return self._read("POST", path, Comment.from_json, [self._object("POST", path, {"body": body})])[0]

    def close(self, number: int, state_reason: str) -> Issue | None:
        """Close issue ``number`` as ``completed`` or ``not_planned``."""
        path = f"/issues/{number}"
        answer = self._object("PATCH", path, {"state": "closed", "state_reason": state_reason})
        return self._read("PATCH", path, Issue.from_json, [answer])[0]

    def _read(self, method: str, path: str, reader: Callable[[Mapping[str, JsonValue]], _Read],
              found: list[Mapping[str, JsonValue]]) -> list[_Read]:
        """``found`` read by ``reader``; an answer of the wrong shape is an :class:`ApiError`."""
        try:
            return [reader(item) for item in found]
        except FieldError as exc:
            raise ApiError(self.safe(f"{method} {self.repo}{path}: {exc}")) from None

    def _list(self, method: str, path: str, what: str) -> list[Mapping[str, JsonValue]]:
        """The objects of a list answer (anything else in it is left out)."""
        answer = self._call(method, path)
        if not isinstance(answer, list):
            raise ApiError(f"{method} {self.repo} {what}: expected a list, found {type(answer).__name__}")
        return [item for item in answer if isinstance(item, dict)]

    def _object(self, method: str, path: str, body: JsonDict | None = None, *,
                root: bool = False) -> Mapping[str, JsonValue]:
        answer = self._call(method, path, body, root=root)
        if not isinstance(answer, dict):
            raise ApiError(f"{method} {'' if root else self.repo}{path.split('?')[0]}: expected a JSON object")
        return answer

    def _call(self, method: str, path: str, body: JsonDict | None = None, *, root: bool = False) -> JsonValue:
        """One request to ``path`` under the repository (``root``: under the API's root)."""
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
                   "User-Agent": "perfguard"}
        what = f"{method} {'' if root else self.repo}{path.split('?')[0]}"
        try:
            return self.session.json(method, (self._root if root else self._base) + path, body, headers,
                                     authorization=f"Bearer {self._token}")
        except ApiError as exc:
            raise ApiError(self.safe(f"{what}: {exc}")) from None


class PlannedGitHub(GitHub):
    """A :class:`GitHub` that reads from the API but only records its writes, as ``requests``
    (method, path under the API root, JSON body): :meth:`plan` is the document a job without
    write access hands to one that posts them (``gh api --method M PATH --input BODY``)."""

    def __init__(self, repo: str, token: str, *, api_url: str = DEFAULT_API_URL, session: Session | None = None) -> None:
        super().__init__(repo, token, api_url=api_url, session=session)
        self._path = self._base[len(self._root) + 1:]
        self.requests: list[JsonDict] = []

    def create_issue(self, title: str, body: str, labels: list[str]) -> None:
        self._record("POST", "/issues", {"title": title, "body": body, "labels": list(labels)})

    def comment(self, number: int, body: str) -> None:
        self._record("POST", f"/issues/{number}/comments", {"body": body})

    def close(self, number: int, state_reason: str) -> None:
        self._record("PATCH", f"/issues/{number}", {"state": "closed", "state_reason": state_reason})

    def _record(self, method: str, path: str, body: JsonDict) -> None:
        self.requests.append({"method": method, "path": self._path + path, "body": body})

    def plan(self) -> JsonDict:
        """The recorded writes as a document (``version`` 1), in the order they must be sent."""
        return {"version": PLAN_VERSION, "repo": self.repo, "requests": list(self.requests)}
