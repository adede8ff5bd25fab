"""The content-addressed artifact cache (``perfguard.compile.cache``, ``--artifact-cache``): a hit
is the fresh compile's artifact (same execution identity) without a compile; a corrupt entry is
dropped and compiled again; concurrent writers of one key leave one valid entry; readers never see
half an entry while others write and evict; the least recently used entries go first; the key
follows what decides the artifact; and a nightly compiles only the head side after a night that ran.

Compiles are counted from the job's progress events (``compile ID`` against ``compile ID (from
the artifact cache)``) and from the cache's own counters."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from perfguard.backends import Artifact
from perfguard.compile.cache import CompileCache, compiler_tree, using_cache
from perfguard.measure.job import Job
from perfguard.progress import Progress
from perfguard.results import load_result
from perfguard.results.result import CacheUse, CorrectnessCheck
from perfguard.suite import load_suite
from perfguard.workers.protocol import CheckTolerance, CompilePipeline, CompileRequest, CompileResponse

from .conftest import run_cli
from .factories import compiler_suite, git, make_compiler_repo, pass_source


class Recorder(Progress):
    """The job's progress events: which cases compiled and which came from the cache."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.lines: list[str] = []

    def advance(self, description: str) -> None:
        self.steps.append(description)

    def log(self, message: str, style: str = "") -> None:
        self.lines.append(message)

    @property
    def compiled(self) -> int:
        return sum(1 for s in self.steps if s.startswith("compile ") and not s.endswith("(from the artifact cache)"))

    @property
    def served(self) -> int:
        return sum(1 for s in self.steps if s.startswith("compile ") and s.endswith("(from the artifact cache)"))


@pytest.fixture
def toy(tmp_path):
    """A real compiler repository (user pass ``extra_work``) and a suite of one case using it."""
    repo, shas = make_compiler_repo(tmp_path / "cc", [
        ("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(2)}),
        ("more work", {"mycc/passes.py": pass_source(6)}),
    ])
    git(repo, "checkout", "-q", shas[0])
    suite_path = tmp_path / "suite.toml"
    suite_path.write_text(compiler_suite(repo, workers=2, max_workers=4))
    return {"repo": repo, "shas": shas, "suite": suite_path}


def _compile(suite_path: Path, work: Path, cache: CompileCache | None):
    """Compile every case of the suite in one job (no measurement); the entries and the events."""
    suite = load_suite(suite_path)
    progress = Recorder()
    with using_cache(cache):
        job = Job(suite, list(suite.cases), workdir=work, progress=progress)
    try:
        job.compile(memory=False)
        entries = [c.entry for c in job.compiled]
        use = job.documents()["head"].artifact_cache
    finally:
        job.close()
    return entries, progress, use


def test_a_hit_after_a_miss_is_the_same_artifact_without_a_compile(toy, tmp_path):
    cache = CompileCache(tmp_path / "cache")
    first, events1, use1 = _compile(toy["suite"], tmp_path / "w1", cache)
    second, events2, use2 = _compile(toy["suite"], tmp_path / "w2", cache)
    fresh, _, no_use = _compile(toy["suite"], tmp_path / "w3", None)
    assert (events1.compiled, events1.served) == (1, 0)
    assert (events2.compiled, events2.served) == (0, 1)
    assert (use1.hits, use1.misses, use2.hits, use2.misses) == (0, 1, 1, 0)
    assert no_use is None
    assert cache.stats.hits == 1 and cache.stats.misses == 1 and cache.stats.stored == 1
    a, b, c = first[0], second[0], fresh[0]
    assert a.ok and b.ok and c.ok
    # The check's identical-artifact rule: a cached artifact runs the same code as a fresh compile.
    assert a.artifact.execution_identity == b.artifact.execution_identity == c.artifact.execution_identity
    assert b.artifact == a.artifact and b.trace == a.trace and b.correctness == a.correctness
    assert b.metrics.node_count == a.metrics.node_count
    assert not b.metrics.compile_times_s  # another job's compile times stay out of the gate


def test_a_corrupted_entry_is_dropped_with_one_warning_and_compiled_again(toy, tmp_path):
    warnings: list[str] = []
    cache = CompileCache(tmp_path / "cache", warn=warnings.append)
    first, _, _ = _compile(toy["suite"], tmp_path / "w1", cache)
    (entry,) = [p for p in (tmp_path / "cache").glob("??/*") if p.is_dir()]
    artifact = next((entry / "files").rglob("*.onnx"))
    data = bytearray(artifact.read_bytes())
    data[len(data) // 2] ^= 0xFF
    artifact.write_bytes(bytes(data))
    again, events, use = _compile(toy["suite"], tmp_path / "w2", cache)
    assert (events.compiled, events.served) == (1, 0)
    assert (use.hits, use.misses) == (0, 1)
    assert cache.stats.dropped == 1 and len(warnings) == 1 and "failed verification" in warnings[0]
    assert again[0].ok and again[0].artifact.execution_identity == first[0].artifact.execution_identity
    # Stored again, whole: the next job is served.
    _, events3, _ = _compile(toy["suite"], tmp_path / "w3", cache)
    assert (events3.compiled, events3.served) == (0, 1)


def _request(**changes) -> CompileRequest:
    request = CompileRequest(
        backend="ort", model_path="/nowhere/model.onnx",
        pipeline=CompilePipeline("p", "ort", ("eliminate_identity",), {"graph_optimization_level": "disable"}),
        out_dir="/nowhere/out", compiler_path=None, runner="cpu", runner_options=None, threads=1, compile_repeats=3,
        correctness=CheckTolerance(1e-4, 1e-5, 0), input_specs=(), reference_cache=None)
    return replace(request, **changes)


def test_the_key_follows_model_pipeline_backend_and_compiler_tree(toy, tmp_path):
    cache = CompileCache(tmp_path / "cache")
    versions = {"onnxruntime": "1.0"}
    base = cache.key(_request(), "m" * 64, versions)
    assert base is not None
    # Paths and compile repeats do not decide the artifact.
    assert cache.key(_request(out_dir="/elsewhere", model_path="/x.onnx", compile_repeats=1), "m" * 64, versions) == base
    changed = [
        cache.key(_request(), "n" * 64, versions),
        cache.key(_request(pipeline=CompilePipeline("p", "ort", ("eliminate_identity",), {})), "m" * 64, versions),
        cache.key(_request(pipeline=CompilePipeline("p", "ort", (), {"graph_optimization_level": "disable"})),
                  "m" * 64, versions),
        cache.key(_request(), "m" * 64, {"onnxruntime": "1.1"}),
        cache.key(_request(correctness=CheckTolerance(1e-3, 1e-5, 0)), "m" * 64, versions),
        cache.key(_request(), "m" * 64, versions, machine="aarch64"),  # Backend.artifact_key
    ]
    assert all(k is not None and k.digest != base.digest for k in changed)
    assert len({k.digest for k in changed if k}) == len(changed)
    # User passes: the compiler's tree at the commit decides; a dirty pass folder is not cached.
    repo = toy["repo"]
    user = _request(pipeline=CompilePipeline("mycc", "ort", ("mycc.passes:extra_work",), {}), compiler_path=str(repo))
    at_first = cache.key(user, "m" * 64, versions)
    assert at_first is not None and at_first.compiler_tree == compiler_tree(repo)
    assert cache.key(replace(user, compiler_path=None), "m" * 64, versions) is None
    # A cache folder inside the compiler's repository is not a change of it.
    inside = CompileCache(repo / ".artifact-cache")
    assert inside.key(user, "m" * 64, versions) == at_first
    shutil.rmtree(repo / ".artifact-cache")
    git(repo, "checkout", "-q", toy["shas"][1])
    at_second = CompileCache(tmp_path / "cache").key(user, "m" * 64, versions)
    assert at_second is not None and at_second.digest != at_first.digest
    (repo / "mycc" / "passes.py").write_text(pass_source(9))
    fresh = CompileCache(tmp_path / "cache")
    assert fresh.key(user, "m" * 64, versions) is None and fresh.stats.uncached == 1
    # Without user passes the compiler's commit does not enter the key.
    assert fresh.key(replace(_request(), compiler_path=str(repo)), "m" * 64, versions) == base
    # A hybrid (pass bisection): how many passes came from the prefix compiler decides too.
    two = _request(pipeline=CompilePipeline("p", "ort", ("eliminate_identity", "fuse_bn_into_conv"), {}))
    hybrids = {fresh.key(two, "m" * 64, versions, prefix_len=n, prefix_path=repo) for n in (0, 1, 2)}
    assert None not in hybrids and len(hybrids) == 3


def test_not_cacheable_names_the_files_that_made_it_so_first_few_then_how_many_more(toy, tmp_path):
    """Issue 43: "1 not cacheable" says which files under the compiler's path keep it from a key,
    the first three, then how many more; a name is data (escaped, quoted: no control character
    reaches the terminal line)."""
    repo = toy["repo"]
    user = _request(pipeline=CompilePipeline("mycc", "ort", ("mycc.passes:extra_work",), {}), compiler_path=str(repo))
    (repo / "first.json").write_text("{}")
    (repo / "mycc" / "passes.py").write_text(pass_source(9))
    cache = CompileCache(tmp_path / "cache")
    assert cache.key(user, "m" * 64, {"onnxruntime": "1.0"}) is None
    line = cache.describe()
    assert "1 not cacheable (uncommitted under " in line and "'first.json', 'mycc/passes.py'" in line, line
    assert "more" not in line
    for n in range(4):
        (repo / f"notes\x1b[31m{n}\n.txt").write_text("x")
    again = CompileCache(tmp_path / "cache")
    assert again.key(user, "m" * 64, {"onnxruntime": "1.0"}) is None
    line = again.describe()
    assert "'first.json', 'mycc/passes.py', 'notes\\x1b[31m0\\n.txt' and 3 more)" in line, line
    assert "\x1b" not in line and "\n" not in line


def test_the_environment_names_the_cache_and_the_result_records_its_use(toy, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGUARD_ARTIFACT_CACHE", str(tmp_path / "cache"))
    for n, expected in ((1, {"hits": 0, "misses": 1, "uncached": 0}), (2, {"hits": 1, "misses": 0, "uncached": 0})):
        out = tmp_path / f"r{n}.json"
        proc = run_cli("run", str(toy["suite"]), "--out", str(out), "--rounds", "1", "--workers", "1", cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert json.loads(out.read_text())["artifact_cache"] == expected
        assert load_result(out).artifact_cache == CacheUse(**expected)  # typed, through the schema
        assert f"artifact cache {tmp_path / 'cache'}" in proc.stderr


def _fake_response(out_dir: Path, payload: bytes) -> CompileResponse:
    """What a compile worker returns for an artifact file of ``payload`` (the cache does not look
    inside it)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "model.onnx"
    path.write_bytes(payload)
    (out_dir / "model.onnx.data").write_bytes(payload[::-1])
    check = CorrectnessCheck(True, "", 0.0, 0.0, 1e-4, 1e-5, 0, status="verified")
    return CompileResponse(Artifact("ort", str(path), {}, "s" * 64, len(payload), 3), {"passes": []}, 0.5, (0.5,),
                           check)


def _writer(root: str, out: str, barrier, results) -> None:
    cache = CompileCache(Path(root))
    key = cache.key(_request(), "m" * 64, {"onnxruntime": "1.0"})
    assert key is not None
    response = _fake_response(Path(out), bytes(range(256)) * 8192)
    barrier.wait()
    results.put(cache.put(key, response, Path(out)))


def test_concurrent_writers_of_one_key_leave_one_valid_entry(tmp_path):
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(4), context.Queue()
    processes = [context.Process(target=_writer, args=(str(tmp_path / "cache"), str(tmp_path / f"out{i}"), barrier,
                                                        results)) for i in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    stored = [results.get(timeout=10) for _ in processes]
    assert stored.count(True) == 1
    entries = [p for p in (tmp_path / "cache").glob("??/*") if p.is_dir()]
    assert len(entries) == 1
    assert not list((tmp_path / "cache" / "tmp").iterdir())  # the losers discarded theirs
    cache = CompileCache(tmp_path / "cache")
    key = cache.key(_request(), "m" * 64, {"onnxruntime": "1.0"})
    assert key is not None
    got = cache.get(key, tmp_path / "read")
    assert got is not None and Path(got.artifact.path).read_bytes() == bytes(range(256)) * 8192
    assert (tmp_path / "read" / "model.onnx.data").read_bytes() == (bytes(range(256)) * 8192)[::-1]


def _churn(root: str, worker: int, rounds: int, results) -> None:
    """Store and read keys 0..5 in random order under a bound that holds about three entries:
    every read is a miss or the whole entry that was stored under that key."""
    cache = CompileCache(Path(root), max_bytes=3 * 2 * 300_000 + 10_000)
    rng = random.Random(worker)
    bad = 0
    for step in range(rounds):
        n = rng.randrange(6)
        key = cache.key(_request(), f"{n:064d}", {"onnxruntime": "1.0"})
        assert key is not None
        out = Path(root).parent / f"w{worker}-{step}"
        if rng.random() < 0.5:
            cache.put(key, _fake_response(out, bytes([n]) * 300_000), out)
        else:
            got = cache.get(key, out)
            if got is not None and Path(got.artifact.path).read_bytes() != bytes([n]) * 300_000:
                bad += 1
    results.put((bad, cache.stats.dropped))


def test_readers_never_see_half_an_entry_while_others_store_and_evict(tmp_path):
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=_churn, args=(str(tmp_path / "cache"), i, 30, results)) for i in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(180)
        assert process.exitcode == 0
    outcomes = [results.get(timeout=10) for _ in processes]
    assert outcomes == [(0, 0)] * 4  # no partial read, and nothing ever looked corrupt
    assert CompileCache(tmp_path / "cache").size_bytes() <= 3 * 2 * 300_000 + 10_000


def test_least_recently_used_entries_go_first_under_the_bound(tmp_path):
    size = 2 * 200_000  # each entry: an artifact and its data file
    cache = CompileCache(tmp_path / "cache", max_bytes=int(2.5 * size))
    keys = [cache.key(_request(), f"{n:064d}", {"onnxruntime": "1.0"}) for n in range(3)]
    assert all(keys)
    for n in (0, 1):
        cache.put(keys[n], _fake_response(tmp_path / f"o{n}", bytes([n]) * 200_000), tmp_path / f"o{n}")
    now = time.time()
    for n, age in ((0, 200), (1, 100)):  # stored long ago; entry 0 the older
        entry = next((tmp_path / "cache").glob(f"??/{keys[n].digest}"))
        os.utime(entry / "used", (now - age, now - age))
    assert cache.get(keys[0], tmp_path / "r0") is not None  # a hit makes entry 0 the most recent
    cache.put(keys[2], _fake_response(tmp_path / "o2", bytes([2]) * 200_000), tmp_path / "o2")
    assert cache.stats.evicted == 1
    assert cache.get(keys[1], tmp_path / "r1") is None  # the least recently used went
    assert cache.get(keys[0], tmp_path / "r0b") is not None and cache.get(keys[2], tmp_path / "r2") is not None
    assert cache.size_bytes() <= int(2.5 * size)


def test_cache_options_refuse_bad_sizes_in_one_line(tmp_path):
    proc = run_cli("run", "--artifact-cache", str(tmp_path / "c"), "--cache-max", "lots", cwd=tmp_path)
    assert proc.returncode == 2 and "--cache-max" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("run", "--cache-max", "1GB", cwd=tmp_path)
    assert proc.returncode == 2 and "--artifact-cache" in proc.stderr


@pytest.mark.slow
def test_a_nightly_with_the_cache_compiles_only_the_head_side_after_a_night_that_ran(tmp_path):
    """Night 1 measures commit A (its compiles stored); night 2 checks B (one pass changed) against
    A: A's side comes from the cache, only B's compiles. Night 3 at B again measures nothing: one
    night per commit (``perfguard.flows.nightly.one_per_commit``)."""
    repo, shas = make_compiler_repo(tmp_path / "cc", [
        ("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)}),
        ("slower pass", {"mycc/passes.py": pass_source(8, "slower")}),
    ])
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo, workers=2, max_workers=4))
    store = f"sqlite:///{tmp_path / 'history.sqlite'}"
    documents = []
    for night, sha in enumerate((shas[0], shas[1]), start=1):
        git(repo, "checkout", "-q", sha)
        out = tmp_path / f"night{night}.json"
        proc = run_cli("nightly", str(suite), "--store", store, "--json", str(out), "--no-bisect", "--no-recheck",
                       "--artifact-cache", str(tmp_path / "cache"), cwd=tmp_path, timeout=900)
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        documents.append(json.loads(out.read_text()))
    first, second = documents
    assert first["artifact_cache"] == {"hits": 0, "misses": 1, "uncached": 0}
    assert second["results"]["baseline"]["artifact_cache"] == {"hits": 1, "misses": 0, "uncached": 0}
    assert second["results"]["candidate"]["artifact_cache"] == {"hits": 0, "misses": 1, "uncached": 0}
    third = run_cli("nightly", str(suite), "--store", store, "--no-bisect", "--no-recheck", "--artifact-cache",
                    str(tmp_path / "cache"), cwd=tmp_path, timeout=900)
    assert third.returncode == 0 and "nothing measured" in third.stdout, third.stdout + third.stderr
