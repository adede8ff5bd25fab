"""The ``cpu`` runner: this machine's CPU (ONNX Runtime's CPU execution provider, a library
compiled for the host), threads pinned by the suite."""

from __future__ import annotations

from pathlib import Path

from perfguard.jsonfields import JsonDict
from perfguard.runners.base import Runner
from perfguard.runners.fingerprint import cpu_model, host_fingerprint


class CpuRunner(Runner):
    name = "cpu"
    kind = "cpu"
    host_cpu = True

    def __init__(self, repo: Path | None = None) -> None:
        self.repo = repo

    def fingerprint(self) -> JsonDict:
        data = host_fingerprint(self.repo)
        data["runner"] = self.name
        return data

    def describe(self) -> str:
        return f"{cpu_model()} via CPUExecutionProvider"
