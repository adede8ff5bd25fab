"""Does `perfguard check` cry wolf, and does it catch small real slowdowns? Measured, not assumed.

Each trial is one real `check --against-pipeline base` on a ~45 ms CNN (ResNet-style, 1 thread):
pipelines ``base`` and ``aa1``..``aaK`` run the same user pass with no extra work (A/A), and
``slow2``, ``slow5``, ``slow10`` run a user pass that inserts real extra work (exact no-op Mul/Add
pairs on the input tensor) calibrated to cost about 2 %, 5 % and 10 % of the model's latency. The
product's own path does the rest (interleaved workers, adaptive sampling, Benjamini-Hochberg).

    python benchmarks/detection.py [--trials 17] [--aa 3] [--floor 1.5%]

Prints the A/A false-positive count, the detection rate per effect, the effect actually measured,
and the wall time per trial and per comparison.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfguard.backends.ort import session_options  # noqa: E402
from perfguard.flows.check import check_against_pipeline  # noqa: E402
from perfguard.models.zoo import build_model  # noqa: E402
from perfguard.progress import Progress  # noqa: E402
from perfguard.suite import load_suite  # noqa: E402
from tests.factories import WORK_FUNCTION  # noqa: E402

PROBE_PAIRS = 150
MODEL = {"depth": 8, "width": 64, "image_size": 224, "num_classes": 1000}

PASSES = WORK_FUNCTION + """

def _work(model, pairs):
    return add_work(model, pairs)


def none(model):
    return add_work(model, 0)
{extra}
"""


def _session(model) -> ort.InferenceSession:
    """The same pinned settings the ort backend uses (all optimizations off, one thread)."""
    options = session_options({"graph_optimization_level": "disabled", "disabled_optimizers": []}, 1)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def calibrate_pairs(folder: Path) -> tuple[float, float]:
    """Latency of the model and the cost of one Mul/Add pair on its input, in-process."""
    sys.path.insert(0, str(folder))
    import bench_passes  # type: ignore[import-not-found]

    model = build_model("resnet", MODEL)
    feeds = {"input": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}
    plain, heavy = _session(model), _session(bench_passes._work(model, PROBE_PAIRS))

    def median_time(session: ort.InferenceSession, runs: int = 15) -> float:
        session.run(None, feeds)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            session.run(None, feeds)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    base_times, heavy_times = [], []
    for _ in range(7):
        base_times.append(median_time(plain))
        heavy_times.append(median_time(heavy))
    base = statistics.median(base_times)
    return base, max(1e-7, (statistics.median(heavy_times) - base) / PROBE_PAIRS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--aa", type=int, default=5, help="A/A pipelines per trial")
    parser.add_argument("--floor", default="1.5%", help="latency floor (threshold) of the check")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--max-workers", type=int, default=20)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "bench_passes.py").write_text(PASSES.replace("{extra}", ""))
        latency, pair_cost = calibrate_pairs(folder)
        effects = {2: 0.02, 5: 0.05, 10: 0.10}
        pairs = {pct: max(1, round(share * latency / pair_cost)) for pct, share in effects.items()}
        extra = "".join(f"\n\ndef slow{pct}(model):\n    return _work(model, {n})\n" for pct, n in pairs.items())
        (folder / "bench_passes.py").write_text(PASSES.replace("{extra}", extra))
        pipelines = "".join(f'[pipelines.aa{i}]\npasses = ["bench_passes:none"]\n' for i in range(1, args.aa + 1))
        pipelines += "".join(f'[pipelines.slow{pct}]\npasses = ["bench_passes:slow{pct}"]\n' for pct in effects)
        suite_path = folder / "detection.toml"
        suite_path.write_text(textwrap.dedent(f"""
            [suite]
            name = "detection"
            [compiler]
            path = "."
            [measure]
            rounds = 6
            warmup = 2
            min_time = "90ms"
            compile_repeats = 1
            memory_probes = 0
            timeout = "600s"
            [check]
            measure_identical = true  # the A/A pipelines compile to one artifact: time them anyway
            workers = {args.workers}
            step_workers = 4
            max_workers = {args.max_workers}
            [thresholds]
            latency = "median:{args.floor.rstrip('%')}%"
            [models.cnn]
            arch = "resnet"
            params = {{ depth = {MODEL['depth']}, width = {MODEL['width']}, image_size = {MODEL['image_size']} }}
            [pipelines.base]
            passes = ["bench_passes:none"]
        """) + pipelines)
        suite = load_suite(suite_path)
        print(f"model: resnet {MODEL}: {latency * 1e3:.1f} ms in-process; one Mul/Add pair: {pair_cost * 1e6:.1f} us; "
              f"pairs for 2/5/10 %: {pairs}; floor {args.floor}; workers {args.workers}..{args.max_workers}")
        false_positives, aa_total = 0, 0
        caught = {pct: 0 for pct in effects}
        measured: dict[int, list[float]] = {pct: [] for pct in effects}
        walls, comparisons_per_trial = [], args.aa + len(effects)
        for trial in range(args.trials):
            start = time.perf_counter()
            document = check_against_pipeline(suite, list(suite.cases), "base", suite.check, Progress()).to_json()
            walls.append(time.perf_counter() - start)
            rows = {r["case"].split("/")[1]: r for r in document["verdicts"] if r["metric"] == "latency"}
            for name, row in rows.items():
                if name.startswith("aa"):
                    aa_total += 1
                    false_positives += row["decision"] == "different"
                else:
                    pct = int(name[4:])
                    caught[pct] += row["decision"] == "different" and row["direction"] == "regression"
                    measured[pct].append((row["comparison"]["ratio"] or 1.0) - 1.0)
            workers = document["settings"]["history"][-1]["workers"]
            print(f"trial {trial + 1}: {walls[-1]:.1f} s, {workers} workers at the last look; " + ", ".join(
                f"{n}: {r['decision'][:4]} {((r['comparison']['ratio'] or 1) - 1) * 100:+.1f}%" for n, r in rows.items()),
                flush=True)
        print(f"\nA/A false positives: {false_positives} of {aa_total} comparisons")
        for pct in effects:
            print(f"injected ~{pct}%: caught {caught[pct]}/{args.trials} ({caught[pct] / args.trials:.0%}); "
                  f"measured effect median {statistics.median(measured[pct]) * 100:+.2f}%")
        print(f"wall time per trial: median {statistics.median(walls):.1f} s (max {max(walls):.1f} s) for "
              f"{comparisons_per_trial} comparisons = {statistics.median(walls) / comparisons_per_trial:.1f} s "
              "per comparison")
    return 0


if __name__ == "__main__":
    sys.exit(main())
