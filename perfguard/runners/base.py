"""The runner contract: the device a compiled artifact is measured on.

A runner knows which ONNX Runtime execution providers serve it, how to check that a session really
uses them (ORT falls back to the CPU silently), what telemetry to sample while the timed rounds run,
and how to fingerprint its environment so that every number carries the machine it came from.
``cpu`` is built in; ``cuda`` and ``npu:<provider>`` plug in behind the same interface without
changing callers.

Per-runner settings come from the suite's ``[runners.NAME]`` table as ``RunnerOptions``
(:mod:`perfguard.runners.options`) and travel to the worker processes as JSON (``runner_options``
in a request).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from perfguard.errors import BackendError, RunnerUnavailable, UserError
from perfguard.jsonfields import JsonDict
from perfguard.runners.options import RunnerOptions

if TYPE_CHECKING:
    from perfguard.runners.telemetry import TelemetrySampler, TelemetrySource


#: An entry of ONNX Runtime's ``providers`` list: a provider's name, or its name and options.
OrtProvider = str | tuple[str, Mapping[str, object]]


def provider_name(provider: OrtProvider) -> str:
    """The execution provider's name in an ORT ``providers`` entry (a name or a (name, options) pair)."""
    return str(provider[0] if isinstance(provider, tuple) else provider)


def ort_available_providers() -> list[str]:
    """Execution providers this onnxruntime build has (imported lazily)."""
    import onnxruntime

    return list(onnxruntime.get_available_providers())


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

    def check_available(self) -> None:
        """Raise ``RunnerUnavailable`` with every reason this machine cannot serve ONNX Runtime
        sessions on this runner: the device (``check_device``) and the ORT provider
        (``check_ort``), in one message. What a case needs depends on its backend: the stages ask
        ``Backend.check_runner`` instead (an IREE case on ``cuda`` needs no ORT provider)."""
        reasons = []
        for check in (self.check_device, self.check_ort):
            try:
                check()
            except RunnerUnavailable as exc:
                reasons.append(str(exc))
        if reasons:
            raise RunnerUnavailable("; ".join(reasons))

    def check_device(self) -> None:
        """Raise ``RunnerUnavailable`` when the device itself is missing (driver, GPU): what every
        backend needs. Nothing by default (the CPU is always there)."""

    def check_ort(self) -> None:
        """Raise ``RunnerUnavailable`` when ONNX Runtime cannot run sessions on this runner (its
        execution provider is not in this onnxruntime build). Nothing by default."""

    @property
    def device_id(self) -> int | None:
        """The device index the suite chose (``[runners.NAME] device_id``), or None for a runner
        without devices to choose from."""
        return None

    @abstractmethod
    def fingerprint(self) -> JsonDict:
        """Facts about the device and environment that make numbers comparable (JSON-ready)."""

    @abstractmethod
    def ort_providers(self) -> list[OrtProvider]:
        """ONNX Runtime providers for sessions on this runner, in preference order."""

    def describe(self) -> str:
        """One line for ``perfguard runners``: the device this runner would use."""
        from perfguard.runners.fingerprint import cpu_model

        return f"{cpu_model()} via {provider_name(self.ort_providers()[0])}"

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

    def check_ort_session(self, session: Any) -> None:
        """Raise ``BackendError`` when a session silently fell back to another provider.

        ONNX Runtime creates the session on the CPU when a requested provider cannot load (missing
        CUDA or vendor libraries) and only logs it. The first provider the session really uses must
        be the one this runner asked for. ORT's *run-time* fallback (an EP failure in ``run``
        retried on the CPU) is switched off here too, so it fails the case instead.
        """
        requested = provider_name(self.ort_providers()[0])
        actual = [str(p) for p in session.get_providers()]
        if not actual or actual[0] != requested:
            raise BackendError(
                f"runner {self.name!r} requested {requested} but the session runs on {', '.join(actual) or 'nothing'}; "
                f"ONNX Runtime fell back silently because the provider could not load (its libraries or "
                f"device are missing; set ORT log severity 0 to see why). perfguard does not time "
                f"{', '.join(actual) or 'it'} under the {self.name!r} label")
        disable = getattr(session, "disable_fallback", None)
        if callable(disable):
            disable()

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
