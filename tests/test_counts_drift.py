"""Exact on a small model: one artifact counted in separate counted processes reads the same count
(within a bound far under the 0.25 % floor), whatever the job's folder is called, and an A/A
pair (the same graph under another pipeline name and path) reads SAME in every process.

On a tiny ResNet (about 0.8 M instructions an inference) protocol 3 moved by up to ~900
instructions an inference between processes (0.1 %: Python's method cache and glibc's bins
cost what the process's history made them cost, and the history depended on the length of the
job's paths). Real Valgrind, real ONNX Runtime: the benchmark's own code
(``benchmarks/counts_drift.py``), one compile, four counted processes.
"""

from __future__ import annotations

import importlib.util
import shutil
import statistics
from pathlib import Path

import pytest

#: The widest spread allowed between processes: 5x under the default instructions floor (0.25 %);
#: protocol 4 measured 0.025 % at most over 6 processes on a loaded machine (docs/measured.md).
BOUND = 0.0005


def _benchmark():  # noqa: ANN202 - a module loaded from its file (benchmarks/ is no package)
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "counts_drift.py"
    spec = importlib.util.spec_from_file_location("counts_drift", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed (.ci/run installs it)")
def test_one_artifact_counted_in_separate_processes_reads_one_count(tmp_path: Path) -> None:
    processes = _benchmark().counted_processes(tmp_path, 4)
    assert all(len(got) == 2 for got in processes), processes
    none = [got["none"] for got in processes]
    assert (max(none) - min(none)) / statistics.median(none) <= BOUND, processes
    for got in processes:  # the A/A pair of each process: within the bound too
        assert abs(got["plain_with_a_longer_name"] / got["none"] - 1) <= BOUND, processes
