"""Proof, in a measuring worker, that every timed value runs the compiled code an artifact holds.

A backend whose executables compile when called (Inductor: ``torch.compile`` is Dynamo compiling
each frame on its first call, and again after a guard fails) gives its executables a
``jit_events()`` method: this process's compile counts so far, by name (Inductor's are
``perfguard.backends.inductor.torch_compile.dynamo_events``). A backend without one (ORT, IREE, TVM: their
artifacts are compiled once, before loading) is not checked.

Why (issue 45): a measuring worker loads a case's variants one after another, and each Inductor
load reset Dynamo, which dropped the compiled code of the variants loaded before it. Each of those
compiled again on its first call after the loads: inside the calibration (which then chose a few
runs a value), without its pipeline's passes, and in torch's default cache folder. The values were
bimodal and the float64 pipeline was timed as another code. Now every variant runs once more after
all have loaded (``prove_compiled``) and the counts must not move until the timed rounds end
(``check_still_compiled``); a move is a ``BackendError``, which fails the worker's values in one line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from perfguard.backends.base import Executable
from perfguard.errors import BackendError
from perfguard.workers.status import status_line, variant_status

if TYPE_CHECKING:
    import numpy as np


def jit_counts(executables: Mapping[str, Executable]) -> dict[str, int]:
    """This process's just-in-time compile counts (``jit_events`` of an executable that compiles
    when called); {} when no executable has them."""
    for executable in executables.values():
        events = getattr(executable, "jit_events", None)
        if callable(events):
            return {str(name): int(count) for name, count in events().items()}
    return {}


def moved(before: Mapping[str, int], after: Mapping[str, int]) -> str:
    """``1 Dynamo compiles, 0 graph breaks``: what changed from ``before`` to ``after``."""
    return ", ".join(f"{after.get(name, 0) - count} {name}" for name, count in before.items())


def _status(message: str) -> None:
    sys.stderr.write(status_line(message))
    sys.stderr.flush()


def prove_compiled(executables: Mapping[str, Executable], feeds: Mapping[str, np.ndarray],
                   sync: Callable[[], None]) -> dict[str, int]:
    """Before timing, run every variant once more now that all have loaded, and refuse one whose
    run compiled anything: a later load replaced its compiled code or its guards failed, and its
    values would be of another code or of eager PyTorch. The status line names the variant, so
    the parent drops it. Returns the counts the timed rounds must end with ({}: nothing to check)."""
    before = jit_counts(executables)
    if not before:
        return before
    for variant_id, executable in executables.items():
        _status(variant_status("calibrating", variant_id))
        executable.run(feeds)
        sync()
        after = jit_counts(executables)
        if after != before:
            raise BackendError(f"{variant_id} compiled again when run after the other variants loaded "
                               f"({moved(before, after)}): its values would not be its artifact's compiled graph's "
                               "(a recompilation after a guard failure, or a fallback to eager)")
    return before


def check_still_compiled(executables: Mapping[str, Executable], before: Mapping[str, int]) -> None:
    """After the calibration and the timed rounds: the counts are still ``before``, or a
    ``BackendError`` that drops every value of this worker (the rounds interleave the variants,
    so the one that compiled is not known; the status line names none)."""
    if not before:
        return
    after = jit_counts(executables)
    if after != before:
        _status("measuring")
        raise BackendError(f"the calibration or the timed rounds compiled again ({moved(before, after)}): this "
                           "worker's values are not all the compiled graphs'; none is kept")
