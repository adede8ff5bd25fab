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
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from perfguard.errors import RunnerUnavailable, UserError, first_line
from perfguard.jsonfields import JsonDict
from perfguard.runners.base import Runner
from perfguard.runners.fingerprint import host_fingerprint
from perfguard.runners.options import RunnerOptions
from perfguard.runners.telemetry import TelemetrySource, decode_reasons

# CUDA runtime sonames ONNX Runtime GPU builds link against, newest first.
CUDART_SONAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so")


# NVML: the GPU's driver interface, read for availability, fingerprint and telemetry.


def import_nvml() -> Any:
    """Import the NVML bindings (``pynvml``), without their deprecation notice.

    The ``pynvml`` distribution now only redirects to ``nvidia-ml-py`` and warns on import; the
    module is the same, and a warning there must not fail a run that treats warnings as errors.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import pynvml
    return pynvml


def load_nvml(loader: Callable[[], Any] = import_nvml) -> Any:
    """Import and initialize NVML; raise ``RunnerUnavailable`` saying why it cannot start.

    The caller owns one ``nvmlShutdown()`` (NVML counts initializations).
    """
    try:
        nvml = loader()
    except ImportError as exc:
        raise RunnerUnavailable(f"NVML bindings not importable ({exc}); install pynvml") from None
    try:
        nvml.nvmlInit()
    except Exception as exc:
        raise RunnerUnavailable(nvml_error_reason(nvml, exc)) from None
    return nvml


def nvml_error_reason(nvml: Any, exc: BaseException) -> str:
    """Turn an NVML start-up error into what the user should know."""
    code = getattr(exc, "value", None)
    if code == getattr(nvml, "NVML_ERROR_LIBRARY_NOT_FOUND", 12):
        return "no NVIDIA driver: the NVML library (libnvidia-ml.so.1) was not found"
    if code == getattr(nvml, "NVML_ERROR_DRIVER_NOT_LOADED", 9):
        return "NVIDIA driver not loaded (NVML: Driver Not Loaded)"
    if code == getattr(nvml, "NVML_ERROR_NO_PERMISSION", 4):
        return "NVML not loadable: no permission to open the NVIDIA device files"
    return f"NVML not loadable: {first_line(exc)}"


def nvml_is_unsupported(nvml: Any, exc: BaseException) -> bool:
    return getattr(exc, "value", None) == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3)


class NvmlSource(TelemetrySource):
    """Clocks, temperature, power, utilization, memory and clock-event reasons of one GPU via NVML.

    ``index`` is the NVML index or UUID (see ``nvml_device_for_cuda``).
    ``loader`` returns the NVML module: the real ``pynvml`` by default, a fake in tests. A field
    the board does not support (NVML_ERROR_NOT_SUPPORTED) reads None and is not asked again; any
    other NVML error (GPU lost, driver reset) propagates and stops sampling, which the verdict
    reports as a flag.
    """

    name = "nvml"

    def __init__(self, index: int | str = 0, loader: Callable[[], Any] = import_nvml) -> None:
        self.index = index
        self._loader = loader
        self._nvml: Any = None
        self._handle: Any = None
        self._unsupported: set[str] = set()

    def open(self) -> JsonDict:
        self._nvml = load_nvml(self._loader)
        try:
            self._handle = nvml_handle(self._nvml, self.index)
            name = self._nvml.nvmlDeviceGetName(self._handle)
        except Exception:
            self.close()
            raise
        return {"index": self.index, "name": name.decode() if isinstance(name, bytes) else str(name)}

    def _get(self, field_name: str, call: Callable[[], Any]) -> Any:
        if field_name in self._unsupported:
            return None
        try:
            return call()
        except Exception as exc:
            if nvml_is_unsupported(self._nvml, exc):
                self._unsupported.add(field_name)
                return None
            raise

    def read(self) -> dict[str, float | int | None]:
        nvml, handle = self._nvml, self._handle
        reasons_fn = clock_event_reasons_function(nvml)
        power_mw = self._get("power_w", lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        util = self._get("utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        memory = self._get("memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        return {
            "sm_clock_mhz": self._get("sm_clock_mhz", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            "mem_clock_mhz": self._get("mem_clock_mhz",
                                       lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
            "temperature_c": self._get("temperature_c",
                                       lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
            "power_w": None if power_mw is None else power_mw / 1000.0,
            "gpu_util_pct": None if util is None else util.gpu,
            "mem_util_pct": None if util is None else util.memory,
            "memory_used_bytes": None if memory is None else memory.used,
            "throttle_reasons": self._get("throttle_reasons", lambda: reasons_fn(handle)),
        }

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None


def clock_event_reasons_function(nvml: Any) -> Callable[[Any], int]:
    """NVML's current clock-event reasons query (renamed from "throttle reasons" in NVML 12)."""
    function: Callable[[Any], int] = (getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                                      or nvml.nvmlDeviceGetCurrentClocksThrottleReasons)
    return function


def nvml_handle(nvml: Any, index: int | str) -> Any:
    """NVML handle for an index or a ``GPU-...`` UUID."""
    if isinstance(index, str):
        return nvml.nvmlDeviceGetHandleByUUID(index)
    return nvml.nvmlDeviceGetHandleByIndex(index)


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


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpu_fingerprint(nvml: Any, handle: Any) -> JsonDict:
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
    kind = "cuda"
    cuda_kernels = True
    name = "cuda"
    accepted_options = ("provider_options", "device_id", "clock_tolerance", "telemetry_interval")
    min_warmup = 3

    def __init__(self, repo: Path | None = None, *, nvml_loader: Callable[[], Any] | None = None) -> None:
        # The NVML module is the hardware boundary; tests pass a fake.
        self.repo = repo
        self._nvml_loader = nvml_loader
        self._cudart: Any = None

    def _load_nvml(self) -> Any:
        return load_nvml(self._nvml_loader or import_nvml)

    @property
    def device_id(self) -> int:
        return 0 if self.options.device_id is None else self.options.device_id

    @classmethod
    def check_options(cls, name: str, options: RunnerOptions) -> None:
        super().check_options(name, options)
        if "device_id" in options.provider_options:
            raise UserError("[runners.cuda]: give the device as device_id, not inside options")

    def check_device(self) -> None:
        """The driver (NVML) and the GPU ``device_id``: what every backend on this runner needs."""
        self._device_handle_check()

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

    def fingerprint(self) -> JsonDict:
        data = host_fingerprint(self.repo, ("onnxruntime-gpu",))
        data["runner"] = self.name
        data["runner_options"] = self.options.to_json()
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
