"""``RunnerOptions``: the settings of one runner, from the suite's ``[runners.NAME]`` table.

Plain data with no runner behind it: the suite parser builds them, the runner contract
(:mod:`perfguard.runners.base`) takes them, telemetry plug-ins read them, and they travel to the
worker processes as JSON (``runner_options`` in a request).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from perfguard.jsonfields import JsonDict


@dataclass(frozen=True)
class RunnerOptions:
    """Settings of one runner, from the suite's ``[runners.NAME]`` table.

    ``provider_options``
        Passed verbatim to the ONNX Runtime execution provider (``cuda``, ``npu:*``).
    ``device_id``
        Which device of its kind (``cuda``: the CUDA device index; default 0).
    ``clock_tolerance``
        Fraction (0.02 = 2 %) by which clocks may move during a run, or differ from the
        baseline's, before the result is flagged.
    ``telemetry_interval``
        Seconds between telemetry samples.
    """

    provider_options: Mapping[str, Any] = field(default_factory=dict)
    device_id: int | None = None
    clock_tolerance: float = 0.02
    telemetry_interval: float = 0.1

    def to_json(self) -> JsonDict:
        data = dataclasses.asdict(self)
        data["provider_options"] = dict(self.provider_options)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> RunnerOptions:
        if not data:
            return cls()
        return cls(**{k: v for k, v in data.items() if k in {f.name for f in dataclasses.fields(cls)}})

    def set_fields(self) -> list[str]:
        """Names of the settings that differ from the defaults (what the suite chose)."""
        default = RunnerOptions()
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(default, f.name)]
