"""The ``cuda`` runner: ONNX Runtime's CUDA execution provider on one NVIDIA GPU, watched by NVML.

Needs the ``gpu`` extra (``onnxruntime-gpu``, installed *in place of* ``onnxruntime``: the two
wheels ship the same module and must not share an environment) and an NVIDIA driver (NVML).

Timing reflects device work: ``session.run`` with host (NumPy) inputs and outputs returns after the
outputs are copied back, which waits for the CUDA stream; ``synchronize`` also calls
``cudaDeviceSynchronize`` through the CUDA runtime ONNX Runtime loaded, before the worker reads
the clock, so an executable that returns device buffers is timed correctly too. Warm-up (at least
``min_warmup`` runs) covers module load, cuDNN/cuBLAS autotuning and arena growth.

Settings (``[runners.cuda]``): ``device_id`` (CUDA device index, default 0), ``options`` (CUDA EP
provider options, e.g. ``{cudnn_conv_algo_search = "EXHAUSTIVE"}``), ``clock_tolerance``,
``telemetry_interval``.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

from perfguard.errors import RunnerUnavailable, UserError
from perfguard.runners.base import Runner, ort_available_providers
from perfguard.runners.fingerprint import host_fingerprint
from perfguard.runners.telemetry import (
    NvmlSource,
    TelemetrySource,
    clock_event_reasons_function,
    decode_reasons,
    import_nvml,
    load_nvml,
    nvml_handle,
    nvml_is_unsupported,
)

CUDA_PROVIDER = "CUDAExecutionProvider"
GPU_EXTRA_HINT = ("on a GPU machine install the gpu extra in place of the CPU wheel: pip install 'perfguard[gpu]' "
                  "&& pip uninstall -y onnxruntime && pip install --force-reinstall --no-deps onnxruntime-gpu")
# CUDA runtime sonames ONNX Runtime GPU builds link against, newest first.
CUDART_SONAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so")


def nvml_device_for_cuda(device_id: int, environ: Mapping[str, str] | None = None) -> int | str:
    """The NVML index or UUID of CUDA device ``device_id``.

    CUDA numbers only the devices in ``CUDA_VISIBLE_DEVICES`` (indices or ``GPU-`` UUIDs), while
    NVML always sees every GPU; the n-th visible entry is CUDA device n. Without the variable the
    indices agree when ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (NVML's order); CUDA's default order puts
    the fastest GPU first, which only differs on machines with mixed GPU models, so
    ``benchmarks/gpu_check.sh`` sets PCI_BUS_ID.
    """
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return device_id
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if device_id >= len(entries):
        raise RunnerUnavailable(f"cuda device_id {device_id} is not visible: CUDA_VISIBLE_DEVICES={visible!r} "
                                f"shows {len(entries)} device(s)")
    entry = entries[device_id]
    return int(entry) if entry.isdigit() else entry


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_fingerprint(nvml: Any, handle: Any) -> dict[str, Any]:
    """Facts about one GPU that decide whether numbers are comparable: name, driver, CUDA version,
    ECC and persistence state, power limit, maximum and application clocks (None where unsupported)."""

    def ask(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:
            if nvml_is_unsupported(nvml, exc):
                return None
            raise

    def on_off(value: Any) -> str | None:
        return None if value is None else ("on" if int(value) else "off")

    cuda = ask(nvml.nvmlSystemGetCudaDriverVersion)
    ecc = ask(lambda: nvml.nvmlDeviceGetEccMode(handle))
    power = ask(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    reasons = ask(lambda: clock_event_reasons_function(nvml)(handle))
    return {
        "name": _text(nvml.nvmlDeviceGetName(handle)),
        "uuid": _text(ask(lambda: nvml.nvmlDeviceGetUUID(handle))),
        "driver": _text(nvml.nvmlSystemGetDriverVersion()),
        "cuda_driver_version": None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}",
        "ecc": on_off(ecc[0] if isinstance(ecc, (list, tuple)) else ecc),
        "persistence_mode": on_off(ask(lambda: nvml.nvmlDeviceGetPersistenceMode(handle))),
        "power_limit_w": None if power is None else power / 1000.0,
        "max_sm_clock_mhz": ask(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
        "max_mem_clock_mhz": ask(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        "app_sm_clock_mhz": ask(lambda: nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_SM)),
        "app_mem_clock_mhz": ask(lambda: nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_MEM)),
        "clock_event_reasons_at_rest": None if reasons is None else decode_reasons(int(reasons)),
    }


class CudaRunner(Runner):
    name = "cuda"
    accepted_options = ("provider_options", "device_id", "clock_tolerance", "telemetry_interval")
    min_warmup = 3

    def __init__(self, repo: Any = None, *, nvml_loader: Callable[[], Any] | None = None,
                 providers: Callable[[], list[str]] | None = None) -> None:
        # The NVML module and the provider list are the hardware boundary; tests pass fakes.
        self.repo = repo
        self._nvml_loader = nvml_loader
        self._providers = providers
        self._cudart: Any = None

    def _load_nvml(self) -> Any:
        return load_nvml(self._nvml_loader or import_nvml)

    def _available_providers(self) -> list[str]:
        return (self._providers or ort_available_providers)()

    @property
    def device_id(self) -> int:
        return 0 if self.options.device_id is None else self.options.device_id

    def configure(self, options: Any) -> None:
        super().configure(options)
        if "device_id" in options.provider_options:
            raise UserError("[runners.cuda]: give the device as device_id, not inside options")

    def check_available(self) -> None:
        """Every reason this machine cannot serve, in one message: driver/NVML, device, provider."""
        reasons = []
        try:
            self._device_handle_check()
        except RunnerUnavailable as exc:
            reasons.append(str(exc))
        try:
            have = self._available_providers()
        except ImportError as exc:
            reasons.append(f"onnxruntime is not importable ({exc})")
        else:
            if CUDA_PROVIDER not in have:
                reasons.append(f"{CUDA_PROVIDER} is not in this onnxruntime build (it has {', '.join(have)}); "
                               + GPU_EXTRA_HINT)
        if reasons:
            raise RunnerUnavailable("; ".join(reasons))

    def _device_handle_check(self) -> None:
        nvml = self._load_nvml()
        try:
            count = nvml.nvmlDeviceGetCount()
            if count == 0:
                raise RunnerUnavailable("the NVIDIA driver is loaded but reports no GPU")
            index = nvml_device_for_cuda(self.device_id)
            if isinstance(index, int) and index >= count:
                raise RunnerUnavailable(f"cuda device_id {self.device_id} does not exist: this machine has "
                                        f"{count} GPU(s)")
            try:
                nvml_handle(nvml, index)
            except Exception as exc:
                raise RunnerUnavailable(f"NVML cannot open GPU {index}: {exc}") from None
        finally:
            nvml.nvmlShutdown()

    def describe(self) -> str:
        """One line for ``perfguard runners``: the GPU this runner would use."""
        nvml = self._load_nvml()
        try:
            data = gpu_fingerprint(nvml, nvml_handle(nvml, nvml_device_for_cuda(self.device_id)))
        finally:
            nvml.nvmlShutdown()
        return (f"GPU {self.device_id}: {data['name']}, driver {data['driver']}, CUDA {data['cuda_driver_version']}, "
                f"ECC {data['ecc'] or 'n/a'}, persistence {data['persistence_mode'] or 'n/a'}")

    def fingerprint(self) -> dict[str, Any]:
        data = host_fingerprint(self.repo)
        data["runner"] = self.name
        data["runner_options"] = self.options.to_json()
        try:
            data["libraries"]["onnxruntime-gpu"] = metadata.version("onnxruntime-gpu")
        except metadata.PackageNotFoundError:
            data["libraries"]["onnxruntime-gpu"] = "not installed"
        try:
            nvml = self._load_nvml()
        except RunnerUnavailable as exc:
            data["gpu"] = {"error": str(exc)}
            return data
        try:
            index = nvml_device_for_cuda(self.device_id)
            data["gpu"] = {"cuda_device_id": self.device_id, "nvml_index": index,
                           **gpu_fingerprint(nvml, nvml_handle(nvml, index))}
        except Exception as exc:  # record what failed; the fingerprint must not stop the run
            data["gpu"] = {"error": f"NVML: {exc}"}
        finally:
            nvml.nvmlShutdown()
        return data

    def ort_providers(self) -> list[Any]:
        options = {"device_id": str(self.device_id)}
        options.update({str(k): v for k, v in self.options.provider_options.items()})
        return [(CUDA_PROVIDER, options), "CPUExecutionProvider"]

    def telemetry_sources(self) -> list[TelemetrySource]:
        source = NvmlSource(nvml_device_for_cuda(self.device_id), self._nvml_loader or import_nvml)
        return [source, *super().telemetry_sources()]

    def synchronize(self) -> None:
        """``cudaDeviceSynchronize`` in the CUDA runtime already loaded by ONNX Runtime (if any).

        ``RTLD_NOLOAD`` finds only a library that is already loaded, so this never brings in a second
        CUDA runtime with its own context; before ORT loaded one there is nothing to wait for.
        """
        if self._cudart is None:
            self._cudart = _loaded_cudart() or False
        if self._cudart:
            status = self._cudart.cudaDeviceSynchronize()
            if status != 0:
                raise RuntimeError(f"cudaDeviceSynchronize failed with CUDA error {status}")


def _loaded_cudart(sonames: tuple[str, ...] = CUDART_SONAMES,
                   opener: Callable[[str, int], Any] = ctypes.CDLL) -> Any:
    if not getattr(os, "RTLD_NOLOAD", 0):  # not on this platform: never risk loading a second runtime
        return None
    mode = os.RTLD_NOLOAD | os.RTLD_LAZY
    for soname in sonames:
        try:
            return opener(soname, mode)
        except OSError:
            continue
    return None
