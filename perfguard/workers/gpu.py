"""GPU kernels in an ONNX Runtime profile: the ``cat == "Kernel"`` events, aggregated per inference.

ONNX Runtime builds made with CUDA profiling (``--enable_cuda_profiling``) record every CUDA
kernel and copy through CUPTI and merge them into the profiler file at ``end_profiling()``
(``onnxruntime/core/providers/cuda/cupti_manager.cc``, ``ProcessActivityBuffers``;
``onnxruntime/core/common/gpu_profiler_common.h``, ``GPUProfilerBase::MergeEvents``):

* a kernel: ``{"cat": "Kernel", "pid": -1, "tid": -1, "name": <demangled kernel name>, "ts", "dur",
  "args": {"stream", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "op_name",
  "parent_name"}}``, ``ts`` and ``dur`` in µs, every arg a string;
* a copy: the same, named ``MemcpyHostToDevice``, ``MemcpyDeviceToHost``, ``MemcpyDeviceToDevice``...
  with ``grid_*`` and ``block_*`` ``"-1"``.

ORT ties a kernel to the node that launched it through CUPTI's external correlation id, which is
the node event's ``ts``; ``MergeEvents`` then writes the kernel events right after that parent
``<node>_kernel_time`` event and copies the parent's ``op_name`` and its name (``parent_name``)
into them. A kernel's own ``ts`` is its GPU timestamp taken against the CPU start of profiling,
which ORT does not shift onto the CPU clock for kernels (it does for copies), so a kernel belongs
to the ``model_run`` window of its parent node (the last ``Node`` event before it in the file);
only a kernel without a parent falls back on its own ``ts``. Kernels outside the kept windows
(at session load, in the warm-up runs) are left out, as the CPU aggregate leaves them out.

Per inference: launches and copies are counted over the kept runs and divided by their number
(they do not vary between runs); Σ kernel time and the GPU-busy fraction (the union of the
kernels' intervals in a run over that run's ``model_run``: kernels overlapping on several
streams count once) are medians over the runs; per kernel name and per op
type, launches and time are means over the runs (a kernel seen in some runs only still counts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from perfguard import jsonfields as f
from perfguard.jsonfields import JsonDict

#: How many kernels (by time per inference) a profile keeps by name.
TOP_KERNELS = 10
COPY_PREFIX = "Memcpy"


def window_of(ts: float, windows: Sequence[tuple[float, float]]) -> int | None:
    """The index of the ``(start, end)`` window that holds ``ts`` (None: none does)."""
    for index, (start, end) in enumerate(windows):
        if start <= ts <= end:
            return index
    return None


@dataclass(frozen=True)
class KernelStat:
    """One kernel name (or op type) per inference: ``launches`` and ``us`` of GPU time."""

    name: str
    launches: float
    us: float

    @property
    def us_per_launch(self) -> float:
        return self.us / self.launches if self.launches else 0.0

    def to_json(self) -> JsonDict:
        return {"name": self.name, "launches": self.launches, "us": self.us}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> KernelStat:
        kind = "kernel stat"
        return cls(f.string(data, "name", kind), f.number(data, "launches", kind), f.number(data, "us", kind))


@dataclass(frozen=True)
class GpuProfile:
    """The GPU side of one worker's profile, per inference (module docstring): kernel launches,
    Σ kernel time (µs), the GPU-busy fraction of ``model_run``, copies and their time, the top
    kernels by time and the kernels per op type (``op_name`` of the parent node)."""

    launches: float
    kernel_us: float
    busy: float
    copies: float
    copy_us: float
    top: tuple[KernelStat, ...]
    by_op: tuple[KernelStat, ...]

    def to_json(self) -> JsonDict:
        return {"launches": self.launches, "kernel_us": self.kernel_us, "busy": self.busy, "copies": self.copies,
                "copy_us": self.copy_us, "top": [k.to_json() for k in self.top],
                "by_op": [k.to_json() for k in self.by_op]}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> GpuProfile:
        kind = "gpu profile"
        return cls(f.number(data, "launches", kind), f.number(data, "kernel_us", kind), f.number(data, "busy", kind),
                   f.number(data, "copies", kind), f.number(data, "copy_us", kind),
                   tuple(KernelStat.from_json(k) for k in f.objects(data, "top", kind)),
                   tuple(KernelStat.from_json(k) for k in f.objects(data, "by_op", kind)))


def is_copy(event: Mapping[str, Any]) -> bool:
    """A CUPTI memcpy record (ORT writes it as a ``Kernel`` event with grid ``-1``)."""
    args = event.get("args") or {}
    return str(event.get("name", "")).startswith(COPY_PREFIX) and str(args.get("grid_x", "-1")) == "-1"


def _union(intervals: list[tuple[float, float]]) -> float:
    covered, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        covered += stop - max(start, end)
        end = stop
    return covered


def _per_run(totals: Mapping[str, list[float]], runs: int) -> tuple[KernelStat, ...]:
    stats = [KernelStat(name, count / runs, us / runs) for name, (count, us) in totals.items()]
    return tuple(sorted(stats, key=lambda k: (-k.us, k.name)))


def aggregate_kernels(events: Sequence[Mapping[str, Any]], windows: Sequence[tuple[float, float]],
                      top: int = TOP_KERNELS) -> GpuProfile | None:
    """The GPU aggregate of ``events`` over the kept ``model_run`` ``windows`` (module
    docstring); None when the profile holds no ``Kernel`` event (a CPU run, or an ORT build
    without CUDA profiling)."""
    if not windows or not any(e.get("cat") == "Kernel" for e in events):
        return None
    runs = len(windows)
    spans: list[list[tuple[float, float]]] = [[] for _ in windows]
    sums, copies, copy_us = [0.0] * runs, 0, 0.0
    by_name: dict[str, list[float]] = {}
    by_op: dict[str, list[float]] = {}
    parent: int | None = None
    for event in events:
        category = event.get("cat")
        if category == "Node":
            parent = window_of(float(event.get("ts", -1)), windows)
            continue
        if category != "Kernel":
            continue
        args = event.get("args") or {}
        index = parent if args.get("parent_name") else window_of(float(event.get("ts", -1)), windows)
        if index is None:
            continue
        start, duration = float(event.get("ts", 0)), float(event.get("dur", 0))
        if is_copy(event):
            copies += 1
            copy_us += duration
            continue
        sums[index] += duration
        spans[index].append((start, start + duration))
        for table, key in ((by_name, str(event.get("name", "?"))), (by_op, str(args.get("op_name") or "?"))):
            entry = table.setdefault(key, [0.0, 0.0])
            entry[0] += 1
            entry[1] += duration
    launches = sum(count for count, _ in by_name.values())
    busy = [_union(s) / (end - begin) if end > begin else 0.0 for s, (begin, end) in zip(spans, windows, strict=True)]
    return GpuProfile(launches / runs, median(sums), median(busy), copies / runs, copy_us / runs,
                      _per_run(by_name, runs)[:top], _per_run(by_op, runs))
