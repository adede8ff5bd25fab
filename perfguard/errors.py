"""The exceptions perfguard raises, as one small tree.

``PerfguardError``
    Base of everything perfguard raises on purpose.

    ``UserError``
        Bad usage or bad input: a malformed suite, an unknown pass, an unreadable model, a corrupt
        baseline. The CLI prints its message on one line and exits with code 2. The message names
        what to fix (the file, the key, what was found and what was expected).

        ``StorageError``
            A result or baseline file could not be read or written (corrupt JSON, a newer format
            version, a full disk, a read-only folder). A ``UserError`` because the fix is the user's.

        ``StoreError``
            The history store (``--store``) cannot be opened, read or written: a bad URL, an
            unreachable server, wrong credentials, a newer schema, a document it refuses. The
            message names the store with its password masked.

        ``RunnerUnavailable``
            A runner (``cuda``, ``npu:<provider>``) cannot serve on this machine; the message says
            why.

        ``BuildError``
            The suite's ``[compiler] build`` command failed or timed out at some git ref; ``label``
            names the checkout (``base``, ``head``, a sha). ``bisect`` skips that version.

    ``BackendError``
        A compiler adapter failed on one case: a pass raised, produced an invalid model, or the
        compiler crashed or hung. It fails that case; other cases go on.

    ``DecodeError``
        Input not in the form its reader expects, raised by a low-level reader and translated by
        its caller at the boundary, where the caller knows what it means: a ``StorageError`` for a
        document file, a ``BackendError`` for a profile a compiler's runtime wrote, a note in a
        report for a profiler's output. Each is a ``ValueError`` too, as it was before the tree
        held it, so a reader that guards a parse with ``except ValueError`` still catches it.

        ``FieldError``
            A JSON field that is missing or of the wrong type (``perfguard.jsonfields``; named
            ``ProtocolError`` where a worker message breaks the protocol, a perfguard bug).

        ``RefusedValue``
            A JSON value no document may hold: NaN or Infinity, a number that overflows a float,
            an integer beyond 2**63 (``perfguard.results.documents.parse_json``).

        ``TraceError``
            A runtime's profiler trace that cannot be read or holds no measured run.

        ``NsightError``
            Output of nsys or ncu that is not the CSV perfguard asked for.

    ``CorruptEntry``
        An artifact-cache entry that is not what the cache wrote (a link, a non-regular file, a size
        or hash that differs from its manifest). The cache catches it: the entry is dropped with one
        warning and the case compiles again (``perfguard.compile.cache``).

    ``CountedCompileDone``
        Not an error: a backend's compile raises it once its last counted window has closed, when
        what follows (TVM's build) is neither counted nor kept; the counted compile catches it
        (``perfguard.counting.child``). It never reaches the CLI.

    ``ApiError``
        A request to GitHub's REST API or a webhook failed (``perfguard history notify``); the
        message is safe to print (the token masked). Notify turns it into a warning line: a failed
        notification never fails the night.

A wrong answer (outputs differ from the reference run of the unoptimized model) and a case whose
every worker process crashed or hung are not exceptions: they happen in worker processes, and the
result records them per case (``status: failed``, ``error.stage`` ``correctness`` or ``measure``,
with the message) while the other cases are still measured.

Anything else that leaves a command is a bug in perfguard, never a verdict: the CLI exits with
code 70 and writes the traceback to a file (``perfguard.cli``). Programming errors inside
perfguard (a statistic called with invalid arguments) are ``ValueError`` / ``TypeError``.

``Terminated`` (SIGTERM) and its subclass ``HungUp`` (SIGHUP) are no errors: the CLI's signal
handlers raise them, as Python raises ``KeyboardInterrupt`` for SIGINT, and they subclass it so
that every cleanup that Ctrl-C runs (``finally``, context managers) runs for them too. The CLI
exits with 128 + the signal's number (143, 129).
"""

from __future__ import annotations

from collections.abc import Iterable


class PerfguardError(Exception):
    """Base class for every error perfguard raises on purpose."""


class UserError(PerfguardError):
    """Bad usage or bad input; the CLI exits with code 2 and this one-line message."""


class StorageError(UserError):
    """A result or baseline document could not be read or written."""


class StoreError(UserError):
    """The history store cannot be opened, read or written; the message names the store."""


class RunnerUnavailable(UserError):
    """A runner cannot serve on this machine (no driver, no provider, no device)."""


class BackendError(PerfguardError):
    """A compile failed for one case (a pass raised, an invalid model, a crash or a hang)."""


class BuildError(UserError):
    """The compiler's build command failed at some ref (``label``: which checkout)."""

    def __init__(self, message: str, label: str | None = None) -> None:
        super().__init__(message)
        self.label = label


class DecodeError(PerfguardError, ValueError):
    """Input not in the form its reader expects; the caller translates it at its boundary."""


class FieldError(DecodeError):
    """A JSON document or message whose field is missing or of the wrong type."""


#: A worker request or response that does not follow the protocol (a perfguard bug).
ProtocolError = FieldError


class RefusedValue(DecodeError):
    """A JSON value no document may hold (NaN, Infinity, a float overflow, an integer beyond 2**63)."""


class TraceError(DecodeError):
    """A profiler trace that cannot be read or holds no measured run."""


class NsightError(DecodeError):
    """Output of nsys or ncu that is not the CSV perfguard asked for."""


class CountedCompileDone(PerfguardError):  # noqa: N818 (not an error: a counted compile's end)
    """A counted compile's last window has closed; the rest of the compile is skipped."""


class CorruptEntry(PerfguardError):
    """An artifact-cache entry that is not what the cache wrote; its message says what, for the warning."""


class ApiError(PerfguardError):
    """A request to the REST API (or a webhook) failed; the message is safe to print."""


class Terminated(KeyboardInterrupt):
    """perfguard was asked to stop by SIGTERM (CI cancelling a job); unwinds like Ctrl-C."""

    signal_name = "SIGTERM"


class HungUp(Terminated):
    """perfguard was asked to stop by SIGHUP (its terminal or session went away)."""

    signal_name = "SIGHUP"


def close_names(name: str, valid: Iterable[str], n: int = 3) -> list[str]:
    """Return up to ``n`` valid names close to ``name`` (for "did you mean" hints)."""
    import difflib  # 1.5 ms, only when a name is wrong

    return difflib.get_close_matches(name, list(valid), n=n, cutoff=0.6)


def did_you_mean(name: str, valid: Iterable[str], *, most: int = 3) -> str:
    """The hint " (did you mean 'a', 'b'?)" naming up to ``most`` close valid names, or "".

    The one place the hint is worded; callers append it to the unknown name. Messages that name
    one suggestion (``most=1``) read as a question with one answer, as the suite errors do."""
    close = close_names(name, valid, n=most)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


def unknown_name_message(kind: str, name: str, valid: Iterable[str]) -> str:
    """Format "unknown <kind> 'x' (did you mean 'y'?); valid: a, b, c"."""
    valid = sorted(set(valid))
    listing = ", ".join(valid) if len(valid) <= 60 else ", ".join(valid[:60]) + ", ..."
    return f"unknown {kind} {name!r}{did_you_mean(name, valid)}; valid: {listing}"


def first_line(exc: BaseException, limit: int = 300, *, empty: str | None = None) -> str:
    """The first non-blank line of ``exc``'s message, stripped and cut at ``limit`` characters;
    ``empty`` (default: the exception's type name) when the message has no such line.

    Compilers and runtimes raise exceptions with empty or multi-line messages; a result or an error
    line needs one short line, and ``str(exc).splitlines()[0]`` raises on an empty message.
    """
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()[:limit]
    return type(exc).__name__ if empty is None else empty


def one_line(exc: BaseException) -> str:
    """Every non-blank line of ``exc``'s message joined by spaces (its type name when there is
    none): the whole message on one line, for the CLI's ``perfguard: error: ...``."""
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
