"""Credentials out of everything perfguard records or prints: one place that masks them.

A command line, an exception message or a store URL may carry a secret: ``--store
postgresql://USER:PASSWORD@HOST/DB`` (also ``postgres://``, ``postgresql+psycopg://``, a
``?password=`` or ``?sslpassword=`` query parameter), a git remote ``https://USER:TOKEN@github.com/...``
or ``https://TOKEN@github.com/...``, an API URL with ``?token=`` or ``?access_token=``. The internal
error's traceback file and ``--json`` error document (which docs/reference/exit-codes.md asks users to
attach to bug reports), error messages and CI logs get them with the secret replaced by ``***``.

How a URL's password is found: it runs from the first ``:`` after the user name to the LAST ``@`` of
the URL, because users write passwords with ``@``, ``:``, ``/``, ``?`` or ``#`` unescaped (SQLAlchemy
takes ``:``, ``/``, ``?`` and ``#`` in a password; its ``%40`` escape decodes to ``@``). A URL whose path
or query holds an ``@`` is masked up to that ``@``: more is hidden than needed, never less. In free
text a URL ends at whitespace (a password with a space must be written ``%20``); a single value
(:func:`redact_url`: an argument, a ``--store`` value) is one URL to its end.

The same secrets are then replaced wherever else they appear in the text (a driver or a library may
echo a password, decoded, without its URL), when at least ``_MIN_ECHOED`` characters long: replacing
a two-letter password everywhere would garble the traceback it protects (a password that short is
masked in its URL only).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

MASK = "***"
# A URL scheme not glued to a word before it (``--store=postgresql://...`` gives ``postgresql``).
_URL = re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*)://")
# Query parameters whose value is a secret. Only after ``?``, ``&`` or ``;``: a traceback's source
# lines say ``connect(password=password)``, which is code, not a secret. The value runs to the next
# ``&``; in free text also to whitespace or a quote (a repr's ``'...?password=x'``).
_SECRET_NAME = (r"(?i)([?&;](?:(?:ssl)?password|passwd|pwd|(?:access_|refresh_|id_|private_|auth_)?token|"
                r"client_secret|secret|api_?key))=")
_SECRET_PARAMETER = {True: re.compile(_SECRET_NAME + r"([^&]*)"), False: re.compile(_SECRET_NAME + r"([^&\s'\"]*)")}
# Schemes where a user name without a password is a token (``https://ghp_xxx@github.com``); for a
# database or ssh URL it is only a user name (``ssh://git@host``, ``postgresql://perf@db``).
_TOKEN_USER_SCHEMES = frozenset({"http", "https", "git+https", "git+http"})
_MIN_ECHOED = 4
_WHITESPACE = re.compile(r"\s")
_PATH_START = re.compile(r"[/?#]")


def redact_url(value: str, *, paths: bool = False) -> str:
    """``value`` (a URL, or one argument or setting that holds one, such as ``--store=URL``) with
    every credential replaced by ``***``; the URL runs to the end of ``value``. Works on a malformed
    URL too: nothing is parsed strictly. ``paths``: each URL's path, query and fragment are masked
    too (``https://HOST/***``), for text meant for others (a bug report)."""
    masked, _ = _masked(value, whole=True, paths=paths)
    return masked


def redact(text: str, *, values: Iterable[str] = (), paths: bool = False) -> str:
    """``text`` (a traceback, a message, a command line) with the credentials of every URL in it
    replaced by ``***``, and every secret of those URLs and of ``values`` (arguments or settings
    that may hold a URL, e.g. the command line and ``$PERFGUARD_STORE``) replaced wherever else it
    appears in ``text``, raw or percent-decoded. ``paths``: each URL's path, query and fragment are
    secrets too (a webhook's path is its secret: ``hooks.slack.com/services/T…/B…/SECRET``).

    The secrets of ``values`` are replaced first: a value is one URL to its end, so a path holding
    a space is masked whole before the free text's URLs, which end at whitespace, are read."""
    secrets: set[str] = set()
    for value in values:
        secrets |= _masked(value, whole=True, paths=paths)[1]
    masked = _replaced(text, secrets)
    masked, found = _masked(masked, whole=False, paths=paths)
    return _replaced(masked, found)


def _replaced(text: str, secrets: set[str]) -> str:
    for secret in sorted((s for s in secrets if len(s) >= _MIN_ECHOED), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def _masked(text: str, *, whole: bool, paths: bool) -> tuple[str, set[str]]:
    """``text`` with URL credentials and secret parameters (``paths``: also every URL's path,
    query and fragment) masked, and the secrets found (raw and percent-decoded). ``whole``:
    ``text`` is one value, so a URL in it runs to its end."""
    secrets: set[str] = set()
    parts: list[str] = []
    position = 0
    for match in _URL.finditer(text):
        if match.start() < position:  # inside a URL already masked (a URL in a URL's query)
            continue
        start = match.end()
        end = len(text) if whole else _token_end(text, start)
        rest = _masked_rest(match.group(1).lower(), text[start:end], secrets, paths)
        if rest is None:
            continue
        replacement, consumed = rest
        parts.append(text[position:start])
        parts.append(replacement)
        position = start + consumed
    parts.append(text[position:])

    def parameter(found: re.Match[str]) -> str:
        if found.group(2):
            secrets.update({found.group(2), unquote(found.group(2))})
        return f"{found.group(1)}={MASK}"

    return _SECRET_PARAMETER[whole].sub(parameter, "".join(parts)), secrets


def _masked_rest(scheme: str, rest: str, secrets: set[str], paths: bool) -> tuple[str, int] | None:
    """What follows ``scheme://`` in one URL, masked, and how many of its characters that
    replaces; None when nothing in it is secret."""
    userinfo_end = rest.rfind("@")
    masked_userinfo = None if userinfo_end < 0 else _masked_userinfo(scheme, rest[:userinfo_end], secrets)
    host_start = 0 if masked_userinfo is None else userinfo_end
    head = "" if masked_userinfo is None else masked_userinfo
    if not paths:
        return None if masked_userinfo is None else (head, userinfo_end)
    found = _PATH_START.search(rest, host_start)
    path_start = len(rest) if found is None else found.start()
    path = rest[path_start:].removeprefix("/")
    if not path:
        return None if masked_userinfo is None else (head, userinfo_end)
    secrets.update({path, unquote(path)})
    return f"{head}{rest[host_start:path_start]}/{MASK}", len(rest)


def _token_end(text: str, start: int) -> int:
    """Where a URL starting at ``start`` in free text ends: at the next whitespace."""
    found = _WHITESPACE.search(text, start)
    return len(text) if found is None else found.start()


def _masked_userinfo(scheme: str, userinfo: str, secrets: set[str]) -> str | None:
    """The ``user:password`` part of a URL with its secret masked (adding it to ``secrets``), or None
    when it holds none (no password, or the ``@`` belongs to a path: the "user" holds a ``/``)."""
    user, colon, password = userinfo.partition(":")
    if any(c in user for c in "/?#"):
        return None
    if colon and password:
        secrets.update({password, unquote(password)})
        return f"{user}:{MASK}"
    if not colon and user and scheme in _TOKEN_USER_SCHEMES:
        secrets.update({user, unquote(user)})
        return MASK
    return None
