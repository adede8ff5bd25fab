"""Exact on a small model, measured: one artifact counted in separate counted processes, as
separate jobs count it (``benchmarks/counts.py --drift``).

A tiny ResNet (depth 2, width 8, 32x32: about 0.8 M instructions an inference) and a second
pipeline with the same graph (``plain``: an A/A pair with another name and path) are compiled
once; then ``--runs`` counted processes (``count_targets``, one call each, as ``check --counts``
makes one per job) count both, each process in a job folder of another length (what moved
protocol 3's counts). Printed: every process's per-inference instructions, the spread of
``none`` over the processes ((max - min) / median), and each process's A/A verdict (``plain``
against ``none`` at the default floor). ``--busy N`` keeps N cores busy meanwhile
(``stress-ng --cpu N``).

Self-contained (only ``count_targets(suite, targets, workdir)`` of perfguard), so it runs
against another checkout too: ``PERFGUARD_SOURCE=/path/to/checkout``, one with the counting
package (``perfguard.counting``, 2026-12-07 on); a checkout from before it (``perfguard.measure.counts``)
no longer runs.

    python benchmarks/counts.py --drift [--runs 20] [--busy 2]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(os.environ.get("PERFGUARD_SOURCE", Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(SOURCE))

SUITE = """
[suite]
name = "drift"
backend = "ort"
runners = ["cpu"]

[measure]
workers = 2
rounds = 2
warmup = 1
min_time = "2ms"
threads = 1

[models.tiny]
arch = "resnet"
params = { %s, num_classes = 10 }

[pipelines.none]
passes = []

[pipelines.plain_with_a_longer_name]
passes = ["eliminate_nop_dropout"]

[[cases]]
model = "tiny"
"""


def _busy(cores: int) -> subprocess.Popen[bytes] | None:
    if cores <= 0:
        return None
    import ctypes
    import signal

    def end_with_benchmark() -> None:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    command = (["stress-ng", "--cpu", str(cores), "--quiet"] if shutil.which("stress-ng")
               else [sys.executable, "-c", "while True: pass"])
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, preexec_fn=end_with_benchmark)


#: The tiny ResNet's parameters (``--model resnet:K=V,...`` with ``--drift`` takes others).
PARAMS = {"depth": 2, "width": 8, "image_size": 32}


def counted_processes(folder: Path, runs: int, params: dict[str, int] | None = None) -> list[dict[str, float]]:
    """Compile the tiny model's two pipelines once in ``folder``, then count both in ``runs``
    separate counted processes (job folders of growing length, the order swapped every other
    process): per process, the instructions an inference by pipeline (a pipeline that was not
    counted is left out and printed)."""
    from perfguard.counting.plan import Target
    from perfguard.counting.take import count_targets
    from perfguard.measure.job import Job
    from perfguard.progress import Progress
    from perfguard.suite import load_suite

    chosen = {**PARAMS, **(params or {})}
    (folder / "suite.toml").write_text(SUITE % ", ".join(f"{k} = {v}" for k, v in chosen.items()))
    suite = load_suite(folder / "suite.toml")
    job = Job(suite, list(suite.cases), workdir=folder / "job", progress=Progress())
    out: list[dict[str, float]] = []
    try:
        job.compile(memory=False)
        members = list(job.compiled)
        for k in range(runs):
            order = members if k % 2 == 0 else members[::-1]
            counted = count_targets(suite, [Target(c, compile=False) for c in order], folder / ("ipc" + "x" * (7 * k)))
            for compiled, result in zip(order, counted, strict=True):
                if "window" not in result.run.counts:
                    print(f"  process {k + 1}: {compiled.case.id} not counted: {result.run.failure}")
            out.append({c.case.pipeline.name: r.run.counts["window"].instructions
                        for c, r in zip(order, counted, strict=True) if "window" in r.run.counts})
    finally:
        job.close()
    return out


def run(runs: int, busy: int, params: dict[str, int] | None = None) -> None:
    """The benchmark (see the module's docstring); ``params``: another tiny ResNet's."""
    from perfguard.stats import compare_deterministic
    from perfguard.suite.gates import DEFAULT_THRESHOLDS

    load = _busy(busy)
    gate = DEFAULT_THRESHOLDS.gate("drift", "instructions")
    try:
        with tempfile.TemporaryDirectory(prefix="counts-drift-") as tmp:
            processes = counted_processes(Path(tmp), runs, params)
    finally:
        if load is not None:
            load.terminate()
            load.wait()
    values, same = [], 0
    for k, got in enumerate(processes):
        if len(got) < 2:
            continue
        none, plain = got["none"], got["plain_with_a_longer_name"]
        verdict = compare_deterministic(none, plain, gate.threshold(none)).decision
        same += verdict == "same"
        values.append(none)
        print(f"  process {k + 1}: none {none:,.1f}, plain {plain:,.1f} ({plain / none - 1:+.4%}), A/A {verdict}")
    if values:
        spread = (max(values) - min(values)) / statistics.median(values)
        print(f"{len(values)} processes, {busy} core(s) kept busy: none {min(values):,.1f}-{max(values):,.1f} "
              f"instructions an inference, spread {spread:.4%}; A/A SAME {same}/{len(values)} at "
              f"the default floor ({gate.text})")

if __name__ == "__main__":  # PERFGUARD_SOURCE=OLD PYTHONPATH=OLD python benchmarks/counts_drift.py RUNS BUSY
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 20, int(sys.argv[2]) if len(sys.argv) > 2 else 2)
