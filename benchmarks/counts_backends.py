"""Counted evidence for TVM and IREE, measured: the A/A spread of ``instructions`` per inference
over ``--runs`` counts of one artifact (the smallest zoo ResNet, each count a fresh worker under
callgrind on the product's own path, ``perfguard.counting.take.count_targets``), and one count
of a real change per backend (TVM: the CPU pipeline without fusion; IREE: the module built for
generic x86-64, SSE2, instead of AVX2), compared with the A/A median. Both pin an AVX2 CPU:
Valgrind runs no AVX-512.

``--compile-runs N`` (IREE): N counted compiles of the A/A pipeline instead, each its own counted
batch (the run and the compile, two children side by side, as ``--counts`` does it): the wall
time of each batch, ``compile_instructions`` and its two steps (``iree-import-onnx`` and
``iree-compile``, each run whole under cachegrind without cache simulation), and their A/A
spread. ``--model smoke`` uses the smoke suite's ResNet (``resnet_s``) instead of the smallest.

    python benchmarks/counts_backends.py [--runs 5] [--backends tvm,iree]
    python benchmarks/counts_backends.py --backends iree --compile-runs 3 [--model smoke]
    python benchmarks/counts_backends.py --tools [--model smoke]

``--tools``: one ``iree-compile`` of the model's MLIR natively, under callgrind without cache
simulation and under cachegrind without cache simulation, one after the other: the wall and CPU
time of each and the instructions each tool counted (why a counted compile uses cachegrind).
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

from perfguard.counting.plan import Target  # noqa: E402
from perfguard.counting.take import count_targets  # noqa: E402
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


#: The model of each ``--model``: the smallest zoo ResNet, the smoke suite's ``resnet_s``.
MODELS = {"tiny": {"depth": 1, "width": 4, "image_size": 16, "num_classes": 4},
          "smoke": {"depth": 4, "width": 16, "image_size": 64, "num_classes": 100}}


def _params(model: str) -> str:
    return "{ " + ", ".join(f"{key} = {value}" for key, value in MODELS[model].items()) + " }"


def _suite(folder: Path, backend: str, model: str = "tiny") -> Path:
    (same, changed) = PIPELINES[backend]
    text = (f'[suite]\nname = "aa-{backend}"\nbackend = "{backend}"\nrunners = ["cpu"]\n\n'
            f'[models.r]\narch = "resnet"\nparams = {_params(model)}\n\n'
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


def measure_compiles(backend: str, runs: int, model: str, folder: Path) -> None:
    """``runs`` counted compiles of the A/A pipeline's variant, each a counted batch of its own."""
    suite = load_suite(_suite(folder, backend, model))
    cases = [c for c in suite.cases if c.pipeline.name == "aa"]
    job = Job(suite, cases, workdir=folder / f"job-compile-{backend}", progress=Progress())
    totals: list[int] = []
    steps: dict[str, list[int]] = {}
    try:
        job.compile(memory=False)
        (compiled,) = job.compiled
        for _ in range(runs):
            start = time.perf_counter()
            (counted,) = count_targets(suite, [Target(compiled)], folder / "ipc")
            wall = time.perf_counter() - start
            if counted.compile is None:
                print(f"  {backend}: compile not counted: {counted.compile_failure}", file=sys.stderr)
                continue
            totals.append(counted.compile.total)
            for name, value in counted.compile.steps.items():
                steps.setdefault(name, []).append(value)
            print(f"  {backend} {model}: compile_instructions {counted.compile.total:,} "
                  f"({', '.join(f'{k} {v:,}' for k, v in counted.compile.steps.items())}); counted batch {wall:.0f} s",
                  flush=True)
    finally:
        job.close()
    for name, values in [("compile_instructions", totals), *steps.items()]:
        if len(values) >= 2:
            median = statistics.median(values)
            print(f"{backend} {model}: {name}: {len(values)} counts, median {median:,.0f}, spread (max - min) / median "
                  f"{(max(values) - min(values)) / median:.4%}")


def compare_tools(model: str, folder: Path) -> None:
    """``iree-compile`` natively, under callgrind and under cachegrind (both ``--cache-sim=no``)."""
    import resource
    import subprocess

    import onnx

    from perfguard.backends.iree.compiler_tools import tool_path
    from perfguard.backends.iree.valgrind_runtime import filter_program
    from perfguard.counting.dumps import parse_dump
    from perfguard.models.zoo import build_resnet

    onnx.save(build_resnet(**MODELS[model]), str(folder / "model.onnx"))
    mlir = folder / "model.mlir"
    subprocess.run([tool_path("iree-import-onnx"), str(folder / "model.onnx"), "-o", str(mlir)], check=True)
    compile_args = [tool_path("iree-compile"), str(mlir), "--iree-hal-target-device=local",
                    "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=haswell",
                    "--mlir-disable-threading", "-o", str(folder / "model.vmfb")]
    seccomp = [sys.executable, "-c", _NO_IO_URING.format(program=filter_program().hex())]
    for name, prefix in (("native", []),
                         ("callgrind --cache-sim=no", ["valgrind", "--tool=callgrind", "--cache-sim=no",
                                                       f"--callgrind-out-file={folder / 'callgrind.out'}"]),
                         ("cachegrind --cache-sim=no", ["valgrind", "--tool=cachegrind", "--cache-sim=no",
                                                        f"--cachegrind-out-file={folder / 'cachegrind.out'}"])):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([*seccomp, *prefix, *compile_args], check=True, capture_output=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        out = folder / ("callgrind.out" if "callgrind" in name else "cachegrind.out")
        counted = f", {parse_dump(out.read_text()).events['Ir']:,} instructions" if prefix else ""
        print(f"iree-compile {model} {name}: {wall:.1f} s wall, {cpu:.1f} s CPU{counted}", flush=True)


#: Run the rest of the command line with io_uring_setup failing (IREE hangs on it under Valgrind).
_NO_IO_URING = """
import ctypes, os, sys
from perfguard.backends.iree.valgrind_runtime import _Program
libc = ctypes.CDLL(None, use_errno=True)
code = ctypes.create_string_buffer(bytes.fromhex("{program}"))
program = _Program(len(code.raw) // 8, ctypes.addressof(code))
assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, ctypes.byref(program), 0, 0) == 0
os.execvp(sys.argv[1], sys.argv[1:])
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--backends", default="tvm,iree")
    parser.add_argument("--compile-runs", type=int, default=0, help="counted compiles instead (IREE)")
    parser.add_argument("--model", choices=sorted(MODELS), default="tiny")
    parser.add_argument("--tools", action="store_true", help="iree-compile under callgrind and cachegrind")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="counts-backends-") as folder:
        if args.tools:
            compare_tools(args.model, Path(folder))
            return
        for backend in args.backends.split(","):
            if args.compile_runs:
                measure_compiles(backend, args.compile_runs, args.model, Path(folder))
            else:
                measure(backend, args.runs, Path(folder))


if __name__ == "__main__":
    main()
