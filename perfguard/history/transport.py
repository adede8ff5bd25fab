"""HTTP for ``history notify``: every request bounded in where it goes, how long it takes and how
much it reads. The one place notify's requests (GitHub's API and the webhook) are sent.

What a hostile or broken server can no longer do (issue 32):

* **Send perfguard elsewhere.** Only ``http://`` and ``https://`` URLs with a host, in ASCII, with no
  space, control character or credentials in them (:func:`check_url`, run on ``--api-url`` and
  ``--webhook`` before any request). No redirect is followed, to any host: a 3xx answer is an
  :class:`~perfguard.errors.ApiError` (a warning), and its body is not read as GitHub's data. The
  token travels in an unredirected ``Authorization`` header, and only to the API's own URL.
* **Hold a run.** One deadline per request (:attr:`Limits.request_s`) and one per run
  (:attr:`Limits.run_s`), both on the monotonic clock and enforced by a timer that shuts the
  connection's socket when the deadline passes: a socket timeout alone restarts with every byte,
  so a server dripping a byte every 5 s held a request ~96 s against a 20 s timeout. (Resolving the
  host name is the one step the timer cannot interrupt.)
* **Exhaust memory.** A body is read in chunks up to :attr:`Limits.body_bytes` (10 MiB; GitHub's
  largest answer notify asks for, a page of 100 issues, is well under 1 MiB), a ``Content-Length``
  over it refused before reading; an error body is read up to 64 KiB. The answers of one run
  together are read up to :attr:`Limits.run_bytes` (100 MiB: what a run keeps of its listings,
  issue bodies, stays bounded however many pages it reads), and paginated listings share a page
  budget per run (:attr:`Limits.pages`, :meth:`Session.take_page`). JSON is parsed by the
  documents' reader (:func:`perfguard.results.documents.parse_json`: no nesting deeper than its
  ``MAX_DEPTH``, no NaN, no integer beyond 2**63).

Every failure of a request is one :class:`~perfguard.errors.ApiError` (notify turns it into a
warning and exit 0); a bad ``--api-url`` or ``--webhook`` is a :class:`~perfguard.errors.UserError`
(exit 2) naming the URL by its host only: a webhook URL's path is its secret.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message
from typing import IO, Protocol, cast

from perfguard.errors import ApiError, StorageError, UserError
from perfguard.jsonfields import JsonValue, json_value
from perfguard.names import visible
from perfguard.redact import redact

#: The most bytes of one answer read (10 MiB).
MAX_BODY_BYTES = 10 * 2**20
#: The most bytes of an error answer read: only its ``message`` is shown.
MAX_ERROR_BODY_BYTES = 64 * 2**10
_CHUNK = 64 * 2**10


@dataclass(frozen=True)
class Limits:
    """The bounds of one run's requests: seconds per request and per run, bytes per answer and per
    run, and pages of a listing (all listings of the run together)."""

    request_s: float = 20.0
    run_s: float = 600.0
    body_bytes: int = MAX_BODY_BYTES
    run_bytes: int = 10 * MAX_BODY_BYTES
    pages: int = 100


def url_host(url: str) -> str:
    """The host of ``url`` as shown in messages (never its path, query or credentials), read
    leniently so a malformed URL still names it; ``?`` when there is none."""
    rest = url.partition("://")[2] if "://" in url else ""
    netloc = rest
    for end in "/?#":
        netloc = netloc.split(end, 1)[0]
    host = netloc.rpartition("@")[2]
    return visible(host[:100]) or "?"


def url_problem(url: str) -> str | None:
    """Why ``url`` is not one notify sends a request to, or None."""
    from urllib.parse import urlsplit

    if not url.isascii():
        return "holds a character that is not ASCII (percent-encode it; an international host in its xn-- form)"
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return "holds a space or a control character (percent-encode it)"
    try:
        parts = urlsplit(url)
        if parts.port is not None and parts.port == 0:  # reading .port raises for ":abc" or one over 65535
            return "names port 0"
    except ValueError:
        return "is not a URL (a malformed host or port)"
    if parts.scheme.lower() not in ("http", "https"):
        return "is not an http:// or https:// URL"
    if not parts.hostname:
        return "names no host"
    if parts.username is not None or parts.password is not None:
        return "holds credentials; the token is read from $GITHUB_TOKEN"
    return None


def check_url(url: str, option: str) -> str:
    """``url`` if notify may send requests to it, else a one-line :class:`UserError` naming
    ``option`` and the URL's host only."""
    problem = url_problem(url)
    if problem is not None:
        raise UserError(f"{option}: the URL at host {url_host(url)} {problem}; expected http(s)://HOST[:PORT]/PATH")
    return url


class _Watch:
    """The deadline of one request: at ``deadline`` (monotonic) every socket it opened is shut
    down, which ends a blocked read at once, whatever the socket's timeout."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.seconds = max(0.0, deadline - time.monotonic())
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:  # the plain socket's shutdown: an SSLSocket's own would drop its state under the reader
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: urllib then raises the 3xx as an ``HTTPError``."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: http.client.HTTPMessage, newurl: str) -> None:
        return None


def _watched(base: type[http.client.HTTPConnection], watch: _Watch) -> type[http.client.HTTPConnection]:
    """``base`` whose socket (after TLS, for HTTPS: the socket that is read) ``watch`` holds."""
    def connect(self: http.client.HTTPConnection) -> None:
        base.connect(self)
        watch.add(self.sock)

    return cast("type[http.client.HTTPConnection]", type(f"Watched{base.__name__}", (base,), {"connect": connect}))


class _WatchedHandler(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
    """urllib's http and https handlers, their connections held by one request's :class:`_Watch`."""

    def __init__(self, watch: _Watch) -> None:
        urllib.request.HTTPSHandler.__init__(self, context=ssl.create_default_context())
        self._watch = watch

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPConnection, self._watch), req)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPSConnection, self._watch), req,
                            context=self._context)  # type: ignore[attr-defined]


class Session:
    """The requests of one run: its deadline starts when the session is made, and its page budget
    is shared by every listing."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._run_deadline = time.monotonic() + self.limits.run_s
        self.pages_left = self.limits.pages
        self.bytes_left = self.limits.run_bytes

    def take_page(self) -> bool:
        """True, and one page fewer left, while the run's page budget lasts."""
        if self.pages_left <= 0:
            return False
        self.pages_left -= 1
        return True

    def json(self, method: str, url: str, body: JsonValue, headers: dict[str, str], *,
             authorization: str | None = None) -> JsonValue:
        """The JSON answer of one request (``None`` for an empty body); :class:`ApiError` otherwise."""
        from perfguard.results.documents import parse_json

        raw = self.send(method, url, body, headers, authorization=authorization)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError("the answer is not UTF-8 text") from None
        if not text.strip():
            return None
        try:
            answer = json_value(parse_json(text, "the answer"), "the answer")
        except StorageError as exc:
            raise ApiError(str(exc)) from None
        except ValueError:
            raise ApiError("the answer is not JSON") from None
        return answer

    def send(self, method: str, url: str, body: JsonValue, headers: dict[str, str], *,
             authorization: str | None = None) -> bytes:
        """The raw answer (at most ``limits.body_bytes``) of one request with ``body`` as JSON;
        :class:`ApiError` on any failure, a 3xx included."""
        problem = url_problem(url)
        if problem is not None:
            raise ApiError(f"the URL at host {url_host(url)} {problem}")
        deadline = min(time.monotonic() + self.limits.request_s, self._run_deadline)
        if deadline <= time.monotonic():
            raise ApiError(f"the run's {self.limits.run_s:g} s for requests are spent")
        data = None if body is None else json.dumps(body, sort_keys=True).encode()
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={**headers, **({"Content-Type": "application/json"} if data else {})})
        if authorization is not None:
            request.add_unredirected_header("Authorization", authorization)
        watch = _Watch(deadline)
        try:
            return self._exchange(request, watch)
        finally:
            watch.cancel()

    def _exchange(self, request: urllib.request.Request, watch: _Watch) -> bytes:
        opener = urllib.request.build_opener(_NoRedirect(), _WatchedHandler(watch))
        try:
            with opener.open(request, timeout=max(0.001, watch.remaining())) as response:
                raw = _read(response, min(self.limits.body_bytes, self.bytes_left), watch,
                            refusal="" if self.bytes_left >= self.limits.body_bytes else
                            f"the run's answers passed {self.limits.run_bytes} bytes; the rest wait for the next run")
                self.bytes_left -= len(raw)
                return raw
        except urllib.error.HTTPError as exc:
            raise _status_error(exc, watch) from None
        except ApiError:
            raise
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            if watch.expired:
                raise ApiError(f"no whole answer within {watch.seconds:.3g} s") from None
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise ApiError(f"unreachable ({' '.join(str(reason).split())[:200] or type(reason).__name__})") from None


class _Body(Protocol):
    """An answer whose body :func:`_read` reads: an ``HTTPResponse``, or an ``HTTPError``."""

    @property
    def headers(self) -> Message: ...

    def read(self, amt: int, /) -> bytes: ...


def _read(response: _Body, limit: int, watch: _Watch, *, refusal: str = "") -> bytes:
    """At most ``limit`` bytes of ``response``'s body; more is an :class:`ApiError` (nothing
    beyond ``limit`` plus one chunk is held), worded ``refusal`` when given."""
    too_long = refusal or f"the answer is longer than {limit} bytes; at most {limit} are read"
    declared = (response.headers.get("Content-Length") or "").strip()
    if declared.isascii() and declared.isdigit() and len(declared) < 20 and int(declared) > limit:
        raise ApiError(refusal or f"the answer is {int(declared)} bytes; at most {limit} are read")
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = response.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            if watch.expired:  # the timer shut the socket: what came is cut short
                raise ApiError(f"no whole answer within {watch.seconds:.3g} s")
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise ApiError(too_long)
        chunks.append(chunk)


def _status_error(exc: urllib.error.HTTPError, watch: _Watch) -> ApiError:
    """The :class:`ApiError` of an error or redirect status (a redirect's target named by host)."""
    if 300 <= exc.code < 400:
        target = url_host(exc.headers.get("Location") or "") if exc.headers else "?"
        return ApiError(f"HTTP {exc.code}: a redirect (to host {target}), not followed; the answer is not used")
    try:
        raw = _read(exc, MAX_ERROR_BODY_BYTES, watch)
    except (ApiError, OSError, http.client.HTTPException, ValueError):
        raw = b""
    detail = _message(raw)
    return ApiError(f"HTTP {exc.code}{': ' + detail if detail else ''}")


def _message(raw: bytes) -> str:
    """The ``message`` of an error answer (GitHub's JSON errors carry one), on one line."""
    from perfguard.results.documents import parse_json

    try:
        found = parse_json(raw.decode("utf-8"), "the answer")
    except (ValueError, StorageError):
        return ""
    message = found.get("message", "") if isinstance(found, dict) else ""
    return " ".join(str(message).split())[:200]


def post_json(session: Session, url: str, document: JsonValue) -> None:
    """POST ``document`` to a webhook (any answer but an error status is success: Slack answers
    ``ok`` in plain text); :class:`ApiError` on failure, naming the host only: a webhook URL's path
    is its secret (``hooks.slack.com/services/T…/B…/SECRET``)."""
    try:
        session.send("POST", url, document, {"User-Agent": "perfguard"})
    except ApiError as exc:
        said = redact(str(exc), values=[url], paths=True)  # no library message may echo the path
        raise ApiError(f"webhook at {url_host(url)}: {said}") from None
