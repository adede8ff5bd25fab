"""Atomic file writes: the one writer of every file perfguard produces.

Results, verdicts, baselines, bisect state, reports, floors, the worker's responses and reference
outputs, and the IREE listing cache all go through :func:`write_atomic`: the bytes go to a
temporary file beside the target, are fsynced, and the temporary file is renamed over the target,
so a reader (a parent process, a second CI job, the next run) never sees half a file and a failed
write (full disk, read-only folder) leaves neither a partial target nor the temporary file.

The module imports nothing heavy (no numpy), so a worker process can use it at no cost. Publishing
a whole folder at once (``backends.iree.compiler_tools.ArtifactCache.store``: a staging folder renamed into
place, refusing to replace one that a concurrent run stored first) is a different operation and
lives there.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from perfguard.errors import StorageError


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` (text is encoded as UTF-8) to ``path`` atomically.

    The data goes to a temporary file beside ``path`` (``.NAME.XXXX.tmp``), is fsynced, and the
    file is renamed over ``path``; missing parent folders are created. A failed write raises
    ``StorageError`` naming the path and removes the temporary file; an existing ``path`` is then
    left as it was.

    A link to a file is followed (the link stays); a target that is not a regular file (a pipe,
    ``/dev/stdout``) cannot be replaced and is written in place."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path = Path(path)
    if path.exists() and not path.is_file() and not path.is_dir():
        try:
            with open(path, "wb") as handle:
                handle.write(payload)
        except OSError as exc:
            raise _storage_error(path, exc) from None
        return
    if path.is_symlink():
        path = path.resolve()
    folder = path.parent if str(path.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise _storage_error(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise _storage_error(path, exc) from None
        raise


def write_json_atomic(path: str | Path, document: object) -> None:
    """Write ``document`` as JSON with sorted keys, one-space indents and a final newline,
    atomically (:func:`write_atomic`). The document is serialized before any file is touched, so
    a NaN or an object JSON cannot hold raises ``ValueError`` / ``TypeError`` and writes nothing."""
    write_atomic(path, json.dumps(document, sort_keys=True, indent=1, allow_nan=False) + "\n")


def _storage_error(path: Path, exc: OSError) -> StorageError:
    return StorageError(f"{path}: cannot write: {exc.strerror or exc}")
