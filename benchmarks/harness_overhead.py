"""How much does perfguard's measurement add to what it measures?

In one run, alternating fresh processes: perfguard's measurement worker (calibrated loops, interleaved
rounds, warm-up discarded) against a bare ``InferenceSession.run`` loop, both on the same model with
the same ORT settings (1 intra-op thread, sequential, all graph optimizations off). Prints both
medians and their ratio (target: within 2 %).

    python benchmarks/harness_overhead.py [--pairs 8] [--model resnet|bert|yolo]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import onnx

from perfguard.backends import get_backend
from perfguard.measure.groups import measure_group
from perfguard.models.inputs import InputSpec, input_specs
from perfguard.models.zoo import build_model
from perfguard.suite import PipelineSpec
from perfguard.workers.protocol import MeasureRequest, MeasureVariant

MODELS = {
    "resnet": ("resnet", {"depth": 8, "width": 16, "image_size": 128, "num_classes": 100}),
    "bert": ("bert", {"layers": 4, "hidden": 128, "heads": 4, "seq_len": 128, "vocab": 1000}),
    "yolo": ("yolo", {"width": 8, "image_size": 192}),
}

BARE = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import onnxruntime as ort
    from perfguard.models.inputs import InputSpec, make_feeds
    path, specs, runs, seed = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    feeds = make_feeds([InputSpec.from_json(s) for s in specs], seed)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        session.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    print(json.dumps(times))
""")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=8, help="process pairs (perfguard worker, bare loop)")
    parser.add_argument("--model", choices=sorted(MODELS), default="resnet")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        arch, params = MODELS[args.model]
        model = build_model(arch, params)
        model_path = folder / "model.onnx"
        onnx.save(model, str(model_path))
        specs = [s.to_json() for s in input_specs(model)]
        artifact = get_backend("ort").compile(model_path, PipelineSpec("none", "ort", (), {}), folder / "art").artifact
        perfguard_medians, bare_medians = [], []
        loops = None
        for pair in range(args.pairs):
            request = MeasureRequest(variants=(MeasureVariant("v", artifact),), runner="cpu", runner_options=None,
                                     threads=1, warmup=3, rounds=args.rounds, min_time=0.02, seed=pair,
                                     worker_index=pair, input_specs=tuple(InputSpec.from_json(s) for s in specs),
                                     min_rounds=args.rounds, max_time=0.0)
            values = measure_group(request, timeout=300, workers=1, workdir=folder / "ipc")["v"]
            flat = [v for worker in values.per_worker for v in worker]
            perfguard_medians.append(statistics.median(flat))
            loops = values.loops
            runs = args.rounds * (loops or 1)
            proc = subprocess.run([sys.executable, "-c", BARE, str(model_path), json.dumps(specs), str(runs),
                                   str(pair + 1)], capture_output=True, text=True, check=True)
            bare_medians.append(statistics.median(json.loads(proc.stdout)))
        pg, bare = statistics.median(perfguard_medians), statistics.median(bare_medians)
        ratios = [p / b for p, b in zip(perfguard_medians, bare_medians, strict=True)]
        print(f"model: {args.model} ({arch} {params}), {args.pairs} process pairs, loops per value: {loops}")
        print(f"perfguard worker median: {pg * 1e3:.4f} ms   (per process: "
              f"{', '.join(f'{m * 1e3:.3f}' for m in perfguard_medians)})")
        print(f"bare session.run median: {bare * 1e3:.4f} ms   (per process: "
              f"{', '.join(f'{m * 1e3:.3f}' for m in bare_medians)})")
        print(f"ratio perfguard/bare: {pg / bare:.4f} ({(pg / bare - 1) * 100:+.2f} %); "
              f"median of per-pair ratios: {statistics.median(ratios):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
