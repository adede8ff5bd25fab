"""Runners by name: ``cpu`` (built in); device runners plug in here with the same interface."""

from __future__ import annotations

from pathlib import Path

from perfguard.errors import UserError, unknown_name_message
from perfguard.runners.base import Runner
from perfguard.runners.cpu import CpuRunner

__all__ = ["Runner", "get_runner", "runner_names"]

_RUNNERS: dict[str, type[Runner]] = {"cpu": CpuRunner}


def runner_names() -> list[str]:
    return sorted(_RUNNERS)


def get_runner(name: str, repo: Path | None = None) -> Runner:
    """Return the runner called ``name``; the error lists the runners this perfguard knows."""
    if name not in _RUNNERS:
        raise UserError(unknown_name_message("runner", name, _RUNNERS))
    return _RUNNERS[name](repo) if name == "cpu" else _RUNNERS[name]()
