"""The progress callbacks of a job: the CLI's progress bar subclasses :class:`Progress`.

It lives apart from the job so that the CLI, the compare and bisect stages and the job all import
it without importing each other (or onnx, numpy and the workers).
"""

from __future__ import annotations


class Progress:
    """Callbacks the CLI uses for its progress bar; the default does nothing."""

    def start(self, total: int | None) -> None:
        """A new bar of ``total`` steps (None: open-ended, ``tune --time``)."""

    def advance(self, description: str) -> None: ...

    def log(self, message: str, style: str = "") -> None:
        """One line of the narrative. ``message`` is plain text (names in it are data, never
        markup); ``style`` (a Rich style such as ``"red"``) is how a terminal may colour it."""
