"""The hooks a backend's compile calls so that a counted compile (``perfguard.counting.child``)
counts its real work: a window around each pass or step (:func:`counted`), a tool run as a
subprocess counted whole (:func:`counted_process`), and whether this compile is counted at all
(:func:`counting_compile`). Outside a counted compile each is a no-op.

Part of the backends' contract (a backend owns its counting hooks, as it owns its tracing): it
imports nothing of perfguard, and ``counting``, which drives backends from a layer above them,
sets the hooks in a counted compile's child.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

#: Where a counted compile (``perfguard.counting.child``) opens a window around each piece of
#: real work: ``window(label)`` is a context manager; None (the default) counts nothing. Labels:
#: ``work|INDEX`` the real work of the pass (or onnxoptimizer group) starting at INDEX,
#: ``replay|INDEX`` the one-pass replay of a pass inside a group (for its own figure only), and
#: ``step|NAME`` a backend's own step (ONNX Runtime's session optimisation).
COUNT_WINDOW: contextvars.ContextVar[Callable[[str], AbstractContextManager[object]] | None] = \
    contextvars.ContextVar("perfguard_count_window", default=None)


#: Where a counted compile counts a tool the backend runs as a subprocess (IREE's
#: ``iree-import-onnx`` and ``iree-compile``), whose work no window of the calling thread sees:
#: ``tool(label, argv)`` is the command that runs ``argv`` whole under Valgrind, its instructions
#: reported as the step ``label`` (``step|NAME``); None (the default) counts nothing.
COUNT_PROCESS: contextvars.ContextVar[Callable[[str, list[str]], list[str]] | None] = \
    contextvars.ContextVar("perfguard_count_process", default=None)


def counted_process(label: str, argv: list[str]) -> list[str]:
    """``argv`` counted whole as the step ``label`` when a counted compile set ``COUNT_PROCESS``,
    else ``argv`` as it is."""
    tool = COUNT_PROCESS.get()
    return argv if tool is None else tool(label, argv)


def counting_compile() -> bool:
    """True inside a counted compile (``COUNT_WINDOW`` set)."""
    return COUNT_WINDOW.get() is not None


def counted(label: str) -> AbstractContextManager[object]:
    """The counted window ``label`` when a counted compile set one, else nothing."""
    window = COUNT_WINDOW.get()
    return nullcontext() if window is None else window(label)
