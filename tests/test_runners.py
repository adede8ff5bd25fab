"""Runners without hardware: device selection, the silent-fallback check, NVML telemetry, device verdicts.

The hardware boundaries are faked, and each test says which: ``FakeNvml`` stands in for the ``pynvml``
module (scripted clocks and clock-event reasons, unsupported fields, a GPU lost mid-run, a missing
driver); ``FakeSession`` stands in for an ONNX Runtime session (``get_providers``); a provider list
stands in for ``onnxruntime.get_available_providers()`` (``perfguard.backends.ort.execution_providers``, where the
``ort`` backend maps a runner to its execution providers). Tests marked ``gpu`` use the real thing and
skip with the reason when this machine has no NVIDIA GPU.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from perfguard.backends import check_case_runner, get_backend
from perfguard.backends.ort.execution_providers import check_session, session_providers
from perfguard.errors import BackendError, RunnerUnavailable, UserError
from perfguard.runners import Runner, RunnerOptions, get_runner, runner_names, runner_status, telemetry as tm
from perfguard.runners.cpu import CpuRunner
from perfguard.runners.cuda import (
    CudaRunner,
    NvmlSource,
    _loaded_cudart,
    gpu_fingerprint,
    nvml_device_for_cuda,
)
from perfguard.runners.npu import NpuRunner
from perfguard.suite import parse_suite

from .conftest import run_cli
from .factories import case_entry

# --------------------------------------------------------------------------------------------
# Fakes
# --------------------------------------------------------------------------------------------


class FakeNvmlError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__({3: "Not Supported", 9: "Driver Not Loaded", 12: "NVML Shared Library Not Found",
                          15: "GPU is lost"}.get(value, f"error {value}"))
        self.value = value


class FakeNvml:
    """The parts of the ``pynvml`` module perfguard calls, with scripted readings.

    ``sm_clocks`` and ``reasons`` are played in order (the last value repeats); ``init_error`` makes
    ``nvmlInit`` fail with that NVML code; ``lost_after`` makes every query after that many samples
    fail with GPU_IS_LOST; names in ``unsupported`` raise NOT_SUPPORTED.
    """

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION = 3, 4
    NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_GPU_IS_LOST = 9, 12, 15
    NVMLError = FakeNvmlError

    def __init__(self, *, count: int = 1, sm_clocks: tuple[int, ...] = (1980,), reasons: tuple[int, ...] = (0,),
                 init_error: int | None = None, lost_after: int | None = None,
                 unsupported: tuple[str, ...] = ()) -> None:
        self.count = count
        self.sm_clocks = list(sm_clocks)
        self.reasons = list(reasons)
        self.init_error = init_error
        self.lost_after = lost_after
        self.unsupported = set(unsupported)
        self.inits = self.shutdowns = self.samples = 0
        self.calls: dict[str, int] = {}

    def _call(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if name in self.unsupported:
            raise FakeNvmlError(3)
        if self.lost_after is not None and self.samples > self.lost_after:
            raise FakeNvmlError(15)

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise FakeNvmlError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        if index >= self.count:
            raise FakeNvmlError(2)
        return ("handle", index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> Any:
        return ("handle", uuid)

    def nvmlDeviceGetName(self, handle: Any) -> bytes:
        return b"NVIDIA Fake H200"

    def nvmlDeviceGetClockInfo(self, handle: Any, kind: int) -> int:
        self._call("clock")
        if kind == self.NVML_CLOCK_MEM:
            return 2619
        self.samples += 1
        return self.sm_clocks[min(self.samples, len(self.sm_clocks)) - 1]

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        self._call("temperature")
        return 45

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        self._call("power")
        return 350_000  # mW

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        self._call("utilization")
        return SimpleNamespace(gpu=97, memory=40)

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        self._call("memory")
        return SimpleNamespace(used=1 << 30)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        self._call("reasons")
        return self.reasons[min(self.samples, len(self.reasons)) - 1]

    # Fingerprint queries.
    def nvmlSystemGetDriverVersion(self) -> str:
        return "560.35.03"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12060

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return "GPU-1234"

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        self._call("ecc")
        return [1, 1]

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        return 1

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return 700_000

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, kind: int) -> int:
        return 1980 if kind == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetApplicationsClock(self, handle: Any, kind: int) -> int:
        self._call("app_clock")
        return 1980 if kind == self.NVML_CLOCK_SM else 2619


class FakeSession:
    """An ONNX Runtime session as far as the fallback check sees it."""

    def __init__(self, providers: list[str]) -> None:
        self.providers = providers
        self.fallback_disabled = False

    def get_providers(self) -> list[str]:
        return list(self.providers)

    def get_outputs(self) -> list[Any]:
        return [SimpleNamespace(name="y")]

    def disable_fallback(self) -> None:
        self.fallback_disabled = True


class ScriptedSource(tm.TelemetrySource):
    """A telemetry source that returns ``rows`` in order and raises after ``fail_after`` reads."""

    name = "scripted"

    def __init__(self, rows: list[dict[str, Any]], fail_after: int | None = None, open_error: bool = False) -> None:
        self.rows = rows
        self.fail_after = fail_after
        self.open_error = open_error
        self.reads = 0
        self.closed = False

    def open(self) -> dict[str, Any]:
        if self.open_error:
            raise RuntimeError("vendor tool not found")
        return {"device": "fake"}

    def read(self) -> dict[str, float | int | None]:
        if self.fail_after is not None and self.reads >= self.fail_after:
            raise RuntimeError("device went away")
        row = self.rows[min(self.reads, len(self.rows) - 1)]
        self.reads += 1
        return row

    def close(self) -> None:
        self.closed = True


def record(sm: list[float], reasons: list[int] | None = None, *, mem: list[float] | None = None,
           errors: list[str] | None = None, tolerance: float = 0.02) -> dict[str, Any]:
    """A worker's telemetry record as the sampler stores it."""
    n = len(sm)
    return {"sources": ["nvml"], "interval_s": 0.1, "clock_tolerance": tolerance, "device": {},
            "errors": errors or [],
            "columns": {"t": [i * 0.1 for i in range(n)], "sm_clock_mhz": sm,
                        "mem_clock_mhz": mem or [2619] * n, "temperature_c": [50 + i for i in range(n)],
                        "throttle_reasons": reasons if reasons is not None else [0] * n}}


# --------------------------------------------------------------------------------------------
# Device selection: the registry, options, CUDA device mapping (no fakes needed)
# --------------------------------------------------------------------------------------------


def test_registry_resolves_exact_names_and_the_npu_prefix():
    assert isinstance(get_runner("cpu"), CpuRunner)
    assert isinstance(get_runner("cuda"), CudaRunner)
    qnn = get_runner("npu:qnn")
    assert isinstance(qnn, NpuRunner) and qnn.name == "npu:qnn"
    assert session_providers(qnn) == [("QNNExecutionProvider", {}), "CPUExecutionProvider"]
    assert session_providers(get_runner("npu:QNNExecutionProvider"))[0][0] == "QNNExecutionProvider"
    assert session_providers(get_runner("npu:VendorXExecutionProvider"))[0][0] == "VendorXExecutionProvider"
    assert session_providers(get_runner("cpu")) == ["CPUExecutionProvider"]
    assert runner_names() == ["cpu", "cuda", "npu:<provider>"]


def test_unknown_runner_and_provider_list_the_valid_names():
    with pytest.raises(UserError, match=r"unknown runner 'cdua' \(did you mean 'cuda'\?\); valid: cpu, cuda, "
                                        r"npu:cann, npu:openvino, npu:qnn, npu:vitisai"):
        get_runner("cdua")
    with pytest.raises(UserError, match=r"unknown npu provider 'qnnn' \(did you mean 'qnn'\?\).*vitisai"):
        get_runner("npu:qnnn")
    with pytest.raises(UserError, match="unknown runner 'npu:'"):
        get_runner("npu:")


def test_provider_options_come_from_the_suite_and_openvino_targets_the_npu():
    cuda = get_runner("cuda", options={"device_id": 1, "provider_options": {"cudnn_conv_algo_search": "EXHAUSTIVE"}})
    assert session_providers(cuda) == [("CUDAExecutionProvider", {"device_id": "1",
                                                                  "cudnn_conv_algo_search": "EXHAUSTIVE"}),
                                       "CPUExecutionProvider"]
    assert session_providers(get_runner("npu:openvino"))[0] == ("OpenVINOExecutionProvider", {"device_type": "NPU"})
    chosen = get_runner("npu:openvino", options=RunnerOptions(provider_options={"device_type": "NPU.1"}))
    assert session_providers(chosen)[0] == ("OpenVINOExecutionProvider", {"device_type": "NPU.1"})


def test_runners_refuse_settings_they_do_not_use():
    with pytest.raises(UserError, match="runner 'cpu' does not take 'device_id'"):
        get_runner("cpu", options={"device_id": 0})
    with pytest.raises(UserError, match="runner 'npu:qnn' does not take 'device_id'"):
        get_runner("npu:qnn", options={"device_id": 0})
    with pytest.raises(UserError, match="device_id, not inside options"):
        get_runner("cuda", options={"provider_options": {"device_id": "1"}})
    assert get_runner("cpu", options={"clock_tolerance": 0.05}).options.clock_tolerance == 0.05


def test_cuda_device_maps_through_cuda_visible_devices():
    assert nvml_device_for_cuda(1, {}) == 1
    assert nvml_device_for_cuda(1, {"CUDA_VISIBLE_DEVICES": "2,3"}) == 3
    assert nvml_device_for_cuda(0, {"CUDA_VISIBLE_DEVICES": "GPU-abc,1"}) == "GPU-abc"
    with pytest.raises(RunnerUnavailable, match="not visible"):
        nvml_device_for_cuda(2, {"CUDA_VISIBLE_DEVICES": "0"})


# --------------------------------------------------------------------------------------------
# Availability (fakes: NVML module, onnxruntime's provider list)
# --------------------------------------------------------------------------------------------


def _onnxruntime_has(monkeypatch: pytest.MonkeyPatch, *providers: str) -> None:
    """Fakes onnxruntime's provider list."""
    monkeypatch.setattr("perfguard.backends.ort.execution_providers.available_providers", lambda: list(providers))


def _check_for_ort(runner: Runner) -> None:
    """What an ``ort`` case needs of ``runner``: its device, then its execution provider."""
    check_case_runner(get_backend("ort"), runner)


def test_cuda_without_driver_or_provider_says_both_reasons(monkeypatch):
    """Fakes NVML without its library and a CPU-only onnxruntime build."""
    _onnxruntime_has(monkeypatch, "AzureExecutionProvider", "CPUExecutionProvider")
    runner = CudaRunner(nvml_loader=lambda: FakeNvml(init_error=12))
    with pytest.raises(RunnerUnavailable) as info:
        _check_for_ort(runner)
    message = str(info.value)
    assert "no NVIDIA driver: the NVML library (libnvidia-ml.so.1) was not found" in message
    assert "CUDAExecutionProvider is not in this onnxruntime build (it has AzureExecutionProvider, " \
           "CPUExecutionProvider)" in message
    assert "perfguard[gpu]" in message


def test_cuda_driver_states_and_device_count(monkeypatch):
    """Fakes NVML (driver not loaded, no GPU, one GPU) with a CUDA-enabled provider list."""
    _onnxruntime_has(monkeypatch, "CUDAExecutionProvider", "CPUExecutionProvider")
    with pytest.raises(RunnerUnavailable, match="NVIDIA driver not loaded"):
        _check_for_ort(CudaRunner(nvml_loader=lambda: FakeNvml(init_error=9)))
    with pytest.raises(RunnerUnavailable, match="reports no GPU"):
        _check_for_ort(CudaRunner(nvml_loader=lambda: FakeNvml(count=0)))
    nvml = FakeNvml(count=1)
    runner = CudaRunner(nvml_loader=lambda: nvml)
    _check_for_ort(runner)
    assert nvml.inits == nvml.shutdowns == 1
    runner.configure(RunnerOptions(device_id=2))
    with pytest.raises(RunnerUnavailable, match="device_id 2 does not exist: this machine has 1 GPU"):
        _check_for_ort(runner)


def test_missing_nvml_bindings_are_reported():
    """Fakes an environment where ``import pynvml`` fails."""

    def no_bindings() -> Any:
        raise ImportError("No module named 'pynvml'")

    with pytest.raises(RunnerUnavailable, match="NVML bindings not importable"):
        CudaRunner(nvml_loader=no_bindings).check_device()


def test_npu_availability_lists_this_installations_providers(monkeypatch):
    """Fakes onnxruntime's provider list."""
    _onnxruntime_has(monkeypatch, "CPUExecutionProvider")
    with pytest.raises(RunnerUnavailable, match=r"QNNExecutionProvider is not in this onnxruntime build "
                                                r"\(it has CPUExecutionProvider\); install onnxruntime-qnn"):
        _check_for_ort(NpuRunner("qnn"))
    _onnxruntime_has(monkeypatch, "CANNExecutionProvider", "CPUExecutionProvider")
    _check_for_ort(NpuRunner("cann"))


def test_runner_status_reports_every_runner_with_a_reason(monkeypatch):
    """Fakes NVML (missing driver) and onnxruntime's provider list (CPU build plus QNN)."""
    monkeypatch.setattr("perfguard.runners.cuda.import_nvml", lambda: FakeNvml(init_error=12))
    _onnxruntime_has(monkeypatch, "QNNExecutionProvider", "CPUExecutionProvider")
    statuses = {s.name: s for s in runner_status(backends={"ort": get_backend("ort").check_runner})}
    assert list(statuses) == ["cpu", "cuda", "npu:qnn", "npu:openvino", "npu:cann", "npu:vitisai"]
    assert statuses["cpu"].available and "CPUExecutionProvider" in statuses["cpu"].detail
    assert not statuses["cuda"].available and "no NVIDIA driver" in statuses["cuda"].detail
    assert statuses["npu:qnn"].available and "QNNExecutionProvider" in statuses["npu:qnn"].detail
    assert not statuses["npu:vitisai"].available and "Ryzen AI" in statuses["npu:vitisai"].detail


def test_runner_status_describes_an_available_gpu(monkeypatch):
    """Fakes NVML (one GPU) and a CUDA-enabled onnxruntime build."""
    monkeypatch.setattr("perfguard.runners.cuda.import_nvml", lambda: FakeNvml())
    _onnxruntime_has(monkeypatch, "CUDAExecutionProvider", "CPUExecutionProvider")
    (status,) = runner_status(["cuda"], backends={"ort": get_backend("ort").check_runner})
    assert status.available
    assert status.detail == "GPU 0: NVIDIA Fake H200, driver 560.35.03, CUDA 12.6, ECC on, persistence on"


# --------------------------------------------------------------------------------------------
# The silent-fallback check (fake: ORT session)
# --------------------------------------------------------------------------------------------


def test_a_session_that_fell_back_to_the_cpu_fails_with_a_clear_message():
    """Fakes a session whose CUDA provider did not load (ORT then runs on the CPU)."""
    with pytest.raises(BackendError, match=r"runner 'cuda' requested CUDAExecutionProvider but the session runs "
                                           r"on CPUExecutionProvider; ONNX Runtime fell back silently"):
        check_session(get_runner("cuda"), FakeSession(["CPUExecutionProvider"]))
    with pytest.raises(BackendError, match="requested QNNExecutionProvider"):
        check_session(get_runner("npu:qnn"), FakeSession(["CPUExecutionProvider"]))


def test_a_session_on_the_requested_provider_passes_and_loses_run_time_fallback():
    """Fakes sessions that really run on the requested provider."""
    session = FakeSession(["CUDAExecutionProvider", "CPUExecutionProvider"])
    check_session(get_runner("cuda"), session)
    assert session.fallback_disabled  # an EP failure inside run() must fail, not retry on the CPU
    check_session(get_runner("cpu"), FakeSession(["CPUExecutionProvider"]))


def test_ort_backend_load_refuses_the_fallen_back_session(monkeypatch, tmp_path):
    """Fakes ``create_session`` in the ort backend so it returns a CPU-only session."""
    from perfguard.backends.base import Artifact
    from perfguard.backends.ort import OrtBackend

    requested: list[Any] = []

    def fake_create_session(path: str, settings: Any, threads: int, providers: list[Any], **_: Any) -> FakeSession:
        requested.append(providers)
        return FakeSession(["CPUExecutionProvider"])

    monkeypatch.setattr("perfguard.backends.ort.create_session", fake_create_session)
    artifact = Artifact("ort", str(tmp_path / "model.onnx"), {}, "0" * 64, 1)
    with pytest.raises(BackendError, match="session runs on CPUExecutionProvider"):
        OrtBackend().load(artifact, get_runner("cuda", options={"device_id": 0}), 1)
    assert requested[0][0] == ("CUDAExecutionProvider", {"device_id": "0"})


def test_cuda_synchronize_uses_only_an_already_loaded_runtime():
    """Fakes ``ctypes.CDLL`` (no CUDA runtime loaded / one loaded) and the runtime itself."""
    attempts: list[tuple[str, int]] = []

    def nothing_loaded(name: str, mode: int) -> Any:
        attempts.append((name, mode))
        raise OSError("not loaded")

    assert _loaded_cudart(("libcudart.so.12",), nothing_loaded) is None
    import os

    assert attempts[0][1] & os.RTLD_NOLOAD  # never loads a second CUDA runtime
    calls: list[str] = []
    runtime = SimpleNamespace(cudaDeviceSynchronize=lambda: calls.append("sync") or 0)
    assert _loaded_cudart(("a", "b"), lambda name, mode: runtime if name == "b" else nothing_loaded(name, mode)) \
        is runtime
    runner = CudaRunner()
    runner._cudart = runtime
    runner.synchronize()
    assert calls == ["sync"]
    runner._cudart = SimpleNamespace(cudaDeviceSynchronize=lambda: 700)
    with pytest.raises(RuntimeError, match="CUDA error 700"):
        runner.synchronize()


# --------------------------------------------------------------------------------------------
# Fingerprint (fake: NVML)
# --------------------------------------------------------------------------------------------


def test_gpu_fingerprint_records_driver_cuda_ecc_and_persistence():
    """Fakes NVML; ECC and application clocks unsupported on the second board."""
    data = gpu_fingerprint(FakeNvml(), ("handle", 0))
    assert data["name"] == "NVIDIA Fake H200" and data["driver"] == "560.35.03"
    assert data["cuda_driver_version"] == "12.6" and data["ecc"] == "on" and data["persistence_mode"] == "on"
    assert data["power_limit_w"] == 700.0 and data["max_sm_clock_mhz"] == 1980
    consumer = gpu_fingerprint(FakeNvml(unsupported=("ecc", "app_clock")), ("handle", 0))
    assert consumer["ecc"] is None and consumer["app_sm_clock_mhz"] is None


def test_cuda_fingerprint_keeps_going_without_nvml():
    """Fakes NVML present (one GPU) and absent (no driver)."""
    nvml = FakeNvml()
    data = CudaRunner(nvml_loader=lambda: nvml).fingerprint()
    assert data["runner"] == "cuda" and data["gpu"]["uuid"] == "GPU-1234" and data["gpu"]["nvml_index"] == 0
    assert "onnxruntime-gpu" in data["libraries"] and data["runner_options"]["device_id"] is None
    assert nvml.inits == nvml.shutdowns
    missing = CudaRunner(nvml_loader=lambda: FakeNvml(init_error=12)).fingerprint()
    assert "no NVIDIA driver" in missing["gpu"]["error"]
    json.dumps(data)


# --------------------------------------------------------------------------------------------
# The sampler and NVML source (fakes: NVML, scripted sources)
# --------------------------------------------------------------------------------------------


@pytest.mark.timing
def test_sampler_samples_in_a_thread_between_start_and_stop():
    """Fakes a telemetry source that always reads 1980 MHz."""
    source = ScriptedSource([{"sm_clock_mhz": 1980, "throttle_reasons": 0}])
    sampler = tm.TelemetrySampler([source], interval_s=0.005)
    sampler.start()
    assert any(t.name == "perfguard-telemetry" for t in threading.enumerate())
    # Until the thread has sampled once (start took the first sample): on a busy machine 50 ms
    # of sleep need not give it a turn, and the test asserts what it sampled, not how fast.
    while source.reads < 2:  # stops waiting if the thread ends instead
        assert any(t.name == "perfguard-telemetry" for t in threading.enumerate())
        time.sleep(0.005)
    result = sampler.stop()
    assert not any(t.name == "perfguard-telemetry" for t in threading.enumerate())
    columns = result["columns"]
    assert len(columns["t"]) >= 3 and set(columns["sm_clock_mhz"]) == {1980}
    assert columns["t"] == sorted(columns["t"])
    assert result["device"] == {"scripted": {"device": "fake"}} and result["errors"] == [] and source.closed


def test_sampler_keeps_long_runs_small_by_thinning():
    """Fakes a source; samples are taken by hand (no thread) to count exactly."""
    sampler = tm.TelemetrySampler([ScriptedSource([{"x": 1}])], interval_s=0.1, max_samples=4)
    sampler.start()
    sampler._stop.set()  # keep the thread out of the count
    for _ in range(9):
        sampler.sample()
    result = sampler.stop()
    assert len(result["columns"]["t"]) <= 5 and result["interval_s"] > 0.1


def test_a_source_failing_mid_run_is_dropped_with_its_error_and_others_go_on():
    """Fakes two sources: one dies after two reads, one keeps going."""
    dying = ScriptedSource([{"sm_clock_mhz": 1980}], fail_after=2)
    steady = ScriptedSource([{"vendor.counter": 7}])
    steady.name = "vendor"
    sampler = tm.TelemetrySampler([dying, steady], interval_s=1.0)
    sampler.start()
    for _ in range(3):
        sampler.sample()
    result = sampler.stop()
    assert len(result["errors"]) == 1
    assert result["errors"][0].startswith("scripted: failed after 2 samples") and "device went away" in result["errors"][0]
    assert result["columns"]["vendor.counter"] == [7] * 5
    assert result["columns"]["sm_clock_mhz"][:2] == [1980, 1980] and result["columns"]["sm_clock_mhz"][2:] == [None] * 3


def test_nvml_source_reads_every_field_in_canonical_units():
    """Fakes NVML with one board that does not report power."""
    nvml = FakeNvml(sm_clocks=(1980, 1755), reasons=(0, 0x4), unsupported=("power",))
    source = NvmlSource(0, loader=lambda: nvml)
    assert source.open() == {"index": 0, "name": "NVIDIA Fake H200"}
    first, second = source.read(), source.read()
    assert first == {"sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "temperature_c": 45, "power_w": None,
                     "gpu_util_pct": 97, "mem_util_pct": 40, "memory_used_bytes": 1 << 30, "throttle_reasons": 0}
    assert second["sm_clock_mhz"] == 1755 and second["throttle_reasons"] == 0x4
    assert nvml.calls["power"] == 1  # an unsupported field is not asked again
    source.close()
    assert nvml.shutdowns == 1


def test_nvml_failing_mid_run_flags_the_result():
    """Fakes NVML losing the GPU after three samples."""
    nvml = FakeNvml(lost_after=3)
    sampler = tm.TelemetrySampler([NvmlSource(0, loader=lambda: nvml)], interval_s=1.0)
    sampler.start()
    for _ in range(5):
        sampler.sample()
    result = sampler.stop()
    assert "GPU is lost" in result["errors"][0] and "nvml: failed after 3 samples" in result["errors"][0]
    assert nvml.shutdowns == 1
    state = tm.judge_device_state(tm.summarize_telemetry([result]))
    assert state.state == "flagged" and state.reasons[0].startswith("telemetry incomplete: nvml: failed after 3")


def test_nvml_absent_leaves_the_result_unmonitored():
    """Fakes NVML whose library is missing when the worker starts sampling."""
    sampler = tm.TelemetrySampler([NvmlSource(0, loader=lambda: FakeNvml(init_error=12))])
    sampler.start()
    result = sampler.stop()
    assert result["columns"] == {} and "could not start: no NVIDIA driver" in result["errors"][0]
    state = tm.judge_device_state(tm.summarize_telemetry([result]))
    assert state.state == "unmonitored" and "no NVIDIA driver" in state.reasons[0]


# --------------------------------------------------------------------------------------------
# Summary and verdict: pure functions on known numbers (no fakes)
# --------------------------------------------------------------------------------------------


def test_summary_pools_workers_and_leaves_idle_samples_out_of_clock_statistics():
    idle = tm.GPU_IDLE_BIT
    summary = tm.summarize_telemetry([record([1980, 1980, 345], [0, 0, idle]), record([1975, 1980], [0, 0]), None])
    assert summary is not None
    assert summary["samples"] == 5 and summary["workers"] == 2 and summary["workers_unmonitored"] == 1
    assert summary["busy_samples"] == 4
    assert summary["sm_clock_mhz"] == {"min": 1975.0, "median": 1980.0, "max": 1980.0}
    assert summary["temperature_c"] == {"min": 50.0, "median": 51.0, "max": 52.0}  # every sample, idle ones too
    assert summary["throttle"]["fraction"] == 0 and summary["throttle"]["reasons"] == {"gpu_idle": 1}
    assert summary["clock_lock"] == "unlocked"
    assert tm.summarize_telemetry([None, None]) is None


def test_steady_unlocked_clocks_are_clean_with_advice_to_lock_them():
    state = tm.judge_device_state(tm.summarize_telemetry([record([1980] * 10)]))
    assert state.state == "clean" and state.reasons == ()
    assert "nvidia-smi --lock-gpu-clocks" in state.notes[0] and "never changes clocks" in state.notes[0]
    locked = tm.summarize_telemetry([record([1410] * 10, [tm.LOCKED_BIT] * 10)])
    assert locked is not None and locked["clock_lock"] == "locked"
    assert tm.judge_device_state(locked).to_json() == {"state": "clean", "reasons": [], "notes": []}


def test_a_single_throttled_sample_flags_unless_a_fraction_is_allowed():
    summary = tm.summarize_telemetry([record([1980] * 10, [0] * 9 + [0x20])])
    state = tm.judge_device_state(summary)
    assert state.flagged
    assert state.reasons == ("throttled in 1 of 10 samples (sw_thermal_slowdown)",)
    assert tm.judge_device_state(summary, max_throttled_fraction=0.2).state == "clean"


def test_clocks_that_moved_during_the_run_flag_beyond_the_tolerance():
    summary = tm.summarize_telemetry([record([1980, 1980, 1800, 1980])])
    state = tm.judge_device_state(summary)
    assert state.reasons == ("SM clock moved during the run: 1800-1980 MHz (9.1% > 2% tolerance)",)
    assert tm.judge_device_state(summary, clock_tolerance=0.10).state == "clean"
    # The tolerance recorded with the telemetry (the runner's clock_tolerance) is the default.
    assert tm.judge_device_state(tm.summarize_telemetry([record([1980, 1800], tolerance=0.1)])).state == "clean"


def test_clocks_that_differ_from_the_baseline_flag():
    baseline = tm.summarize_telemetry([record([1980] * 5)])
    candidate = tm.summarize_telemetry([record([1755] * 5)])
    assert candidate is not None and baseline is not None
    state = tm.judge_device_state(candidate, baseline=baseline)
    assert state.reasons == ("SM clock median 1755 MHz vs baseline 1980 MHz (-11.4%, tolerance 2%)",)
    assert tm.clock_drift(candidate, baseline, 0.15) == []
    no_clocks = tm.judge_device_state(candidate, baseline={"samples": 0})
    assert no_clocks.state == "clean" and "could not be compared" in no_clocks.notes[0]


def test_missing_telemetry_is_unmonitored_and_partial_coverage_is_flagged():
    assert tm.judge_device_state(None).to_json() == {"state": "unmonitored", "reasons": [
        "this runner has no device telemetry"], "notes": []}
    partial = tm.judge_device_state(tm.summarize_telemetry([record([1980] * 3), None]))
    assert partial.reasons == ("1 of 2 workers have no telemetry",)


def test_reason_bits_decode_and_unknown_bits_count_as_throttling():
    assert tm.decode_reasons(0x1 | 0x4 | 0x40) == ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]
    assert tm.throttling_reasons(0x1 | 0x2 | 0x10 | 0x100) == []
    assert tm.throttling_reasons(0x1000) == ["reason_0x1000"]


# --------------------------------------------------------------------------------------------
# Plug-ins and the measurement path (fakes: a telemetry source, a runner)
# --------------------------------------------------------------------------------------------


def test_a_vendor_plug_in_adds_telemetry_to_the_runners_it_chooses(monkeypatch):
    """Fakes a vendor counter tool registered as a plug-in for QNN NPUs."""
    monkeypatch.setattr(tm, "_PLUGINS", {})

    def qnn_counters(runner: Any) -> tm.TelemetrySource | None:
        return ScriptedSource([{"qnn.hvx_util_pct": 80}]) if runner.name == "npu:qnn" else None

    tm.register_telemetry("qnn-counters", qnn_counters)
    assert "qnn-counters" in tm.telemetry_plugins()
    assert get_runner("cpu").telemetry() is None
    sampler = get_runner("npu:qnn", options={"telemetry_interval": 0.5}).telemetry()
    assert sampler is not None and sampler.interval_s == 0.5


class _WatchedCpuRunner(CpuRunner):
    """The CPU runner plus a scripted telemetry source and a counted synchronize."""

    syncs = 0

    def telemetry_sources(self) -> list[tm.TelemetrySource]:
        return [ScriptedSource([{"sm_clock_mhz": 1980, "throttle_reasons": 0}])]

    def synchronize(self) -> None:
        _WatchedCpuRunner.syncs += 1


def test_worker_samples_telemetry_around_the_timed_rounds_and_harness_judges_it(monkeypatch, tmp_path):
    """Fakes the runner (CPU with a scripted telemetry source) inside an in-process measure worker;
    the artifact is the mock backend's."""
    from perfguard.backends.mock import MockBackend
    from perfguard.measure.groups import VariantValues
    from perfguard.measure.job import fill_measurement
    from perfguard.models.inputs import InputSpec
    from perfguard.suite import MeasureSettings, PipelineSpec
    from perfguard.workers import worker
    from perfguard.workers.protocol import MeasureRequest

    monkeypatch.setattr(worker, "get_runner", lambda name, options=None: _WatchedCpuRunner())
    _WatchedCpuRunner.syncs = 0
    artifact = MockBackend().compile(tmp_path / "none.onnx", PipelineSpec("p", "mock", (), {"latency": "200us"}),
                                     tmp_path / "a").artifact
    request = {"mode": "measure", "variants": [{"id": "v", "artifact": artifact.to_json()}], "runner": "cpu",
               "runner_options": None, "threads": 1, "warmup": 1, "rounds": 4, "min_time": 0.001, "seed": 0,
               "worker_index": 0, "input_specs": [InputSpec("x", "float32", (1, 4)).to_json()], "loops": {"v": 2}}
    response = worker.do_measure(MeasureRequest.from_json(request)).to_json()
    assert len(response["values"]["v"]) == 4
    assert _WatchedCpuRunner.syncs == 1 + 4  # after warm-up, then before every clock read
    telemetry = response["telemetry"]
    assert telemetry["sources"] == ["scripted"] and len(telemetry["columns"]["t"]) >= 2
    json.dumps(response)

    values = VariantValues(per_worker=[response["values"]["v"]], worker_ids=[0], loops=2, rss_delta_bytes=[0],
                           peak_rss_bytes=[1], telemetry=[telemetry])
    compiled = SimpleNamespace(entry=case_entry(None), case=SimpleNamespace(measure=MeasureSettings()))
    fill_measurement(compiled, values, "m/cpu", 1)  # type: ignore[arg-type]
    measurement = compiled.entry.measurement.to_json()
    assert measurement["device_state"]["state"] == "clean"
    assert measurement["telemetry"]["summary"]["sm_clock_mhz"]["median"] == 1980
    assert measurement["telemetry"]["per_worker"] == [telemetry]
    assert compiled.entry.metrics.latency_s.per_worker == (tuple(response["values"]["v"]),)


# --------------------------------------------------------------------------------------------
# Suite syntax and the CLI
# --------------------------------------------------------------------------------------------

SUITE = {
    "models": {"m": {"arch": "resnet"}},
    "pipelines": {"a": {"passes": []}},
}


def _suite(runners: list[str], table: dict[str, Any]) -> Any:
    raw = {**SUITE, "suite": {"runners": runners}, "runners": table}
    return parse_suite(json.loads(json.dumps(raw)), Path("s.toml"))


def test_suite_runner_tables_parse_into_runner_options():
    suite = _suite(["cuda", "npu:qnn"], {
        "cuda": {"device_id": 1, "clock_tolerance": "5%", "telemetry_interval": "50ms",
                 "options": {"cudnn_conv_algo_search": "EXHAUSTIVE"}},
        "npu:qnn": {"options": {"backend_path": "libQnnHtp.so", "htp_graph_finalization_optimization_mode": 3}},
    })
    cuda = suite.runner_options("cuda")
    assert cuda == RunnerOptions(provider_options={"cudnn_conv_algo_search": "EXHAUSTIVE"}, device_id=1,
                                 clock_tolerance=0.05, telemetry_interval=0.05)
    assert suite.runner_options("npu:qnn").provider_options["backend_path"] == "libQnnHtp.so"
    assert suite.runner_options("cpu") == RunnerOptions()
    assert RunnerOptions.from_json(cuda.to_json()) == cuda


@pytest.mark.parametrize(("table", "message"), [
    ({"cdua": {}}, r"s.toml: \[runners.cdua\]: no case runs on runner 'cdua'; cases use: cuda"),
    ({"cuda": {"clock_tolerance": 0.05}}, r"clock_tolerance: expected a percentage such as \"2%\", found a number"),
    ({"cuda": {"options": {"enable_cuda_graph": True}}}, r"options.enable_cuda_graph: expected a string or a number"),
    ({"cuda": {"device": 0}}, r"unknown key \(did you mean 'device_id'\?\)"),
])
def test_suite_runner_table_errors_name_the_key(table, message):
    with pytest.raises(UserError, match=message):
        _suite(["cuda"], table)


def test_cli_runners_lists_this_machine():
    result = run_cli("runners", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "cpu" in result.stdout and "available" in result.stdout
    for name in ("cuda", "npu:qnn", "npu:openvino", "npu:cann", "npu:vitisai"):
        assert name in result.stdout
    assert "onnxruntime" in result.stdout


def test_cli_runners_exits_2_for_an_unavailable_or_unknown_runner(tmp_path):
    out = tmp_path / "runners.json"
    result = run_cli("runners", "npu:vitisai", "--json", str(out), timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("perfguard: error: runner 'npu:vitisai' is unavailable: no backend can use it: ")
    assert "ort: VitisAIExecutionProvider is not in this onnxruntime build" in result.stderr
    written = json.loads(out.read_text())["runners"][0]
    assert written["available"] is False and {"iree", "ort"} <= {b["backend"] for b in written["backends"]}
    unknown = run_cli("runners", "tpu", timeout=120)
    assert unknown.returncode == 2 and "unknown runner 'tpu'" in unknown.stderr and "Traceback" not in unknown.stderr


# --------------------------------------------------------------------------------------------
# Real hardware
# --------------------------------------------------------------------------------------------


def _real_gpu_or_skip() -> None:
    try:
        CudaRunner()._device_handle_check()
    except RunnerUnavailable as exc:
        pytest.skip(f"no NVIDIA GPU here: {exc}")


@pytest.mark.gpu
def test_real_nvml_sampling_and_fingerprint():
    _real_gpu_or_skip()
    sampler = tm.TelemetrySampler([NvmlSource(0)], interval_s=0.02)
    sampler.start()
    time.sleep(0.2)
    result = sampler.stop()
    assert result["errors"] == [] and len(result["columns"]["sm_clock_mhz"]) >= 3
    summary = tm.summarize_telemetry([result])
    assert summary is not None and summary["sm_clock_mhz"]["max"] > 0
    assert tm.judge_device_state(summary).state in ("clean", "flagged")
    gpu = CudaRunner().fingerprint()["gpu"]
    assert gpu["name"] and gpu["driver"] and gpu["cuda_driver_version"]


@pytest.mark.gpu
def test_real_cuda_session_runs_on_the_gpu(tmp_path):
    _real_gpu_or_skip()
    runner = CudaRunner()
    try:
        _check_for_ort(runner)
    except RunnerUnavailable as exc:
        pytest.skip(str(exc))
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    from perfguard.backends.ort import create_session

    session = create_session(str(path), {"graph_optimization_level": "disabled", "disabled_optimizers": []}, 1,
                             session_providers(runner))
    check_session(runner, session)
    out = session.run(None, {"x": -np.ones((4, 4), np.float32)})[0]
    runner.synchronize()
    assert float(out.sum()) == 0.0


def test_suite_runner_table_for_a_runner_that_refuses_the_setting_names_the_key():
    with pytest.raises(UserError, match=r"s.toml: \[runners.cpu\]: runner 'cpu' does not take 'device_id'"):
        _suite(["cpu"], {"cpu": {"device_id": 0}})
    with pytest.raises(UserError, match=r"s.toml: \[runners.\"npu:qnnn\"\]: unknown npu provider 'qnnn'"):
        _suite(["npu:qnnn"], {"npu:qnnn": {}})
