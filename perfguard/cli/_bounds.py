"""The ranges of the whole numbers the commands take (``--workers``, ``--rounds``,
``--max-workers``): checked before anything is sized by them, so a typo of ten digits is one line
and exit 2, not ten billion worker processes."""

from __future__ import annotations

#: Worker processes per case (each a Python process with the runtime loaded): far above any machine.
MAX_WORKERS = 1024
#: Rounds per worker.
MAX_ROUNDS = 1_000_000


def in_range(value: int | None, flag: str, low: int, high: int) -> int | None:
    """``value`` (None: the option was not given) when ``low <= value <= high``; else a ``UserError``."""
    from perfguard.errors import UserError

    if value is not None and not low <= value <= high:
        shown = str(value) if len(str(value)) <= 12 else f"a number of {len(str(value))} digits"
        raise UserError(f"{flag} must be from {low} to {high}, found {shown}")
    return value
