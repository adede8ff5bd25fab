"""Summarize a ``perfguard run suites/iree-cpu.toml`` result: each pipeline's effect with the A/A noise.

    python benchmarks/iree_effects.py RESULT.json [--baseline default] [--aa default_aa]

For every model, prints the ratio of medians of each pipeline to the baseline pipeline (all measured
interleaved in the same worker processes), the spread of that ratio across workers, and the A/A
pair's ratio beside it: an effect smaller than the A/A row is not an effect. Then names the first
pass where the IR of the baseline and ``o2`` builds diverged, when both were traced with
``trace = "ir"``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from perfguard.backends.iree.ir_trace import first_divergence


def _per_worker_medians(case: dict[str, Any]) -> list[float]:
    return [statistics.median(values) for values in case["metrics"]["latency_s"]["per_worker"] if values]


def effect(case: dict[str, Any], base: dict[str, Any]) -> tuple[float, float, float]:
    """Ratio of overall medians minus 1, and the min/max of the per-worker ratios minus 1."""
    overall = case["metrics"]["latency_s"]["median"] / base["metrics"]["latency_s"]["median"] - 1
    ratios = [c / b - 1 for c, b in zip(_per_worker_medians(case), _per_worker_medians(base), strict=False)]
    return overall, min(ratios, default=overall), max(ratios, default=overall)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result")
    parser.add_argument("--baseline", default="default")
    parser.add_argument("--aa", default="default_aa")
    args = parser.parse_args(argv)
    document = json.loads(Path(args.result).read_text())
    by_model: dict[str, dict[str, dict[str, Any]]] = {}
    for case in document["cases"]:
        by_model.setdefault(case["model"], {})[case["pipeline"]] = case
    print("| model | pipeline | median | effect vs baseline | per-worker range | A/A (same module) | dispatches |")
    print("|---|---|---|---|---|---|---|")
    for model, cases in by_model.items():
        base = cases.get(args.baseline)
        if base is None or base["status"] != "ok":
            continue
        aa = cases.get(args.aa)
        aa_text = "n/a"
        if aa is not None and aa["status"] == "ok":
            value, low, high = effect(aa, base)
            aa_text = f"{value * 100:+.1f} % [{low * 100:+.1f}, {high * 100:+.1f}]"
        for name, case in cases.items():
            if case["status"] != "ok":
                print(f"| {model} | {name} | failed: {case['error']['message'][:60]} | | | | |")
                continue
            value, low, high = effect(case, base)
            median_ms = case["metrics"]["latency_s"]["median"] * 1e3
            print(f"| {model} | {name} | {median_ms:.3f} ms | {value * 100:+.1f} % | [{low * 100:+.1f}, "
                  f"{high * 100:+.1f}] | {aa_text} | {case['metrics'].get('node_count')} |")
        o2 = cases.get("o2")
        traces = [c.get("trace") or {} for c in (base, o2 or {})]
        if o2 is not None and all(t.get("mode") == "ir" for t in traces):
            found = first_divergence(traces[0]["passes"], traces[1]["passes"])
            print(f"\n{model}: {args.baseline} vs o2: {found.describe() if found else 'identical IR'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
