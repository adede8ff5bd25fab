"""Counts kept in the artifact cache (``perfguard.counting.served``): the document, and the
cache folder's rules for it (atomic store, bounded read, no link followed, a corrupt document
dropped, eviction that sees counts beside the entries). No Valgrind: the counts are known numbers;
a real counted check served from the cache is ``tests/test_counts.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from perfguard.compile.cache import CompileCache
from perfguard.counting.served import COUNTS_FORMAT, CountsDocument, CountsKey, _read
from perfguard.results.counts import COUNT_PROTOCOL, CompileCounts, Counts


def _key(kind: str = "run", execution: str = "e" * 16) -> CountsKey:
    return CountsKey(kind, execution, "c" * 64 if kind == "compile" else "", "[]", 0, 3, 3, COUNT_PROTOCOL,
                     "valgrind-3.19.0", "0.1+abc")


def _run(instructions: float = 5_023_292.0) -> Counts:
    return Counts(instructions, 1.0, 2.0, 3.0, 4.0, instructions + 100, 3, "window", "valgrind-3.19.0")


def _bytes(document: CountsDocument) -> bytes:
    return json.dumps(document.to_json()).encode()


def test_a_document_reads_back_what_was_written_and_keys_differ_in_every_part() -> None:
    run = CountsDocument(_key(), counts=_run())
    assert CountsDocument.from_json(json.loads(_bytes(run))) == run
    compiled = CountsDocument(_key("compile"), compile=CompileCounts(1234, {0: 1000, 2: 34}, {"step|ort": 200}))
    assert CountsDocument.from_json(json.loads(_bytes(compiled))) == compiled
    base = _key()
    changed = [CountsKey(**{**base.to_json(), name: value})
               for name, value in (("execution", "f" * 16), ("protocol", COUNT_PROTOCOL + 1), ("tool", "valgrind-3.22.0"),
                                   ("perfguard", "0.2+def"), ("inferences", 5), ("seed", 1), ("inputs", "[1]"))]
    assert len({k.digest for k in [base, *changed]}) == len(changed) + 1
    with pytest.raises(ValueError, match="format"):
        CountsDocument.from_json({**run.to_json(), "version": COUNTS_FORMAT + 1})
    with pytest.raises(ValueError, match="per_pass"):
        CompileCounts.from_json({"total": 1, "per_pass": {"x": 1}, "steps": {}})


def test_the_cache_serves_a_stored_count_and_drops_one_that_names_another_key(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache")
    key = _key()
    assert cache.get_counts(key.digest) is None
    assert cache.put_counts(key.digest, _bytes(CountsDocument(key, counts=_run())))
    served = _read(cache, key)
    assert served is not None and served.counts == _run()
    assert not list((tmp_path / "cache" / "tmp").iterdir())  # the staging folder went
    # One artifact counted twice side by side differs by a few instructions: the first stored stays.
    assert not cache.put_counts(key.digest, _bytes(CountsDocument(key, counts=_run(5_023_300.0))))
    assert (served := _read(cache, key)) is not None and served.counts == _run()
    assert not list((tmp_path / "cache" / "tmp").iterdir())
    other = _key(execution="f" * 16)
    cache.put_counts(other.digest, _bytes(CountsDocument(key, counts=_run())))  # stored under the wrong name
    assert _read(cache, other) is None and not (tmp_path / "cache" / "counts" / f"{other.digest}.json").exists()
    cache.put_counts(other.digest, b"{not json")
    assert _read(cache, other) is None
    assert cache.stats.dropped == 2 and cache.stats.counts_stored == 3


def test_a_link_in_place_of_a_count_is_unlinked_never_read_and_its_target_kept(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache")
    key = _key()
    precious = tmp_path / "precious.json"
    precious.write_bytes(_bytes(CountsDocument(key, counts=_run())))
    (tmp_path / "cache" / "counts").mkdir()
    os.symlink(precious, tmp_path / "cache" / "counts" / f"{key.digest}.json")
    assert _read(cache, key) is None
    assert precious.exists() and not os.path.lexists(tmp_path / "cache" / "counts" / f"{key.digest}.json")


def test_a_counts_folder_that_is_a_link_is_neither_written_nor_read(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, tmp_path / "cache" / "counts")
    key = _key()
    assert not cache.put_counts(key.digest, _bytes(CountsDocument(key, counts=_run())))
    assert list(elsewhere.iterdir()) == []


def test_eviction_sees_counts_and_removes_the_least_recently_used_first(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache", max_bytes=10**9)
    keys = [_key(execution=f"{i:016x}") for i in range(3)]
    for age, key in enumerate(keys):
        cache.put_counts(key.digest, _bytes(CountsDocument(key, counts=_run())))
        path = tmp_path / "cache" / "counts" / f"{key.digest}.json"
        os.utime(path, (1_000_000 + age, 1_000_000 + age))
    stranger = tmp_path / "cache" / "counts" / "notes.json"
    stranger.write_text("{}")
    one = (tmp_path / "cache" / "counts" / f"{keys[0].digest}.json").stat().st_size
    assert cache.size_bytes() == 3 * one
    cache.max_bytes = 2 * one
    assert cache.evict() == 1
    assert _read(cache, keys[0]) is None and _read(cache, keys[2]) is not None
    assert stranger.exists()  # not the cache's: never evicted
