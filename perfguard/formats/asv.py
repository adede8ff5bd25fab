"""asv (airspeed velocity) results, in (history series) and out (a results folder ``asv publish`` reads).

The format (asv 0.5 and 0.6: ``asv/results.py`` ``api_version`` 2, ``benchmarks.py``, ``machine.py``)::

    asv.conf.json                      {"project", "repo", "branches", "results_dir", "html_dir", ...}
    results/benchmarks.json            {NAME: {"name", "type" (time|memory|peakmemory|track), "unit",
                                               "params", "param_names", "version", ...}, "version": 2}
    results/MACHINE/machine.json       {"machine", "arch", "cpu", "num_cpu", "os", "ram", "version": 1}
    results/MACHINE/HASH8-ENV.json     {"version": 2, "commit_hash", "env_name", "date" (ms, UTC),
                                        "params" {"machine", "python", ...}, "python", "requirements",
                                        "env_vars", "result_columns", "results" {NAME: [row]}, "durations"}

A row holds one value per ``result_columns`` entry (``result``, ``params``, ``version``,
``started_at``, ``duration``, ``stats_ci_99_a``, ``stats_ci_99_b``, ``stats_q_25``, ``stats_q_75``,
``stats_number``, ``stats_repeat``, ``samples``, ``profile``), trailing nulls dropped. ``result``
and each ``stats_*`` and ``samples`` are lists with one entry per parameter combination, in the
order of ``itertools.product(*params)``; a null result failed, a NaN one was skipped. asv writes
``Infinity`` for an interval it cannot compute (Python's JSON reader accepts it).

**In**: each benchmark and parameter combination is an absolute series. Suite ``asv:<project>``
(``asv.conf.json``'s project beside the results folder, else that folder's name; ``--project``
overrides), case the benchmark's name with its parameter values as asv prints them
(``bench.Suite.time_sum(10)``), runner class the machine name, backend the environment name;
metric ``latency`` for ``time`` benchmarks (seconds), ``memory`` for ``memory`` and
``peakmemory`` ones (bytes), ``track:<unit>`` for ``track`` ones; value asv's result (the median
of its samples), values the ``samples`` column when recorded (``asv run --record-samples``);
commit ``commit_hash``, time ``date``. The type and unit come from ``benchmarks.json``, which a
results file needs beside its machine folder; results of benchmarks it no longer lists are
skipped, as ``asv publish`` skips them. Values that are not finite and above zero (failed,
skipped, a track of 0) give no point: history series hold positive values.

**Out**: an asv project folder: ``asv.conf.json`` (its ``repo``: the compiler's git checkout, which
``asv publish`` needs to order the commits), ``results/benchmarks.json``, and per machine
(``--machine``, else the runner's host name) ``machine.json`` and one results file per commit.
Each case that ran gives ``perfguard.<suite>.time_<case>`` (latency median in seconds, every
per-round value as samples, the interquartile range, a distribution-free 99 % interval of the
median when there are enough values), ``perfguard.<suite>.peakmem_<case>`` (peak RSS, bytes) and
``perfguard.<suite>.track_compile_time_<case>`` (seconds). Exporting into a folder that holds an
earlier export adds to it: benchmarks and results of other commits stay.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfguard.errors import StorageError, UserError
from perfguard.formats.common import (
    identifier,
    json_files,
    ms_of_time,
    numbers,
    positive,
    read_json_file,
    time_of_ms,
)
from perfguard.store.extract import Imported

if TYPE_CHECKING:
    from perfguard.formats.common import ExportSource
    from perfguard.results.result import CaseEntry
    from perfguard.store.extract import Extracted

NAME = "asv"
#: asv's format versions: results files (``Results.api_version``), ``benchmarks.json``, ``machine.json``.
RESULTS_VERSION = 2
BENCHMARKS_VERSION = 2
MACHINE_VERSION = 1
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
           "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
_NOT_RESULTS = ("machine.json", "benchmarks.json")


# --- in ---------------------------------------------------------------------------------------


def read(paths: Sequence[str | Path], *, project: str | None = None) -> list[Imported]:
    """Every results file named (a folder: the asv project or its ``results`` folder or one
    machine's folder, each results file under it), read and validated with its folder's
    ``benchmarks.json``; the first bad one is a one-line ``StorageError`` naming it."""
    benchmarks: dict[Path, Mapping[str, Any]] = {}
    out = []
    for path in json_files(paths, expand=_results_files):
        results_dir = path.resolve().parent.parent
        if results_dir not in benchmarks:
            benchmarks[results_dir] = _benchmarks(results_dir, path)
        data = read_json_file(path, "asv results")
        name = project or _project(results_dir)
        out.append(Imported(path, data, extract(data, str(path), benchmarks[results_dir], project=name)))
    return out


def _results_files(folder: Path) -> list[Path]:
    """The results files under an asv project, results or machine folder: the JSON files of
    folders holding a ``machine.json``."""
    conf = folder / "asv.conf.json"
    if conf.is_file():
        settings = _lenient_json(conf)
        folder = folder / str(settings.get("results_dir") or "results") if settings else folder / "results"
    found = []
    for machine in sorted([folder, *(p.parent for p in folder.rglob("machine.json"))]):
        if (machine / "machine.json").is_file():
            found += sorted(p for p in machine.glob("*.json") if p.name not in _NOT_RESULTS and p.is_file())
    if not found:
        raise StorageError(f"{folder}: no asv results files (results/<machine>/<commit>-<env>.json beside a "
                           "machine.json)")
    return sorted(set(found))


# The untyped JSON objects of this module are asv's (another tool's format), read and written as asv has them.
def _lenient_json(path: Path) -> dict[str, Any]:
    """``asv.conf.json`` may hold ``//`` comments (``asv quickstart`` writes them); {} when unreadable."""
    from perfguard.results.documents import parse_json

    try:
        text = path.read_text(encoding="utf-8")
        data = parse_json(re.sub(r"(?m)^\s*//.*$", "", text), path, finite=False)
    except (OSError, UnicodeDecodeError, ValueError, StorageError):  # deep or huge: as unreadable
        return {}
    return data if isinstance(data, dict) else {}


def _project(results_dir: Path) -> str:
    project = _lenient_json(results_dir.parent / "asv.conf.json").get("project")
    return project if isinstance(project, str) and project else results_dir.parent.name or "unknown"


def _benchmarks(results_dir: Path, for_file: Path) -> Mapping[str, Any]:
    path = results_dir / "benchmarks.json"
    if not path.is_file():
        raise StorageError(f"{for_file}: no benchmarks.json in {results_dir} (asv writes results/benchmarks.json "
                           "beside the machine folders; ingest a results file where asv left it)")
    data = read_json_file(path, "asv benchmarks.json")
    _check_version(data, str(path), "benchmarks.json", BENCHMARKS_VERSION, "asv run")
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def _check_version(data: Any, source: str, what: str, version: int, update: str) -> None:
    found = data.get("version") if isinstance(data, dict) else None
    if not isinstance(found, int):
        raise StorageError(f"{source}: not an asv {what} (no integer 'version')")
    if found > version:
        raise StorageError(f"{source}: asv {what} version {found} is newer than this perfguard reads ({version}); "
                           "upgrade perfguard")
    if found < version:
        raise StorageError(f"{source}: asv {what} version {found} is older than this perfguard reads ({version}); "
                           f"run `{update}` with a current asv first")


def _corrupt(source: str, what: str) -> StorageError:
    return StorageError(f"{source}: corrupt asv results file: {what}")


def metric_of(meta: Mapping[str, Any]) -> str | None:
    """The history metric of an asv benchmark's type and unit (None: a type perfguard does not take)."""
    kind, unit = meta.get("type"), meta.get("unit")
    if kind == "time":
        return "latency"
    if kind in ("memory", "peakmemory"):
        return "memory"
    if kind == "track":
        return f"track:{unit if isinstance(unit, str) and unit else 'unit'}"
    return None


def extract(data: Any, source: str, benchmarks: Mapping[str, Any], *, project: str) -> Extracted:
    """The history points of one asv results file, with the ``benchmarks.json`` entries that
    describe its benchmarks (see the module docstring)."""
    from perfguard.store.extract import Extracted, PointRow, SeriesKey

    if not isinstance(data, dict) or not {"result_columns", "results", "commit_hash"} <= data.keys():
        raise StorageError(f"{source}: not an asv results file (expected 'commit_hash', 'result_columns' and "
                           "'results', as asv run writes to results/<machine>/<commit>-<env>.json)")
    _check_version(data, source, "results file", RESULTS_VERSION, "asv update")
    commit, columns, results = data["commit_hash"], data["result_columns"], data["results"]
    if not isinstance(commit, str) or not commit:
        raise _corrupt(source, f"'commit_hash' is {commit!r}, not a commit")
    if not isinstance(columns, list) or "result" not in columns or not isinstance(results, dict):
        raise _corrupt(source, "'result_columns' must list 'result' and 'results' must be an object")
    params = data.get("params")
    machine = params.get("machine") if isinstance(params, dict) else None
    if not isinstance(machine, str) or not machine:
        raise _corrupt(source, "no 'params.machine' (the machine the results were measured on)")
    time = time_of_ms(data.get("date"), source, "'date'")
    env = data.get("env_name")
    backend = env if isinstance(env, str) else ""
    suite = f"{NAME}:{project}"
    rows = []
    for name, row in sorted(results.items()):
        meta = benchmarks.get(name)
        metric = metric_of(meta) if meta is not None else None
        if metric is None:
            continue
        if not isinstance(row, list):
            raise _corrupt(source, f"results[{name!r}] is not a list")
        cells = dict(zip(columns, row, strict=False))
        values = cells.get("result")
        if values is None:
            continue  # the benchmark failed
        combos = _combinations(cells.get("params"), source, name)
        if not isinstance(values, list) or len(values) != len(combos):
            raise _corrupt(source, f"results[{name!r}]: {len(combos)} parameter combination(s) but result "
                                   f"{values!r}")
        samples = cells.get("samples")
        for i, combo in enumerate(combos):
            value = positive(values[i])
            if value is None:
                continue
            case = f"{name}({', '.join(combo)})" if combo else name
            per_run = numbers(samples[i]) if isinstance(samples, list) and i < len(samples) else ()
            key = SeriesKey(suite, case, "", "", backend, machine, metric, "absolute")
            rows.append(PointRow(key, time, commit, value, per_run))
    return Extracted(NAME, suite, time, commit, tuple(rows))


def _combinations(params: Any, source: str, name: str) -> list[tuple[str, ...]]:
    if params is None or params == []:
        return [()]
    if not isinstance(params, list) or not all(isinstance(p, list) for p in params):
        raise _corrupt(source, f"results[{name!r}]: 'params' must be a list of lists")
    return [tuple(str(v) for v in combo) for combo in itertools.product(*params)]


# --- out --------------------------------------------------------------------------------------


def median_interval(values: Sequence[float], confidence: float = 0.99) -> tuple[float, float] | None:
    """A distribution-free ``confidence`` interval of the median: the order statistics
    ``x(k)``, ``x(n+1-k)`` with the largest ``k`` such that P(Binomial(n, 1/2) < k) <= (1 -
    confidence) / 2 (the sign-test interval; it assumes independent values, nothing about their
    distribution). None when there are too few values (fewer than 8 at 99 %): asv then gives the
    result no weight, as for its own intervals it cannot compute."""
    n = len(values)
    tail = (1.0 - confidence) / 2.0
    k, below = 0, 0.0
    for j in range(n):
        below += math.comb(n, j) / 2.0 ** n
        if below > tail:
            break
        k = j + 1
    if k == 0 or k > n - k + 1:
        return None
    ordered = sorted(values)
    return ordered[k - 1], ordered[n - k]


@dataclass
class _Machine:
    info: dict[str, Any]
    files: dict[tuple[str, str], dict[str, Any]]  # (commit, env name) -> results file


def export(sources: Sequence[ExportSource], out: Path, *, repo: str, branch: str, machine: str | None = None,
           commit: str | None = None) -> list[Path]:
    """Write the results as the asv project folder ``out`` (see the module docstring; its project:
    the first result's suite): ``commit`` for results that record none, ``machine`` instead of each
    runner's host name. Every file is computed before the first is written. Returns the paths
    written."""
    import json

    from perfguard.atomic import write_atomic
    from perfguard.names import safe_filename

    benchmarks: dict[str, Any] = {}
    owners: dict[str, tuple[str, str]] = {}  # asv name -> (suite, case id): two cases must not share one
    machines: dict[str, _Machine] = {}
    for source in sources:
        sha = source.commit or commit
        if not sha:
            raise UserError(f"{source.path}: the result records no compiler commit; pass --commit SHA (asv places "
                            "every result at a commit of the repository)")
        result = source.result
        for entry in result.cases:
            if not entry.ok:
                continue
            env = result.environment.get(entry.runner) or {}
            host = machine or str(env.get("hostname") or "") or "perfguard"
            name = safe_filename(host)  # a folder of results/: a host name from a document may be ".."
            python = str(env.get("python") or "")
            env_name = f"perfguard-py{python}" if python else "perfguard"
            held = machines.setdefault(name, _Machine(_machine_json(name, env), {}))
            document = held.files.setdefault((sha, env_name), _results_json(sha, env_name, name, python,
                                                                           result.finished_at))
            for bench, meta, row in _rows(result.suite.name, entry):
                owner = owners.setdefault(bench, (result.suite.name, entry.id))
                if owner != (result.suite.name, entry.id):
                    raise UserError(f"{source.path}: cases {owner[1]!r} and {entry.id!r} would both be the asv "
                                    f"benchmark {bench}")
                benchmarks[bench] = meta
                document["results"][bench] = row
    if not machines:
        raise UserError("export asv: no case of these results ran; nothing to export")
    results_dir = out / "results"
    writes: list[tuple[Path, Any]] = []
    known = _existing(results_dir / "benchmarks.json", BENCHMARKS_VERSION)
    writes.append((results_dir / "benchmarks.json", {**known, **benchmarks, "version": BENCHMARKS_VERSION}))
    for name, held in sorted(machines.items()):
        writes.append((results_dir / name / "machine.json", held.info))
        for (sha, env_name), document in sorted(held.files.items()):
            path = results_dir / name / f"{safe_filename(f'{sha[:8]}-{env_name}')}.json"  # both from documents
            before = _existing(path, RESULTS_VERSION)
            if before.get("result_columns") == COLUMNS and isinstance(before.get("results"), dict):
                document = {**document, "results": {**before["results"], **document["results"]}}
            writes.append((path, document))
    conf = {"version": 1, "project": sources[0].result.suite.name, "repo": repo, "branches": [branch],
            "dvcs": "git", "environment_type": "existing", "benchmark_dir": "benchmarks",
            "results_dir": "results", "html_dir": "html"}
    writes.append((out / "asv.conf.json", conf))
    for path, document in writes:
        # As asv writes its files: NaN and Infinity allowed (a skipped benchmark, an interval asv
        # could not compute), which an earlier results file merged into this one may hold.
        write_atomic(path, json.dumps(document, sort_keys=True, indent=1) + "\n")
    return [path for path, _ in writes]


def _existing(path: Path, version: int) -> dict[str, Any]:
    """An earlier export's file at ``path`` ({} when there is none); a file asv cannot read is refused."""
    if not path.exists():
        return {}
    data = read_json_file(path, "asv")
    _check_version(data, str(path), path.name, version, "asv update")
    return dict(data)


def _machine_json(name: str, env: Mapping[str, Any]) -> dict[str, Any]:
    return {"machine": name, "arch": str(env.get("machine") or ""), "cpu": str(env.get("cpu_model") or ""),
            "num_cpu": str(env.get("logical_cores") or ""), "os": str(env.get("os") or ""), "ram": "",
            "version": MACHINE_VERSION}


def _results_json(sha: str, env_name: str, machine: str, python: str, finished_at: str) -> dict[str, Any]:
    return {"commit_hash": sha, "env_name": env_name, "date": ms_of_time(finished_at),
            "params": {"machine": machine, "python": python}, "python": python, "requirements": {}, "env_vars": {},
            "result_columns": COLUMNS, "results": {}, "durations": {}, "version": RESULTS_VERSION}


def _rows(suite: str, entry: CaseEntry) -> list[tuple[str, dict[str, Any], list[Any]]]:
    """The asv benchmarks of one case: (name, benchmarks.json entry, results row)."""
    from perfguard.store.extract import backend_label

    prefix = f"perfguard.{identifier(suite)}"
    case = identifier(entry.id)
    m = entry.metrics
    started = ms_of_time(entry.started_at)
    duration = (ms_of_time(entry.finished_at) - started) / 1000.0 if entry.finished_at else None
    code = (f"perfguard case {entry.id} of suite {suite}: model {entry.model}, pipeline {entry.pipeline}, "
            f"runner {entry.runner}, backend {backend_label(entry.key.backend)}")
    out = []

    def add(name: str, kind: str, unit: str, value: float, samples: Sequence[float], stats: Mapping[str, Any]) -> None:
        version = hashlib.sha256(name.encode()).hexdigest()
        meta = {"code": code, "name": name, "param_names": [], "params": [], "timeout": 60.0, "type": kind,
                "unit": unit, "version": version}
        if kind == "time":
            meta.update({"number": 0, "repeat": 0, "rounds": 1, "min_run_count": 2, "sample_time": 0.01,
                         "warmup_time": -1})
        cells = {"result": [value], "params": [], "version": version, "started_at": started, "duration": duration,
                 **{f"stats_{k}": [v] for k, v in stats.items() if v is not None},
                 "samples": [list(samples)] if samples else None}
        row = [cells.get(column) for column in COLUMNS]
        while row and row[-1] is None:
            row.pop()
        out.append((name, meta, row))

    latency = m.latency_s
    if latency is not None and math.isfinite(latency.median) and latency.median > 0:
        samples = [v for worker in latency.per_worker for v in worker]
        interval = median_interval(samples)
        q25 = latency.p25 if latency.p25 is not None else (
            statistics.quantiles(samples, n=4)[0] if len(samples) > 1 else latency.median)
        q75 = latency.p75 if latency.p75 is not None else (
            statistics.quantiles(samples, n=4)[2] if len(samples) > 1 else latency.median)
        loops = entry.measurement.loops if entry.measurement and entry.measurement.loops else 1
        add(f"{prefix}.time_{case}", "time", "seconds", latency.median, samples,
            {"ci_99_a": interval[0] if interval else None, "ci_99_b": interval[1] if interval else None,
             "q_25": q25, "q_75": q75, "number": loops, "repeat": len(samples)})
    if m.peak_rss_bytes is not None and m.peak_rss_bytes > 0:
        add(f"{prefix}.peakmem_{case}", "peakmemory", "bytes", float(m.peak_rss_bytes),
            [float(v) for v in m.peak_rss_bytes_probes or ()], {})
    compile_times = list(m.compile_times_s or ([m.compile_time_s] if m.compile_time_s is not None else []))
    if compile_times and statistics.median(compile_times) > 0:
        add(f"{prefix}.track_compile_time_{case}", "track", "seconds", statistics.median(compile_times),
            compile_times, {})
    return out
