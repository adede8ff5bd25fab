"""Hostile input, third round (issue 44): the counts cache read through a link or serving what
perfguard's own readers refuse, nested JSON, hand-edited merge parts, a misbehaving Valgrind,
a mistyped store URL, two nights at one commit. Each test failed on the main of 2026-12-07."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from perfguard.compile.cache import CompileCache
from perfguard.counting.served import CountsDocument, CountsKey, _read
from perfguard.results.counted_functions import FunctionCount
from perfguard.results.counts import COUNT_PROTOCOL, CompileCounts, Counts


def _key(kind: str = "run") -> CountsKey:
    return CountsKey(kind, "e" * 16, "c" * 64 if kind == "compile" else "", "[]", 0, 3, 3, COUNT_PROTOCOL,
                     "valgrind-3.19.0", "0.1+abc")


def _run(**changed: object) -> Counts:
    counts = Counts(5_000_000.0, 1.0, 2.0, 3.0, 4.0, 5_000_100.0, 3, "window", "valgrind-3.19.0",
                    protocol=COUNT_PROTOCOL)
    return Counts(**{**{name: getattr(counts, name) for name in counts.__dataclass_fields__}, **changed})


def _plant(cache_root: Path, key: CountsKey, data: bytes) -> Path:
    folder = cache_root / "counts"
    folder.mkdir(exist_ok=True)
    path = folder / f"{key.digest}.json"
    path.write_bytes(data)
    return path


# --- 1. the counts folder obeys the ownership rules on reads too ------------------------------

def test_a_counts_folder_that_is_a_link_is_not_read_through(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    key = _key()
    planted = elsewhere / f"{key.digest}.json"
    planted.write_text(json.dumps(CountsDocument(key, counts=_run()).to_json()))
    os.symlink(elsewhere, tmp_path / "cache" / "counts")
    assert cache.get_counts(key.digest) is None
    assert _read(cache, key) is None
    assert planted.exists()  # what lies behind the link is not the cache's to drop either
    assert cache.stats.dropped == 0


# --- 2. a stored document is read as the verdicts file will be read ---------------------------

def _compile_document(total: int, per_pass: dict[int, int], steps: dict[str, int]) -> bytes:
    return json.dumps(CountsDocument(_key("compile"), compile=CompileCounts(total, per_pass, steps)).to_json()).encode()


@pytest.mark.parametrize("name, data", [
    ("no inferences", json.dumps(CountsDocument(_key(), counts=_run(inferences=0)).to_json()).encode()),
    ("21 functions", json.dumps(CountsDocument(_key(), counts=_run(
        functions=tuple(FunctionCount(f"f{i}", "lib.so", 10.0) for i in range(21)))).to_json()).encode()),
    ("another method", json.dumps(CountsDocument(_key(), counts=_run(method="guess")).to_json()).encode()),
    ("nested lists", b"[" * 200_000 + b"]" * 200_000),
    ("nested in an object", b'{"version": 1, "key": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"),
    ("a huge document", json.dumps({**CountsDocument(_key(), counts=_run()).to_json(),
                                    "padding": "x" * (1 << 20)}).encode()),
    ("not UTF-8", b'{"version": 1, "key": "\xff"}'),
])
def test_a_run_document_perfguard_would_not_read_back_is_dropped(tmp_path: Path, name: str, data: bytes) -> None:
    warnings: list[str] = []
    cache = CompileCache(tmp_path / "cache", warn=warnings.append)
    path = _plant(tmp_path / "cache", _key(), data)
    assert _read(cache, _key()) is None, name
    assert not path.exists() and cache.stats.dropped == 1
    assert len(warnings) == 1 and len(warnings[0]) < 400 and "\n" not in warnings[0]


@pytest.mark.parametrize("total, per_pass, steps", [
    (-5, {0: 1}, {}),
    (5, {0: -1}, {}),
    (5, {0: 1}, {"step|ort": -2}),
])
def test_a_compile_document_with_a_negative_count_is_dropped(tmp_path: Path, total: int, per_pass: dict[int, int],
                                                              steps: dict[str, int]) -> None:
    cache = CompileCache(tmp_path / "cache")
    key = _key("compile")
    path = _plant(tmp_path / "cache", key, _compile_document(total, per_pass, steps))
    assert _read(cache, key) is None
    assert not path.exists()


def test_a_sound_document_is_still_served_and_an_oversized_one_never_stored(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache")
    run = CountsDocument(_key(), counts=_run(functions=tuple(FunctionCount(f"f{i}", "lib.so", 10.0) for i in range(20))))
    assert cache.put_counts(run.key.digest, json.dumps(run.to_json()).encode())
    assert _read(cache, run.key) == run
    compiled = CountsDocument(_key("compile"), compile=CompileCounts(0, {}, {"step|session": 0}))
    assert cache.put_counts(compiled.key.digest, json.dumps(compiled.to_json()).encode())
    assert _read(cache, compiled.key) == compiled
    other = CountsKey(**{**_key().to_json(), "seed": 7})
    assert not cache.put_counts(other.digest, b" " * (1 << 20))


# --- 3. every JSON reader bounded in depth before parsing -------------------------------------

NESTED = "[" * 200_000 + "]" * 200_000


def _entry(tmp_path: Path) -> tuple[CompileCache, object, Path, list[str]]:
    from .test_artifact_cache import _fake_response, _request

    warnings: list[str] = []
    cache = CompileCache(tmp_path / "cache", warn=warnings.append)
    key = cache.key(_request(), "4" * 64, {"onnxruntime": "1.0"})
    assert key is not None
    assert cache.put(key, _fake_response(tmp_path / "out", b"model" * 100), tmp_path / "out")
    return cache, key, tmp_path / "cache" / key.digest[:2] / key.digest, warnings


def test_a_nested_manifest_drops_its_entry(tmp_path: Path) -> None:
    cache, key, entry, warnings = _entry(tmp_path)
    (entry / "manifest.json").write_text(NESTED)
    assert cache.get(key, tmp_path / "read") is None  # type: ignore[arg-type]
    assert not entry.exists() and "nested deeper" in warnings[0]


def test_a_nested_record_that_its_manifest_vouches_for_drops_its_entry(tmp_path: Path) -> None:
    import hashlib

    cache, key, entry, warnings = _entry(tmp_path)
    record = ('{"a": ' + NESTED + "}").encode()
    (entry / "record.json").write_bytes(record)
    manifest = json.loads((entry / "manifest.json").read_text())
    manifest["files"]["record.json"] = hashlib.sha256(record).hexdigest()
    manifest["sizes"]["record.json"] = len(record)
    (entry / "manifest.json").write_text(json.dumps(manifest))
    assert cache.get(key, tmp_path / "read") is None  # type: ignore[arg-type]
    assert not entry.exists() and "nested deeper" in warnings[0]


def test_a_nested_reported_marker_is_no_marker() -> None:
    from perfguard.history.notify import last_reported

    assert last_reported(["<!-- perfguard-reported:" + "%5B" * 50_000 + " -->"]) is None
    assert last_reported(["<!-- perfguard-reported:" + "%7B%22a%22%3A" * 5_000 + " -->"]) is None


def test_a_nested_stored_document_is_a_one_line_store_error(tmp_path: Path) -> None:
    import zlib

    import sqlalchemy as sa

    from perfguard.errors import StoreError
    from perfguard.store import Store

    from .test_history_store import small_result

    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    with Store.open(url) as store:
        ingested = store.ingest_json(small_result(1), source="one.json")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE documents SET body = ?", (zlib.compress(NESTED.encode()),))
    engine.dispose()
    with Store.open(url) as store:
        with pytest.raises(StoreError, match="nested deeper"):
            store.document(ingested.document_id)
        with pytest.raises(StoreError, match="nested deeper"):
            store.latest_results("golden")


def test_a_nested_torch_descriptor_is_exit_2(tmp_path: Path) -> None:
    from perfguard.errors import UserError
    from perfguard.models.torch_callable import TorchModel

    path = tmp_path / "model.torch.json"
    path.write_text('{"version": ' + NESTED + "}")
    with pytest.raises(UserError, match="nested deeper"):
        TorchModel.read(path)


# --- 5. merge validates every setting it uses ---------------------------------------------------

def _edited(path: Path, change) -> Path:  # type: ignore[no-untyped-def]
    data = json.loads(path.read_text())
    change(data)
    out = path.with_name("edited-" + path.name)
    out.write_text(json.dumps(data))
    return out


def _drop_history(data: dict) -> None:  # type: ignore[type-arg]
    del data["settings"]["history"]


@pytest.mark.parametrize("change, said", [
    (lambda d: d["settings"].update(alpha=-3), "settings.alpha must be a level between 0 and 1"),
    (lambda d: d["settings"].update(alpha=2.0), "settings.alpha must be a level between 0 and 1"),
    (_drop_history, "field 'history' is missing"),
    (lambda d: d["settings"].update(step_workers=0), "must be at least 1"),
    (lambda d: d["mode"].update(baseline="someone-else"), "its mode.baseline differs from"),
    (lambda d: d["settings"].update(alpha=0.2), "its settings.alpha differs from"),
])
def test_merge_refuses_a_setting_it_cannot_use_in_one_line(tmp_path: Path, change, said: str) -> None:  # type: ignore[no-untyped-def]
    from .test_hostile_shards import _one_line
    from .test_shards import _merge, _write_shards

    one, two, three = _write_shards(tmp_path)
    proc = _merge(one, _edited(two, change), three, out=tmp_path / "m.json")
    _one_line(proc, said)
    assert "shard 2/3" in proc.stderr and not (tmp_path / "m.json").exists()


def test_merge_refuses_a_first_part_without_history_in_one_line(tmp_path: Path) -> None:
    from .test_hostile_shards import _one_line
    from .test_shards import _merge, _write_shards

    one, two, three = _write_shards(tmp_path)
    _one_line(_merge(_edited(one, _drop_history), two, three, out=tmp_path / "m.json"),
              "shard 1/3: settings: field 'history' is missing")


# --- 6. a misbehaving valgrind ------------------------------------------------------------------

PROFILE = """version: 1
creator: callgrind-3.19.0
pid: 123
desc: Trigger: Client Request: w
positions: line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
summary: 1000 10 10 1 1 1 1 1 1
ob=/lib/libx.so
fn=foo
16 600 5 5 0 0 0 0 0 0
+2 400 5 5 1 1 1 1 1 1
"""


def _profile(folder: Path, text: str, pid: int = 123) -> Path:
    path = folder / f"callgrind.out.{pid}.1-01"
    path.write_text(text)
    return path


def test_a_sound_profile_reads_its_window_and_functions(tmp_path: Path) -> None:
    from perfguard.counting.dumps import read_dumps, window_functions

    _profile(tmp_path, PROFILE)
    assert read_dumps(tmp_path, 123)["w"]["Ir"] == 1000
    assert [f.name for f in window_functions(tmp_path, 123, "w", 1)] == ["foo"]


def test_an_unparseable_cost_line_fails_the_count_not_the_job(tmp_path: Path) -> None:
    from perfguard.counting.dumps import read_dumps, window_functions

    _profile(tmp_path, PROFILE + "+3 12abc 7\n")
    with pytest.raises(ValueError, match="a cost line that is not a position and numbers"):
        read_dumps(tmp_path, 123)  # counting.take._windows: "unreadable callgrind profile: ..."
    assert window_functions(tmp_path, 123, "w", 1) == ()


def test_a_profile_that_is_a_link_or_too_large_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from perfguard.counting import dumps
    from perfguard.counting.dumps import read_dumps

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = _profile(elsewhere, PROFILE)
    os.symlink(target, tmp_path / target.name)
    with pytest.raises(ValueError, match="symbolic link"):
        read_dumps(tmp_path, 123)
    assert dumps.window_functions(tmp_path, 123, "w", 1) == ()
    monkeypatch.setattr(dumps, "MAX_PROFILE_BYTES", 100)
    with pytest.raises(ValueError, match="larger than 100 bytes"):
        read_dumps(elsewhere, 123)


def test_the_tool_string_is_the_first_line_bounded(tmp_path: Path) -> None:
    from perfguard.counting.valgrind import MAX_TOOL_CHARS, valgrind_version

    wrapper = tmp_path / "valgrind"
    wrapper.write_text("#!/bin/sh\nprintf 'valgrind-3.19.0\\033[31m%s\\n' \"$(head -c 3000000 /dev/zero | tr '\\0' x)\"\n"
                       "echo second line\n")
    wrapper.chmod(0o755)
    tool = valgrind_version(str(wrapper))
    assert tool.startswith("valgrind-3.19.0?[31m") and len(tool) == MAX_TOOL_CHARS


def test_a_users_glibc_tunables_are_merged_not_replaced() -> None:
    from perfguard.counting.valgrind import COUNTED_ENV, counted_env

    env = counted_env(["python"], {"GLIBC_TUNABLES": "glibc.pthread.rseq=0:glibc.malloc.mxfast=64"})
    tunables = env["GLIBC_TUNABLES"].split(":")
    assert "glibc.pthread.rseq=0" in tunables and "glibc.malloc.mxfast=64" not in tunables
    assert set(COUNTED_ENV["GLIBC_TUNABLES"].split(":")) <= set(tunables)
    assert counted_env(["python"], {})["GLIBC_TUNABLES"] == COUNTED_ENV["GLIBC_TUNABLES"]


# --- 7. a SQLite URL a slash short --------------------------------------------------------------

@pytest.mark.parametrize("url, spelled", [
    ("sqlite://", "sqlite:///PATH"),
    ("sqlite://h.sqlite", "sqlite:///h.sqlite"),
    ("sqlite:///:memory:", "sqlite:///PATH"),
])
def test_a_sqlite_url_that_names_no_file_is_refused_with_the_right_spelling(tmp_path: Path, url: str,
                                                                            spelled: str) -> None:
    from .conftest import run_cli
    from .test_hostile_shards import _one_line

    proc = run_cli("history", "ingest", str(Path(__file__).parent / "golden" / "v1" / "result-failed.json"),
                   "--store", url, cwd=tmp_path)
    _one_line(proc, f"names no SQLite file (in memory it would keep nothing); write three slashes and the file: {spelled}")
    assert list(tmp_path.iterdir()) == []


# --- 8. one night per suite, runner class and commit, enforced by the store ---------------------

def _night_document(index: int, commit: str = "c" * 40, shard: tuple[int, int] | None = None) -> dict:  # type: ignore[type-arg]
    from .test_history_store import small_result

    data = small_result(index)
    data["compiler"]["commit"] = commit
    if shard is not None:
        ids = [c["id"] for c in data["cases"]]
        data["shard"] = {"version": 2, "k": shard[0], "n": shard[1], "cases": ids, "part": ids,
                         "suite_sha256": "s" * 64, "settings_sha256": "t" * 64, "head_commit": commit,
                         "base_commit": None, "costs": "static"}
    return data


def _nightly_ingest(url: str, index: int, barrier, results) -> None:  # type: ignore[no-untyped-def]
    from perfguard.errors import StoreError
    from perfguard.results import parse_result
    from perfguard.store import Store

    document = parse_result(_night_document(index), "<night>")
    with Store.open(url) as store:
        barrier.wait()
        try:
            results.put(("stored", store.ingest(document, source="nightly").document_id))
        except StoreError as exc:
            results.put(("refused", str(exc)))


@pytest.fixture(params=["sqlite", "postgresql"])
def night_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    else:
        from .pg import create_database

        url = create_database(request.getfixturevalue("postgres_url"), f"n_{os.getpid()}_{id(tmp_path)}")
    from perfguard.store import Store

    with Store.open(url):  # created before the writers race
        pass
    return url


def test_two_nightlies_that_store_together_record_one_night_of_a_commit(night_store: str) -> None:
    import multiprocessing

    from perfguard.store import Store

    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    writers = [context.Process(target=_nightly_ingest, args=(night_store, i, barrier, results)) for i in (1, 2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
        assert writer.exitcode == 0
    outcomes = sorted(results.get(timeout=10) for _ in writers)
    assert [kind for kind, _ in outcomes] == ["refused", "stored"], outcomes
    said = str(outcomes[0][1])
    assert "golden already has a night at commit cccccccccc on cpu" in said and "\n" not in said
    with Store.open(night_store) as store:
        stored = store.latest_results("golden")
        assert [document_id for document_id, _ in stored] == [outcomes[1][1]]
        points = store.all_points()
        assert all(len({p.commit for p in series}) == len(series) for series in points.values())


def test_a_night_is_refused_after_a_broken_night_but_parts_and_other_sources_are_not(tmp_path: Path) -> None:
    from perfguard.errors import StoreError
    from perfguard.results import parse_result
    from perfguard.store import Store

    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        store.ingest(parse_result(_night_document(1, shard=(1, 2)), "<1/2>"), source="nightly")
        store.ingest(parse_result(_night_document(2, shard=(2, 2)), "<2/2>"), source="nightly")  # its sibling part
        with pytest.raises(StoreError, match="already has a night at commit cccccccccc on cpu"):
            store.ingest(parse_result(_night_document(3, shard=(1, 2)), "<1/2 again>"), source="nightly")
        store.ingest(parse_result(_night_document(4), "<file>"), source="results.json")  # history ingest: no night
        store.record_broken_night("golden", "d" * 40, "it does not build")
        with pytest.raises(StoreError, match=r"night \d+, broken"):
            store.ingest(parse_result(_night_document(5, commit="d" * 40), "<after broken>"), source="nightly")
        store.ingest(parse_result(_night_document(6, commit="e" * 40), "<next commit>"), source="nightly")


def test_a_run_document_whose_counts_name_another_tool_than_its_key_is_dropped(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache")
    counts = _run(tool="valgrind-3.19.0" + "x" * 100_000)  # 100 kB in every result it would serve
    path = _plant(tmp_path / "cache", _key(), json.dumps(CountsDocument(_key(), counts=counts).to_json()).encode())
    assert _read(cache, _key()) is None and not path.exists() and cache.stats.dropped == 1


def test_nested_worker_values_in_a_point_are_a_one_line_store_error(tmp_path: Path) -> None:
    import sqlalchemy as sa

    from perfguard.errors import StoreError
    from perfguard.store import Store

    from .test_history_store import small_result

    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    with Store.open(url) as store:
        store.ingest_json(small_result(1), source="one.json")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE points SET worker_values = ?", (NESTED,))
    engine.dispose()
    with Store.open(url) as store, pytest.raises(StoreError, match="corrupt worker values in a point"):
        store.all_points()
