"""Counted evidence for TVM and IREE, measured: the A/A spread of ``instructions`` per inference
over ``--runs`` counts of one artifact (the smallest zoo ResNet, each count a fresh worker under
callgrind on the product's own path, ``perfguard.measure.counts.count_targets``), and one count
of a real change per backend (TVM: the CPU pipeline without fusion; IREE: the module built for
generic x86-64, SSE2, instead of AVX2), compared with the A/A median. Both pin an AVX2 CPU:
Valgrind runs no AVX-512.

    python benchmarks/counts_backends.py [--runs 5] [--backends tvm,iree]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfguard.measure.counts import Target, count_targets  # noqa: E402
from perfguard.measure.job import Job  # noqa: E402
from perfguard.progress import Progress  # noqa: E402
from perfguard.suite import load_suite  # noqa: E402

LOWER = ["RewriteDataflowReshape", "ToNonDataflow", "RemovePurityChecking", "CallTIRRewrite", "StaticPlanBlockMemory",
         "LowerAllocTensor", "KillAfterLastUse", "LowerRuntimeBuiltin", "ComputePrimValue", "VMShapeLower",
         "AttachGlobalSymbol"]
TVM_TARGET = '{ target = { kind = "llvm", mcpu = "haswell" } }'
IREE = '{{ target_cpu = "{cpu}", flags = {{ "iree-llvmcpu-link-embedded" = false }} }}'
#: Per backend: (the A/A pipeline, the changed one), each (passes, options).
PIPELINES = {
    "tvm": ((["LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR", *LOWER], TVM_TARGET),
            (["LegalizeOps", *LOWER], TVM_TARGET)),
    "iree": (([], IREE.format(cpu="haswell")), ([], IREE.format(cpu="x86-64"))),
}


def _suite(folder: Path, backend: str) -> Path:
    (same, changed) = PIPELINES[backend]
    text = (f'[suite]\nname = "aa-{backend}"\nbackend = "{backend}"\nrunners = ["cpu"]\n\n'
            '[models.r]\narch = "resnet"\nparams = { depth = 1, width = 4, image_size = 16, num_classes = 4 }\n\n'
            f"[pipelines.aa]\npasses = {json.dumps(same[0])}\noptions = {same[1]}\n\n"
            f"[pipelines.changed]\npasses = {json.dumps(changed[0])}\noptions = {changed[1]}\n")
    path = folder / f"{backend}.toml"
    path.write_text(text)
    return path


def measure(backend: str, runs: int, folder: Path) -> None:
    suite = load_suite(_suite(folder, backend))
    job = Job(suite, list(suite.cases), workdir=folder / f"job-{backend}", progress=Progress())
    try:
        job.compile(memory=False)
        values: dict[str, list[float]] = {}
        for compiled in job.compiled:
            for _ in range(runs if compiled.case.pipeline.name == "aa" else 1):
                start = time.perf_counter()
                (counted,) = count_targets(suite, [Target(compiled, compile=False)], folder / "ipc")
                outcome = counted.run
                counts = outcome.counts.get("window")
                if counts is None:
                    print(f"  {compiled.case.id}: {outcome.failure}", file=sys.stderr)
                    continue
                values.setdefault(compiled.case.pipeline.name, []).append(counts.instructions)
                print(f"  {backend} {compiled.case.pipeline.name}: {counts.instructions:,.1f} instructions/inference "
                      f"({time.perf_counter() - start:.0f} s)", flush=True)
    finally:
        job.close()
    aa = values.get("aa", [])
    if len(aa) >= 2:
        median = statistics.median(aa)
        print(f"{backend}: A/A {len(aa)} counts, median {median:,.1f}, spread (max - min) / median "
              f"{(max(aa) - min(aa)) / median:.3%}")
        for value in values.get("changed", []):
            print(f"{backend}: changed {value:,.1f} ({value / median - 1:+.2%} against the A/A median)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--backends", default="tvm,iree")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="counts-backends-") as folder:
        for backend in args.backends.split(","):
            measure(backend, args.runs, Path(folder))


if __name__ == "__main__":
    main()
