"""Where a small model's counted cost goes: the smoke suite's ``resnet_s`` (four pipelines),
compiled once, then counted twice on the product's path (``count_targets``, one counted process
each): its inferences only, then its inferences and its compiles (what a counted check counts).
Printed: wall and the counted processes' CPU seconds of each, and the compiles' share of the CPU.

    python benchmarks/counts.py --split [--model resnet_s]
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(model: str = "resnet_s") -> None:
    """The benchmark (see the module's docstring)."""
    from perfguard.counting.plan import Target
    from perfguard.counting.take import count_targets
    from perfguard.measure.job import Job
    from perfguard.progress import Progress
    from perfguard.suite import load_suite

    suite = load_suite(ROOT / "suites" / "smoke.toml")
    cases = [c for c in suite.cases if c.model.name == model]
    if not cases:
        sys.exit(f"the smoke suite has no model {model!r}")
    with tempfile.TemporaryDirectory(prefix="counts-split-") as tmp:
        folder = Path(tmp)
        job = Job(suite, cases, workdir=folder / "job", progress=Progress())
        try:
            job.compile(memory=False)
            members = list(job.compiled)
            cpu = {}
            for label, compile_too in (("inferences only", False), ("inferences and compiles", True)):
                started, before = time.perf_counter(), _children_cpu()
                counted = count_targets(suite, [Target(c, compile=compile_too) for c in members], folder / label[:4])
                cpu[label] = _children_cpu() - before
                failed = [r.run.failure for r in counted if r.run.failure]
                print(f"{model}, {len(members)} variants, {label}: {time.perf_counter() - started:.1f} s wall, "
                      f"{cpu[label]:.1f} s CPU" + (f"; failures: {failed}" if failed else ""))
            share = 1 - cpu["inferences only"] / cpu["inferences and compiles"]
            print(f"the counted compiles are {share:.0%} of a counted check's counting CPU")
        finally:
            job.close()
