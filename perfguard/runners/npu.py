"""``npu:<provider>`` runners: ONNX Runtime execution providers that drive NPUs.

``<provider>`` is a short name (``qnn``, ``openvino``, ``cann``, ``vitisai``) or a full execution
provider name (``npu:QNNExecutionProvider``). Provider options come from the suite, verbatim::

    [runners."npu:qnn"]
    options = { backend_path = "libQnnHtp.so", htp_performance_mode = "burst" }

``openvino`` defaults to ``device_type = "NPU"`` (its default would be the CPU). Availability is
checked before any work, against the providers this onnxruntime build has; a session that fell
back to the CPU fails the case (both the ``ort`` backend's: ``perfguard.backends.ort.execution_providers``,
which also says how to install a missing provider). NPUs have no built-in telemetry:
results are ``unmonitored`` unless a vendor plug-in registers a source
(``perfguard.runners.telemetry.register_telemetry``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from perfguard.errors import UserError, unknown_name_message
from perfguard.jsonfields import JsonDict
from perfguard.runners.base import Runner
from perfguard.runners.fingerprint import host_fingerprint
from perfguard.runners.options import RunnerOptions


@dataclass(frozen=True)
class NpuProvider:
    """A known NPU execution provider: its name, the package whose version the fingerprint records
    and its default options."""

    short: str
    provider: str
    package: str | None = None
    defaults: Mapping[str, str] = field(default_factory=dict)


NPU_PROVIDERS: dict[str, NpuProvider] = {
    p.short: p for p in (
        NpuProvider("qnn", "QNNExecutionProvider", "onnxruntime-qnn"),
        NpuProvider("openvino", "OpenVINOExecutionProvider", "onnxruntime-openvino", {"device_type": "NPU"}),
        NpuProvider("cann", "CANNExecutionProvider"),
        NpuProvider("vitisai", "VitisAIExecutionProvider", "onnxruntime-vitisai"),
    )
}


def resolve_provider(spec: str) -> NpuProvider:
    """``qnn`` -> QNNExecutionProvider; a full ``...ExecutionProvider`` name is taken as given."""
    if spec in NPU_PROVIDERS:
        return NPU_PROVIDERS[spec]
    for known in NPU_PROVIDERS.values():
        if spec == known.provider:
            return known
    if spec.endswith("ExecutionProvider"):
        return NpuProvider(spec, spec)
    valid = [*NPU_PROVIDERS, "<Name>ExecutionProvider"]
    raise UserError(unknown_name_message("npu provider", spec, valid) + " (written as npu:<provider>)")


class NpuRunner(Runner):
    kind = "npu"
    """``npu:<provider>``: one NPU execution provider with options from the suite."""

    accepted_options = ("provider_options", "clock_tolerance", "telemetry_interval")
    min_warmup = 3

    def __init__(self, provider: str, repo: Path | None = None) -> None:
        self.spec = resolve_provider(provider)
        self.name = f"npu:{provider}"
        self.repo = repo

    @property
    def provider_options(self) -> JsonDict:
        options: JsonDict = dict(self.spec.defaults)
        options.update({str(k): v for k, v in self.options.provider_options.items()})
        return options

    @classmethod
    def check_options(cls, name: str, options: RunnerOptions) -> None:
        """Also refuse an unknown provider in ``name`` (``npu:<provider>``), as making the runner would."""
        resolve_provider(name.partition(":")[2])
        if options.device_id is not None:
            raise UserError(f"runner {name!r} does not take 'device_id'; give the provider's own device "
                            "option inside options (e.g. device_type or device_id)")
        super().check_options(name, options)

    def describe(self) -> str:
        return f"{self.spec.provider} with options {self.provider_options or '{}'}"

    def fingerprint(self) -> JsonDict:
        package = self.spec.package
        data = host_fingerprint(self.repo, (package,) if package else ())
        data["runner"] = self.name
        data["runner_options"] = self.options.to_json()
        data["npu"] = {"provider": self.spec.provider, "provider_options": self.provider_options}
        return data
