"""Other tools' files, in and out, against the real tools.

In: a real pytest-benchmark run (``--benchmark-json``, ``--benchmark-autosave
--benchmark-save-data``) and a real asv project's results (``asv run --set-commit-hash``, with and
without ``--record-samples``) are ingested with ``perfguard history ingest --format`` and shown by
``perfguard history show``; each number is the file's. Out: a perfguard result exported to asv is
rendered by a real ``asv publish`` (and read by ``asv compare``), and exported to pytest-benchmark
is read by a real ``pytest-benchmark compare``. Bad input is one line, exit 2, and stores nothing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perfguard.cli import main
from perfguard.formats.asv import median_interval
from perfguard.formats.pytest_benchmark import stats_of
from perfguard.store import Store, store_url

from .conftest import REPO, run_cli

GOLDEN = REPO / "tests" / "golden" / "v1"
BIN = Path(sys.executable).parent
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1"}

PYTEST_BENCH = '''
import pytest


def work(n):
    return sum(range(n))


@pytest.mark.parametrize("n", [10, 1000])
def test_sum(benchmark, n):
    benchmark(work, n)


def test_grouped(benchmark):
    benchmark.group = "small"
    benchmark(work, 5)
'''

ASV_BENCH = '''
class Suite:
    params = [[10, 1000]]
    param_names = ["n"]

    def time_sum(self, n):
        sum(range(n))

    def peakmem_list(self, n):
        [0] * (n * 100)


def time_plain():
    sum(range(10))


def mem_object():
    return [0] * 100


def track_widgets():
    return 42


track_widgets.unit = "widgets"


def track_zero():
    return 0
'''


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(command, cwd=cwd, env={**os.environ, **GIT_ENV, **(env or {})}, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{command}: {proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc


def _git_repo(folder: Path, commits: int) -> list[str]:
    _run(["git", "init", "-q", "-b", "main"], folder)
    shas = []
    for i in range(commits):
        _run(["git", "add", "-A"], folder)
        stamp = f"2026-11-{10 + i}T12:00:00+00:00"  # a day apart: asv's date is the commit's
        _run(["git", "commit", "-q", "--allow-empty", "-m", f"commit {i}"], folder,
             {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp})
        shas.append(_run(["git", "rev-parse", "HEAD"], folder).stdout.strip())
    return shas


def _one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfguard: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _documents(store_path: Path) -> int:
    if not store_path.exists():
        return 0
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{store_path}")
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("select count(*) from documents")).scalar_one())
    finally:
        engine.dispose()


# --- real files ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pytest_benchmark_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real pytest-benchmark run in a git checkout: the --benchmark-json file and the folder
    that --benchmark-autosave --benchmark-save-data filled."""
    folder = tmp_path_factory.mktemp("pytest-benchmark")
    (folder / "test_bench_tiny.py").write_text(PYTEST_BENCH)
    (sha,) = _git_repo(folder, 1)
    _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_bench_tiny.py",
          "--benchmark-json=run.json", "--benchmark-autosave", "--benchmark-save-data",
          "--benchmark-max-time=0.002", "--benchmark-min-rounds=5"], folder)
    saved = sorted((folder / ".benchmarks").rglob("0001_*.json"))
    assert len(saved) == 1
    return {"folder": folder, "json": folder / "run.json", "storage": folder / ".benchmarks", "saved": saved[0],
            "sha": sha}


@pytest.fixture(scope="module")
def asv_project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real asv project with two commits measured by ``asv run --python=same --set-commit-hash``:
    the first --quick, the second with --record-samples."""
    folder = tmp_path_factory.mktemp("asv")
    (folder / "benchmarks").mkdir()
    (folder / "benchmarks" / "__init__.py").write_text("")
    (folder / "benchmarks" / "bench_tiny.py").write_text(ASV_BENCH)
    (folder / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "tiny", "repo": ".", "branches": ["main"], "environment_type": "existing",
        "benchmark_dir": "benchmarks", "results_dir": "results", "html_dir": "html"}))
    shas = _git_repo(folder, 2)
    env = {"HOME": str(folder)}  # asv machine writes ~/.asv-machine.json
    asv = [sys.executable, "-m", "asv"]
    _run([*asv, "machine", "--yes", "--machine", "bench"], folder, env)
    _run([*asv, "run", "--python=same", "--quick", "--machine", "bench", "--set-commit-hash", shas[0]], folder, env)
    _run([*asv, "run", "--python=same", "--record-samples", "-a", "repeat=3", "-a", "number=5", "-a", "rounds=1",
          "-a", "warmup_time=0", "--machine", "bench", "--set-commit-hash", shas[1]], folder, env)
    files = {sha: next((folder / "results" / "bench").glob(f"{sha[:8]}-*.json")) for sha in shas}
    return {"folder": folder, "shas": shas, "files": files,
            "benchmarks": json.loads((folder / "results" / "benchmarks.json").read_text())}


@pytest.mark.slow
def test_a_real_pytest_benchmark_run_is_ingested_and_shown(pytest_benchmark_run: dict[str, Any],
                                                           tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite"
    proc = run_cli("history", "ingest", "--format", "pytest-benchmark", str(pytest_benchmark_run["storage"]),
                   "--store", str(store))
    assert proc.returncode == 0, proc.stderr
    saved = json.loads(pytest_benchmark_run["saved"].read_text())
    assert f"pytest-benchmark document 1 (pytest-benchmark:{pytest_benchmark_run['folder'].name}), 3 point(s)" \
        in proc.stdout
    shown = tmp_path / "show.json"
    proc = run_cli("history", "show", "test_sum[1000]", "--store", str(store), "--json", str(shown))
    assert proc.returncode == 0, proc.stderr
    assert "test_sum[1000] latency" in proc.stdout
    (series,) = json.loads(shown.read_text())["series"]
    bench = next(b for b in saved["benchmarks"] if b["name"] == "test_sum[1000]")
    machine = saved["machine_info"]
    assert series["suite"] == f"pytest-benchmark:{pytest_benchmark_run['folder'].name}"
    assert series["runner_class"] == f"{machine['node']}:{machine['cpu']['brand_raw']}"
    assert series["backend"] == f"{machine['python_implementation']} {machine['python_version']}"
    (point,) = series["points"]
    assert point["value"] == bench["stats"]["median"]
    assert point["values"] == bench["stats"]["data"] and len(point["values"]) == bench["stats"]["rounds"] >= 5
    assert point["commit"] == pytest_benchmark_run["sha"] == saved["commit_info"]["id"]
    assert point["time"] == saved["datetime"].replace("+00:00", "Z")


@pytest.mark.slow
def test_a_benchmark_json_file_gives_one_point_per_benchmark_and_twice_is_one_record(
        pytest_benchmark_run: dict[str, Any], tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite"
    data = json.loads(pytest_benchmark_run["json"].read_text())
    args = ["history", "ingest", "--format", "pytest-benchmark", str(pytest_benchmark_run["json"]), "--store", str(store),
            "--project", "tiny"]
    assert main(args) == 0
    with Store.open(store_url(str(store))) as opened:
        found = {s.key.case: s for s in opened.series(suite="pytest-benchmark:tiny")}
        assert sorted(found) == sorted(b["name"] for b in data["benchmarks"]) == [
            "test_grouped", "test_sum[1000]", "test_sum[10]"]
        for bench in data["benchmarks"]:
            assert found[bench["name"]].last_value == bench["stats"]["median"]
            assert found[bench["name"]].key.metric == "latency" and found[bench["name"]].key.kind == "absolute"
        before = sum(s.points for s in found.values())
    assert main(args) == 0
    with Store.open(store_url(str(store))) as opened:
        assert sum(s.points for s in opened.series(suite="pytest-benchmark:tiny")) == before == 3
    assert _documents(store) == 1


@pytest.mark.slow
def test_real_asv_results_are_ingested_with_their_types_params_and_samples(asv_project: dict[str, Any],
                                                                          tmp_path: Path) -> None:
    store = tmp_path / "history.sqlite"
    proc = run_cli("history", "ingest", "--format", "asv", str(asv_project["folder"]), "--store", str(store))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("asv document") == 2 and "(asv:tiny)" in proc.stdout
    with Store.open(store_url(str(store))) as opened:
        found = {s.key.case: s for s in opened.series(suite="asv:tiny")}
        # track_zero returns 0: history series hold positive values only.
        assert sorted(found) == ["bench_tiny.Suite.peakmem_list(10)", "bench_tiny.Suite.peakmem_list(1000)",
                                 "bench_tiny.Suite.time_sum(10)", "bench_tiny.Suite.time_sum(1000)",
                                 "bench_tiny.mem_object", "bench_tiny.time_plain", "bench_tiny.track_widgets"]
        metrics = {case: s.key.metric for case, s in found.items()}
        assert metrics["bench_tiny.Suite.time_sum(10)"] == metrics["bench_tiny.time_plain"] == "latency"
        assert metrics["bench_tiny.Suite.peakmem_list(10)"] == metrics["bench_tiny.mem_object"] == "memory"
        assert metrics["bench_tiny.track_widgets"] == "track:widgets"
        assert {s.key.runner_class for s in found.values()} == {"bench"}
        assert {s.points for s in found.values()} == {2}
        first, second = (json.loads(asv_project["files"][sha].read_text()) for sha in asv_project["shas"])
        columns = second["result_columns"]
        row = dict(zip(columns, second["results"]["bench_tiny.Suite.time_sum"], strict=False))
        points = opened.points(found["bench_tiny.Suite.time_sum(1000)"].id)
        assert [p.commit for p in points] == asv_project["shas"]
        assert points[1].value == row["result"][1]
        assert list(points[1].values) == row["samples"][1] and len(points[1].values) == 3
        assert points[0].values == ()  # --quick records no samples
        assert points[0].value == dict(zip(columns, first["results"]["bench_tiny.Suite.time_sum"],
                                           strict=False))["result"][1]
        widgets = opened.points(found["bench_tiny.track_widgets"].id)
        assert [p.value for p in widgets] == [42.0, 42.0]
    shown = tmp_path / "show.json"
    proc = run_cli("history", "show", "bench_tiny.Suite.time_sum(10)", "--store", str(store), "--json", str(shown))
    assert proc.returncode == 0, proc.stderr
    (series,) = json.loads(shown.read_text())["series"]
    from perfguard.formats.common import time_of_ms

    assert [p["time"] for p in series["points"]] == [time_of_ms(first["date"], "", ""), time_of_ms(second["date"], "", "")]
    proc = run_cli("history", "ingest", "--format", "asv", str(asv_project["folder"] / "results"), "--store", str(store))
    assert proc.returncode == 0 and proc.stdout.count("already stored") == 2, proc.stdout + proc.stderr


# --- bad input ----------------------------------------------------------------------------------


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def _pb_file(median: Any = 1e-3) -> dict[str, Any]:
    return {"machine_info": {"node": "n", "cpu": {"brand_raw": "cpu"}}, "commit_info": {"id": "abc", "project": "p"},
            "datetime": "2026-12-01T10:00:00+00:00", "version": "5.3.1",
            "benchmarks": [{"name": "test_a", "fullname": "t.py::test_a", "stats": {"median": median, "data": [median]}}]}


def _asv_results(version: int = 2) -> dict[str, Any]:
    return {"version": version, "commit_hash": "a" * 40, "env_name": "existing", "date": 1796146105000,
            "params": {"machine": "m"}, "python": "3.11", "requirements": {}, "env_vars": {},
            "result_columns": ["result", "params"], "results": {"b.time_x": [[1e-3], []]}}


@pytest.mark.parametrize(("fmt", "content", "fragments"), [
    ("pytest-benchmark", GOLDEN / "result-run.json", ("result-run.json: not a pytest-benchmark file",)),
    ("pytest-benchmark", "{not json", ("bad.json: not a pytest-benchmark file (not JSON",)),
    ("pytest-benchmark", _pb_file(median=None), ("corrupt pytest-benchmark file: benchmarks[0] (test_a)",
                                                 "'stats.median' is None")),
    ("pytest-benchmark", {**_pb_file(), "datetime": "yesterday"}, ("'datetime': expected an ISO-8601 time",)),
    ("asv", GOLDEN / "result-run.json", ("result-run.json: no benchmarks.json in",)),
    ("perfguard", _pb_file(), ("bad.json: looks like a file of pytest-benchmark", "--format pytest-benchmark")),
    ("perfguard", _asv_results(), ("bad.json: looks like a file of asv", "--format asv")),
])
def test_a_file_of_another_kind_is_one_line_and_stores_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               fmt: str, content: Any, fragments: tuple[str, ...]) -> None:
    good = _write(tmp_path / "good" / "0001_good.json", _pb_file())
    bad = tmp_path / "bad.json"
    if isinstance(content, Path):
        bad = tmp_path / content.name
        shutil.copy(content, bad)
    else:
        _write(bad, content)
    store = tmp_path / "history.sqlite"
    files = [str(good), str(bad)] if fmt == "pytest-benchmark" else [str(bad)]
    code = main(["history", "ingest", "--format", fmt, *files, "--store", str(store)])
    err = capsys.readouterr().err
    _one_line_error(subprocess.CompletedProcess([], code, "", err), *fragments)
    assert _documents(store) == 0  # the good file before the bad one was not stored either


def test_asv_results_are_checked_for_their_version_and_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    _write(results / "benchmarks.json", {"b.time_x": {"name": "b.time_x", "type": "time", "unit": "seconds"},
                                         "version": 2})
    _write(results / "m" / "machine.json", {"machine": "m", "version": 1})
    cases = [
        (_asv_results(version=1), "version 1 is older than this perfguard reads (2); run `asv update`"),
        (_asv_results(version=3), "version 3 is newer than this perfguard reads (2); upgrade perfguard"),
        ({**_asv_results(), "results": {"b.time_x": [[1e-3, 2e-3], []]}},
         "corrupt asv results file: results['b.time_x']: 1 parameter combination(s)"),
        ({k: v for k, v in _asv_results().items() if k != "commit_hash"}, "not an asv results file"),
    ]
    store = tmp_path / "history.sqlite"
    for data, fragment in cases:
        path = _write(results / "m" / "aaaaaaaa-existing.json", data)
        assert main(["history", "ingest", "--format", "asv", str(results), "--store", str(store)]) == 2
        _one_line_error(subprocess.CompletedProcess([], 2, "", capsys.readouterr().err), str(path), fragment)
    assert not store.exists()
    _write(results / "m" / "aaaaaaaa-existing.json", _asv_results())
    assert main(["history", "ingest", "--format", "asv", str(results), "--store", str(store), "--project", "p"]) == 0
    assert "asv document 1 (asv:p), 1 point(s)" in capsys.readouterr().out


def test_a_folder_without_files_of_the_format_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["history", "ingest", "--format", "asv", str(tmp_path / "empty"), "--store",
                 str(tmp_path / "s.sqlite")]) == 2
    _one_line_error(subprocess.CompletedProcess([], 2, "", capsys.readouterr().err), "no asv results files")
    assert main(["history", "ingest", "--format", "pytest-benchmark", str(tmp_path / "empty"), "--store",
                 str(tmp_path / "s.sqlite")]) == 2
    _one_line_error(subprocess.CompletedProcess([], 2, "", capsys.readouterr().err), "no JSON files in this folder")


# --- out ----------------------------------------------------------------------------------------


def test_exported_statistics_are_pytest_benchmarks_own() -> None:
    from pytest_benchmark.stats import Stats

    rng = random.Random(7)
    for n in (1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 40):
        data = [rng.lognormvariate(-7, 0.3) for _ in range(n)] + ([1e-2] if n > 5 else [])
        theirs = Stats()
        for value in data:
            theirs.update(value)
        mine, expected = stats_of(data), theirs.as_dict()
        assert mine.pop("outliers") == expected.pop("outliers"), n
        assert mine == pytest.approx(expected, rel=1e-12), n


def test_the_median_interval_is_the_sign_test_one() -> None:
    assert median_interval([float(v) for v in range(1, 8)]) is None  # 7 values: 2 * 0.5**7 = 1.6 % > 1 %
    assert median_interval([float(v) for v in range(8, 0, -1)]) == (1.0, 8.0)  # 2 * 0.5**8 = 0.78 %
    # n = 20: P(Bin(20, 1/2) <= 3) = 0.13 % <= 0.5 % < P(<= 4) = 0.59 %: the 4th and 17th values.
    assert median_interval([float(v) for v in range(1, 21)]) == (4.0, 17.0)
    assert median_interval([float(v) for v in range(1, 21)], confidence=0.9) == (6.0, 15.0)


def test_an_export_to_pytest_benchmark_reads_back_as_the_results_numbers(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    result = json.loads((GOLDEN / "result-run.json").read_text())
    out = tmp_path / "exported"
    assert main(["export", "pytest-benchmark", str(GOLDEN / "result-run.json"), "--out", str(out)]) == 0
    (path,) = out.glob("0001_smoke_*.json")
    assert f"written to {path}" in capsys.readouterr().out
    store = tmp_path / "history.sqlite"
    assert main(["history", "ingest", "--format", "pytest-benchmark", str(path), "--store", str(store)]) == 0
    with Store.open(store_url(str(store))) as opened:
        found = {s.key.case: s for s in opened.series(suite="pytest-benchmark:smoke")}
        env = result["environment"]["cpu"]
        for case in result["cases"]:
            latency = case["metrics"]["latency_s"]
            series = found[case["id"]]
            assert series.last_value == pytest.approx(latency["median"], rel=1e-12)
            assert series.key.runner_class == f"{env['hostname']}:{env['cpu_model']}"
            (point,) = opened.points(series.id)
            assert list(point.values) == [v for worker in latency["per_worker"] for v in worker]
    assert main(["export", "pytest-benchmark", str(GOLDEN / "result-run.json"), "--out", str(out)]) == 0
    assert sorted(p.name[:5] for p in out.glob("*.json")) == ["0001_", "0002_"]


@pytest.mark.slow
def test_pytest_benchmark_compare_reads_two_exported_results(tmp_path: Path) -> None:
    out = tmp_path / "exported"
    proc = run_cli("export", "pytest-benchmark", str(GOLDEN / "result-run.json"), str(GOLDEN / "verdicts-compare.json"),
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    files = sorted(out.glob("*.json"))
    assert len(files) == 2
    compare = subprocess.run([str(BIN / "pytest-benchmark"), "compare", "--columns=median,rounds", *map(str, files)],
                             capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
                             env={**os.environ, "COLUMNS": "200"})
    assert compare.returncode == 0, compare.stdout + compare.stderr
    assert "Failed to load" not in compare.stdout + compare.stderr
    assert "benchmark 'smoke': 8 tests" in compare.stdout
    result = json.loads((GOLDEN / "result-run.json").read_text())
    for case in result["cases"]:
        rows = [line for line in compare.stdout.splitlines() if line.startswith(case["id"] + " ")]
        assert len(rows) == 2, compare.stdout
        assert f"{case['metrics']['latency_s']['median'] * 1e6:.4f}" in rows[0]


@pytest.mark.slow
def test_asv_publish_renders_exported_results_of_two_commits(tmp_path: Path) -> None:
    repo = tmp_path / "compiler"
    repo.mkdir()
    shas = _git_repo(repo, 2)
    raw = json.loads((GOLDEN / "result-run.json").read_text())
    later = json.loads(json.dumps(raw))
    later["compiler"]["commit"] = shas[1]
    later["finished_at"] = "2026-12-02T12:19:47.839672Z"
    for case in later["cases"]:
        latency = case["metrics"]["latency_s"]
        for key in ("median", "mean", "stdev", "min", "max", "p10", "p25", "p75", "p90", "p99"):
            latency[key] *= 1.25
        latency["per_worker"] = [[v * 1.25 for v in worker] for worker in latency["per_worker"]]
    second = _write(tmp_path / "later.json", later)
    out = tmp_path / "asv"
    proc = run_cli("export", "asv", str(GOLDEN / "result-run.json"), "--out", str(out), "--repo", str(repo),
                   "--commit", shas[0])
    assert proc.returncode == 0, proc.stderr
    assert f"repo {repo}, branch main" in proc.stdout
    proc = run_cli("export", "asv", str(second), "--out", str(out), "--repo", str(repo))  # adds to the folder
    assert proc.returncode == 0, proc.stderr
    results = sorted(p.name for p in (out / "results" / "vm").glob("*.json"))
    assert results == sorted([f"{shas[0][:8]}-perfguard-py3.11.7.json", f"{shas[1][:8]}-perfguard-py3.11.7.json",
                              "machine.json"])
    env = {**os.environ, **GIT_ENV, "HOME": str(tmp_path)}
    publish = subprocess.run([sys.executable, "-m", "asv", "--config", str(out / "asv.conf.json"), "publish"],
                             capture_output=True, text=True, timeout=300, env=env, check=False)
    assert publish.returncode == 0, publish.stdout + publish.stderr
    assert "Couldn't find" not in publish.stdout + publish.stderr  # every commit is on the branch
    assert (out / "html" / "index.html").is_file()
    index = json.loads((out / "html" / "index.json").read_text())
    name = "perfguard.smoke.time_resnet_s_none_cpu"
    assert {name, "perfguard.smoke.peakmem_resnet_s_none_cpu",
            "perfguard.smoke.track_compile_time_resnet_s_none_cpu"} <= set(index["benchmarks"])
    assert index["benchmarks"][name]["unit"] == "seconds"
    assert set(index["revision_to_hash"].values()) == set(shas)
    graph = json.loads((out / "html" / "graphs" / "branch-main" / "machine-vm" / "python-3.11.7" / f"{name}.json")
                       .read_text())
    median = next(c for c in raw["cases"] if c["id"] == "resnet_s/none/cpu")["metrics"]["latency_s"]["median"]
    assert [value for _, value in graph] == pytest.approx([median, median * 1.25], rel=1e-9)
    compare = subprocess.run([sys.executable, "-m", "asv", "--config", str(out / "asv.conf.json"), "compare",
                              shas[0], shas[1], "--machine", "vm"], capture_output=True, text=True, timeout=300,
                             env=env, check=False)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    row = next(line for line in compare.stdout.splitlines() if name in line)
    assert "1.25" in row, compare.stdout


def test_asv_export_needs_a_commit_and_a_git_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "compiler"
    repo.mkdir()
    _git_repo(repo, 1)
    out = tmp_path / "asv"
    assert main(["export", "asv", str(GOLDEN / "result-run.json"), "--out", str(out), "--repo", str(repo)]) == 2
    _one_line_error(subprocess.CompletedProcess([], 2, "", capsys.readouterr().err),
                    "result-run.json: the result records no compiler commit; pass --commit SHA")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert main(["export", "asv", str(GOLDEN / "result-run.json"), "--out", str(out), "--repo", str(plain),
                 "--commit", "a" * 40]) == 2
    _one_line_error(subprocess.CompletedProcess([], 2, "", capsys.readouterr().err), f"{plain} is not a git checkout")
    assert main(["export", "pytest-benchmark", str(GOLDEN / "manifest.json"), "--out", str(out)]) == 2
    _one_line_error(subprocess.CompletedProcess([], 2, "", capsys.readouterr().err), "manifest.json: an artifact manifest")
    assert main(["export", "pytest-benchmark", str(GOLDEN / "result-run.json"), "--out", str(out),
                 "--commit", "abc"]) == 2
    _one_line_error(subprocess.CompletedProcess([], 2, "", capsys.readouterr().err), "does not take --commit (an option of export asv)")
    assert not out.exists()


def test_the_export_help_names_both_formats() -> None:
    proc = run_cli("export", "--help")
    assert proc.returncode == 0
    assert "asv" in proc.stdout and "pytest-benchmark" in proc.stdout and "--out DIR" in proc.stdout
