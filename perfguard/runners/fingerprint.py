"""Environment fingerprint: CPU, OS, load, Python and library versions, git commit.

Comparing numbers taken under different fingerprints warns (or refuses with ``--strict-env``);
``comparable_keys`` names the fields that must agree for that.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from collections.abc import Mapping
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from perfguard.jsonfields import JsonDict, JsonValue

LIBRARIES = ("perfguard", "onnx", "onnxruntime", "onnxoptimizer", "numpy")

# Fields that must match for two measurements to be compared without a warning.
comparable_keys = ("cpu_model", "logical_cores", "os", "python", "libraries", "governor", "gpu")
# Of a GPU, what decides its numbers (not its serial number or UUID).
GPU_COMPARABLE = ("name", "driver", "cuda_driver_version", "ecc", "persistence_mode")


def _comparable(fingerprint: JsonDict, key: str) -> JsonValue:
    value = fingerprint.get(key)
    if key == "gpu" and isinstance(value, Mapping):
        return {k: value.get(k) for k in GPU_COMPARABLE}
    return value


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


@lru_cache(maxsize=1)
def cpu_model() -> str:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def library_versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit(path: Path | None) -> str | None:
    """Commit of the git repository holding ``path`` (None outside a repository)."""
    if path is None:
        return None
    folder = path if path.is_dir() else path.parent
    try:
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def host_fingerprint(repo: Path | None = None, libraries: tuple[str, ...] = ()) -> JsonDict:
    """What every runner records about the host (and the versions of its own ``libraries``)."""
    try:
        physical = __import__("psutil").cpu_count(logical=False)
    except Exception:  # psutil cannot always tell
        physical = None
    freq = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
    return {
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": physical,
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "cpu_freq_khz": int(freq) if freq and freq.isdigit() else None,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "libraries": library_versions() | library_versions(libraries),
        "git_commit": git_commit(repo),
    }


def fingerprint_hash(fingerprint: JsonDict) -> str:
    """Hash of the comparable part of a fingerprint (load and host name left out)."""
    part = {k: _comparable(fingerprint, k) for k in comparable_keys}
    return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:16]


def fingerprint_differences(a: JsonDict, b: JsonDict) -> dict[str, tuple[JsonValue, JsonValue]]:
    """The comparable fields where two fingerprints disagree."""
    return {k: (_comparable(a, k), _comparable(b, k)) for k in comparable_keys
            if _comparable(a, k) != _comparable(b, k)}
