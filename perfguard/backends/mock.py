"""The ``mock`` backend: no compiler, no hardware, known truth. For unit tests only.

Its artifact is a JSON file holding a latency; running it busy-waits that long and echoes the
inputs. Passes scale the latency (``slower_5pct``, ``slower_10pct``, ``faster_10pct``, ``noop``) or
misbehave on purpose so the harness's fault handling can be tested: ``fail`` raises,
``crash_compile`` kills the compile worker, ``hang_compile`` never returns, ``crash_worker`` kills
each measurement worker that loads the artifact, ``wrong_output`` changes the answer.
Option ``latency`` (a duration, default ``"1ms"``) sets the base time; option ``speedup`` (a
boolean, default false) divides it by 1.10.

It exercises every capability of the contract (``Capabilities``), so the stages that ask for one
are tested without a compiler:

* **profile**: ``load_profiled`` records each run as ONNX Runtime's profiler would (one
  ``model_run`` and one ``Mock`` node per run), the format ``perfguard.workers.trace`` reads;
* **hybrid compiles**: compiled from a mock artifact (a hybrid's stage 2), that artifact's
  latency over the default 1 ms scales this one, so what the prefix's passes did carries over;
* **user passes**: ``package.module:function`` is called with the latency in seconds and returns
  the new one;
* **tuning moves**: ``speedup`` toggled (``tuning_moves``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfguard.backends.base import (
    Artifact,
    Backend,
    Capabilities,
    CompileOutput,
    CountWording,
    OptionEdit,
    PassInfo,
    PassRecord,
    PassTrace,
    file_sha256,
)
from perfguard.backends.settings import check_option_keys
from perfguard.errors import BackendError, FieldError, UserError, unknown_name_message
from perfguard.jsonfields import JsonDict, number, string
from perfguard.units import parse_duration

if TYPE_CHECKING:
    import numpy as np

    from perfguard.runners.base import Runner
    from perfguard.suite import PipelineSpec

SCALES = {"noop": 1.0, "slower_5pct": 1.05, "slower_10pct": 1.10, "faster_10pct": 1 / 1.10}
FAULTS = ("fail", "crash_compile", "hang_compile", "crash_worker", "wrong_output")
OPTIONS = ("latency", "speedup")
DEFAULT_LATENCY = "1ms"


class MockExecutable:
    """Busy-waits the artifact's latency, then answers what the source model answers (computed by
    ONNX Runtime once per distinct input), or a wrong answer when asked to."""

    def __init__(self, latency: float, wrong: bool, model_path: str) -> None:
        self.latency = latency
        self.wrong = wrong
        self.model_path = model_path
        self._answers: dict[bytes, list[np.ndarray]] = {}

    def _answer(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        key = b"".join(value.tobytes() for value in feeds.values())
        if key not in self._answers:
            if os.path.exists(self.model_path):
                import onnxruntime as ort

                session = ort.InferenceSession(self.model_path, providers=["CPUExecutionProvider"])
                self._answers[key] = session.run(None, dict(feeds))
            else:
                self._answers[key] = [value.copy() for value in feeds.values()]
        return self._answers[key]

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        deadline = time.perf_counter() + self.latency
        outputs = self._answer(feeds)
        while time.perf_counter() < deadline:
            pass
        return [o + 1 for o in outputs] if self.wrong else outputs


class MockProfiledExecutable(MockExecutable):
    """A ``MockExecutable`` that records each run as ONNX Runtime's profiler does: a
    ``model_run`` event around it and one ``Mock`` node event for its busy wait (µs from load)."""

    def __init__(self, latency: float, wrong: bool, model_path: str, trace_prefix: str) -> None:
        super().__init__(latency, wrong, model_path)
        self.trace_path = f"{trace_prefix}_mock.json"
        self.origin = time.perf_counter()
        self.events: list[JsonDict] = []

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        start = time.perf_counter()
        outputs = super().run(feeds)
        end = time.perf_counter()
        ts, dur = (start - self.origin) * 1e6, (end - start) * 1e6
        self.events.append({"cat": "Session", "name": "model_run", "ph": "X", "ts": ts, "dur": dur})
        self.events.append({"cat": "Node", "name": "mock_kernel_time", "ph": "X", "ts": ts, "dur": dur,
                            "args": {"op_name": "Mock", "provider": "MockExecutionProvider"}})
        return outputs

    def end_profiling(self) -> str:
        Path(self.trace_path).write_text(json.dumps(self.events))
        return self.trace_path


def _user_pass(name: str) -> Any:
    """The function a user pass ``package.module:function`` names (the compile worker has put the
    suite's ``[compiler] path`` on ``sys.path``)."""
    import importlib

    module_name, _, func_name = name.partition(":")
    try:
        func = getattr(importlib.import_module(module_name), func_name, None)
    except Exception as exc:  # the compiler under test may raise anything on import
        raise BackendError(f"user pass {name!r}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    if not callable(func):
        raise BackendError(f"user pass {name!r}: module {module_name} has no function {func_name!r}")
    return func


def _source_artifact(model_path: Path) -> tuple[float, Path] | None:
    """The latency (seconds) and model of a mock artifact compiled from (a hybrid's stage 2), None
    for a model."""
    if model_path.suffix != ".json" or not model_path.is_file():
        return None
    data = json.loads(model_path.read_text())
    if not (isinstance(data, dict) and "latency" in data):
        return None
    kind = f"mock artifact {model_path}"
    try:
        return number(data, "latency", kind), Path(string(data, "model_path", kind))
    except FieldError as exc:
        raise BackendError(str(exc)) from None


class MockBackend(Backend):
    name = "mock"
    capabilities = Capabilities(profile=True, hybrid_compile=True, user_passes=True)
    test_only = True

    def versions(self) -> dict[str, str]:
        return {"mock": "1"}

    def list_passes(self) -> list[PassInfo]:
        return [PassInfo(n, "mock", f"multiply latency by {s:.3f}") for n, s in SCALES.items()] + [
            PassInfo(n, "mock", "fault injection") for n in FAULTS]

    def check_pipeline(self, pipeline: PipelineSpec) -> None:
        for name in pipeline.passes:
            if name not in SCALES and name not in FAULTS and ":" not in name:  # a:b is a user pass
                raise UserError(f"pipeline {pipeline.name!r}: " + unknown_name_message("pass", name, [*SCALES, *FAULTS]))
        check_option_keys(pipeline.options, OPTIONS, "mock", f"pipeline {pipeline.name!r}")
        if not isinstance(pipeline.options.get("speedup", False), bool):
            raise UserError(f"pipeline {pipeline.name!r}: mock option speedup must be true or false, "
                            f"found {pipeline.options['speedup']!r}")

    def tuning_moves(self, options: Mapping[str, object]) -> list[OptionEdit]:
        speedup = bool(options.get("speedup", False))
        return [OptionEdit(f"speedup -> {str(not speedup).lower()}", {**options, "speedup": not speedup})]

    def compile(self, model_path: Path, pipeline: PipelineSpec, out_dir: Path) -> CompileOutput:
        self.check_pipeline(pipeline)
        latency = parse_duration(pipeline.options.get("latency", DEFAULT_LATENCY), f"pipeline {pipeline.name!r} latency")
        if pipeline.options.get("speedup", False):
            latency /= 1.10
        trace = PassTrace(input_hash="0" * 16)
        source = _source_artifact(model_path)
        if source is not None:
            latency *= source[0] / parse_duration(DEFAULT_LATENCY, "mock")
            trace.input_hash = hashlib.sha256(model_path.read_bytes()).hexdigest()[:16]
            model_path = source[1]
        flags = {"crash_worker": False, "wrong_output": False}
        previous = trace.input_hash
        for index, name in enumerate(pipeline.passes):
            start = time.perf_counter()
            if name == "fail":
                raise BackendError(f"pass #{index + 1} 'fail' raised RuntimeError: injected failure")
            if name == "crash_compile":
                os.abort()
            if name == "hang_compile":
                time.sleep(3600)
            if name in flags:
                flags[name] = True
            latency = float(_user_pass(name)(latency)) if ":" in name else latency * SCALES.get(name, 1.0)
            ir_hash = hashlib.sha256(f"{previous}|{name}|{latency:.12g}".encode()).hexdigest()[:16]
            trace.passes.append(PassRecord(index, name, "mock", time.perf_counter() - start, 1, 1, {"Mock": 1},
                                           ir_hash, ir_hash != previous))
            previous = ir_hash
        trace.final_hash = previous
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "mock.json"
        settings: JsonDict = {"latency": latency, "model_path": str(model_path), **flags}
        path.write_text(json.dumps(settings, sort_keys=True))
        artifact = Artifact(self.name, str(path), settings, file_sha256(path),
                            path.stat().st_size, node_count=1)
        return CompileOutput(artifact, trace)

    def count_wording(self) -> CountWording:
        """The mock's one node (it profiles, so this words only a mock without ``profile``)."""
        return CountWording("mock node", "mock nodes", "the mock artifact's settings", "the mock", "mock-nodes")

    def load(self, artifact: Artifact, runner: Runner, threads: int) -> MockExecutable:
        settings = json.loads(Path(artifact.path).read_text())
        if settings["crash_worker"] and os.environ.get("PERFGUARD_WORKER_MODE") == "measure":
            os.abort()
        return MockExecutable(float(settings["latency"]), bool(settings["wrong_output"]), settings["model_path"])

    def load_profiled(self, artifact: Artifact, runner: Runner, threads: int,
                      trace_prefix: str) -> MockProfiledExecutable:
        settings = json.loads(Path(artifact.path).read_text())
        return MockProfiledExecutable(float(settings["latency"]), bool(settings["wrong_output"]),
                                      settings["model_path"], trace_prefix)
