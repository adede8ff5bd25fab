"""The ``count`` request of a worker run under callgrind (``perfguard.workers.callgrind``): load
one artifact, warm it up uninstrumented, switch instrumentation on, run ``warmup`` more
inferences so the simulated caches hold the model, then count two windows, each dumped as its
own profile: ``ID|1`` (one inference) and ``ID|N`` (``inferences`` of them). The parent turns
them into per-inference counts (``perfguard.measure.counts``).

Why two windows: the per-inference figure can be the window of N over N (it keeps the fixed
cost of opening a window, a few thousand instructions) or the difference of the windows over
N - 1 (it cancels that cost and adds the spread of two windows); both are recorded so the
benchmark (``benchmarks/counts.py``) can say which spreads less.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from perfguard.jsonfields import (
    JsonDict,
    array as _list,
    integer as _int,
    obj as _object,
    string as _str,
)
from perfguard.runners.options import RunnerOptions
from perfguard.workers.protocol import CompileRequest, MeasureVariant, _input_specs, _specs_json

if TYPE_CHECKING:
    from perfguard.models.inputs import InputSpec

MODE = "count"
COMPILE_MODE = "count_compile"


def window_label(variant: str, inferences: int) -> str:
    """The label a window's dump carries: the variant id and its inferences."""
    return f"{variant}|{inferences}"


@dataclass(frozen=True)
class CountResponse:
    """What a counted worker did: ``valgrind`` (how many Valgrinds it ran under: 0 means the
    windows counted nothing) and its ``pid`` (its profiles are ``callgrind.out.PID.N``)."""

    valgrind: int
    pid: int
    windows: tuple[str, ...]

    def to_json(self) -> JsonDict:
        return {"valgrind": self.valgrind, "pid": self.pid, "windows": list(self.windows)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CountResponse:
        kind = "count response"
        return cls(_int(data, "valgrind", kind), _int(data, "pid", kind),
                   tuple(str(w) for w in _list(data, "windows", kind)))


@dataclass(frozen=True)
class CountRequest:
    """Count ``variant`` on ``runner``: ``warmup`` inferences before and after instrumentation
    starts, then a window of one inference and one of ``inferences``; inputs seeded ``seed``."""

    mode: ClassVar[str] = MODE
    variant: MeasureVariant
    runner: str
    runner_options: RunnerOptions
    warmup: int
    inferences: int
    seed: int
    input_specs: tuple[InputSpec, ...]

    @property
    def threads(self) -> int:
        return 1

    @property
    def backends(self) -> tuple[str, ...]:
        return (self.variant.artifact.backend,)

    def to_json(self) -> JsonDict:
        return {"mode": self.mode, "variant": self.variant.to_json(), "runner": self.runner,
                "runner_options": self.runner_options.to_json(), "warmup": self.warmup,
                "inferences": self.inferences, "seed": self.seed, "input_specs": _specs_json(self.input_specs)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CountRequest:
        kind = "count request"
        return cls(MeasureVariant.from_json(_object(data, "variant", kind)), _str(data, "runner", kind),
                   RunnerOptions.from_json(_object(data, "runner_options", kind)), _int(data, "warmup", kind),
                   _int(data, "inferences", kind), _int(data, "seed", kind), _input_specs(data, kind))

    def parse_response(self, data: Mapping[str, Any]) -> CountResponse:
        return CountResponse.from_json(data)


def do_count(request: CountRequest) -> CountResponse:
    """The worker side of a ``count`` request (see the module's docstring)."""
    from perfguard.backends import get_backend
    from perfguard.models.inputs import make_feeds
    from perfguard.runners import get_runner
    from perfguard.workers.callgrind import ClientRequests

    artifact = request.variant.artifact
    backend = get_backend(artifact.backend)
    backend.require("counts")
    runner = get_runner(request.runner, options=request.runner_options)
    feeds = make_feeds(list(request.input_specs), request.seed)
    executable = backend.load(artifact, runner, 1)
    warmup = max(1, request.warmup)
    for _ in range(warmup):
        executable.run(feeds)
    client = ClientRequests()
    labels = []
    gc.collect()
    gc.disable()  # a collection inside a window would count the heap, not the model
    try:
        client.start()
        for _ in range(warmup):
            executable.run(feeds)
        for count in (1, max(2, request.inferences)):
            label = window_label(request.variant.id, count)
            client.zero()
            for _ in range(count):
                executable.run(feeds)
            client.dump(label)
            labels.append(label)
        client.stop()
    finally:
        gc.enable()
    return CountResponse(client.running(), os.getpid(), tuple(labels))


@dataclass(frozen=True)
class CountCompileRequest:
    """Compile once as ``compile`` says (into its ``out_dir``: a scratch folder), instrumented,
    with a counted window around each piece of real work (``onnx_passes.COUNT_WINDOW``); no
    reference run and no correctness check (the real compile did those)."""

    mode: ClassVar[str] = COMPILE_MODE
    compile: CompileRequest

    @property
    def threads(self) -> int:
        return 1

    @property
    def backends(self) -> tuple[str, ...]:
        return self.compile.backends

    def to_json(self) -> JsonDict:
        return {"mode": self.mode, "compile": self.compile.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CountCompileRequest:
        return cls(CompileRequest.from_json(_object(data, "compile", "count compile request")))

    def parse_response(self, data: Mapping[str, Any]) -> CountResponse:
        return CountResponse.from_json(data)


def do_count_compile(request: CountCompileRequest) -> CountResponse:
    """The worker side of a ``count_compile`` request: every window is dumped with its label."""
    import sys
    from contextlib import contextmanager
    from pathlib import Path

    from perfguard.backends import get_backend
    from perfguard.backends.onnx_passes import COUNT_WINDOW, CountedCompileDone
    from perfguard.suite import PipelineSpec
    from perfguard.workers.callgrind import ClientRequests

    compile_request = request.compile
    if compile_request.compiler_path:
        sys.path.insert(0, compile_request.compiler_path)
    backend = get_backend(compile_request.backend)
    spec = compile_request.pipeline
    pipeline = PipelineSpec(name=spec.name, backend=spec.backend, passes=spec.passes, options=spec.options)
    client = ClientRequests()
    labels: list[str] = []

    @contextmanager
    def window(label: str) -> Iterator[None]:
        # Instrumented inside windows only: what lies between them (perfguard's tracing, a
        # backend's own steps that are not counted) runs at Valgrind's uninstrumented speed,
        # ~10x faster (a TVM compile instrumented throughout did not finish its import in 10 min).
        client.start()
        client.zero()
        yield
        client.dump(label)
        client.stop()
        labels.append(label)

    token = COUNT_WINDOW.set(window)
    gc.collect()
    gc.disable()
    try:
        backend.compile(Path(compile_request.model_path), pipeline, Path(compile_request.out_dir))
    except CountedCompileDone:
        pass  # the backend stopped after its last counted window
    finally:
        gc.enable()
        COUNT_WINDOW.reset(token)
    return CountResponse(client.running(), os.getpid(), tuple(labels))
