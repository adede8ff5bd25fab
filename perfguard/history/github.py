"""A small client of GitHub's REST API (github.com or GitHub Enterprise), over urllib.

Only what ``perfguard history notify`` uses: list a label's issues, read one issue and its
comments, create an issue, comment, close, the pull requests of a commit; a ``POST`` of JSON to any URL (a webhook). No third
party client: five endpoints do not justify a dependency, and urllib ships with Python.

Every failure of a request (an HTTP error status, a refused connection, a timeout, a body that is
not JSON, an answer of the wrong shape) is one :class:`ApiError` whose message names the method
and path and never holds the token: it is masked with :func:`perfguard.redact.redact` and then
replaced wherever it appears. The token travels in the ``Authorization`` header only, never in a URL.

What perfguard reads of an answer is a frozen dataclass (:class:`Issue`, :class:`Comment`,
:class:`PullRequest`), each read in one place (its ``from_json``) with :mod:`perfguard.jsonfields`;
what it sends (request bodies, webhook documents, the recorded plan) is a
:data:`~perfguard.jsonfields.JsonDict`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote, urlencode, urlsplit

from perfguard import jsonfields as jf
from perfguard.errors import ApiError, FieldError
from perfguard.jsonfields import JsonDict, JsonValue
from perfguard.redact import MASK, redact

DEFAULT_API_URL = "https://api.github.com"
#: Seconds one request may take; a night must not hang on an unreachable API.
TIMEOUT_S = 20.0
#: Pages of 100 issues at most read per listing (10,000 issues): a bound, not a limit users meet.
MAX_PAGES = 100
#: Format of :meth:`PlannedGitHub.plan` (``history notify --plan``). History: 1 (2026-12) first version.
PLAN_VERSION = 1


@dataclass(frozen=True)
class Issue:
    """What perfguard reads of an issue: ``body`` and ``html_url`` are ``""`` when absent or null,
    ``closed_by`` the closer's login (None: open, or not known), ``labels`` their names."""

    number: int
    title: str
    body: str
    state: str
    state_reason: str | None
    html_url: str
    closed_by: str | None
    labels: tuple[str, ...]

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
                                                          for label in jf.objects(data, "labels", kind)))


@dataclass(frozen=True)
class Comment:
    """What perfguard reads of an issue's (or a pull request's) comment; ``body`` ``""`` when null."""

    id: int
    body: str

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Comment:
        kind = "GitHub comment"
        return cls(id=jf.integer(data, "id", kind), body=jf.opt_string(data, "body", kind) or "")


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


class GitHub:
    """The REST API of one repository ``owner/name`` at ``api_url``, authenticated with ``token``."""

    def __init__(self, repo: str, token: str, *, api_url: str = DEFAULT_API_URL, timeout: float = TIMEOUT_S) -> None:
        owner, _, name = repo.partition("/")
        self.repo = repo
        self._base = f"{api_url.rstrip('/')}/repos/{quote(owner, safe='')}/{quote(name, safe='')}"
        self._token = token
        self._timeout = timeout

    def safe(self, text: str) -> str:
        """``text`` with the token and any URL credentials masked."""
        masked = redact(text)
        return masked.replace(self._token, MASK) if len(self._token) >= 4 else masked

    def issues(self, label: str) -> list[Issue]:
        """Every issue (open and closed, pull requests left out) that carries ``label``."""
        found: list[Issue] = []
        for page in range(1, MAX_PAGES + 1):
            query = urlencode({"labels": label, "state": "all", "per_page": 100, "page": page})
            batch = self._list("GET", f"/issues?{query}", f"issues labelled {label}")
            found += self._read("GET", "/issues", Issue.from_json, [i for i in batch if "pull_request" not in i])
            if len(batch) < 100:
                break
        return found

    def issue(self, number: int) -> Issue:
        path = f"/issues/{number}"
        return self._read("GET", path, Issue.from_json, [self._object("GET", path)])[0]

    def comments(self, number: int) -> list[Comment]:
        found: list[Comment] = []
        for page in range(1, MAX_PAGES + 1):
            path = f"/issues/{number}/comments"
            batch = self._list("GET", f"{path}?per_page=100&page={page}", f"issue {number} comments")
            found += self._read("GET", path, Comment.from_json, batch)
            if len(batch) < 100:
                break
        return found

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

    def _object(self, method: str, path: str, body: JsonDict | None = None) -> Mapping[str, JsonValue]:
        answer = self._call(method, path, body)
        if not isinstance(answer, dict):
            raise ApiError(f"{method} {self.repo}{path.split('?')[0]}: expected a JSON object")
        return answer

    def _call(self, method: str, path: str, body: JsonDict | None = None) -> JsonValue:
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
                   "User-Agent": "perfguard"}
        what = f"{method} {self.repo}{path.split('?')[0]}"
        try:
            return request_json(method, self._base + path, body, headers, self._timeout,
                                authorization=f"Bearer {self._token}")
        except ApiError as exc:
            raise ApiError(self.safe(f"{what}: {exc}")) from None


class PlannedGitHub(GitHub):
    """A :class:`GitHub` that reads from the API but only records its writes, as ``requests``
    (method, path under the API root, JSON body): :meth:`plan` is the document a job without
    write access hands to one that posts them (``gh api --method M PATH --input BODY``)."""

    def __init__(self, repo: str, token: str, *, api_url: str = DEFAULT_API_URL, timeout: float = TIMEOUT_S) -> None:
        super().__init__(repo, token, api_url=api_url, timeout=timeout)
        self._path = self._base[len(api_url.rstrip("/")) + 1:]
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


def request_json(method: str, url: str, body: JsonValue, headers: dict[str, str], timeout: float, *,
                 authorization: str | None = None) -> JsonValue:
    """The JSON answer of one request (``None`` for an empty body); :class:`ApiError` otherwise."""
    raw = send(method, url, body, headers, timeout, authorization=authorization)
    if not raw.strip():
        return None
    try:
        answer: JsonValue = json.loads(raw)
    except ValueError:
        raise ApiError("the answer is not JSON") from None
    return answer


def send(method: str, url: str, body: JsonValue, headers: dict[str, str], timeout: float, *,
         authorization: str | None = None) -> bytes:
    """The raw answer of one request with ``body`` as JSON; :class:`ApiError` on any failure.
    ``authorization`` is not sent on after a redirect (urllib would copy it to any host)."""
    if not url.lower().startswith(("https://", "http://")):
        raise ApiError("only http:// and https:// URLs are used")  # urllib would also open file://
    data = None if body is None else json.dumps(body, sort_keys=True).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={**headers, **({"Content-Type": "application/json"} if data else {})})
    if authorization is not None:
        request.add_unredirected_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (scheme checked above)
            return bytes(response.read())
    except urllib.error.HTTPError as exc:
        detail = _message(exc.read())
        raise ApiError(f"HTTP {exc.code}{': ' + detail if detail else ''}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise ApiError(f"unreachable ({reason})") from None


def post_json(url: str, document: JsonDict, timeout: float = TIMEOUT_S) -> None:
    """POST ``document`` to a webhook (any answer but an error status is success: Slack answers
    ``ok`` in plain text); :class:`ApiError` on failure, naming the host only: a webhook URL's path
    is its secret (``hooks.slack.com/services/T…/B…/SECRET``)."""
    try:
        send("POST", url, document, {"User-Agent": "perfguard"}, timeout)
    except ApiError as exc:
        raise ApiError(f"webhook at {urlsplit(url).hostname or '?'}: {exc}") from None


def _message(raw: bytes) -> str:
    try:
        found = json.loads(raw).get("message", "")
    except (ValueError, AttributeError):
        return ""
    return " ".join(str(found).split())[:200]
