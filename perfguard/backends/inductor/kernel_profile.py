"""Per-kernel time of an Inductor artifact, in the trace format every perfguard profile uses.

Why not the torch profiler: on the CPU it sees the library calls (``aten::convolution``) but not
Inductor's own C++ kernels, unless ``cpp.enable_kernel_profile`` is set, and that setting changes
the generated code (a ``RECORD_FUNCTION`` in every kernel), so the profiled code would not be the
artifact's and the worker refuses it. Instead the generated module's kernels and its
``extern_kernels`` are wrapped where its ``call`` looks them up (module globals), so the code
that runs is the artifact's: each call records one ``Node`` event (µs) inside its run's
``model_run`` event, as ONNX Runtime's profiler writes them (``perfguard.workers.trace``). On the
GPU each wrapped call synchronizes the device, so it times the kernel, not its launch (and runs
slower than unprofiled: the figures are per kernel, not the run's latency).

The op type of each event is the ONNX name of what it computes, so the explanation's rules
(``perfguard.profile.dimension``: compute, memory, scheduling) read Inductor's kernels like any
other backend's: library convolutions ``Conv``, matrix products ``MatMul``/``Gemm``; a generated
kernel by the ATen ops Inductor named it after (``cpp_fused_add_relu_3``: ``Relu`` before
``Add``...), ``Cast`` for one that only converts (``_to_copy``), ``Concat`` for ``cat``, and
``Copy`` for one that only moves data (``clone``, layout copies feeding a convolution).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.backends.inductor.torch_compile import CompiledModel
from perfguard.jsonfields import JsonDict

if TYPE_CHECKING:
    import numpy as np

#: Library calls (``extern_kernels.<name>``) by the ONNX op type they compute.
LIBRARY_OPS = {"convolution": "Conv", "mkldnn_convolution": "Conv", "_convolution_pointwise": "Conv",
               "mm": "MatMul", "bmm": "MatMul", "baddbmm": "MatMul", "addmm": "Gemm", "_mkl_linear": "Gemm",
               "_linear_pointwise": "Gemm"}
#: ATen op names in a generated kernel's name, in the order that decides its op type (the first
#: found): the heavier arithmetic first, then conversions and data movement.
KERNEL_OPS = (("native_layer_norm", "LayerNormalization"), ("layer_norm", "LayerNormalization"),
              ("batch_norm", "BatchNormalization"), ("_softmax", "Softmax"), ("softmax", "Softmax"),
              ("gelu", "Gelu"), ("max_pool", "MaxPool"), ("avg_pool", "AveragePool"), ("mean", "ReduceMean"),
              ("sum", "ReduceSum"), ("addmm", "Gemm"), ("bmm", "MatMul"), ("sigmoid", "Sigmoid"),
              ("silu", "Sigmoid"), ("relu", "Relu"), ("clamp", "Clip"), ("tanh", "Tanh"), ("exp", "Exp"),
              ("div", "Div"), ("mul", "Mul"), ("sub", "Sub"), ("add", "Add"), ("_to_copy", "Cast"),
              ("convert_element_type", "Cast"), ("cat", "Concat"), ("constant_pad_nd", "Pad"))
_PREFIX = re.compile(r"^(?:cpp_fused|triton_(?:poi|red|per|tem)_fused|cpp|triton)_?")
_KERNEL = re.compile(r"^(?:cpp_fused|triton_\w+_fused)_\w*\d$|^(?:cpp|triton)_\w+_\d+$")


def kernel_op(name: str) -> str:
    """The ONNX op type of a generated kernel, from the ATen ops in its name (module docstring)."""
    body = "_" + _PREFIX.sub("", re.sub(r"_\d+$", "", name)) + "_"
    for token, op in KERNEL_OPS:
        if f"_{token}" in body:
            return op
    return "Copy"


class _Timed:
    """A callable that records each call as a ``Node`` event of ``events``."""

    def __init__(self, function: Callable[..., object], name: str, op: str, provider: str, clock: _Clock) -> None:
        self.function, self.name, self.op, self.provider, self.clock = function, name, op, provider, clock

    def __call__(self, *args: object, **kwargs: object) -> object:
        start = time.perf_counter()
        result = self.function(*args, **kwargs)
        self.clock.synchronize()
        self.clock.record(self.name, self.op, self.provider, start, time.perf_counter())
        return result


class _Clock:
    """The events of a profiled executable. A library function is called from several places of
    the generated code: its n-th call in a run is node ``extern_kernels.<name>#n``, so a profile
    counts call sites as ORT counts nodes."""

    def __init__(self, synchronize: Callable[[], None]) -> None:
        self.origin = time.perf_counter()
        self.events: list[JsonDict] = []
        self.synchronize = synchronize
        self.calls: dict[str, int] = {}

    def record(self, name: str, op: str, provider: str, start: float, end: float) -> None:
        if provider == "Library":
            self.calls[name] = self.calls.get(name, 0) + 1
            name = f"{name}#{self.calls[name]}"
        self.events.append({"cat": "Node", "name": f"{name}_kernel_time", "ph": "X", "ts": (start - self.origin) * 1e6,
                            "dur": (end - start) * 1e6, "args": {"op_name": op, "provider": provider}})


class _Library:
    """``extern_kernels`` with each function it hands out timed."""

    def __init__(self, library: object, clock: _Clock) -> None:
        self._library, self._clock = library, clock

    def __getattr__(self, name: str) -> object:
        function = getattr(self._library, name)
        if not callable(function):
            return function
        return _Timed(function, f"extern_kernels.{name}", LIBRARY_OPS.get(name, name), "Library", self._clock)


class InductorProfiledExecutable:
    """A compiled module whose generated kernels and library calls are timed (module docstring)."""

    def __init__(self, compiled: CompiledModel, trace_prefix: str) -> None:
        self.compiled = compiled
        self.trace_path = f"{trace_prefix}_inductor.json"
        synchronize = (lambda: None) if compiled.device == "cpu" else _cuda_synchronize
        self.clock = _Clock(synchronize)
        for module in compiled.modules:
            _instrument(vars(module), self.clock)

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        self.clock.calls.clear()
        start = time.perf_counter()
        outputs = self.compiled.run(feeds)
        self.clock.synchronize()
        end = time.perf_counter()
        self.clock.events.append({"cat": "Session", "name": "model_run", "ph": "X",
                                  "ts": (start - self.clock.origin) * 1e6, "dur": (end - start) * 1e6})
        return outputs

    def end_profiling(self) -> str:
        Path(self.trace_path).write_text(json.dumps(self.clock.events))
        return self.trace_path


def _instrument(namespace: dict[str, object], clock: _Clock) -> None:
    for name, value in list(namespace.items()):
        if name == "extern_kernels":
            namespace[name] = _Library(value, clock)
        elif _KERNEL.match(name) and callable(value):
            namespace[name] = _Timed(value, name, kernel_op(name), "Inductor", clock)


def _cuda_synchronize() -> None:
    import torch

    torch.cuda.synchronize()
