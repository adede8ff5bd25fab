"""pytest-benchmark's JSON files, in (history series) and out (one file per perfguard result).

The format (pytest-benchmark 3.1 to 5.x: ``plugin.pytest_benchmark_generate_json``; the same for
``--benchmark-json`` files and the runs that ``--benchmark-autosave`` / ``--benchmark-save`` keep
in ``.benchmarks/<machine>/NNNN_<name>.json``)::

    {"machine_info": {"node", "machine", "python_implementation", "python_version", "system",
                      "release", "cpu": {"brand_raw", "count", ...}, ...},
     "commit_info": {"id", "time", "author_time", "dirty", "project", "branch"} or {..., "error"},
     "datetime": ISO 8601 UTC, "version": the plugin's version,
     "benchmarks": [{"group", "name", "fullname", "params", "param", "extra_info", "options",
                     "stats": {"min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1",
                               "q3", "iqr_outliers", "stddev_outliers", "outliers", "ld15iqr",
                               "hd15iqr", "ops", "total", "iterations",
                               "data": per-round times (--benchmark-json, --benchmark-save-data)}}]}

Times are seconds per iteration.

**In**: each benchmark is an absolute ``latency`` series. Suite ``pytest-benchmark:<project>``
(``commit_info.project``; ``--project`` overrides), case the benchmark's ``name`` (with its
parameters: ``test_sum[10]``; the ``fullname`` where two benchmarks of a file share a name),
runner class ``<node>:<cpu brand>``, backend ``<python implementation> <version>``, value the
median, values the per-round ``data`` when the file has them; commit ``commit_info.id``, time
``datetime``. Model and pipeline hashes are empty: pytest-benchmark has neither.

**Out**: one file per result; one benchmark per case that measured latency (group: the suite,
name: the case id), its statistics computed from the per-round values exactly as
pytest-benchmark's ``Stats`` computes them, so ``pytest-benchmark compare`` reads the file as one
of its own runs. perfguard's other numbers go to ``extra_info``.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfguard.errors import StorageError
from perfguard.formats.common import iso_time, json_files, numbers, positive, read_json_file
from perfguard.store.extract import Imported

if TYPE_CHECKING:
    from perfguard.formats.common import ExportSource
    from perfguard.store.extract import Extracted

NAME = "pytest-benchmark"


def read(paths: Sequence[str | Path], *, project: str | None = None) -> list[Imported]:
    """Every file named (a folder: every ``*.json`` under it, e.g. ``.benchmarks``), read and
    validated; the first bad one is a one-line ``StorageError`` naming it."""
    out = []
    for path in json_files(paths):
        data = read_json_file(path, NAME)
        out.append(Imported(path, data, extract(data, str(path), project=project)))
    return out


def _corrupt(source: str, what: str) -> StorageError:
    return StorageError(f"{source}: corrupt pytest-benchmark file: {what}")


def extract(data: Any, source: str, *, project: str | None = None) -> Extracted:
    """The history points of one pytest-benchmark file (see the module docstring)."""
    from perfguard.store.extract import Extracted, PointRow, SeriesKey

    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list) \
            or not isinstance(data.get("machine_info"), dict):
        raise StorageError(f"{source}: not a pytest-benchmark file (expected an object with 'machine_info' and a "
                           "'benchmarks' list, as --benchmark-json and --benchmark-autosave write)")
    machine: Mapping[str, Any] = data["machine_info"]
    commit_info: Mapping[str, Any] = data["commit_info"] if isinstance(data.get("commit_info"), dict) else {}
    time = iso_time(data.get("datetime"), source, "'datetime'")
    name = project or _text(commit_info.get("project")) or "unknown"
    suite = f"{NAME}:{name}"
    commit_id = _text(commit_info.get("id"))
    commit = commit_id if commit_id and commit_id != "unknown" else None
    cpu: Mapping[str, Any] = machine["cpu"] if isinstance(machine.get("cpu"), dict) else {}
    brand = _text(cpu.get("brand_raw")) or _text(cpu.get("brand")) or _text(machine.get("processor"))
    runner_class = ":".join(part for part in (_text(machine.get("node")) or "unknown", brand) if part)
    backend = " ".join(part for part in (_text(machine.get("python_implementation")),
                                         _text(machine.get("python_version"))) if part)
    benches = data["benchmarks"]
    for i, bench in enumerate(benches):
        if not isinstance(bench, dict) or not _text(bench.get("name")) or not isinstance(bench.get("stats"), dict):
            raise _corrupt(source, f"benchmarks[{i}]: expected an object with a 'name' and 'stats'")
        median = bench["stats"].get("median")
        if not isinstance(median, (int, float)) or isinstance(median, bool):
            raise _corrupt(source, f"benchmarks[{i}] ({bench['name']}): 'stats.median' is {median!r}, not a number")
    shared = {n for n, count in Counter(b["name"] for b in benches).items() if count > 1}
    rows = []
    for bench in benches:
        case = bench["name"] if bench["name"] not in shared else (_text(bench.get("fullname")) or bench["name"])
        value = positive(bench["stats"]["median"])
        if value is None:
            continue
        key = SeriesKey(suite, case, "", "", backend, runner_class, "latency", "absolute")
        rows.append(PointRow(key, time, commit, value, numbers(bench["stats"].get("data"))))
    return Extracted(NAME, suite, time, commit, tuple(rows))


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


# --- out --------------------------------------------------------------------------------------


# The untyped JSON objects of this module are pytest-benchmark's (another tool's format).
def stats_of(data: Sequence[float]) -> dict[str, Any]:
    """The ``stats`` of one benchmark from its per-round times, as pytest-benchmark's
    ``stats.Stats`` computes them (quartiles: Wikipedia's method 3 for an odd count, method 2 for
    an even one; outliers beyond mean ± 1 stddev and beyond Q1 - 1.5 IQR / Q3 + 1.5 IQR; ``ops``
    rounds over total). At least one value."""
    if not data:
        raise ValueError("stats_of needs at least one value")
    values = list(data)
    ordered = sorted(values)
    n = len(values)
    mean = statistics.mean(values)
    stddev = statistics.stdev(values) if n > 1 else 0.0
    q1, q3 = _quartiles(ordered)
    iqr = q3 - q1
    low, high = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    stddev_outliers = sum(1 for v in values if v < mean - stddev or v > mean + stddev)
    iqr_outliers = sum(1 for v in values if v < low or v > high)
    total = sum(values)
    return {
        "min": ordered[0], "max": ordered[-1], "mean": mean, "stddev": stddev, "rounds": n,
        "median": statistics.median(values), "iqr": iqr, "q1": q1, "q3": q3, "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers, "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": values[0] if n == 1 else ordered[bisect_left(ordered, low)],
        "hd15iqr": values[0] if n == 1 else ordered[bisect_right(ordered, high) - 1],
        "ops": n / total if total else 0, "total": total,
    }


def _quartiles(data: Sequence[float]) -> tuple[float, float]:
    n = len(data)
    if n == 1:
        return data[0], data[0]
    if n % 2 == 0:
        return statistics.median(data[: n // 2]), statistics.median(data[n // 2:])
    k, r = n // 4, n % 4
    if r == 1:
        return 0.25 * data[k - 1] + 0.75 * data[k], 0.75 * data[3 * k] + 0.25 * data[3 * k + 1]
    return 0.75 * data[k] + 0.25 * data[k + 1], 0.25 * data[3 * k + 1] + 0.75 * data[3 * k + 2]


def to_json(source: ExportSource) -> dict[str, Any]:
    """The pytest-benchmark file of one perfguard result (see the module docstring)."""
    from perfguard import __version__
    from perfguard.store.extract import backend_label

    result = source.result
    env = next(iter(result.environment.values()), {})
    os_text = str(env.get("os") or "")
    machine_info = {
        "node": str(env.get("hostname") or ""), "processor": "", "machine": str(env.get("machine") or ""),
        "python_implementation": "CPython", "python_version": str(env.get("python") or ""),
        "system": os_text.split(" ")[0], "release": os_text.partition(" ")[2],
        "cpu": {"brand_raw": str(env.get("cpu_model") or ""), "count": env.get("logical_cores")},
        "perfguard": {"environment": result.environment},
    }
    commit_info: dict[str, Any] = {"id": source.commit or "unknown", "time": None, "author_time": None,
                                   "dirty": False, "project": result.suite.name,
                                   "branch": result.compiler.label if result.compiler else ""}
    if source.commit is None:
        commit_info["error"] = "the perfguard result records no compiler commit"
    benchmarks = []
    for entry in result.cases:
        latency = entry.metrics.latency_s
        if not entry.ok or latency is None:
            continue
        data = [v for worker in latency.per_worker for v in worker]
        if not data:
            continue
        m, measurement = entry.metrics, entry.measurement
        extra = {"perfguard": {k: v for k, v in {
            "model": entry.model, "pipeline": entry.pipeline, "runner": entry.runner,
            "backend": backend_label(entry.key.backend), "workers": len(latency.per_worker),
            "compile_time_s": m.compile_time_s, "peak_rss_bytes": m.peak_rss_bytes,
            "artifact_size_bytes": m.artifact_size_bytes, "node_count": m.node_count}.items() if v is not None}}
        options = {"disable_gc": False, "timer": "perf_counter", "warmup": measurement.warmup > 0 if measurement else False,
                   "min_rounds": measurement.rounds if measurement else len(data),
                   "min_time": measurement.min_time_s if measurement else 0.0,
                   "max_time": measurement.max_time_s if measurement and measurement.max_time_s else 0.0}
        stats = {**stats_of(data), "iterations": (measurement.loops if measurement and measurement.loops else 1),
                 "data": data}
        benchmarks.append({"group": result.suite.name, "name": entry.id, "fullname": f"{result.suite.name}::{entry.id}",
                           "params": None, "param": None, "extra_info": extra, "options": options, "stats": stats})
    stamp = iso_time(result.finished_at, str(source.path), "finished_at")
    return {"machine_info": machine_info, "commit_info": commit_info, "benchmarks": benchmarks,
            "datetime": stamp[:-1] + "+00:00", "version": f"perfguard {__version__}"}


def export(sources: Sequence[ExportSource], out: Path) -> list[Path]:
    """Write one file per result into ``out`` as pytest-benchmark names its saved runs
    (``NNNN_<suite>_<commit>.json``, numbered after the files already there); the paths written."""
    from perfguard.atomic import write_json_atomic
    from perfguard.formats.common import identifier

    documents = [to_json(s) for s in sources]  # everything computed before the first write
    taken = [int(p.name[:4]) for p in out.glob("[0-9][0-9][0-9][0-9]_*.json")] if out.is_dir() else []
    number = max(taken, default=0)
    written = []
    for source, document in zip(sources, documents, strict=True):
        number += 1
        label = (source.commit or source.path.stem)[:12]
        path = out / f"{number:04d}_{identifier(source.result.suite.name)}_{identifier(label)}.json"
        write_json_atomic(path, document)
        written.append(path)
    return written
