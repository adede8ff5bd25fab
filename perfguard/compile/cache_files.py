"""The artifact cache's file system rules (``perfguard.compile.cache``): which folder is a cache,
which of its files are the cache's own, and reads that neither follow a link nor run unbounded.

A cache folder is shared with whatever else lives on the machine, and its path comes from a user
(``--artifact-cache``, ``$PERFGUARD_ARTIFACT_CACHE``): a mistyped path is a project folder, and
an entry can be replaced by anyone who can write there. So:

* **Ownership.** A folder is a cache when it holds the marker file :data:`MARKER`. A new or
  empty folder gets it; a folder of the first cache format (no marker yet) is adopted only when
  every child is the cache's own shape (``lock``, ``tmp``, two-hex-digit folders holding
  sha256-named folders); anything else is refused (a ``UserError``, exit 2), so the cache never
  evicts a project's ``db/`` or ``tmp/notes/``.
* **What is the cache's.** Eviction and sizing see only entries (:func:`own_entries`: a real
  folder named by a sha256 under a real folder named by its first two digits, holding a
  ``manifest.json``) and the temporary folders it makes in ``tmp/`` (:data:`TMP_PREFIXES`).
* **Counts.** Counts of a variant (``perfguard.counting.served``) are one JSON file each,
  ``counts/<sha256>.json`` (:func:`own_counts`), read and written only when ``counts`` is a real
  folder (:func:`counts_folder`, reads included) and at most :data:`MAX_COUNTS_BYTES`; eviction
  sees them beside the entries.
* **No link followed.** Everything is checked with ``lstat``; a link anywhere in an entry makes
  it corrupt (:func:`links_in`); files open with ``O_NOFOLLOW`` and ``O_NONBLOCK`` (a FIFO does
  not hang the open) and must be regular files.
* **Bounded reads.** A copy reads at most the size the manifest records (:func:`copy_bounded`),
  a document at most :data:`MAX_DOCUMENT_BYTES`: a link to ``/dev/zero`` or a grown file is
  refused after that many bytes, never read to the end.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from perfguard.errors import CorruptEntry, UserError

#: The file that makes a folder an artifact cache (written into a new or empty folder).
MARKER = "perfguard-cache.json"
MARKER_TEXT = ('{"kind": "perfguard artifact cache", "note": "perfguard deletes only the entries it '
               'recorded here; do not keep other files in this folder"}\n')
#: The temporary folders the cache makes in ``tmp/`` (staging, removal): ``tempfile.mkdtemp``
#: names with these prefixes (eight characters follow).
TMP_PREFIXES = ("new-", "gone-")
_TMP_NAME = re.compile(r"^(?:new|gone)-[a-z0-9_]{8}$")
#: The most a manifest is read: it names files and hashes, far below this.
MAX_DOCUMENT_BYTES = 16 << 20

#: The folder of counts documents (``counts/<sha256>.json``).
COUNTS = "counts"
#: The most a counts document is read or stored: a key and at most 20 functions (long C++
#: names included) take a few kilobytes; a larger one is not perfguard's and is dropped.
MAX_COUNTS_BYTES = 256 << 10

_PREFIX = re.compile(r"^[0-9a-f]{2}$")
_COUNTS_NAME = re.compile(r"^[0-9a-f]{64}\.json$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 1 << 20
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def claim(root: Path) -> None:
    """Make ``root`` a cache folder or refuse it (see the module docstring); also refuses a
    ``lock`` that is not a file and a ``tmp`` that is not a real folder (a link is never followed)."""
    found = _lstat(root)
    if found is None:
        root.mkdir(parents=True, exist_ok=True)
    elif not stat.S_ISDIR(os.stat(root).st_mode):
        raise UserError(f"artifact cache {root}: not a folder; name a new or empty folder")
    marker = _lstat(root / MARKER)
    if marker is not None and not stat.S_ISREG(marker.st_mode):
        raise UserError(f"artifact cache {root}: {MARKER} is not a regular file; remove it or name another folder")
    if marker is None:
        strangers = [child.name for child in root.iterdir() if not _legacy_part(child)]
        if strangers:
            raise UserError(f"artifact cache {root}: the folder is not empty and is not a perfguard artifact cache "
                            f"(no {MARKER}; it holds {strangers[0]!r}); name a new or empty folder")
        _write_marker(root / MARKER)
    lock = _lstat(root / "lock")
    if lock is not None and not stat.S_ISREG(lock.st_mode):
        raise UserError(f"artifact cache {root}: {root / 'lock'} is not a regular file (a folder or a link?); "
                        "remove it")
    tmp = _lstat(root / "tmp")
    if tmp is None:
        (root / "tmp").mkdir(exist_ok=True)
    elif not stat.S_ISDIR(tmp.st_mode):
        raise UserError(f"artifact cache {root}: {root / 'tmp'} is not a real folder (a link is never followed); "
                        "remove it")


def _write_marker(path: Path) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except FileExistsError:  # a concurrent job claimed the folder first
        return
    try:
        os.write(fd, MARKER_TEXT.encode())
    finally:
        os.close(fd)


def _legacy_part(child: Path) -> bool:
    """Whether ``child`` of a folder without the marker is what the first cache format wrote:
    ``lock`` (a file), ``tmp`` (a folder of the cache's temporary folders), or a two-hex-digit
    folder of sha256-named folders with that prefix."""
    found = _lstat(child)
    if found is None:
        return True  # removed meanwhile
    if child.name == "lock":
        return stat.S_ISREG(found.st_mode)
    if not stat.S_ISDIR(found.st_mode):
        return False
    if child.name == "tmp":
        return all(_TMP_NAME.match(c.name) for c in child.iterdir())
    return bool(_PREFIX.match(child.name)) and all(_is_entry_name(child.name, c) for c in child.iterdir())


def _is_entry_name(prefix: str, path: Path) -> bool:
    found = _lstat(path)
    return (found is not None and stat.S_ISDIR(found.st_mode) and bool(_DIGEST.match(path.name))
            and path.name.startswith(prefix))


def own_entries(root: Path) -> Iterator[Path]:
    """The entries of the cache in ``root``: only what its naming scheme writes (see the module
    docstring); a link, a stranger's file or folder is never yielded."""
    try:
        children = list(root.iterdir())
    except OSError:
        return
    for shard in children:
        found = _lstat(shard)
        if not _PREFIX.match(shard.name) or found is None or not stat.S_ISDIR(found.st_mode):
            continue
        try:
            entries = list(shard.iterdir())
        except OSError:
            continue
        for entry in entries:
            manifest = _lstat(entry / "manifest.json") if _is_entry_name(shard.name, entry) else None
            if manifest is not None and stat.S_ISREG(manifest.st_mode):
                yield entry


def counts_folder(root: Path) -> bool:
    """Whether the cache in ``root`` has a real ``counts`` folder (``lstat``: a link to a folder
    is not one, so nothing is read, written or evicted through it)."""
    found = _lstat(root / COUNTS)
    return found is not None and stat.S_ISDIR(found.st_mode)


def own_counts(root: Path) -> Iterator[Path]:
    """The counts documents of the cache in ``root``: regular files named by a sha256 in a real
    ``counts`` folder (nothing when it is a link or not a folder)."""
    folder = root / COUNTS
    if not counts_folder(root):
        return
    try:
        children = list(folder.iterdir())
    except OSError:
        return
    for child in children:
        kind = _lstat(child)
        if _COUNTS_NAME.match(child.name) and kind is not None and stat.S_ISREG(kind.st_mode):
            yield child


def own_temporaries(tmp: Path) -> Iterator[Path]:
    """The folders the cache made in ``tmp`` (nothing when ``tmp`` is a link or not a folder)."""
    found = _lstat(tmp)
    if found is None or not stat.S_ISDIR(found.st_mode):
        return
    for child in tmp.iterdir():
        kind = _lstat(child)
        if _TMP_NAME.match(child.name) and kind is not None and stat.S_ISDIR(kind.st_mode):
            yield child


def tree_bytes(folder: Path) -> int:
    """Bytes of the regular files under ``folder``, no link followed."""
    total = 0
    for top, _, names in os.walk(folder):
        for name in names:
            found = _lstat(Path(top) / name)
            if found is not None and stat.S_ISREG(found.st_mode):
                total += found.st_size
    return total


def links_in(entry: Path) -> str | None:
    """What makes ``entry`` unsafe to read: the entry, its prefix folder or anything under it
    being a link or not a regular file or folder; None when it holds only files and folders."""
    for path in (entry.parent, entry):
        found = _lstat(path)
        if found is not None and stat.S_ISLNK(found.st_mode):
            return f"{path.name} is a symbolic link"
    for top, folders, names in os.walk(entry):
        for name in folders + names:
            found = _lstat(Path(top) / name)
            if found is None:
                continue
            if stat.S_ISLNK(found.st_mode):
                return f"{Path(top, name).relative_to(entry)} is a symbolic link"
            if not (stat.S_ISDIR(found.st_mode) or stat.S_ISREG(found.st_mode)):
                return f"{Path(top, name).relative_to(entry)} is not a regular file"
    return None


def _open_regular(path: Path, name: str, folder: int | None = None) -> int:
    try:
        fd = os.open(path if folder is None else path.name, _READ_FLAGS, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CorruptEntry(f"{name} is a symbolic link") from None
        raise CorruptEntry(f"{name}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CorruptEntry(f"{name} is not a regular file")
    return fd


def _open_folder(path: Path, name: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise CorruptEntry(f"{name}: {path.name} is not a real folder (a link is never followed)") from None
        raise CorruptEntry(f"{name}: {exc.strerror or exc}") from None


def read_bounded(path: Path, name: str, limit: int = MAX_DOCUMENT_BYTES, *, real_folder: bool = False) -> bytes:
    """The bytes of the regular file ``path`` (no link followed), at most ``limit``; a
    ``CorruptEntry`` for a link, a non-regular file or a larger one. ``real_folder``: the folder
    holding ``path`` is opened without following a link too (a link there is a ``CorruptEntry``),
    and the file opened inside that very folder, so swapping the folder for a link between a
    check and the read gains nothing."""
    folder = _open_folder(path.parent, name) if real_folder else None
    try:
        fd = _open_regular(path, name, folder)
    finally:
        if folder is not None:
            os.close(folder)
    chunks: list[bytes] = []
    total = 0
    try:
        while total <= limit:
            data = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not data:
                break
            chunks.append(data)
            total += len(data)
    finally:
        os.close(fd)
    out = b"".join(chunks)
    if total > limit:
        raise CorruptEntry(f"{name} is larger than {limit} bytes")
    return out


def copy_bounded(source: Path, target: Path, name: str, size: int) -> str:
    """Copy the regular file ``source`` (no link followed) to ``target``, reading at most
    ``size`` + 1 bytes; its sha256. A ``CorruptEntry`` when the source is a link, not a regular
    file or not ``size`` bytes; an ``OSError`` (with ``filename`` the target) when the target
    cannot be written."""
    fd = _open_regular(source, name)
    digest = hashlib.sha256()
    copied = 0
    try:
        if os.fstat(fd).st_size != size:
            raise CorruptEntry(f"{name}: {os.fstat(fd).st_size} bytes, the manifest says {size}")
        with open(target, "wb") as out:
            while copied <= size:
                chunk = os.read(fd, min(_CHUNK, size + 1 - copied))
                if not chunk:
                    break
                copied += len(chunk)
                if copied > size:
                    break
                digest.update(chunk)
                out.write(chunk)
    finally:
        os.close(fd)
    if copied != size:
        raise CorruptEntry(f"{name}: {'more' if copied > size else 'fewer'} bytes than the manifest says ({size})")
    return digest.hexdigest()
