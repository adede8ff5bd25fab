"""The runner contract: the device a compiled artifact is measured on.

A runner knows which ONNX Runtime execution providers serve it, how to check that a session really
uses them (ORT falls back to the CPU silently), and how to fingerprint its environment so that
every number carries the machine it came from. ``cpu`` is built in; ``cuda`` and ``npu:<provider>``
plug in behind the same interface without changing callers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class Runner(ABC):
    """One device kind on this machine."""

    name: str

    @abstractmethod
    def check_available(self) -> None:
        """Raise ``RunnerUnavailable`` with the reason when this machine cannot serve."""

    @abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """Facts about the device and environment that make numbers comparable (JSON-ready)."""

    @abstractmethod
    def ort_providers(self) -> list[Any]:
        """ONNX Runtime providers for sessions on this runner, in preference order."""

    def check_ort_session(self, session: Any) -> None:
        """Raise ``BackendError`` when a session silently fell back to another provider."""
