"""ONNX Runtime's execution providers for a runner: which ones a session asks for, whether this
onnxruntime build has them, and whether a session really runs on them.

A runner says only what device it is (``Runner.kind``, ``cuda_kernels``), which one
(``device_id``), the options the suite gives the device (``[runners.NAME] options``) and, for an
``npu:<provider>`` runner, the NPU's execution provider (``NpuRunner.spec``). The ``ort`` backend
maps those facts to ONNX Runtime's ``providers`` list here, with the install hints that say how to
get a provider this build lacks, so no runner knows ONNX Runtime (issue 46).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from perfguard.errors import BackendError, RunnerUnavailable
from perfguard.jsonfields import JsonDict
from perfguard.runners.base import Runner
from perfguard.runners.npu import NpuRunner

#: An entry of ONNX Runtime's ``providers`` list: a provider's name, or its name and options.
OrtProvider = str | tuple[str, Mapping[str, object]]

CPU_PROVIDER = "CPUExecutionProvider"
CUDA_PROVIDER = "CUDAExecutionProvider"
GPU_EXTRA_HINT = ("on a GPU machine install the gpu extra in place of the CPU wheel: pip install 'perfguard[gpu]' "
                  "&& pip uninstall -y onnxruntime && pip install --force-reinstall --no-deps 'onnxruntime-gpu>=1.17'")
#: How to get each known NPU provider into this environment.
NPU_INSTALL = {
    "QNNExecutionProvider": "install onnxruntime-qnn in place of onnxruntime (Qualcomm Snapdragon / Hexagon NPUs)",
    "OpenVINOExecutionProvider": "install onnxruntime-openvino in place of onnxruntime (Intel NPUs; needs the NPU "
                                 "driver)",
    "CANNExecutionProvider": "use an onnxruntime built with --use_cann and the Ascend CANN toolkit (Huawei Ascend "
                             "NPUs)",
    "VitisAIExecutionProvider": "install the onnxruntime-vitisai wheel from AMD Ryzen AI Software (AMD XDNA NPUs)",
}
OTHER_PROVIDER_HINT = "use an onnxruntime build that includes it"


def provider_name(provider: OrtProvider) -> str:
    """The execution provider's name in an ORT ``providers`` entry (a name or a (name, options) pair)."""
    return str(provider[0] if isinstance(provider, tuple) else provider)


def available_providers() -> list[str]:
    """Execution providers this onnxruntime build has (imported lazily); tests replace it."""
    import onnxruntime

    return list(onnxruntime.get_available_providers())


def session_providers(runner: Runner) -> list[OrtProvider]:
    """ONNX Runtime providers for sessions on ``runner``, in preference order."""
    if isinstance(runner, NpuRunner):
        return [(runner.spec.provider, runner.provider_options), CPU_PROVIDER]
    if runner.cuda_kernels:
        options: JsonDict = {"device_id": str(runner.device_id)}
        options.update({str(k): v for k, v in runner.options.provider_options.items()})
        return [(CUDA_PROVIDER, options), CPU_PROVIDER]
    return [CPU_PROVIDER]


def check_providers(runner: Runner) -> None:
    """Raise ``RunnerUnavailable`` when ONNX Runtime cannot run sessions on ``runner``: its
    execution provider is not in this onnxruntime build (and, for OpenVINO, its NPU is missing).
    What ``ort`` cases need beyond the device; the CPU provider is always there."""
    wanted = provider_name(session_providers(runner)[0])
    if wanted == CPU_PROVIDER:
        return
    try:
        have = available_providers()
    except ImportError as exc:
        raise RunnerUnavailable(f"onnxruntime is not importable ({exc})") from None
    if wanted not in have:
        hint = GPU_EXTRA_HINT if wanted == CUDA_PROVIDER else NPU_INSTALL.get(wanted, OTHER_PROVIDER_HINT)
        raise RunnerUnavailable(f"{wanted} is not in this onnxruntime build (it has {', '.join(have)}); {hint}")
    if isinstance(runner, NpuRunner) and runner.spec.short == "openvino":
        _check_openvino_device(runner)


def _check_openvino_device(runner: NpuRunner) -> None:
    """OpenVINO builds can list their devices; a missing NPU (no driver) is caught here."""
    try:
        from onnxruntime.capi import _pybind_state
    except ImportError:
        return
    lister = getattr(_pybind_state, "get_available_openvino_device_ids", None)
    if lister is None:
        return
    devices = [str(d) for d in lister()]
    wanted = str(runner.provider_options.get("device_type", "NPU"))
    if devices and not any(d.startswith(wanted.split(".")[0]) for d in devices):
        raise RunnerUnavailable(f"OpenVINO sees no {wanted} device (it has {', '.join(devices)}); "
                                "install the NPU driver")


class SessionLike(Protocol):
    """What :func:`check_session` reads of an ONNX Runtime ``InferenceSession``."""

    def get_providers(self) -> list[str]: ...


def check_session(runner: Runner, session: SessionLike) -> None:
    """Raise ``BackendError`` when a session on ``runner`` silently fell back to another provider.

    ONNX Runtime creates the session on the CPU when a requested provider cannot load (missing
    CUDA or vendor libraries) and only logs it. The first provider the session really uses must
    be the one this runner asked for. ORT's *run-time* fallback (an EP failure in ``run``
    retried on the CPU) is switched off here too, so it fails the case instead.
    """
    requested = provider_name(session_providers(runner)[0])
    actual = [str(p) for p in session.get_providers()]
    if not actual or actual[0] != requested:
        raise BackendError(
            f"runner {runner.name!r} requested {requested} but the session runs on {', '.join(actual) or 'nothing'}; "
            f"ONNX Runtime fell back silently because the provider could not load (its libraries or "
            f"device are missing; set ORT log severity 0 to see why). perfguard does not time "
            f"{', '.join(actual) or 'it'} under the {runner.name!r} label")
    disable = getattr(session, "disable_fallback", None)
    if callable(disable):
        disable()
