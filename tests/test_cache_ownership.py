"""The artifact cache owns only what it wrote (issue 32, items 1 and 2): a folder that is not a cache
is refused, eviction never removes a stranger's file or what a link points to, an entry that is or
holds a link is dropped (the link removed, its target untouched) and compiled again, a copy is
bounded by the manifest's sizes, and a ``lock`` that is a folder is exit 2, not exit 70.

Entries are stored by :class:`CompileCache.put` from a real artifact folder (the fake compile
response of ``test_artifact_cache``: the cache does not look inside the artifact); the command-line
refusals run ``python -m perfguard``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from perfguard.compile.cache import STALE_TMP_S, CompileCache
from perfguard.compile.cache_files import MARKER
from perfguard.errors import UserError

from .conftest import run_cli
from .test_artifact_cache import _fake_response, _request

OLD = time.time() - 2 * STALE_TMP_S


def _user_tree(folder: Path, size: int) -> list[Path]:
    """Files a user keeps, old enough for any age rule."""
    files = []
    for n in range(3):
        path = folder / f"file{n}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([n]) * size)
        os.utime(path, (OLD, OLD))
        files.append(path)
    os.utime(folder, (OLD, OLD))
    return files


def _store(cache: CompileCache, tmp_path: Path, n: int, size: int = 100_000):
    key = cache.key(_request(), f"{n:064d}", {"onnxruntime": "1.0"})
    assert key is not None
    out = tmp_path / f"out{n}"
    assert cache.put(key, _fake_response(out, bytes([n]) * size), out)
    return key, tmp_path / "cache" / key.digest[:2] / key.digest


def test_a_project_folder_is_refused_in_one_line_and_keeps_its_data(tmp_path):
    proj = tmp_path / "proj"
    customers = _user_tree(proj / "db" / "customers", 1_000_000)
    notes = _user_tree(proj / "tmp" / "notes", 10_000)
    proc = run_cli("run", "suite.toml", "--artifact-cache", str(proj), "--cache-max", "1MB", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "not a perfguard artifact cache" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert all(p.exists() for p in customers + notes) and not (proj / MARKER).exists()


def test_a_new_or_empty_folder_becomes_a_cache_and_is_accepted_again(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    CompileCache(empty)
    CompileCache(tmp_path / "new" / "deeper")
    assert (empty / MARKER).is_file() and (tmp_path / "new" / "deeper" / MARKER).is_file()
    cache = CompileCache(empty)  # the marker makes it the cache's: accepted with entries in it
    _store(cache, tmp_path, 0)
    CompileCache(empty)


def test_eviction_leaves_strangers_in_a_cache_folder(tmp_path):
    """Even inside a marked cache, files the cache did not write stay: a user's folder named like
    a prefix (``db/customers``), a note in ``tmp/``, a foreign file in a prefix folder."""
    cache = CompileCache(tmp_path / "cache", max_bytes=10_000)
    root = tmp_path / "cache"
    strangers = _user_tree(root / "db" / "customers", 100_000) + _user_tree(root / "tmp" / "notes", 1000)
    key, entry = _store(cache, tmp_path, 1)
    foreign = entry.parent / "README"
    foreign.write_text("mine")
    dead_writer, lookalike = root / "tmp" / "new-abcd1234", root / "tmp" / "new-notes"
    for folder in (dead_writer, lookalike):
        folder.mkdir()
        os.utime(folder, (OLD, OLD))
    cache.evict()
    assert all(p.exists() for p in strangers) and foreign.exists() and lookalike.exists()
    assert not dead_writer.exists()  # what the cache itself left when its writer died does go
    assert not entry.exists() and cache.stats.evicted == 1  # its own entry over the bound did go


def test_a_tmp_that_is_a_link_is_refused_and_never_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    old = _user_tree(elsewhere, 1000)
    root = tmp_path / "cache"
    CompileCache(root)
    os.rmdir(root / "tmp")
    os.symlink(elsewhere, root / "tmp")
    with pytest.raises(UserError, match="tmp is not a real folder"):
        CompileCache(root)
    proc = run_cli("run", "suite.toml", "--artifact-cache", str(root), cwd=tmp_path)
    assert proc.returncode == 2 and "not a real folder" in proc.stderr and "Traceback" not in proc.stderr
    assert all(p.exists() for p in old)


def test_a_tmp_turned_link_after_start_is_not_swept(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "new-abcd1234").mkdir(parents=True)
    os.utime(elsewhere / "new-abcd1234", (OLD, OLD))
    cache = CompileCache(tmp_path / "cache")
    os.rmdir(tmp_path / "cache" / "tmp")
    os.symlink(elsewhere, tmp_path / "cache" / "tmp")
    cache.evict()
    assert (elsewhere / "new-abcd1234").exists()


@pytest.mark.parametrize("target", ["file", "/dev/zero"])
def test_a_linked_artifact_file_is_dropped_not_served(tmp_path, target):
    warnings: list[str] = []
    cache = CompileCache(tmp_path / "cache", warn=warnings.append)
    key, entry = _store(cache, tmp_path, 2)
    artifact = entry / "files" / "model.onnx"
    secret = tmp_path / "secret"
    secret.write_bytes(artifact.read_bytes())  # same bytes: the hash would match
    artifact.unlink()
    os.symlink(secret if target == "file" else target, artifact)
    assert cache.get(key, tmp_path / "read") is None
    assert cache.stats.dropped == 1 and len(warnings) == 1 and "symbolic link" in warnings[0]
    assert not entry.exists() and secret.exists()


@pytest.mark.parametrize("target", ["entry", "/dev/zero"])
def test_an_entry_that_is_a_link_is_unlinked_its_target_untouched(tmp_path, target):
    warnings: list[str] = []
    cache = CompileCache(tmp_path / "cache", warn=warnings.append)
    key, entry = _store(cache, tmp_path, 3)
    if target == "entry":  # the real entry moved away, a link in its place: valid bytes, not the cache's
        moved = tmp_path / "moved"
        os.rename(entry, moved)
        os.symlink(moved, entry)
    else:
        import shutil

        shutil.rmtree(entry)
        os.symlink(target, entry)
    assert cache.get(key, tmp_path / "read") is None
    assert not os.path.lexists(entry) and cache.stats.dropped == 1 and "symbolic link" in warnings[0]
    if target == "entry":
        assert (moved / "manifest.json").is_file()  # the link went, not what it pointed to
    assert cache.put(key, _fake_response(tmp_path / "again", b"x" * 1000), tmp_path / "again")  # compiled again
    assert cache.get(key, tmp_path / "read2") is not None


def test_a_file_larger_than_its_manifest_is_refused_unread(tmp_path):
    warnings: list[str] = []
    cache = CompileCache(tmp_path / "cache", warn=warnings.append)
    key, entry = _store(cache, tmp_path, 4, size=1000)
    with open(entry / "files" / "model.onnx", "ab") as handle:
        handle.write(b"\0" * 50_000_000)
    assert cache.get(key, tmp_path / "read") is None
    assert "manifest says 1000" in warnings[0] and not entry.exists()
    assert not (tmp_path / "read").exists()


def test_a_lock_that_is_a_folder_is_exit_2(tmp_path):
    root = tmp_path / "cache"
    CompileCache(root)
    (root / "lock").unlink(missing_ok=True)
    (root / "lock").mkdir()
    proc = run_cli("run", "suite.toml", "--artifact-cache", str(root), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "lock" in proc.stderr and "not a regular file" in proc.stderr and "Traceback" not in proc.stderr


def test_a_cache_of_the_first_format_is_adopted(tmp_path):
    """A folder the first format wrote (no marker: lock, tmp, prefix folders of sha256 names) stays
    usable: CI caches restored from before the marker are not refused."""
    root = tmp_path / "cache"
    (root / "tmp" / "new-abcd1234").mkdir(parents=True)
    (root / "lock").write_bytes(b"")
    (root / "ab" / ("ab" + "0" * 62)).mkdir(parents=True)
    CompileCache(root)
    assert (root / MARKER).is_file()
