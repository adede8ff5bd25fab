"""How should the variants of a measurement round take turns? Spread and bias of three designs.

In one process, on the smoke suite's ResNet (compiled by ``perfguard compile``: pipelines ``none``,
``bn_fused_unfolded`` and ``ort_all``, plus a second session of ``none``, an A/A), each round runs
every variant ``--loops`` times in one of three designs, the designs taking turns round by round:

* ``one block``: each variant's runs back to back, the variants in a random order (perfguard's
  rounds before 2026-12-02);
* ``10 blocks``: the production round (``perfguard.workers.worker._interleaved_round``): 10 blocks
  of a tenth of the runs per variant, the blocks of all variants in a fresh random order, each
  block after one untimed run of its own variant;
* ``run by run``: every run its own block, no untimed run (tried on 2026-12-02 and not kept).

Prints, per design and variant, the median ratio to ``none`` over the rounds and the spread
(standard deviation) of the per-round log ratio: the spread is the noise a worker's value
carries, the ratio shows a bias where it departs from the ``one block`` design's steady-state
ratio (the A/A ratio should read 0 %).

    python benchmarks/interleave.py [--rounds 20] [--loops 50]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from perfguard.backends import get_backend  # noqa: E402
from perfguard.models.inputs import make_feeds  # noqa: E402
from perfguard.results.artifacts import load_manifest  # noqa: E402
from perfguard.runners import get_runner  # noqa: E402
from perfguard.workers import worker  # noqa: E402

PIPELINES = ("none", "bn_fused_unfolded", "ort_all")


def _run_by_run(executables: dict[str, Any], count: int, feeds: dict[str, np.ndarray]) -> dict[str, float]:
    order, totals = list(executables), dict.fromkeys(executables, 0)
    for _ in range(count):
        random.shuffle(order)
        for name in order:
            start = time.perf_counter_ns()
            executables[name].run(feeds)
            totals[name] += time.perf_counter_ns() - start
    return {name: total / 1e9 / count for name, total in totals.items()}


def _production(executables: dict[str, Any], count: int, feeds: dict[str, np.ndarray], blocks: bool
                ) -> dict[str, float]:
    values: dict[str, list[float]] = {name: [] for name in executables}
    saved = worker.MIN_BLOCK_RUNS
    if not blocks:  # one block per variant: the rounds before the blocks
        worker.MIN_BLOCK_RUNS = 10**9
    try:
        worker._interleaved_round(executables, dict.fromkeys(executables, count), feeds, lambda: None,
                                  random.Random(), values)
    finally:
        worker.MIN_BLOCK_RUNS = saved
    return {name: v[0] for name, v in values.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--loops", type=int, default=50, help="runs per variant and round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="interleave-") as tmp:
        out = Path(tmp) / "artifacts"
        subprocess.run([sys.executable, "-m", "perfguard", "compile", str(REPO / "suites" / "smoke.toml"), "--case",
                        "resnet_s/*", "--out", str(out), "--quiet"], check=True, cwd=REPO)
        manifest = load_manifest(out)
        runner = get_runner("cpu")
        executables: dict[str, Any] = {}
        feeds: dict[str, np.ndarray] = {}
        for case in manifest.cases:
            pipeline = case.entry.pipeline
            if pipeline not in PIPELINES or case.artifact_file is None:
                continue
            artifact = case.artifact_file
            artifact = type(artifact)(**{**artifact.to_json(), "path": str(out / artifact.path)})
            names = [pipeline, "none (A/A)"] if pipeline == "none" else [pipeline]
            for name in names:
                executables[name] = get_backend("ort").load(artifact, runner, 1)
            feeds = make_feeds(list(manifest.models["resnet_s"].inputs), 0)
        for executable in executables.values():
            for _ in range(20):
                executable.run(feeds)
        designs = {"one block": lambda: _production(executables, args.loops, feeds, blocks=False),
                   "10 blocks": lambda: _production(executables, args.loops, feeds, blocks=True),
                   "run by run": lambda: _run_by_run(executables, args.loops, feeds)}
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in designs}
        for _ in range(args.rounds):
            order = list(designs)
            random.shuffle(order)
            for name in order:
                rows[name].append(designs[name]())
    print(f"{args.rounds} rounds x {args.loops} runs per variant and design, smoke resnet_s, 1 thread")
    print(f"| design | none (median) | {' | '.join(v for v in executables if v != 'none')} |")
    print("|---|---|" + "---|" * (len(executables) - 1))
    for name, values in rows.items():
        base = np.array([v["none"] for v in values])
        cells = []
        for variant in executables:
            if variant == "none":
                continue
            log_ratio = np.log(np.array([v[variant] for v in values]) / base)
            cells.append(f"{np.expm1(np.median(log_ratio)):+.1%} (spread {log_ratio.std(ddof=1):.1%})")
        print(f"| {name} | {np.median(base) * 1e6:.0f} us | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
