"""``npu:<provider>`` runners: ONNX Runtime execution providers that drive NPUs.

``<provider>`` is a short name (``qnn``, ``openvino``, ``cann``, ``vitisai``) or a full execution
provider name (``npu:QNNExecutionProvider``). Provider options come from the suite, verbatim::

    [runners."npu:qnn"]
    options = { backend_path = "libQnnHtp.so", htp_performance_mode = "burst" }

``openvino`` defaults to ``device_type = "NPU"`` (its default would be the CPU). Availability is
checked before any work, against the providers this onnxruntime build has; a session that fell
back to the CPU fails the case (``Runner.check_ort_session``). NPUs have no built-in telemetry:
results are ``unmonitored`` unless a vendor plug-in registers a source
(``perfguard.runners.telemetry.register_telemetry``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from perfguard.errors import RunnerUnavailable, UserError, unknown_name_message
from perfguard.jsonfields import JsonDict
from perfguard.runners.base import OrtProvider, Runner, ort_available_providers
from perfguard.runners.fingerprint import host_fingerprint
from perfguard.runners.options import RunnerOptions


@dataclass(frozen=True)
class NpuProvider:
    """A known NPU execution provider: its ORT name, default options and how to get it."""

    short: str
    provider: str
    install: str
    package: str | None = None
    defaults: Mapping[str, str] = field(default_factory=dict)


NPU_PROVIDERS: dict[str, NpuProvider] = {
    p.short: p for p in (
        NpuProvider("qnn", "QNNExecutionProvider", "install onnxruntime-qnn in place of onnxruntime "
                    "(Qualcomm Snapdragon / Hexagon NPUs)", "onnxruntime-qnn"),
        NpuProvider("openvino", "OpenVINOExecutionProvider", "install onnxruntime-openvino in place of "
                    "onnxruntime (Intel NPUs; needs the NPU driver)", "onnxruntime-openvino",
                    {"device_type": "NPU"}),
        NpuProvider("cann", "CANNExecutionProvider", "use an onnxruntime built with --use_cann and the "
                    "Ascend CANN toolkit (Huawei Ascend NPUs)"),
        NpuProvider("vitisai", "VitisAIExecutionProvider", "install the onnxruntime-vitisai wheel from AMD "
                    "Ryzen AI Software (AMD XDNA NPUs)", "onnxruntime-vitisai"),
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
        return NpuProvider(spec, spec, "use an onnxruntime build that includes it")
    valid = [*NPU_PROVIDERS, "<Name>ExecutionProvider"]
    raise UserError(unknown_name_message("npu provider", spec, valid) + " (written as npu:<provider>)")


class NpuRunner(Runner):
    kind = "npu"
    """``npu:<provider>``: one ONNX Runtime NPU execution provider with options from the suite."""

    accepted_options = ("provider_options", "clock_tolerance", "telemetry_interval")
    min_warmup = 3

    def __init__(self, provider: str, repo: Path | None = None, *, providers: Callable[[], list[str]] | None = None) -> None:
        self.spec = resolve_provider(provider)
        self.name = f"npu:{provider}"
        self.repo = repo
        self._providers = providers  # the provider list is the hardware boundary; tests pass a fake

    def _available_providers(self) -> list[str]:
        return (self._providers or ort_available_providers)()

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

    def check_ort(self) -> None:
        """The provider in this onnxruntime build (and, for OpenVINO, its NPU): an NPU runner is
        an ORT provider, so this is its whole availability."""
        try:
            have = self._available_providers()
        except ImportError as exc:
            raise RunnerUnavailable(f"onnxruntime is not importable ({exc})") from None
        if self.spec.provider not in have:
            raise RunnerUnavailable(f"{self.spec.provider} is not in this onnxruntime build (it has "
                                    f"{', '.join(have)}); {self.spec.install}")
        if self.spec.short == "openvino":
            self._check_openvino_device()

    def _check_openvino_device(self) -> None:
        """OpenVINO builds can list their devices; a missing NPU (no driver) is caught here."""
        try:
            from onnxruntime.capi import _pybind_state
        except ImportError:
            return
        lister = getattr(_pybind_state, "get_available_openvino_device_ids", None)
        if lister is None:
            return
        devices = [str(d) for d in lister()]
        wanted = str(self.provider_options.get("device_type", "NPU"))
        if devices and not any(d.startswith(wanted.split(".")[0]) for d in devices):
            raise RunnerUnavailable(f"OpenVINO sees no {wanted} device (it has {', '.join(devices)}); "
                                    "install the NPU driver")

    def describe(self) -> str:
        return f"{self.spec.provider} with options {self.provider_options or '{}'}"

    def fingerprint(self) -> JsonDict:
        package = self.spec.package
        data = host_fingerprint(self.repo, (package,) if package else ())
        data["runner"] = self.name
        data["runner_options"] = self.options.to_json()
        data["npu"] = {"provider": self.spec.provider, "provider_options": self.provider_options}
        return data

    def ort_providers(self) -> list[OrtProvider]:
        return [(self.spec.provider, self.provider_options), "CPUExecutionProvider"]
