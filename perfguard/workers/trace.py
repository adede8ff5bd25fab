"""ONNX Runtime profiles: read the profiler's trace file and aggregate it per inference.

The file ``InferenceSession.end_profiling()`` writes is a bare JSON array of trace events (the
trace-event "JSON Array Format"; ``onnxruntime/core/common/profiler.cc``), each
``{"cat", "pid", "tid", "dur", "ts", "ph": "X", "name", "args"}`` with ``ts`` and ``dur`` in µs
from the start of profiling. Read from ORT 1.32 (``tests/golden/ort-1.32-profile-resnet.json``):

* ``cat == "Session"``: ``model_loading_uri``, ``session_initialization`` (graph optimization and
  kernel creation at load: ORT's own compile step), then per ``run()`` one ``model_run`` and one
  ``SequentialExecutor::Execute`` inside it;
* ``cat == "Node"``: one ``<node>_kernel_time`` per node per run, inside its ``model_run``, with
  ``args.op_name``, ``args.provider``, ``args.node_index`` and the byte counts
  ``activation_size`` (inputs), ``parameter_size`` (initializers), ``output_size`` as strings.
  Older versions also wrote ``_fence_before`` / ``_fence_after`` events: they are not kernel time.

A kernel event belongs to the ``model_run`` window that contains its start. The first
``skip_runs`` windows (the warm-up) are dropped. Per (op type, provider) the aggregate keeps the
node count, and the kernel time *per inference* as the least over the kept runs of that op
type's time in the run (``fastest``). On a shared machine a run that was preempted gets the
neighbour's whole time slice added to the op it was in (resnet's 2 ms run measured 6 ms, and
10 ms, under ``stress-ng --cpu 1`` on 2 cores), and the neighbour preempts about every other run:
the median of such bimodal times then lands in the fast mode on one side and the slow one on the
other, by chance (Conv 3.98 ms before against 1.95 ms after in one worker that ran both sides
interleaved, 11 and 7 of its 20 runs preempted), which drowned a +0.29 ms change in Transposes.
Preemption only ever adds time, so the least time over the runs is the op's cost (timeit's
reasoning) as long as one run of the op went uninterrupted. The framework overhead is the least
over runs of ``model_run`` − Σ kernel time, and the run time of the profile is the sum of those
figures, so the parts add up exactly (Σ kernel time + framework overhead = ``run_us``); the
``model_run`` times themselves are kept as measured. Bytes and kernel counts are means (they do
not vary between runs).

On the CUDA execution provider the ``Node`` events time the host side of each node (its kernel
launches), and a build with CUDA profiling adds ``cat == "Kernel"`` events for the GPU work:
``perfguard.workers.gpu`` aggregates them into the optional ``gpu`` part of a ``ProfileRun``
(None on the CPU, and absent from its JSON, so the CPU aggregate and older documents are unchanged).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfguard import jsonfields as f
from perfguard.errors import TraceError
from perfguard.jsonfields import JsonDict
from perfguard.workers.gpu import GpuProfile, aggregate_kernels, window_of

KERNEL_SUFFIX = "_kernel_time"


@dataclass(frozen=True)
class OpStats:
    """One op type on one execution provider in one profile, per inference: ``nodes`` distinct
    nodes, ``kernel_us`` µs of kernel time, and the bytes its kernels read and wrote."""

    op_type: str
    provider: str
    nodes: int
    kernel_us: float
    kernels: float
    activation_bytes: float
    parameter_bytes: float
    output_bytes: float

    @property
    def moved_bytes(self) -> float:
        """Bytes of tensors read and written per inference (activations in, outputs out)."""
        return self.activation_bytes + self.output_bytes

    def to_json(self) -> JsonDict:
        return {"op_type": self.op_type, "provider": self.provider, "nodes": self.nodes, "kernel_us": self.kernel_us,
                "kernels": self.kernels, "activation_bytes": self.activation_bytes,
                "parameter_bytes": self.parameter_bytes, "output_bytes": self.output_bytes}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OpStats:
        kind = "op stats"
        return cls(f.string(data, "op_type", kind), f.string(data, "provider", kind), f.integer(data, "nodes", kind),
                   f.number(data, "kernel_us", kind), f.number(data, "kernels", kind),
                   f.number(data, "activation_bytes", kind), f.number(data, "parameter_bytes", kind),
                   f.number(data, "output_bytes", kind))


@dataclass(frozen=True)
class ProfileRun:
    """One worker process's profile of one artifact: the ``model_run`` time of every kept run
    (µs), the kernel time summed per run, ``session_initialization`` (µs), the per-op aggregates
    and the framework overhead (the least over the runs, per inference: see the module
    docstring); ``gpu``: the GPU kernels' aggregate where ORT recorded ``Kernel`` events
    (``perfguard.workers.gpu``)."""

    model_run_us: tuple[float, ...]
    kernel_sum_us: tuple[float, ...]
    session_init_us: float
    ops: tuple[OpStats, ...]
    overhead_us: float
    gpu: GpuProfile | None = None

    @property
    def runs(self) -> int:
        return len(self.model_run_us)

    @property
    def run_us(self) -> float:
        """Run time per inference: Σ kernel time of the op types + framework overhead."""
        return self.kernel_us + self.overhead_us

    @property
    def kernel_us(self) -> float:
        return sum(o.kernel_us for o in self.ops)

    @property
    def kernels_per_run(self) -> float:
        return sum(o.kernels for o in self.ops)

    def to_json(self) -> JsonDict:
        data: JsonDict = {
            "model_run_us": list(self.model_run_us), "kernel_sum_us": list(self.kernel_sum_us),
            "session_init_us": self.session_init_us, "ops": [o.to_json() for o in self.ops],
            "overhead_us": self.overhead_us}
        if self.gpu is not None:
            data["gpu"] = self.gpu.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProfileRun:
        kind = "profile run"
        gpu = f.opt_obj(data, "gpu", kind)
        return cls(f.number_list(data, "model_run_us", kind), f.number_list(data, "kernel_sum_us", kind),
                   f.number(data, "session_init_us", kind),
                   tuple(OpStats.from_json(o) for o in f.objects(data, "ops", kind)), f.number(data, "overhead_us", kind),
                   None if gpu is None else GpuProfile.from_json(gpu))


# ONNX Runtime's profiler JSON (another tool's format): its events as written.
def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """The events of a profiler file: a JSON array, or a ``{"traceEvents": [...]}`` object."""
    from perfguard.errors import StorageError
    from perfguard.results.documents import parse_json

    try:
        # finite=False: a profiler may write NaN; the aggregation reads durations only.
        data = parse_json(Path(path).read_text(encoding="utf-8"), path, finite=False)
    except StorageError as exc:  # nested too deep, an integer beyond 2**63
        raise TraceError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise TraceError(f"{path}: not a readable profiler trace: {exc}") from None
    if isinstance(data, dict):
        data = data.get("traceEvents")
    if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
        raise TraceError(f"{path}: expected a JSON array of trace events")
    return data


def _size(args: Mapping[str, Any], key: str) -> float:
    try:
        return float(args.get(key, 0) or 0)
    except (TypeError, ValueError):
        return 0.0


def _windows(events: Iterable[Mapping[str, Any]]) -> list[tuple[float, float]]:
    runs = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
            if e.get("cat") == "Session" and e.get("name") == "model_run"]
    return sorted(runs)


def fastest(times: Sequence[float]) -> float:
    """An op's cost from its times over the runs: the least (module docstring: preemption only
    adds time, and a median flips between the preempted and the clean mode)."""
    return min(times)


def aggregate(events: Sequence[Mapping[str, Any]], skip_runs: int = 0) -> ProfileRun:
    """Aggregate ONNX Runtime trace ``events`` per inference, leaving out the first
    ``skip_runs`` runs (warm-up). ``TraceError`` when no run is left."""
    windows = _windows(events)
    kept = windows[skip_runs:]
    if not kept:
        raise TraceError(f"the profile holds {len(windows)} model_run events, none left after {skip_runs} warm-up runs")
    init = sum(float(e.get("dur", 0)) for e in events
               if e.get("cat") == "Session" and e.get("name") == "session_initialization")
    sums = [0.0] * len(kept)
    per_op: dict[tuple[str, str], dict[str, Any]] = {}
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") != "Node" or not name.endswith(KERNEL_SUFFIX):
            continue
        index = window_of(float(event.get("ts", -1)), kept)
        if index is None:
            continue
        args = event.get("args") or {}
        key = (str(args.get("op_name", "?")), str(args.get("provider", "?")))
        entry = per_op.setdefault(key, {"names": set(), "us": [0.0] * len(kept), "kernels": 0, "act": 0.0,
                                        "par": 0.0, "out": 0.0})
        duration = float(event.get("dur", 0))
        sums[index] += duration
        entry["names"].add(name)
        entry["us"][index] += duration
        entry["kernels"] += 1
        entry["act"] += _size(args, "activation_size")
        entry["par"] += _size(args, "parameter_size")
        entry["out"] += _size(args, "output_size")
    runs = len(kept)
    ops = tuple(OpStats(op, provider, len(e["names"]), fastest(e["us"]), e["kernels"] / runs, e["act"] / runs,
                        e["par"] / runs, e["out"] / runs) for (op, provider), e in sorted(per_op.items()))
    model_runs = tuple(end - start for start, end in kept)
    overhead = fastest([run - kernels for run, kernels in zip(model_runs, sums, strict=True)])
    return ProfileRun(model_runs, tuple(sums), init, ops, overhead, aggregate_kernels(events, kept))
