"""What the commands show while they work: a rich progress bar, or the bisect narrative.

Imported inside the commands' ``run`` only, like the stages the commands drive (the measurement
engine pulls in numpy, scipy and onnx, which ``perfguard --help`` and argument parsing must not
load: ``tests/test_cli_startup.py``). It subclasses ``perfguard.progress.Progress``.
"""

from __future__ import annotations

import sys
from typing import Any

from perfguard.cli._text import literal
from perfguard.names import visible
from perfguard.progress import Progress


class RichProgress(Progress):
    """A progress bar on stderr; without a terminal (CI logs), one line per step instead."""

    def __init__(self, quiet: bool) -> None:
        from rich.progress import BarColumn, Progress as Bar, TextColumn, TimeElapsedColumn

        from perfguard.cli._text import cli_console

        self.console = cli_console(stderr=True)
        self.quiet = quiet
        # Without a terminal (CI logs) print one line per step instead of redrawing a bar.
        self.lines = not quiet and not self.console.is_terminal
        # Descriptions name cases: shown as text, never parsed as markup (``perfguard.cli._text``).
        self.bar = Bar(TextColumn("{task.description}", markup=False), BarColumn(),
                       TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(), console=self.console,
                       disable=quiet or self.lines)
        self.task: Any = None

    def start(self, total: int | None) -> None:
        self.bar.start()
        self.task = self.bar.add_task("starting", total=total)

    def advance(self, description: str) -> None:
        if self.task is not None and self.bar.tasks[0].description != "starting":
            self.bar.advance(self.task)
        self.bar.update(self.task, description=visible(description))
        if self.lines:
            self.console.print(literal(f"perfguard: {description}"), highlight=False)

    def log(self, message: str, style: str = "") -> None:
        self.console.print(literal(message, style, keep_newlines=True), highlight=False)

    def stop(self) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=self.bar.tasks[0].total, description="done")
        self.bar.stop()


class Narrator(Progress):
    """Prints the narrative on stdout as it happens (probe progress on stderr)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def start(self, total: int | None) -> None: ...

    def advance(self, description: str) -> None:
        if not self.quiet:
            sys.stderr.write(f"  ... {visible(description)}\n")

    def log(self, message: str, style: str = "") -> None:
        print(visible(message, keep_newlines=True), flush=True)

    def stop(self) -> None: ...
