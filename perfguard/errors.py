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

        ``RunnerUnavailable``
            A runner (``cuda``, ``npu:<provider>``) cannot serve on this machine; the message says
            why.

        ``BuildError``
            The suite's ``[compiler] build`` command failed or timed out at some git ref; ``label``
            names the checkout (``base``, ``head``, a sha). ``bisect`` skips that version.

    ``BackendError``
        A compiler adapter failed on one case: a pass raised, produced an invalid model, or the
        compiler crashed or hung. It fails that case; other cases go on.

A wrong answer (outputs differ from the reference run of the unoptimized model) and a case whose
every worker process crashed or hung are not exceptions: they happen in worker processes, and the
result records them per case (``status: failed``, ``error.stage`` ``correctness`` or ``measure``,
with the message) while the other cases are still measured.

Anything else that leaves a command is a bug in perfguard, never a verdict: the CLI exits with
code 70 and writes the traceback to a file (``perfguard.cli``). Programming errors inside
perfguard (a statistic called with invalid arguments) are ``ValueError`` / ``TypeError``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PerfguardError(Exception):
    """Base class for every error perfguard raises on purpose."""


class UserError(PerfguardError):
    """Bad usage or bad input; the CLI exits with code 2 and this one-line message."""


class StorageError(UserError):
    """A result or baseline document could not be read or written."""


class RunnerUnavailable(UserError):
    """A runner cannot serve on this machine (no driver, no provider, no device)."""


class BackendError(PerfguardError):
    """A compile failed for one case (a pass raised, an invalid model, a crash or a hang)."""


class BuildError(UserError):
    """The compiler's build command failed at some ref (``label``: which checkout)."""

    def __init__(self, message: str, label: str | None = None) -> None:
        super().__init__(message)
        self.label = label


def close_names(name: str, valid: Iterable[str], n: int = 3) -> list[str]:
    """Return up to ``n`` valid names close to ``name`` (for "did you mean" hints)."""
    return difflib.get_close_matches(name, list(valid), n=n, cutoff=0.6)


def unknown_name_message(kind: str, name: str, valid: Iterable[str]) -> str:
    """Format "unknown <kind> 'x' (did you mean 'y'?); valid: a, b, c"."""
    valid = sorted(set(valid))
    close = close_names(name, valid)
    hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
    listing = ", ".join(valid) if len(valid) <= 60 else ", ".join(valid[:60]) + ", ..."
    return f"unknown {kind} {name!r}{hint}; valid: {listing}"


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first non-blank line of ``exc``'s message, or its type name when the message is empty.

    Compilers and runtimes raise exceptions with empty or multi-line messages; a result or an error
    line needs one short line, and ``str(exc).splitlines()[0]`` raises on an empty message.
    """
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()[:limit]
    return type(exc).__name__
