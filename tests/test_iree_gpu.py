"""IREE on the cuda runner without a GPU: what a case needs from the runner per backend, and the
IREE CUDA suite compiled here (``perfguard compile``) for a GPU machine to measure.

Fakes only what hardware provides: the NVML module (``FakeNvml``), onnxruntime's provider list and
``iree.runtime``'s driver query (a GPU machine's driver and device). Everything else is real:
IREE compiles for CUDA on this CPU machine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from perfguard.backends import check_case_runner, get_backend
from perfguard.errors import RunnerUnavailable
from perfguard.runners import runner_status
from perfguard.runners.cuda import CudaRunner

from .conftest import run_cli
from .test_runners import FakeNvml

REPO = Path(__file__).resolve().parents[1]
GPU_SUITE = REPO / "suites" / "iree-gpu.toml"
CPU_ORT = ["AzureExecutionProvider", "CPUExecutionProvider"]
needs_iree = pytest.mark.skipif(shutil.which("iree-compile") is None and not (REPO / ".venv/bin/iree-compile").exists(),
                                reason="iree-compile not installed")


def fake_iree(drivers: tuple[str, ...] = ("cuda", "local-sync", "local-task"), devices: int = 1,
              start_error: str = "") -> Any:
    """``iree.runtime`` as far as the driver query sees it: the drivers compiled in, and the cuda
    driver's devices (or the error it raises without libcuda)."""

    def get_driver(name: str) -> Any:
        if start_error:
            raise RuntimeError(f"Error creating driver: c/runtime/src/iree/hal/drivers/cuda/x.c:66: {start_error}")
        return SimpleNamespace(query_available_devices=lambda: [{"device_id": i, "path": "", "name": "gpu"}
                                                                 for i in range(devices)])

    return SimpleNamespace(query_available_drivers=lambda: list(drivers), get_driver=get_driver)


@pytest.fixture
def gpu_without_ort_cuda(monkeypatch: pytest.MonkeyPatch) -> CudaRunner:
    """The GPU machine of issue 27: an NVIDIA GPU with its driver, a CPU-only onnxruntime, and an
    iree-base-runtime whose cuda driver sees the GPU (NVML and both runtimes faked)."""
    monkeypatch.setattr("perfguard.runners.cuda.import_nvml", lambda: FakeNvml())
    monkeypatch.setattr("perfguard.backends.ort.execution_providers.available_providers", lambda: CPU_ORT)
    monkeypatch.setattr("perfguard.backends.iree.import_iree_runtime", lambda: fake_iree())
    return CudaRunner()


def test_an_iree_case_on_cuda_needs_the_iree_driver_not_onnxruntime_gpu(gpu_without_ort_cuda):
    runner = gpu_without_ort_cuda
    check_case_runner(get_backend("iree"), runner)
    with pytest.raises(RunnerUnavailable) as info:
        check_case_runner(get_backend("ort"), runner)
    assert "runner 'cuda' cannot run 'ort' cases here: CUDAExecutionProvider is not in this onnxruntime" in str(info.value)


def test_runner_status_reports_each_backend(gpu_without_ort_cuda):
    backends = {name: get_backend(name).check_runner for name in ("iree", "ort")}
    (status,) = runner_status(["cuda"], backends=backends)
    assert status.available and status.detail.startswith("GPU 0: NVIDIA Fake H200")
    rows = {row.backend: row for row in status.backends}
    assert rows["iree"].available and rows["iree"].detail == ""
    assert not rows["ort"].available and "CUDAExecutionProvider" in rows["ort"].detail
    assert status.to_json()["backends"][0] == {"backend": "iree", "available": True, "detail": ""}


def test_the_device_and_the_iree_driver_are_both_reported(monkeypatch):
    monkeypatch.setattr("perfguard.runners.cuda.import_nvml", lambda: FakeNvml(init_error=12))
    monkeypatch.setattr("perfguard.backends.iree.import_iree_runtime",
                        lambda: fake_iree(start_error="UNAVAILABLE; CUDA driver library 'libcuda.so' not available"))
    with pytest.raises(RunnerUnavailable) as info:
        check_case_runner(get_backend("iree"), CudaRunner())
    message = str(info.value)
    assert "no NVIDIA driver" in message and "IREE's cuda driver cannot start: UNAVAILABLE; CUDA driver library" in message
    assert "onnxruntime" not in message and "c/runtime" not in message
    monkeypatch.setattr("perfguard.backends.iree.import_iree_runtime", lambda: fake_iree(drivers=("local-sync",)))
    with pytest.raises(RunnerUnavailable, match=r"IREE's cuda driver is not in this iree-base-runtime build \(it has "
                                                r"local-sync\)"):
        get_backend("iree").check_runner(CudaRunner())
    monkeypatch.setattr("perfguard.backends.iree.import_iree_runtime", lambda: fake_iree(devices=0))
    with pytest.raises(RunnerUnavailable, match="IREE's cuda driver sees no device"):
        get_backend("iree").check_runner(CudaRunner())


def test_cli_runners_cuda_lists_backends_on_this_machine(tmp_path):
    out = tmp_path / "runners.json"
    result = run_cli("runners", "cuda", "--backend", "iree", "--backend", "ort", "--json", str(out), timeout=120)
    (cuda,) = json.loads(out.read_text())["runners"]
    assert [row["backend"] for row in cuda["backends"]] == ["iree", "ort"]
    assert result.returncode == (0 if cuda["available"] else 2)
    assert "Traceback" not in result.stderr


@needs_iree
def test_run_of_the_gpu_suite_here_refuses_with_the_iree_reason_only(tmp_path):
    """Preflight of an iree case on the cuda runner asks for IREE's cuda driver, not for onnxruntime-gpu."""
    result = run_cli("run", str(GPU_SUITE), "--case", "bert/sm89/", "--out", str(tmp_path / "r.json"), timeout=300)
    if result.returncode == 0:
        pytest.skip("this machine has a GPU")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "runner 'cuda' cannot run 'iree' cases here" in result.stderr
    assert "onnxruntime-gpu" not in result.stderr and "CUDAExecutionProvider" not in result.stderr


@needs_iree
@pytest.mark.slow
def test_the_iree_gpu_suite_compiles_for_cuda_without_a_gpu(tmp_path):
    """`perfguard compile` of the CUDA suite: modules for sm_89 and sm_80, traces with the dispatch
    count, correctness deferred to the runner, the ORT-CPU reference outputs in the folder."""
    folder = tmp_path / "gpu-artifacts"
    result = run_cli("compile", str(GPU_SUITE), "--case", "bert/", "--out", str(folder), "--quiet", timeout=600)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((folder / "manifest.json").read_text())
    cases = {c["pipeline"]: c for c in manifest["cases"]}
    assert sorted(cases) == ["sm80", "sm89", "sm89_o2"]
    for case in cases.values():
        assert case["status"] == "ok" and case["runner"] == "cuda"
        assert case["correctness"]["status"] == "deferred" and "cannot run 'iree' cases here" in case["correctness"]["reason"]
        assert (folder / case["artifact_file"]["path"]).stat().st_size > 0
        assert case["artifact_file"]["settings"]["driver"] == "cuda"
        assert case["trace"]["passes"] and case["metrics"]["node_count"] > 0  # dispatches per run
    assert cases["sm89_o2"]["metrics"]["node_count"] != cases["sm89"]["metrics"]["node_count"]
    assert cases["sm80"]["artifact"]["sha256"] != cases["sm89"]["artifact"]["sha256"]
    assert list((folder / "refs").glob("*.npz"))  # the ORT-CPU reference outputs the runner checks against
    # Measuring here is refused before any work, with the reason (no GPU on this machine).
    measured = run_cli("run", "--artifacts", str(folder), "--quiet", timeout=300)
    if measured.returncode != 0:
        assert measured.returncode == 2 and "Traceback" not in measured.stderr
        assert "runner 'cuda' cannot run 'iree' cases here" in measured.stderr


def test_the_measuring_path_imports_nothing_a_measuring_machine_lacks():
    """What `perfguard run --artifacts` and its workers import must not pull in the compile-side or
    history-side packages (a bundle carries none of them): git, jinja2, sqlalchemy, alembic,
    onnxoptimizer, jsonschema, iree.compiler."""
    code = (
        "import sys\n"
        "import perfguard.cli, perfguard.cli.run, perfguard.cli.runners, perfguard.flows.compile_here\n"
        "import perfguard.workers.worker, perfguard.workers.launch\n"
        "from perfguard.backends import get_backend\n"
        "for name in ('ort', 'iree'): get_backend(name)\n"
        "bad = ('git', 'jinja2', 'sqlalchemy', 'alembic', 'onnxoptimizer', 'jsonschema')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in bad or m.startswith('iree.compiler')))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
