"""perfguard's temporary folders (``$TMPDIR/perfguard-*``): each carries a marker naming the
process that made it (its pid and start time), so that a later perfguard can tell a folder left
by a killed process (``kill -9``, a runner that lost power: no cleanup ran) from one still in use,
and reclaim it (:func:`reclaim_stale`, called when a job starts).

A folder without the marker, or with one that cannot be read, is never touched; nor is a link, a
folder of another user, or one whose process still runs (a reused pid is another process: the
start time tells them apart).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

#: The marker in each folder :func:`scratch_folder` makes.
OWNER_MARKER = "perfguard-owner.json"
#: The prefix of every folder perfguard makes in the system's temporary folder.
PREFIX = "perfguard-"


def owner(pid: int) -> dict[str, float]:
    """The process ``pid`` as a marker records it: its id and start time (a reused id is another
    process); start time -1 for a process that does not exist."""
    import psutil

    try:
        return {"pid": pid, "started": psutil.Process(pid).create_time()}
    except psutil.Error:
        return {"pid": pid, "started": -1.0}


def gone(marker: Path) -> bool:
    """Whether the process a marker names has ended (an unreadable marker: not ours to judge)."""
    try:
        recorded = json.loads(marker.read_text())
        pid, started = int(recorded["pid"]), float(recorded["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return owner(pid)["started"] != started


def scratch_folder(kind: str = "") -> Path:
    """A new folder ``$TMPDIR/perfguard-KIND...`` marked as this process's."""
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}"))
    (folder / OWNER_MARKER).write_text(json.dumps(owner(os.getpid())))
    return folder


def reclaim_stale(root: Path | None = None) -> int:
    """Remove the ``perfguard-*`` folders of ``root`` (the system's temporary folder) whose marker
    names a process that has ended; how many. Failures leave things as they were: cleaning up
    never stops a job."""
    base = Path(tempfile.gettempdir()) if root is None else root
    removed = 0
    try:
        entries = list(os.scandir(base))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(PREFIX):
            continue
        try:
            info = os.lstat(entry.path)
            marker = Path(entry.path) / OWNER_MARKER
            own = (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
                   and stat.S_ISREG(os.lstat(marker).st_mode))
        except OSError:
            continue
        if own and gone(marker):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
    return removed
