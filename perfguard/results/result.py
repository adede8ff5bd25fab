"""The result document, typed: one ``ResultDocument`` per run, one ``CaseEntry`` per case.

The file is versioned JSON validated by a shipped JSON Schema (``perfguard/schemas``). This module
owns the format: its version and history, the frozen dataclasses that hold it in memory, their
``to_json``/``from_json``, and the one loader. Every stage after compile passes these objects, not
dicts; free-form parts whose keys are not perfguard's (a runner's fingerprint, a model's source
parameters, a backend's settings, device telemetry) are ``JsonDict``, their values checked as JSON
by ``jsonfields.json_obj`` when read.

Format history (``RESULT_VERSION``):

1. First format: suite, environment per runner, and per case its full key (model hash, pipeline
   name + ordered passes + hash, backend and settings, runner fingerprint hash), pass trace,
   correctness check, raw latency values per worker process, and summary metrics.
2. A case may be left unmeasured: ``not_measured`` says why (its artifact is identical to the one
   it is compared with), and its latency and memory metrics are absent; ``artifact`` carries the
   ``execution_identity`` that decided it. A version-1 file is a valid version-2 file.
   Later addition, optional (absent when the run was not sharded; older readers ignore it):
   ``shard`` (``run --shard K/N``: which part of which whole, ``perfguard.results.shard.ShardInfo``).
   Later addition, optional (absent without ``--artifact-cache``): ``artifact_cache``
   (``CacheUse``: the compiles served from the cache and those done).
   Later addition, optional (absent without ``--counts``): ``metrics.counts`` (callgrind's counts
   per inference, ``perfguard.results.counts.Counts``) and ``metrics.compile_instructions``, and
   per pass record ``instructions``. Optional like the others, so no version bump: a reader
   before them ignores them, a version-2 file without them reads as "not counted".
   Later addition, optional: ``metrics.counts.functions`` (the counted window's largest
   functions, at most 20, ``perfguard.results.counted_functions.FunctionCount``); a count
   without it reads with none ("why, counted" is then not shown).

Readers refuse a newer version ("upgrade perfguard") and migrate older ones step by step
(``_MIGRATIONS[n]`` turns version n into n + 1). ``to_json(from_json(d)) == d`` for every valid
document of the current version, and a version-1 file (``tests/golden/v1``) is written back
unchanged but for its version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from perfguard import jsonfields as f
from perfguard.backends import TraceExtension, trace_extensions
from perfguard.backends.base import Artifact, DatabaseUse, PassRecord
from perfguard.errors import FieldError
from perfguard.jsonfields import JsonDict, json_value
from perfguard.models.inputs import InputSpec
from perfguard.results.counts import COUNTED_FIGURES, Counts
from perfguard.results.documents import current_format, read_json, typed_document
from perfguard.results.shard import ShardInfo
from perfguard.runners.telemetry import DeviceState

RESULT_VERSION = 2
_MIGRATIONS: dict[int, Callable[[JsonDict], JsonDict]] = {1: lambda data: {**data, "version": 2}}

Status = Literal["ok", "failed"]


@dataclass(frozen=True)
class Latency:
    """Latency in seconds: every value per worker process, and their summary."""

    per_worker: tuple[tuple[float, ...], ...]
    n: int
    median: float
    mean: float
    stdev: float
    cv: float
    min: float
    max: float
    p90: float
    p99: float
    p10: float | None = None
    p25: float | None = None
    p75: float | None = None

    @classmethod
    def from_values(cls, per_worker: Sequence[Sequence[float]]) -> Latency:
        """Median, mean, spread and percentiles of every value (at least one value)."""
        data = np.asarray([v for worker in per_worker for v in worker], dtype=float)
        if data.size == 0:
            raise ValueError("a latency summary needs at least one value")
        p10, p25, median, p75, p90, p99 = (float(p) for p in np.percentile(data, [10, 25, 50, 75, 90, 99]))
        mean = float(data.mean())
        stdev = float(data.std(ddof=1)) if data.size > 1 else 0.0
        return cls(tuple(tuple(float(v) for v in w) for w in per_worker), int(data.size), median, mean, stdev,
                   stdev / mean if mean > 0 else 0.0, float(data.min()), float(data.max()), p90, p99, p10, p25, p75)

    def to_json(self) -> JsonDict:
        summary = {"n": self.n, "median": self.median, "mean": self.mean, "stdev": self.stdev, "cv": self.cv,
                   "min": self.min, "max": self.max, "p10": self.p10, "p25": self.p25, "p75": self.p75,
                   "p90": self.p90, "p99": self.p99}
        return {**f.drop_none(summary), "per_worker": [list(w) for w in self.per_worker]}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Latency:
        kind = "latency"
        workers = f.array(data, "per_worker", kind)
        # Every sample is a duration above zero: a NaN, negative or absurd one would be compared
        # (or shown as "ok") as if it were measured. The summary may be 0 (``cv`` of one value).
        per_worker = tuple(f.seconds_list({f"per_worker[{i}]": w}, f"per_worker[{i}]", kind, positive=True)
                           for i, w in enumerate(workers))
        median, mean, stdev = (f.seconds(data, k, kind) for k in ("median", "mean", "stdev"))
        return cls(per_worker, f.count(data, "n", kind), median, mean, stdev, f.finite(data, "cv", kind),
                   *(f.seconds(data, k, kind) for k in ("min", "max", "p90", "p99")),
                   *(f.opt_seconds(data, k, kind) for k in ("p10", "p25", "p75")))


@dataclass(frozen=True)
class Metrics:
    """What was measured of one case; ``None`` where it was not (yet) measured.

    Filled by stage: compile (``compile_time_s``, ``compile_times_s``, ``artifact_size_bytes``,
    ``node_count``), memory probes (``peak_rss_bytes``...), measurement (``latency_s``...)."""

    compile_time_s: float | None = None
    compile_times_s: tuple[float, ...] | None = None
    artifact_size_bytes: int | None = None
    # Present (possibly null: the backend cannot count) whenever the case compiled.
    node_count: int | None = None
    peak_rss_bytes: int | None = None
    peak_rss_bytes_probes: tuple[int, ...] | None = None
    latency_s: Latency | None = None
    throughput_per_s: float | None = None
    session_rss_bytes: int | None = None
    session_rss_bytes_per_worker: tuple[int, ...] | None = None
    worker_peak_rss_bytes: int | None = None
    # Counted evidence (``--counts``): callgrind's counts per inference, and of the compile.
    counts: Counts | None = None
    compile_instructions: int | None = None

    @property
    def compiled(self) -> bool:
        return self.compile_time_s is not None

    def value(self, key: str) -> float | None:
        """A deterministic metric by its document key (``artifact_size_bytes``, ``node_count``,
        ``peak_rss_bytes``, ``compile_instructions``) or a counted one (``instructions``,
        ``estimated_cycles``), or None."""
        if key in COUNTED_FIGURES:
            return None if self.counts is None else self.counts.value(key)
        value = getattr(self, key)
        return None if value is None else float(value)

    def to_json(self) -> JsonDict:
        out = f.drop_none({
            "compile_time_s": self.compile_time_s,
            "compile_times_s": None if self.compile_times_s is None else list(self.compile_times_s),
            "artifact_size_bytes": self.artifact_size_bytes, "node_count": self.node_count,
            "peak_rss_bytes": self.peak_rss_bytes,
            "peak_rss_bytes_probes": None if self.peak_rss_bytes_probes is None else list(self.peak_rss_bytes_probes),
            "latency_s": None if self.latency_s is None else self.latency_s.to_json(),
            "throughput_per_s": self.throughput_per_s, "session_rss_bytes": self.session_rss_bytes,
            "session_rss_bytes_per_worker": (None if self.session_rss_bytes_per_worker is None
                                             else list(self.session_rss_bytes_per_worker)),
            "worker_peak_rss_bytes": self.worker_peak_rss_bytes,
            "counts": None if self.counts is None else self.counts.to_json(),
            "compile_instructions": self.compile_instructions,
        })
        if self.compiled:
            out["node_count"] = self.node_count
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Metrics:
        kind = "metrics"

        def counts(key: str) -> tuple[int, ...] | None:
            return None if data.get(key) is None else f.count_list(data, key, kind)

        latency = data.get("latency_s")
        throughput = f.opt_finite(data, "throughput_per_s", kind)
        if throughput is not None and throughput < 0:
            raise f.wrong_type(kind, "throughput_per_s", "0 or more", throughput)
        return cls(
            compile_time_s=f.opt_seconds(data, "compile_time_s", kind),
            compile_times_s=None if data.get("compile_times_s") is None else f.seconds_list(data, "compile_times_s", kind),
            artifact_size_bytes=f.opt_count(data, "artifact_size_bytes", kind),
            node_count=f.opt_count(data, "node_count", kind),
            peak_rss_bytes=f.opt_count(data, "peak_rss_bytes", kind),
            peak_rss_bytes_probes=counts("peak_rss_bytes_probes"),
            latency_s=None if latency is None else Latency.from_json(f.obj(data, "latency_s", kind)),
            throughput_per_s=throughput,
            session_rss_bytes=f.opt_count(data, "session_rss_bytes", kind),
            session_rss_bytes_per_worker=counts("session_rss_bytes_per_worker"),
            worker_peak_rss_bytes=f.opt_count(data, "worker_peak_rss_bytes", kind),
            counts=None if data.get("counts") is None else Counts.from_json(f.obj(data, "counts", kind)),
            compile_instructions=f.opt_count(data, "compile_instructions", kind),
        )


@dataclass(frozen=True)
class Measurement:
    """How the latency values were taken: the group measured together, workers, loops, failures,
    device telemetry and the judgement of the device state (``perfguard.runners.telemetry``)."""

    group: str
    workers_requested: int
    workers_ok: int
    worker_ids: tuple[int, ...]
    loops: int | None
    warmup: int
    rounds: int
    min_time_s: float
    threads: int
    failures: tuple[str, ...] = ()
    # Why this variant stopped being measured (it crashed or hung its worker), or None.
    dropped: str | None = None
    telemetry: JsonDict | None = None
    device_state: DeviceState | None = None
    # The early stop of a worker's rounds (``[measure] min_rounds``/``max_time``); None in
    # results written before it: every worker timed ``rounds``.
    min_rounds: int | None = None
    max_time_s: float | None = None

    @property
    def telemetry_summary(self) -> JsonDict | None:
        summary = (self.telemetry or {}).get("summary")
        return summary if isinstance(summary, dict) else None

    def to_json(self) -> JsonDict:
        out: JsonDict = {
            "group": self.group, "workers_requested": self.workers_requested, "workers_ok": self.workers_ok,
            "worker_ids": list(self.worker_ids), "loops": self.loops, "warmup": self.warmup, "rounds": self.rounds,
            "min_time_s": self.min_time_s, "threads": self.threads, "failures": list(self.failures),
            "dropped": self.dropped, "telemetry": self.telemetry,
        }
        if self.device_state is not None:
            out["device_state"] = self.device_state.to_json()
        if self.min_rounds is not None:
            out["min_rounds"], out["max_time_s"] = self.min_rounds, self.max_time_s
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Measurement:
        kind = "measurement"
        return cls(f.string(data, "group", kind), f.count(data, "workers_requested", kind),
                   f.count(data, "workers_ok", kind), f.count_list(data, "worker_ids", kind),
                   f.opt_count(data, "loops", kind), f.count(data, "warmup", kind), f.count(data, "rounds", kind),
                   f.seconds(data, "min_time_s", kind), f.count(data, "threads", kind),
                   f.string_list(data, "failures", kind) if "failures" in data else (),
                   f.opt_string(data, "dropped", kind), f.opt_json_obj(data, "telemetry", kind),
                   None if data.get("device_state") is None else DeviceState.from_json(f.obj(data, "device_state", kind)),
                   f.opt_count(data, "min_rounds", kind), f.opt_seconds(data, "max_time_s", kind))


def _nodes(data: Mapping[str, object], key: str, kind: str) -> int:
    """A pass record's node count: -1 where it is unknown (the first IREE dump of a scope, whose
    input does not print; ``ir_trace.ir_records``), else a count."""
    value = f.integer(data, key, kind)
    if value < -1:
        raise f.wrong_type(kind, key, "a count of nodes (-1: unknown)", value)
    return value


def _pass_record(data: Mapping[str, object]) -> PassRecord:
    kind = "pass record"
    return PassRecord(f.count(data, "index", kind), f.string(data, "name", kind), f.string(data, "source", kind),
                      f.seconds(data, "time_s", kind), _nodes(data, "nodes_before", kind),
                      _nodes(data, "nodes_after", kind), f.int_map(data, "op_histogram", kind),
                      f.string(data, "ir_hash", kind), f.boolean(data, "changed", kind),
                      f.opt_count(data, "instructions", kind))


@dataclass(frozen=True)
class Trace:
    """The pass trace of one compile: one record per pass, in pipeline order.

    ``mode``, ``pass_times`` and ``cache_hit`` are IREE's (``perfguard.backends.iree.ir_trace``),
    ``database_use`` a tuned pipeline's (TVM's); ``extension`` holds the typed fields a backend
    declares for its trace (``perfguard.backends.TraceExtension``, e.g. TVM's stages: written as
    keys of the trace, as that backend's trace has them); ``extra`` keeps any other key a
    third-party backend's trace adds, so it is written back."""

    passes: tuple[PassRecord, ...] = ()
    input_hash: str = ""
    final_hash: str = ""
    total_time_s: float = 0.0
    exact: bool = True
    note: str = ""
    mode: str | None = None
    pass_times: tuple[JsonDict, ...] | None = None
    cache_hit: bool | None = None
    extra: JsonDict = field(default_factory=dict)
    database_use: DatabaseUse | None = None  # a TVM pipeline that applies a tuning database
    extension: TraceExtension | None = None

    def after_prefix(self, prefix: Trace, shift: int) -> Trace:
        """This trace (stage 2 of a hybrid compile, its passes renumbered from ``shift``) behind the
        records of the ``prefix`` compile (stage 1)."""
        return replace(self, passes=prefix.passes + tuple(replace(p, index=p.index + shift) for p in self.passes),
                       input_hash=prefix.input_hash, total_time_s=self.total_time_s + prefix.total_time_s)

    def to_json(self) -> JsonDict:
        out: JsonDict = {"passes": [_pass_json(p) for p in self.passes], "input_hash": self.input_hash,
                           "final_hash": self.final_hash, "total_time_s": self.total_time_s, "exact": self.exact,
                           "note": self.note}
        return {**self.extra, **out, **({} if self.extension is None else self.extension.to_json()),
                **f.drop_none({"mode": self.mode, "cache_hit": self.cache_hit,
                               "pass_times": None if self.pass_times is None else list(self.pass_times),
                               "database_use": None if self.database_use is None
                               else self.database_use.to_json()})}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Trace:
        kind = "trace"
        pass_times = data.get("pass_times")
        known = _COMMON_TRACE_KEYS.union(*(extension.KEYS for extension in trace_extensions()))
        return cls(tuple(_pass_record(p) for p in f.objects(data, "passes", kind)), f.string(data, "input_hash", kind),
                   f.string(data, "final_hash", kind), f.seconds(data, "total_time_s", kind),
                   f.boolean(data, "exact", kind), f.string(data, "note", kind), f.opt_string(data, "mode", kind),
                   None if pass_times is None else f.json_objects(data, "pass_times", kind),
                   None if data.get("cache_hit") is None else f.boolean(data, "cache_hit", kind),
                   {k: json_value(v, f"{kind}.{k}") for k, v in data.items() if k not in known},
                   None if data.get("database_use") is None
                   else DatabaseUse.from_json(f.obj(data, "database_use", kind)),
                   _extension(data))


def _extension(data: Mapping[str, object]) -> TraceExtension | None:
    """The first backend trace extension whose keys the trace holds, read and checked."""
    for extension in trace_extensions():
        found = extension.from_trace(data)
        if found is not None:
            return found
    return None


_COMMON_TRACE_KEYS = frozenset({"passes", "input_hash", "final_hash", "total_time_s", "exact", "note", "mode",
                                "pass_times", "cache_hit", "database_use"})


def _pass_json(record: PassRecord) -> JsonDict:
    return {"index": record.index, "name": record.name, "source": record.source, "time_s": record.time_s,
            "nodes_before": record.nodes_before, "nodes_after": record.nodes_after,
            "op_histogram": dict(record.op_histogram), "ir_hash": record.ir_hash, "changed": record.changed,
            **f.drop_none({"instructions": record.instructions})}


@dataclass(frozen=True)
class CaseError:
    """Where a case failed (``compile``, ``verify``, ``correctness``, ``measure``...) and why."""

    stage: str
    message: str

    def to_json(self) -> JsonDict:
        return {"stage": self.stage, "message": self.message}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CaseError:
        return cls(f.string(data, "stage", "error"), f.string(data, "message", "error"))


@dataclass(frozen=True)
class ArtifactInfo:
    """The compiled artifact as the result records it (no path: the file is gone after the run)."""

    sha256: str
    size_bytes: int
    node_count: int | None
    settings: JsonDict
    # What decides how it runs on its runner (``Backend.execution_identity`` and the runner):
    # two artifacts with one identity are not timed against each other.
    execution_identity: str | None = None

    @classmethod
    def of(cls, artifact: Artifact, execution_identity: str | None = None) -> ArtifactInfo:
        return cls(artifact.sha256, artifact.size_bytes, artifact.node_count, dict(artifact.settings),
                   execution_identity)

    def to_json(self) -> JsonDict:
        out: JsonDict = {"sha256": self.sha256, "size_bytes": self.size_bytes, "node_count": self.node_count,
                         "settings": self.settings}
        return {**out, **f.drop_none({"execution_identity": self.execution_identity})}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ArtifactInfo:
        kind = "artifact"
        return cls(f.string(data, "sha256", kind), f.count(data, "size_bytes", kind),
                   f.opt_count(data, "node_count", kind), f.json_obj(data, "settings", kind),
                   f.opt_string(data, "execution_identity", kind))


@dataclass(frozen=True)
class CaseKey:
    """What decides a measurement: model, pipeline, backend versions, runner (and how it was measured)."""

    model: JsonDict
    pipeline: JsonDict
    backend: JsonDict
    runner: JsonDict
    measure: JsonDict

    def hash(self) -> str:
        """Hash of model, pipeline, backend versions and runner fingerprint (not of ``measure``)."""
        part = {"model": self.model, "pipeline": self.pipeline, "backend": self.backend, "runner": self.runner}
        return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:16]

    def to_json(self) -> JsonDict:
        return {"model": self.model, "pipeline": self.pipeline, "backend": self.backend, "runner": self.runner,
                "measure": self.measure}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CaseKey:
        kind = "case key"
        return cls(*(f.json_obj(data, k, kind) for k in ("model", "pipeline", "backend", "runner", "measure")))


@dataclass(frozen=True)
class CorrectnessCheck:
    """The outcome of comparing an artifact's outputs with the reference, as stored in the case
    entry (``correctness``, ``correctness_on_runner``).

    ``status`` (compile only): ``verified``, ``failed`` or ``blind`` (the reference does not
    depend on the inputs); ``probe_seed``: the seed of the blindness probe's inputs, when there
    was one. Both are left out of the JSON when None, as before."""

    passed: bool
    reason: str
    max_abs_error: float | None
    max_rel_error: float | None
    rtol: float
    atol: float
    seed: int
    status: str | None = None
    probe_seed: int | None = None

    def to_json(self) -> JsonDict:
        data: JsonDict = {"passed": self.passed, "reason": self.reason, "max_abs_error": self.max_abs_error,
                                "max_rel_error": self.max_rel_error, "rtol": self.rtol, "atol": self.atol,
                                "seed": self.seed}
        if self.status is not None:
            data["status"] = self.status
        if self.probe_seed is not None:
            data["probe_seed"] = self.probe_seed
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CorrectnessCheck:
        kind = "correctness check"
        return cls(f.boolean(data, "passed", kind), f.string(data, "reason", kind), f.opt_number(data, "max_abs_error", kind),
                   f.opt_number(data, "max_rel_error", kind), f.number(data, "rtol", kind), f.number(data, "atol", kind),
                   f.integer(data, "seed", kind), f.opt_string(data, "status", kind), f.opt_integer(data, "probe_seed", kind))


@dataclass(frozen=True)
class CaseEntry:
    """One case of a result document: what ran (``key``), how it compiled (``trace``,
    ``correctness``, ``artifact``), what was measured (``metrics``, ``measurement``) and whether
    it failed (``status``, ``error``). ``compiled_on`` and ``correctness_on_runner`` are set when
    the artifact was compiled on another machine (``perfguard run --artifacts``)."""

    id: str
    model: str
    pipeline: str
    runner: str
    key: CaseKey
    key_hash: str
    started_at: str
    status: Status = "ok"
    error: CaseError | None = None
    trace: Trace | None = None
    correctness: CorrectnessCheck | None = None
    metrics: Metrics = field(default_factory=Metrics)
    measurement: Measurement | None = None
    finished_at: str | None = None
    artifact: ArtifactInfo | None = None
    compiled_on: dict[str, JsonDict] | None = None
    correctness_on_runner: CorrectnessCheck | None = None
    # Why latency and memory were not measured (an artifact identical to its pair's), or None.
    not_measured: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def execution_identity(self) -> str | None:
        return self.artifact.execution_identity if self.artifact else None

    def failed(self, stage: str, message: str) -> CaseEntry:
        return replace(self, status="failed", error=CaseError(stage, message))

    def finished(self, stamp: str) -> CaseEntry:
        """This entry with ``finished_at`` set to ``stamp`` unless it is already set."""
        return self if self.finished_at else replace(self, finished_at=stamp)

    def with_metrics(self, **values: Any) -> CaseEntry:
        return replace(self, metrics=replace(self.metrics, **values))

    def latency_by_worker(self) -> dict[int, list[float]]:
        """Per-worker latency values keyed by worker id (the key two sides are paired by)."""
        latency = self.metrics.latency_s
        if latency is None:
            return {}
        ids = (self.measurement.worker_ids if self.measurement else ()) or tuple(range(len(latency.per_worker)))
        return {i: list(w) for i, w in zip(ids, latency.per_worker, strict=False)}

    def to_json(self) -> JsonDict:
        out: JsonDict = {
            "id": self.id, "model": self.model, "pipeline": self.pipeline, "runner": self.runner,
            "status": self.status, "error": None if self.error is None else self.error.to_json(),
            "key": self.key.to_json(), "key_hash": self.key_hash,
            "trace": None if self.trace is None else self.trace.to_json(),
            "correctness": None if self.correctness is None else self.correctness.to_json(),
            "metrics": self.metrics.to_json(),
            "measurement": None if self.measurement is None else self.measurement.to_json(),
            "started_at": self.started_at,
        }
        optional = {"finished_at": self.finished_at,
                    "artifact": None if self.artifact is None else self.artifact.to_json(),
                    "compiled_on": self.compiled_on,
                    "correctness_on_runner": (None if self.correctness_on_runner is None
                                              else self.correctness_on_runner.to_json()),
                    "not_measured": self.not_measured}
        return {**out, **f.drop_none(optional)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CaseEntry:
        kind = "case"
        status = f.string(data, "status", kind)
        if status not in ("ok", "failed"):
            raise f.wrong_type(kind, "status", "'ok' or 'failed'", status)

        def optional(key: str, parse: Callable[[Mapping[str, object]], Any]) -> Any:
            value = f.opt_obj(data, key, kind)
            return None if value is None else parse(value)

        return cls(
            id=f.string(data, "id", kind), model=f.string(data, "model", kind),
            pipeline=f.string(data, "pipeline", kind), runner=f.string(data, "runner", kind),
            key=CaseKey.from_json(f.obj(data, "key", kind)), key_hash=f.string(data, "key_hash", kind),
            started_at=f.string(data, "started_at", kind), status="ok" if status == "ok" else "failed",
            error=optional("error", CaseError.from_json), trace=optional("trace", Trace.from_json),
            correctness=optional("correctness", CorrectnessCheck.from_json),
            metrics=Metrics.from_json(f.obj(data, "metrics", kind)),
            measurement=optional("measurement", Measurement.from_json),
            finished_at=f.opt_string(data, "finished_at", kind), artifact=optional("artifact", ArtifactInfo.from_json),
            compiled_on=f.opt_json_obj_map(data, "compiled_on", kind),
            correctness_on_runner=optional("correctness_on_runner", CorrectnessCheck.from_json),
            not_measured=f.opt_string(data, "not_measured", kind),
        )


@dataclass(frozen=True)
class ModelInfo:
    """A benchmark model as the run saw it: hash, size, opset, where it came from, its inputs."""

    sha256: str
    nodes: int
    opset: int
    source: JsonDict
    inputs: tuple[InputSpec, ...]

    def to_json(self) -> JsonDict:
        return {"sha256": self.sha256, "nodes": self.nodes, "opset": self.opset, "source": self.source,
                "inputs": [s.to_json() for s in self.inputs]}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ModelInfo:
        kind = "model"
        try:
            inputs = tuple(InputSpec.from_json(s) for s in f.objects(data, "inputs", kind))
        except (KeyError, TypeError) as exc:
            raise FieldError(f"{kind}: field 'inputs' holds an entry that is not an input spec: {exc}") from None
        return cls(f.string(data, "sha256", kind), f.count(data, "nodes", kind), f.count(data, "opset", kind),
                   f.json_obj(data, "source", kind), inputs)


@dataclass(frozen=True)
class SuiteInfo:
    name: str
    path: str
    sha256: str

    def to_json(self) -> JsonDict:
        return {"name": self.name, "path": self.path, "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SuiteInfo:
        return cls(*(f.string(data, k, "suite") for k in ("name", "path", "sha256")))


#: The subject a check records for its head side when it is the working tree as it is (uncommitted
#: changes and all), which is no commit's subject (``perfguard.flows.check``).
WORKING_TREE = "working tree"


@dataclass(frozen=True)
class CompilerInfo:
    """Which version of the compiler under test this document measured (a side of a check)."""

    label: str
    commit: str | None = None
    subject: str = ""
    pass_path: str | None = None

    @property
    def commit_subject(self) -> str:
        """The subject of ``commit``: '' where the side says only that it is the working tree."""
        return "" if self.subject == WORKING_TREE else self.subject

    def to_json(self) -> JsonDict:
        return {"label": self.label, "commit": self.commit, "subject": self.subject, "pass_path": self.pass_path}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CompilerInfo:
        kind = "compiler"
        return cls(f.string(data, "label", kind), f.opt_string(data, "commit", kind),
                   str(data.get("subject") or ""), f.opt_string(data, "pass_path", kind))


@dataclass(frozen=True)
class CacheUse:
    """How this run's compiles used the artifact cache (``--artifact-cache``): ``hits`` served
    from it without compiling, ``misses`` compiled (and stored when they verified), ``uncached``
    compiled without a key (the compiler's pass folder had uncommitted changes)."""

    hits: int
    misses: int
    uncached: int = 0

    def to_json(self) -> JsonDict:
        return {"hits": self.hits, "misses": self.misses, "uncached": self.uncached}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CacheUse:
        kind = "artifact_cache"
        return cls(f.count(data, "hits", kind), f.count(data, "misses", kind), f.count(data, "uncached", kind))


@dataclass(frozen=True)
class ArtifactsOrigin:
    """Set when the run measured an artifact folder compiled elsewhere (``perfguard run --artifacts``)."""

    folder: str
    manifest_created_at: str

    def to_json(self) -> JsonDict:
        return {"folder": self.folder, "manifest_created_at": self.manifest_created_at}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ArtifactsOrigin:
        return cls(f.string(data, "folder", "artifacts"), f.string(data, "manifest_created_at", "artifacts"))


@dataclass(frozen=True)
class ResultDocument:
    """One run: the suite, each runner's environment fingerprint, the models and every case."""

    suite: SuiteInfo
    started_at: str
    finished_at: str
    environment: dict[str, JsonDict]
    models: dict[str, ModelInfo]
    cases: tuple[CaseEntry, ...]
    tool_version: str
    compiler: CompilerInfo | None = None
    artifacts: ArtifactsOrigin | None = None
    version: int = RESULT_VERSION
    shard: ShardInfo | None = None
    artifact_cache: CacheUse | None = None

    def to_json(self) -> JsonDict:
        out: JsonDict = {
            "version": self.version, "tool": {"name": "perfguard", "version": self.tool_version},
            "suite": self.suite.to_json(), "started_at": self.started_at, "finished_at": self.finished_at,
            "environment": self.environment, "models": {n: m.to_json() for n, m in self.models.items()},
            "cases": [c.to_json() for c in self.cases],
        }
        if self.compiler is not None:
            out["compiler"] = self.compiler.to_json()
        if self.artifacts is not None:
            out["artifacts"] = self.artifacts.to_json()
        if self.shard is not None:
            out["shard"] = self.shard.to_json()
        if self.artifact_cache is not None:
            out["artifact_cache"] = self.artifact_cache.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ResultDocument:
        kind = "result"
        compiler, artifacts = f.opt_obj(data, "compiler", kind), f.opt_obj(data, "artifacts", kind)
        shard = f.opt_obj(data, "shard", kind)
        cache = f.opt_obj(data, "artifact_cache", kind)
        return cls(
            suite=SuiteInfo.from_json(f.obj(data, "suite", kind)), started_at=f.string(data, "started_at", kind),
            finished_at=f.string(data, "finished_at", kind), environment=f.json_obj_map(data, "environment", kind),
            models={n: ModelInfo.from_json(m) for n, m in f.obj_map(data, "models", kind).items()},
            cases=tuple(CaseEntry.from_json(c) for c in f.objects(data, "cases", kind)),
            tool_version=f.string(f.obj(data, "tool", kind), "version", "tool"),
            compiler=None if compiler is None else CompilerInfo.from_json(compiler),
            artifacts=None if artifacts is None else ArtifactsOrigin.from_json(artifacts),
            version=f.integer(data, "version", kind),
            shard=None if shard is None else ShardInfo.from_json(shard),
            artifact_cache=None if cache is None else CacheUse.from_json(cache),
        )


def current_result_json(data: object, path: str | Path) -> JsonDict:
    """The JSON object of a result document at the current version: refuses a newer one,
    migrates an older one (result files, and the results inside a verdicts document)."""
    return current_format(data, path, kind="result", title="perfguard result", version=RESULT_VERSION,
                          migrations=_MIGRATIONS)


def parse_result(data: object, path: str | Path = "<result>") -> ResultDocument:
    """A result document from its JSON value (read from ``path``): refuses newer versions,
    migrates older ones, validates against the schema. Every failure is a one-line ``StorageError``."""
    data = current_result_json(data, path)
    return typed_document(data, path, ResultDocument.from_json, corrupt="result file",
                          schemas={"result file": ("result", data)})


def load_result(path: str | Path) -> ResultDocument:
    """The one reader of result files (``perfguard run``, baselines)."""
    data = read_json(Path(path), missing="{path}: result file not found",
                     not_json="{path}: corrupt result file (not JSON: {exc}); re-run perfguard run")
    return parse_result(data, path)
