"""``example``: a third-party backend that profiles and offers a tuning move through the contract.

Its artifact is a JSON list of ops with their times; running it busy-waits each op in turn and
answers what the source model answers (ONNX Runtime on the model, as a real backend's output
would match it). Pass ``add_copy`` appends a 300 µs ``Copy`` op, ``noop`` does nothing; option
``fast`` (a boolean) halves the ``Compute`` op, and ``tuning_moves`` offers to toggle it. Profiled,
each run is written as ONNX Runtime's profiler writes it (the format the contract names).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfguard.backends import (
    Artifact,
    Backend,
    Capabilities,
    CompileOutput,
    OptionEdit,
    PassInfo,
    PassRecord,
    PassTrace,
)
from perfguard.backends.base import file_sha256
from perfguard.errors import UserError

PASSES = {"add_copy": "append a 300 us Copy op", "noop": "change nothing"}


class ExampleExecutable:
    def __init__(self, ops: list[tuple[str, float]], model_path: str, trace_prefix: str | None = None) -> None:
        import onnxruntime

        self.ops = ops
        self.session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        self.trace_path = f"{trace_prefix}_example.json" if trace_prefix else None
        self.origin = time.perf_counter()
        self.events: list[dict[str, Any]] = []

    def _event(self, cat: str, name: str, start: float, end: float, **args: str) -> None:
        self.events.append({"cat": cat, "name": name, "ph": "X", "ts": (start - self.origin) * 1e6,
                            "dur": (end - start) * 1e6, "args": args})

    def run(self, feeds: Mapping[str, Any]) -> list[Any]:
        start = time.perf_counter()
        outputs: list[Any] = self.session.run(None, dict(feeds))
        for index, (op, seconds) in enumerate(self.ops):
            began = time.perf_counter()
            while time.perf_counter() < began + seconds:
                pass
            if self.trace_path:
                self._event("Node", f"n{index}_kernel_time", began, time.perf_counter(), op_name=op,
                            provider="ExampleProvider")
        if self.trace_path:
            self._event("Session", "model_run", start, time.perf_counter())
        return outputs

    def end_profiling(self) -> str:
        assert self.trace_path is not None
        Path(self.trace_path).write_text(json.dumps(self.events))
        return self.trace_path


class ExampleBackend(Backend):
    name = "example"
    capabilities = Capabilities(profile=True)

    def versions(self) -> dict[str, str]:
        return {"example": "1.0"}

    def list_passes(self) -> list[PassInfo]:
        return [PassInfo(name, "example", summary) for name, summary in PASSES.items()]

    def check_pipeline(self, pipeline: Any) -> None:
        for name in pipeline.passes:
            if name not in PASSES:
                raise UserError(f"pipeline {pipeline.name!r}: unknown example pass {name!r}")
        if set(pipeline.options) - {"fast"}:
            raise UserError(f"pipeline {pipeline.name!r}: the example backend's only option is fast")

    def tuning_moves(self, options: Mapping[str, Any]) -> list[OptionEdit]:
        fast = bool(options.get("fast", False))
        return [OptionEdit(f"fast -> {str(not fast).lower()}", {**options, "fast": not fast})]

    def compile(self, model_path: Path, pipeline: Any, out_dir: Path) -> CompileOutput:
        self.check_pipeline(pipeline)
        ops = [("Compute", 0.0005 if pipeline.options.get("fast") else 0.001)]
        trace = PassTrace(input_hash="0" * 16)
        previous = trace.input_hash
        for index, name in enumerate(pipeline.passes):
            if name == "add_copy":
                ops.append(("Copy", 0.0003))
            ir_hash = hashlib.sha256(f"{previous}|{name}".encode()).hexdigest()[:16]
            trace.passes.append(PassRecord(index, name, "example", 0.0, len(ops), len(ops), {}, ir_hash,
                                           ir_hash != previous))
            previous = ir_hash
        trace.final_hash = previous
        out_dir.mkdir(parents=True, exist_ok=True)
        # The model travels with the artifact (its outputs are the answer), by its hash: a path
        # would give two compiles of one model in two folders two execution identities.
        shutil.copyfile(model_path, out_dir / "model.onnx")
        path = out_dir / "example.json"
        settings = {"ops": ops, "model_sha256": file_sha256(model_path)}
        path.write_text(json.dumps(settings))
        return CompileOutput(Artifact(self.name, str(path), settings, file_sha256(path), path.stat().st_size,
                                      node_count=len(ops)), trace)

    def _read(self, artifact: Artifact) -> tuple[list[tuple[str, float]], str]:
        settings = json.loads(Path(artifact.path).read_text())
        return [(str(op), float(seconds)) for op, seconds in settings["ops"]], str(Path(artifact.path).parent / "model.onnx")

    def load(self, artifact: Artifact, runner: Any, threads: int) -> ExampleExecutable:
        return ExampleExecutable(*self._read(artifact))

    def load_profiled(self, artifact: Artifact, runner: Any, threads: int, trace_prefix: str) -> ExampleExecutable:
        return ExampleExecutable(*self._read(artifact), trace_prefix=trace_prefix)
