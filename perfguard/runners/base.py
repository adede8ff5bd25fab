"""The runner contract: the device a compiled artifact is measured on.

A runner knows what device it is (``kind``, ``host_cpu``, ``cuda_kernels``), which one
(``device_id``) and the options the suite gives it, whether the device is there, what telemetry to
sample while the timed rounds run, and how to fingerprint its environment so that every number
carries the machine it came from. What a backend's runtime needs of it (an ONNX Runtime execution
provider, an IREE driver) the backend asks itself, from those facts (``Backend.check_runner``).
``cpu`` is built in; ``cuda`` and ``npu:<provider>`` plug in behind the same interface without
changing callers.

Per-runner settings come from the suite's ``[runners.NAME]`` table as ``RunnerOptions``
(:mod:`perfguard.runners.options`) and travel to the worker processes as JSON (``runner_options``
in a request).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from perfguard.errors import UserError
from perfguard.jsonfields import JsonDict
from perfguard.runners.options import RunnerOptions

if TYPE_CHECKING:
    from perfguard.runners.telemetry import TelemetrySampler, TelemetrySource


class Runner(ABC):
    """One device kind on this machine."""

    name: str
    options: RunnerOptions = RunnerOptions()
    # Which RunnerOptions fields this runner understands; others in the suite are an error.
    accepted_options: ClassVar[tuple[str, ...]] = ("clock_tolerance", "telemetry_interval")
    # Untimed runs after loading, at least: device runners need more (module load, JIT, autotuning).
    min_warmup: ClassVar[int] = 1
    #: The device kind: its name without a provider (``cpu``, ``cuda``, ``npu``). A stage that
    #: needs to know what a runner is asks it (this, or the properties below), never its name.
    kind: ClassVar[str]
    #: Its artifacts run on this machine's CPU (an ONNX Runtime CPU session, a library compiled
    #: for the host).
    host_cpu: ClassVar[bool] = False
    #: Its kernels run on an NVIDIA GPU through CUDA: ONNX Runtime's ``Kernel`` events time them,
    #: Nsight Systems and Nsight Compute profile them.
    cuda_kernels: ClassVar[bool] = False

    def check_device(self) -> None:
        """Raise ``RunnerUnavailable`` when the device itself is missing (driver, GPU): what every
        backend needs. Nothing by default (the CPU is always there)."""

    @property
    def device_id(self) -> int | None:
        """The device index the suite chose (``[runners.NAME] device_id``), or None for a runner
        without devices to choose from."""
        return None

    @abstractmethod
    def fingerprint(self) -> JsonDict:
        """Facts about the device and environment that make numbers comparable (JSON-ready)."""

    def describe(self) -> str:
        """One line for ``perfguard runners``: the device this runner would use."""
        from perfguard.runners.fingerprint import cpu_model

        return cpu_model()

    @classmethod
    def check_options(cls, name: str, options: RunnerOptions) -> None:
        """Raise ``UserError`` when runner ``name`` (of this kind) does not use a setting of ``options``.

        A class method, so the suite checks its ``[runners.NAME]`` tables without making a runner."""
        for setting in options.set_fields():
            if setting not in cls.accepted_options:
                raise UserError(f"runner {name!r} does not take {setting!r} (it takes: "
                                f"{', '.join(cls.accepted_options)})")

    def configure(self, options: RunnerOptions) -> None:
        """Take the suite's settings; raise ``UserError`` for a setting this runner does not use."""
        self.check_options(self.name, options)
        self.options = options

    def synchronize(self) -> None:
        """Wait for queued device work; the worker calls it before reading the clock. CPU: nothing."""

    def telemetry_sources(self) -> list[TelemetrySource]:
        """Sources to sample during measurement: registered plug-ins that apply to this runner."""
        from perfguard.runners.telemetry import plugin_sources

        return plugin_sources(self)

    def telemetry(self) -> TelemetrySampler | None:
        """A sampler over this runner's telemetry sources, or None when it has none."""
        from perfguard.runners.telemetry import TelemetrySampler

        sources = self.telemetry_sources()
        if not sources:
            return None
        return TelemetrySampler(sources, interval_s=self.options.telemetry_interval,
                                clock_tolerance=self.options.clock_tolerance)
