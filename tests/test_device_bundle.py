"""The runner bundle (`benchmarks/device_bundle.sh --cpu`): built here, then its run.sh measures the
artifacts in a clean virtual environment that holds only the bundle's wheels and the packages the
GPU machine lists (numpy, onnx, onnxruntime, scipy, rich, jinja2, psutil, nvidia-ml-py). The cpu
runner stands in for the GPU: the same script with --cpu builds wheels for this machine's Python.
The bundle is called with a relative OUT from another folder: it lands there, not in the repository.
A build that fails (here at its first step: PYTHON=false, seconds) leaves no partial folder, so the
retry is not refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GPU_MACHINE_PACKAGES = ("numpy", "onnx", "onnxruntime", "scipy", "rich", "jinja2", "psutil", "nvidia-ml-py")



def _pinned(package: str) -> str:
    from importlib import metadata

    return f"{package}=={metadata.version(package)}"


@pytest.fixture(scope="session")
def gpu_machine_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the GPU machine's packages, installed with --no-index from a wheelhouse
    downloaded once (pinned to this machine's versions)."""
    root = tmp_path_factory.mktemp("gpu-machine")
    wheelhouse = root / "wheelhouse"
    pinned = [_pinned(p) for p in GPU_MACHINE_PACKAGES]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(wheelhouse),
                    *pinned], check=True, timeout=600)
    venv.EnvBuilder(with_pip=True).create(root / "venv")  # the GPU machine has pip: run.sh uses it
    python = root / "venv" / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse), *pinned],
                   check=True, timeout=600)
    return python


def test_a_failed_build_leaves_nothing_and_the_retry_is_not_refused(tmp_path: Path):
    env = {**os.environ, "PYTHON": "false"}  # the first step (pip wheel) fails at once
    for _ in range(2):
        build = subprocess.run(["bash", str(REPO / "benchmarks" / "device_bundle.sh"), "--cpu", "relout"], cwd=tmp_path,
                               capture_output=True, text=True, timeout=60, env=env)
        assert build.returncode != 0 and "exists and is not empty" not in build.stderr, build.stderr
        assert list(tmp_path.iterdir()) == []  # neither relout nor its temporary folder
    assert not (REPO / "relout").exists() and not (REPO / "benchmarks" / "relout").exists()


@pytest.mark.slow
def test_bundle_run_sh_measures_in_a_clean_venv(gpu_machine_venv: Path, tmp_path: Path):
    bundle = tmp_path / "bundle"
    build = subprocess.run(["bash", str(REPO / "benchmarks" / "device_bundle.sh"), "--cpu", "bundle"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]  # a relative OUT lands where it was called
    assert not (REPO / "bundle").exists()
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file())
    assert size < 60 << 20
    wheels = {w.name.split("-")[0].lower() for w in (bundle / "wheels").glob("*.whl")}
    assert {"perfguard", "iree_base_runtime", "jsonschema", "referencing", "rpds_py"} <= wheels
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = subprocess.run(["bash", str(bundle / "run.sh"), str(out)], env={**env, "PYTHON": str(gpu_machine_venv)},
                         capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and {"log.txt", "runners.json", "result-iree.json", "result-ort.json",
                                "verdicts.json"} <= set(files)
    for kind in ("iree", "ort"):
        document = json.loads((out / f"result-{kind}.json").read_text())
        assert document["cases"] and all(c["status"] == "ok" for c in document["cases"])
        assert all(c["correctness_on_runner"]["passed"] and c["metrics"]["latency_s"]["n"] > 0
                   for c in document["cases"])
    verdicts = json.loads((out / "verdicts.json").read_text())
    latency = [v for v in verdicts["verdicts"] if v["metric"] == "latency"]
    assert [(v["case"], v["baseline"], v["candidate"]) for v in latency] == [("bert/sm89_o2/cpu", "sm89", "sm89_o2")]
    assert latency[0]["comparison"]["method"].startswith("paired")  # measured interleaved, in one job
