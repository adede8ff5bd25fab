"""A content-addressed cache of compiled artifacts (``--artifact-cache DIR``), shared by runs,
checks, nights, bisections and tunes, and by concurrent jobs on one machine.

The key (``CacheKey``) is everything that decides what a compile worker returns: the model's
sha256, the pipeline (name, passes, options), the backend with its versions, perfguard's version
with a hash of its source (``perfguard_identity``) and artifact format, what of the compiling machine decides the artifact (``Backend.artifact_key``:
the architecture; IREE adds its compiler binary and, for ``target_cpu = "host"``, the CPU), the git
tree hash of the compiler's pass folder when the pipeline names user passes (both compilers' for a
hybrid), and what the worker's correctness check runs with (runner, runner options, threads,
tolerance and seed, input specs). The runner's machine fingerprint is not part of it beyond that:
where an artifact does not depend on the machine that compiled it, a CI cache restored on another
hosted runner still hits (the correctness record is then the compiling machine's). A compiler folder with uncommitted changes has no tree hash: its compiles are not
cached (``None`` from :meth:`CompileCache.key`).

The value is the compile worker's response (artifact, pass trace, compile times, correctness
record) and every file of the artifact folder, in ``<root>/<key[:2]>/<key>/``:
``files/`` (the artifact folder), ``record.json`` (the response, its artifact path relative to
``files/``), ``manifest.json`` (the key record, the sha256 of every file, ``record.json``
included) and ``used`` (its mtime: when the entry last served a compile).

Counts (``--counts``) are kept beside the entries, one JSON document per key in
``<root>/counts/<sha256>.json`` (:meth:`CompileCache.put_counts`, :meth:`CompileCache.get_counts`;
the keys and documents are ``perfguard.counting.served``'s): written the same way, read
bounded without following a link, sized and evicted with the entries.

Guarantees. An entry is built in ``<root>/tmp/`` (same file system), every file fsynced, then
renamed into place: readers never see half an entry; of concurrent writers of one key the first
rename wins and the others discard theirs. Readers copy the files out under a shared
``fcntl.flock`` on ``<root>/lock`` and hash the copies against the manifest; eviction and dropping
take the lock exclusively, so no entry disappears under a reader. A mismatch (a flipped bit, a
truncated file, a manifest that does not parse) drops the entry and the compile runs again; the
first drop is logged as a warning, all are counted. The folder stays under ``max_bytes``: after a
store, the least recently used entries go first.

The folder is the cache's only when it says so, and nothing is read through a link or without a
bound (``perfguard.compile.cache_files``): a new or empty folder gets the marker file, any other
folder without it is refused; eviction sees only the entries and temporary folders the cache
names; an entry holding a link (or being one) is corrupt: the link is removed, never its target,
and the compile runs again; a copy reads no more than the size the manifest records.

Format history (``CACHE_VERSION``): 1. first format. 2. the manifest records each file's size
(``sizes``), so a copy is bounded; the folder holds the marker ``perfguard-cache.json``. Entries
of format 1 never hit (dropped, compiled again); a marker-less folder of format 1 is adopted.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from perfguard import __version__
from perfguard.compile.cache_files import (
    COUNTS,
    MAX_COUNTS_BYTES,
    claim,
    copy_bounded,
    counts_folder,
    links_in,
    own_counts,
    own_entries,
    own_temporaries,
    read_bounded,
    tree_bytes,
)
from perfguard.compile.compiler_tree import CompilerTree, read_compiler_tree, uncommitted_text
from perfguard.errors import CorruptEntry, StorageError
from perfguard.jsonfields import JsonDict
from perfguard.results import utc_now
from perfguard.results.documents import parse_json
from perfguard.units import format_bytes
from perfguard.workers.protocol import CompileRequest, CompileResponse

#: The layout of an entry (manifest, record, files); see the module docstring.
CACHE_VERSION = 2
#: What a compile worker writes and returns (``CompileResponse``, the artifact folder). Bump it
#: when either changes in a way an older entry would not match: older entries then never hit.
ARTIFACT_FORMAT_VERSION = 1
#: ``--cache-max`` by default: 5 GB.
DEFAULT_MAX_BYTES = 5 * 10**9
#: A temporary entry older than this is a writer that died: eviction removes it.
STALE_TMP_S = 6 * 3600.0



def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class CacheKey:
    """Everything that decides a compile worker's response (see the module docstring). JSON-valued
    parts are kept as canonical JSON text, so the record is hashable and its digest stable."""

    model_sha256: str
    pipeline: str
    backend: str
    passes: tuple[str, ...]
    options: str
    backend_versions: str
    perfguard_version: str
    artifact_format: int
    machine: str  # ``Backend.artifact_key``: what of the compiling machine decides the artifact
    compiler_tree: str | None  # git tree of the pass folder; None: no user passes
    prefix: str | None  # a hybrid's "LEN:TREE" (TREE "-" when the prefix names no user pass)
    runner: str
    runner_options: str
    threads: int
    correctness: str
    inputs: str

    @property
    def digest(self) -> str:
        """The entry's name: sha256 of the canonical JSON of the record."""
        return hashlib.sha256(_canonical(self.to_json()).encode()).hexdigest()

    def to_json(self) -> JsonDict:
        out: JsonDict = {f.name: getattr(self, f.name) for f in fields(self)}
        out["passes"] = list(self.passes)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CacheKey:
        values = {f.name: data[f.name] for f in fields(cls)}
        values["passes"] = tuple(str(p) for p in data["passes"])
        key = cls(**values)
        if key.to_json() != dict(data):
            raise ValueError("not a cache key record")
        return key


@dataclass(frozen=True)
class EntryManifest:
    """``manifest.json`` of an entry: its key, the sha256 and the size in bytes of each file
    (paths relative to the entry), the artifact's path inside ``files/`` and when it was stored."""

    key: CacheKey
    files: Mapping[str, str]
    sizes: Mapping[str, int]
    artifact: str
    created_at: str
    version: int = CACHE_VERSION

    def to_json(self) -> JsonDict:
        return {"version": self.version, "key": self.key.to_json(), "files": dict(self.files),
                "sizes": dict(self.sizes), "artifact": self.artifact, "created_at": self.created_at}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> EntryManifest:
        if data.get("version") != CACHE_VERSION:
            raise ValueError(f"format {data.get('version')!r}, this perfguard reads {CACHE_VERSION}")
        files, sizes = data["files"], data["sizes"]
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise ValueError("files: not a map of sha256 by path")
        if (not isinstance(sizes, dict) or set(sizes) != set(files)
                or not all(type(v) is int and v >= 0 for v in sizes.values())):
            raise ValueError("sizes: not a size in bytes for every file")
        key = data["key"]
        if not isinstance(key, Mapping):
            raise ValueError("key: not a cache key record")
        return cls(CacheKey.from_json(key), {str(k): v for k, v in files.items()},
                   {str(k): int(v) for k, v in sizes.items()}, str(data["artifact"]), str(data["created_at"]),
                   CACHE_VERSION)


@dataclass(frozen=True)
class CacheStats:
    """What a cache did so far in this process: compiles served (``hits``), looked up and not
    found (``misses``), not keyed (``uncached``: uncommitted changes in the compiler's pass
    folder), entries ``stored``, ``dropped`` (failed verification) and ``evicted`` (LRU)."""

    hits: int = 0
    misses: int = 0
    uncached: int = 0
    stored: int = 0
    dropped: int = 0
    evicted: int = 0
    counts_served: int = 0  # variants whose counts came from the cache (not counted again)
    counts_stored: int = 0

    def describe(self, uncached_why: str = "") -> str:
        """``uncached_why``: what kept the compiles from a key (the files), said after their count."""
        counts = (f"; counts: {self.counts_served} served, {self.counts_stored} stored"
                  if self.counts_served or self.counts_stored else "")
        why = f" ({uncached_why})" if uncached_why and self.uncached else ""
        return (f"{self.hits} hit(s), {self.misses} miss(es), {self.uncached} not cacheable{why}; {self.stored} "
                f"stored, {self.dropped} dropped (corrupt), {self.evicted} evicted{counts}")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _safe_relative(name: str) -> bool:
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts


def compiler_tree(path: Path, cache_root: Path | None = None) -> str | None:
    """The git tree hash of the folder ``path`` at its repository's HEAD, when the folder holds
    exactly that (no modified or untracked file; ignored files such as build outputs, Python
    bytecode caches and the cache folder ``cache_root`` aside); None otherwise (uncommitted
    changes, or not in git): :func:`perfguard.compile.compiler_tree.read_compiler_tree`."""
    return read_compiler_tree(path, cache_root).tree


@functools.cache
def perfguard_identity() -> str:
    """perfguard's version and a hash of its own source files: the built-in passes, the compile
    worker and its correctness check are perfguard's code, and an editable install (perfguard's
    own CI) changes them without changing the version."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{__version__}+{digest.hexdigest()[:16]}"


def _user_passes(passes: Sequence[str]) -> bool:
    return any(":" in name for name in passes)  # package.module:function (perfguard.compile.user_passes)


class CompileCache:
    """The artifact cache in folder ``root``, at most ``max_bytes`` (see the module docstring).
    One object serves the threads of a job; several processes may share the folder. ``warn``
    receives one warning of each kind: the first entry dropped, the first store that failed.
    A folder that is not a cache (not empty, no marker), a ``lock`` that is not a file or a
    ``tmp`` that is not a real folder is a ``UserError``."""

    def __init__(self, root: Path, max_bytes: int = DEFAULT_MAX_BYTES,
                 warn: Callable[[str], None] | None = None) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.warn = warn
        self._mutex = threading.Lock()
        self._stats = CacheStats()
        self._trees: dict[str, CompilerTree] = {}
        self._warned: set[str] = set()  # the kinds of warning given (one each)
        claim(self.root)

    @property
    def stats(self) -> CacheStats:
        with self._mutex:
            return self._stats

    def _count(self, **more: int) -> None:
        with self._mutex:
            self._stats = replace(self._stats, **{k: getattr(self._stats, k) + v for k, v in more.items()})

    def _tree(self, path: Path | None) -> str | None:
        if path is None:
            return None
        name = str(Path(path).resolve())
        with self._mutex:
            if name in self._trees:
                return self._trees[name].tree
        tree = read_compiler_tree(Path(name), self.root)
        with self._mutex:
            self._trees[name] = tree
        return tree.tree

    # --- the key -----------------------------------------------------------------------------

    def key(self, request: CompileRequest, model_sha256: str, backend_versions: Mapping[str, str], *,
            machine: str = "", prefix_len: int = 0, prefix_path: Path | None = None) -> CacheKey | None:
        """The key of ``request`` (``machine``: the backend's ``artifact_key`` of the pipeline; a
        hybrid: its first ``prefix_len`` passes from the compiler at ``prefix_path``), or None when
        it cannot be cached: a pass folder with uncommitted changes, or user passes without a pass
        folder. Counts the latter as ``uncached``."""
        passes = request.pipeline.passes
        rest, head = passes[prefix_len:], passes[:prefix_len]
        tree: str | None = None
        if _user_passes(rest):
            tree = self._tree(Path(request.compiler_path) if request.compiler_path else None)
            if tree is None:
                self._count(uncached=1)
                return None
        prefix = None
        if prefix_len > 0:
            prefix_tree = "-"
            if _user_passes(head):
                found = self._tree(prefix_path)
                if found is None:
                    self._count(uncached=1)
                    return None
                prefix_tree = found
            prefix = f"{prefix_len}:{prefix_tree}"
        return CacheKey(
            model_sha256=model_sha256, pipeline=request.pipeline.name, backend=request.backend, passes=tuple(passes),
            options=_canonical(request.pipeline.options), backend_versions=_canonical(dict(backend_versions)),
            perfguard_version=perfguard_identity(), artifact_format=ARTIFACT_FORMAT_VERSION, machine=machine, compiler_tree=tree,
            prefix=prefix, runner=request.runner, runner_options=_canonical(request.runner_options),
            threads=request.threads, correctness=_canonical(request.correctness.to_json()),
            inputs=_canonical([spec.to_json() for spec in request.input_specs]))

    # --- reading -----------------------------------------------------------------------------

    def _entry(self, key: CacheKey) -> Path:
        digest = key.digest
        return self.root / digest[:2] / digest

    @contextmanager
    def _locked(self, mode: int) -> Iterator[None]:
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, mode)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def get(self, key: CacheKey, out_dir: Path) -> CompileResponse | None:
        """The response stored under ``key`` with its artifact folder copied into ``out_dir``
        (its artifact path there), verified file by file; None on a miss or a dropped entry."""
        entry = self._entry(key)
        with self._locked(fcntl.LOCK_SH):
            if not os.path.lexists(entry):
                self._count(misses=1)
                return None
            raw: bytes | None = None
            try:
                problem = links_in(entry) or ""
                if not problem:
                    raw = read_bounded(entry / "manifest.json", "manifest.json")
            except CorruptEntry as exc:
                problem = str(exc)
            response = None
            if not problem and raw is not None:
                problem, response = self._copy_out(entry, raw, key, out_dir)
            if response is not None:
                try:
                    (entry / "used").touch()
                except OSError:
                    pass  # a read-only cache still serves
                self._count(hits=1)
                return response
        shutil.rmtree(out_dir, ignore_errors=True)
        if problem:
            self._drop(entry, raw, problem)
        self._count(misses=1)
        return None

    def _copy_out(self, entry: Path, raw: bytes, key: CacheKey, out_dir: Path) -> tuple[str, CompileResponse | None]:
        """Copy and verify; returns (what is wrong with the entry, None), ("", the response), or
        ("", None) when this job's ``out_dir`` cannot take the copy."""
        try:
            manifest = EntryManifest.from_json(_document(raw, "manifest.json"))
        except (ValueError, KeyError, TypeError) as exc:
            return f"manifest.json does not parse ({exc})", None
        if manifest.version != CACHE_VERSION or manifest.key != key:
            return "manifest.json names another key or format", None
        names = [n for n in manifest.files if n != "record.json"]
        if "record.json" not in manifest.files or not all(_safe_relative(n) and n.startswith("files/") for n in names):
            return "manifest.json lists unsafe or missing files", None
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            target = out_dir / Path(name).relative_to("files")
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                digest = copy_bounded(entry / name, target, name, manifest.sizes[name])
            except CorruptEntry as exc:
                return str(exc), None
            except OSError as exc:
                if exc.filename is not None and Path(exc.filename) == target:
                    return "", None  # this job's folder cannot be written: a miss, the entry stays
                return f"{name}: {exc.strerror or exc}", None
            if digest != manifest.files[name]:
                return f"{name}: sha256 differs from the manifest", None
        try:
            record_bytes = read_bounded(entry / "record.json", "record.json", manifest.sizes["record.json"])
            if hashlib.sha256(record_bytes).hexdigest() != manifest.files["record.json"]:
                return "record.json: sha256 differs from the manifest", None
            response = CompileResponse.from_json(_document(record_bytes, "record.json"))
        except CorruptEntry as exc:
            return str(exc), None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return f"record.json: {exc}", None
        artifact = out_dir / manifest.artifact
        if not _safe_relative(manifest.artifact) or not artifact.is_file():
            return "the artifact file is not in the entry", None
        return "", replace(response, artifact=replace(response.artifact, path=str(artifact)))

    def _drop(self, entry: Path, raw: bytes | None, problem: str) -> None:
        """Remove a corrupt entry, unless another process replaced it since ``raw`` (its manifest;
        None: it held a link or an unreadable manifest) was read. A link is unlinked, its target
        untouched."""
        with self._locked(fcntl.LOCK_EX):
            try:
                if raw is not None and read_bounded(entry / "manifest.json", "manifest.json") != raw:
                    return
            except (CorruptEntry, OSError):
                pass
            for path in (entry.parent, entry):  # a linked prefix folder: the link goes, not what is behind it
                if os.path.islink(path):
                    os.unlink(path)
                    break
            else:
                if os.path.lexists(entry):
                    self._remove(entry)
        self._count(dropped=1)
        if self._first("dropped") and self.warn is not None:
            self.warn(f"warning: artifact cache entry {entry.name[:16]} failed verification ({problem}); "
                      "dropped, compiling again")

    def _remove(self, entry: Path) -> None:
        """Rename ``entry`` out of its key's place (atomic), then delete it (``rmtree`` unlinks a
        link inside, never follows it)."""
        trash = Path(tempfile.mkdtemp(prefix="gone-", dir=self.root / "tmp"))
        try:
            os.rename(entry, trash / "entry")
        except OSError:
            pass
        shutil.rmtree(trash, ignore_errors=True)

    # --- writing -----------------------------------------------------------------------------

    def put(self, key: CacheKey, response: CompileResponse, out_dir: Path) -> bool:
        """Store ``response`` and the artifact folder ``out_dir`` under ``key``, atomically; then
        evict down to ``max_bytes``. False when nothing was stored (the key was stored first by
        another writer, the artifact is outside ``out_dir``, or the folder cannot be written: a
        cache that cannot be written only costs a compile)."""
        try:
            relative = Path(response.artifact.path).resolve().relative_to(out_dir.resolve())
        except ValueError:
            return False
        entry = self._entry(key)
        if os.path.islink(entry.parent):  # never stored through a link; the next get drops it
            return False

        def place(staging: Path) -> bool:
            entry.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(staging, entry)  # rename(2) refuses a non-empty target: the first writer wins
            except OSError:
                return False
            _fsync(entry.parent)
            (entry / "used").touch()
            return True

        return self._write(lambda staging: self._stage(staging, key, response, out_dir, relative), place,
                           "stored", keep=entry)

    def _write(self, build: Callable[[Path], int], place: Callable[[Path], bool], counter: str,
               keep: Path | None = None) -> bool:
        """The one way the cache writes: ``build`` writes and fsyncs its files into a new folder in
        ``tmp/`` (same file system) and returns their bytes; ``place`` moves them into place with
        one atomic rename(2) or link(2) and returns False when another writer's is there (the first
        wins); then ``counter`` of the stats counts one and the cache is evicted down to
        ``max_bytes`` (``keep``, what was placed, goes last unless it alone is larger). The
        temporary folder is always removed. False when nothing was stored: the first writer won,
        the compile's folder holds a link or a special file, or the folder cannot be written (a
        warning, once)."""
        staging = self._new_staging()
        if staging is None:
            return False
        try:
            size = build(staging)
            if not place(staging):
                return False
        except CorruptEntry:  # the compile's folder holds a link or a special file: not cached
            return False
        except OSError as exc:
            self._warn_write(exc)
            return False
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self._count(**{counter: 1})
        self.evict(keep=keep if keep is not None and size <= self.max_bytes else None)
        return True

    def _new_staging(self) -> Path | None:
        """A new folder in ``tmp/`` to build in; None (warned) when the cache cannot be written."""
        try:
            return Path(tempfile.mkdtemp(prefix="new-", dir=self.root / "tmp"))
        except OSError as exc:
            self._warn_write(exc)
            return None

    def _stage(self, staging: Path, key: CacheKey, response: CompileResponse, out_dir: Path, relative: Path) -> int:
        """Write the entry into ``staging``; return its size in bytes."""
        files: dict[str, str] = {}
        sizes: dict[str, int] = {}
        for source in _regular_files(out_dir):
            name = (Path("files") / source.relative_to(out_dir)).as_posix()
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            files[name] = copy_bounded(source, target, name, source.stat().st_size)
            sizes[name] = target.stat().st_size
            _fsync(target)
        record = json.dumps(replace(response, artifact=replace(response.artifact, path=relative.as_posix())).to_json(),
                            sort_keys=True).encode()
        (staging / "record.json").write_bytes(record)
        files["record.json"] = hashlib.sha256(record).hexdigest()
        sizes["record.json"] = len(record)
        size = sum(sizes.values())
        manifest = EntryManifest(key, files, sizes, relative.as_posix(), utc_now())
        text = json.dumps(manifest.to_json(), sort_keys=True, indent=1).encode()
        (staging / "manifest.json").write_bytes(text)
        for name in ("record.json", "manifest.json"):
            _fsync(staging / name)
        for folder in {p.parent for p in staging.rglob("*")}:
            _fsync(folder)
        return size + len(record) + len(text)

    def _first(self, kind: str) -> bool:
        """Whether no warning of ``kind`` was given yet (and from now on, one was)."""
        with self._mutex:
            first = kind not in self._warned
            self._warned.add(kind)
        return first

    def _warn_write(self, exc: OSError) -> None:
        if self._first("write") and self.warn is not None:
            self.warn(f"warning: artifact cache {self.root} cannot be written ({exc.strerror or exc}); compiling "
                      "without storing")

    # --- counts (perfguard.counting.served) ---------------------------------------------------

    def _counts_file(self, digest: str) -> Path:
        return self.root / COUNTS / f"{digest}.json"

    def get_counts(self, digest: str) -> bytes | None:
        """The counts document stored as ``digest`` (a sha256), read bounded and without following
        a link; None when there is none. One that cannot be read is dropped."""
        path = self._counts_file(digest)
        with self._locked(fcntl.LOCK_SH):
            if not counts_folder(self.root) or not os.path.lexists(path):
                return None  # a ``counts`` that is a link or a file is not the cache's: never read through
            try:
                data = read_bounded(path, f"{COUNTS}/{path.name}", MAX_COUNTS_BYTES, real_folder=True)
            except (CorruptEntry, OSError) as exc:
                problem = str(exc)
            else:
                try:
                    os.utime(path, follow_symlinks=False)  # its last use, for eviction
                except OSError:
                    pass
                return data
        self.drop_counts(digest, problem)
        return None

    def drop_counts(self, digest: str, problem: str) -> None:
        """Remove the counts document ``digest`` (one that does not parse or names another key);
        a link is unlinked, its target untouched."""
        path = self._counts_file(digest)
        with self._locked(fcntl.LOCK_EX):
            if not counts_folder(self.root):
                return  # never the cache's: nothing is read or written through it
            try:
                os.unlink(path)
            except OSError:
                pass
        self._count(dropped=1)
        if self._first("dropped") and self.warn is not None:
            self.warn(f"warning: artifact cache counts {digest[:16]} failed verification ({problem}); dropped, "
                      "counting again")

    def put_counts(self, digest: str, data: bytes) -> bool:
        """Store the counts document ``data`` as ``digest``, atomically (written in ``tmp/``,
        fsynced, linked into place: a reader sees no document or a whole one; of two writers of
        one key the first wins, as for entries); then evict down to ``max_bytes``. False when it
        was not stored (one is there already, ``counts`` is not a real folder, or the folder
        cannot be written)."""
        folder = self.root / COUNTS
        if os.path.lexists(folder) and not counts_folder(self.root):
            return False
        if len(data) > MAX_COUNTS_BYTES:
            return False  # a reader would drop it: not stored
        try:
            folder.mkdir(exist_ok=True)
        except OSError as exc:
            self._warn_write(exc)
            return False

        def build(staging: Path) -> int:
            (staging / "counts.json").write_bytes(data)
            _fsync(staging / "counts.json")
            return len(data)

        def place(staging: Path) -> bool:
            try:
                os.link(staging / "counts.json", self._counts_file(digest))  # link(2) refuses an existing name: the first writer wins
            except FileExistsError:
                return False
            _fsync(folder)
            return True

        return self._write(build, place, "counts_stored")

    def counted_from_cache(self) -> None:
        """Note a variant whose counts the cache served (``CacheStats.counts_served``)."""
        self._count(counts_served=1)

    # --- the bound ---------------------------------------------------------------------------

    def size_bytes(self) -> int:
        """Bytes held by the entries (temporary folders aside)."""
        return sum(size for _, size, _ in self._entries())

    def _entries(self) -> list[tuple[float, int, Path]]:
        """(last use, bytes, folder or file) of every entry and counts document."""
        found = []
        for document in own_counts(self.root):
            try:
                seen = os.lstat(document)
            except OSError:  # removed meanwhile
                continue
            found.append((seen.st_mtime, seen.st_size, document))
        for entry in own_entries(self.root):
            try:
                used = os.lstat(entry / "used") if os.path.lexists(entry / "used") else os.lstat(entry)
                size = tree_bytes(entry)
            except OSError:  # removed meanwhile
                continue
            found.append((used.st_mtime, size, entry))
        return found

    def evict(self, keep: Path | None = None) -> int:
        """Remove the least recently used entries until the folder holds at most ``max_bytes``
        (``keep``, the entry just stored, goes last), and temporary folders of writers that
        died; returns how many entries went. Only the cache's own entries and temporary folders
        are seen (``cache_files.own_entries``, ``own_temporaries``)."""
        removed = 0
        with self._locked(fcntl.LOCK_EX):
            now = time.time()
            for leftover in own_temporaries(self.root / "tmp"):
                try:
                    if now - os.lstat(leftover).st_mtime > STALE_TMP_S:
                        shutil.rmtree(leftover, ignore_errors=True)
                except OSError:
                    pass
            entries = self._entries()
            total = sum(size for _, size, _ in entries)
            for _, size, entry in sorted(entries, key=lambda e: (e[2] == keep, e[0])):
                if total <= self.max_bytes:
                    break
                self._remove(entry)
                total -= size
                removed += 1
        if removed:
            self._count(evicted=removed)
        return removed

    def describe(self) -> str:
        """One line for the end of a command: the folder, what it did (the files that kept compiles
        from a key named), its size."""
        with self._mutex:
            unclean = sorted((name, tree.uncommitted) for name, tree in self._trees.items() if tree.uncommitted)
        why = "; ".join(uncommitted_text(name, names) for name, names in unclean)
        return f"artifact cache {self.root}: {self.stats.describe(why)}; {format_bytes(self.size_bytes())} held"


def _document(raw: bytes, name: str) -> Mapping[str, object]:
    """The JSON object of a stored file, read as every perfguard document is (``parse_json``: no
    nesting deeper than ``MAX_DEPTH``, no NaN, no integer beyond 2**63); a ``ValueError`` for
    anything else, so a hostile or corrupt file drops its entry and is never exit 70."""
    try:
        data = parse_json(raw.decode("utf-8"), name)
    except StorageError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(data, dict):
        raise ValueError(f"{name}: not a JSON object")
    return data


def _regular_files(folder: Path) -> list[Path]:
    """The files of a compile's output folder, sorted; a ``CorruptEntry`` when it holds a link or
    a special file (what a link points to is not the compile's to store)."""
    found = []
    for top, folders, names in os.walk(folder):
        for name in folders + names:
            path = Path(top) / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode) or not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise CorruptEntry(f"{path} is a link or a special file")
            if stat.S_ISREG(mode):
                found.append(path)
    return sorted(found)


_ACTIVE: ContextVar[CompileCache | None] = ContextVar("perfguard_artifact_cache", default=None)


def active_cache() -> CompileCache | None:
    """The cache the jobs started in this context consult (:func:`using_cache`), or None."""
    return _ACTIVE.get()


@contextmanager
def using_cache(cache: CompileCache | None) -> Iterator[CompileCache | None]:
    """Every job started inside consults ``cache``: how ``--artifact-cache`` reaches the compile
    stage of any flow (check, nightly, bisect, tune) without each flow passing it down."""
    token = _ACTIVE.set(cache)
    try:
        yield cache
    finally:
        _ACTIVE.reset(token)
