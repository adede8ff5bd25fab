"""The ``mock`` backend: no compiler, no hardware, known truth. For unit tests only.

Its artifact is a JSON file holding a latency; running it busy-waits that long and echoes the
inputs. Passes scale the latency (``slower_5pct``, ``slower_10pct``, ``faster_10pct``, ``noop``) or
misbehave on purpose so the harness's fault handling can be tested: ``fail`` raises,
``crash_compile`` kills the compile worker, ``hang_compile`` never returns, ``crash_worker`` kills
each measurement worker that loads the artifact, ``wrong_output`` changes the answer.
Option ``latency`` (a duration, default ``"1ms"``) sets the base time.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.backends.base import (
    Artifact,
    Backend,
    CompileOutput,
    PassInfo,
    PassRecord,
    PassTrace,
    file_sha256,
)
from perfguard.errors import BackendError, UserError, unknown_name_message
from perfguard.units import parse_duration

if TYPE_CHECKING:
    import numpy as np

    from perfguard.runners.base import Runner
    from perfguard.suite import PipelineSpec

SCALES = {"noop": 1.0, "slower_5pct": 1.05, "slower_10pct": 1.10, "faster_10pct": 1 / 1.10}
FAULTS = ("fail", "crash_compile", "hang_compile", "crash_worker", "wrong_output")


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


class MockBackend(Backend):
    name = "mock"

    def versions(self) -> dict[str, str]:
        return {"mock": "1"}

    def list_passes(self) -> list[PassInfo]:
        return [PassInfo(n, "mock", f"multiply latency by {s:.3f}") for n, s in SCALES.items()] + [
            PassInfo(n, "mock", "fault injection") for n in FAULTS]

    def check_pipeline(self, pipeline: PipelineSpec) -> None:
        for name in pipeline.passes:
            if name not in SCALES and name not in FAULTS:
                raise UserError(f"pipeline {pipeline.name!r}: " + unknown_name_message("pass", name, [*SCALES, *FAULTS]))
        for key in pipeline.options:
            if key != "latency":
                raise UserError(f"pipeline {pipeline.name!r}: " + unknown_name_message("mock option", key, ["latency"]))

    def compile(self, model_path: Path, pipeline: PipelineSpec, out_dir: Path) -> CompileOutput:
        self.check_pipeline(pipeline)
        latency = parse_duration(pipeline.options.get("latency", "1ms"), f"pipeline {pipeline.name!r} latency")
        trace = PassTrace(input_hash="0" * 16)
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
            latency *= SCALES.get(name, 1.0)
            ir_hash = hashlib.sha256(f"{previous}|{name}|{latency:.12g}".encode()).hexdigest()[:16]
            trace.passes.append(PassRecord(index, name, "mock", time.perf_counter() - start, 1, 1, {"Mock": 1},
                                           ir_hash, ir_hash != previous))
            previous = ir_hash
        trace.final_hash = previous
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "mock.json"
        settings = {"latency": latency, "model_path": str(model_path), **flags}
        path.write_text(json.dumps(settings, sort_keys=True))
        artifact = Artifact(self.name, str(path), settings, file_sha256(path),
                            path.stat().st_size, node_count=1)
        return CompileOutput(artifact, trace)

    def load(self, artifact: Artifact, runner: Runner, threads: int) -> MockExecutable:
        settings = json.loads(Path(artifact.path).read_text())
        if settings["crash_worker"] and os.environ.get("PERFGUARD_WORKER_MODE") == "measure":
            os.abort()
        return MockExecutable(float(settings["latency"]), bool(settings["wrong_output"]), settings["model_path"])
