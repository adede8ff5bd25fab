"""The status lines a worker prints on stderr while it works (``perfguard-worker: loading ID``).

The last one tells the parent which stage, or which variant, a crash or a hang happened in
(``perfguard.workers.launch``). Re-exported by ``perfguard.workers.protocol``, which they belong to.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["STATUS_PREFIX", "VARIANT_VERBS", "split_stderr", "status_line", "status_variant", "variant_status"]

STATUS_PREFIX = "perfguard-worker: "
# Status verbs followed by a variant id: the variant the worker was busy with.
VARIANT_VERBS = ("loading", "calibrating", "running")

def status_line(message: str) -> str:
    """The stderr line by which a worker announces ``message`` (``reference``, ``loading ID``...)."""
    return f"{STATUS_PREFIX}{message}\n"


def variant_status(verb: str, variant: str) -> str:
    """The status message for working on one variant: ``verb`` is one of ``VARIANT_VERBS``."""
    if verb not in VARIANT_VERBS:
        raise ValueError(f"unknown status verb {verb!r}; expected one of {', '.join(VARIANT_VERBS)}")
    return f"{verb} {variant}"


def split_stderr(text: str) -> tuple[list[str], list[str]]:
    """A worker's stderr as (status messages without the prefix, the other non-blank lines)."""
    lines = text.splitlines()
    statuses = [line[len(STATUS_PREFIX):] for line in lines if line.startswith(STATUS_PREFIX)]
    others = [line for line in lines if not line.startswith(STATUS_PREFIX) and line.strip()]
    return statuses, others


def status_variant(status: str, variant_ids: Iterable[str]) -> str | None:
    """The variant among ``variant_ids`` that status message ``status`` names, or None."""
    ids = set(variant_ids)
    for verb in VARIANT_VERBS:
        prefix = verb + " "
        if status.startswith(prefix) and status[len(prefix):] in ids:
            return status[len(prefix):]
    return None
