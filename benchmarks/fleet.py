"""A suite the size of a real compiler's, spread over runners: shards, one merged verdict, reused compiles.

``shards`` section: a generated suite of 60 cases (30 ResNet-style zoo models of different depth,
width and image size, each under two pipelines: ``none`` and ``bn``, which folds BatchNorm into the
convolutions, so every pair differs) checked with ``perfguard check --against-pipeline none`` once
whole and once as 4 shards (``--shard K/4``), run one after another on this machine, each a real
CLI process. Reported: the wall time of the whole and of each shard, the balance (slowest shard
over the mean; the goal is <= 1.25), the partition's own estimate of it, and whether the merged
verdicts (``perfguard merge``) are the whole family's correction of the shards' rows (the same set
of cases; every row's decision and BH-adjusted p-value recomputed from the raw p-values over one
family). The whole check is a separate measurement, so its decisions are compared (how many
agree), not required equal.

``cache`` section: ``benchmarks/fleet_cache.py`` (a nightly with and without the artifact cache),
when that module is there.

    python benchmarks/fleet.py [--section shards|cache|all] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SHARDS = 4
MODELS = 30  # x 2 pipelines = 60 cases


def suite_text(quick: bool) -> str:
    """The generated suite: 30 ResNet-style models whose sizes differ, two pipelines each."""
    # 7 paired workers are the fewest whose signed-rank test can reach p <= 0.025 (the first look's level).
    workers, max_workers = (7, 7) if quick else (8, 16)
    lines = ["[suite]", 'name = "fleet"', "", "[measure]", "workers = 2", f"rounds = {2 if quick else 4}",
             "warmup = 1", 'min_time = "2ms"', "compile_repeats = 2", "memory_probes = 1", 'timeout = "120s"',
             'compile_timeout = "120s"', "", "[check]", f"workers = {workers}", "step_workers = 4",
             f"max_workers = {max_workers}", ""]
    for i in range(MODELS):
        depth, width, size = (2, 4, 6)[i % 3], (8, 12, 16)[(i // 3) % 3], (32, 48, 64)[(i // 9) % 3]
        lines += [f"[models.r{i:02d}]", 'arch = "resnet"',
                  f"params = {{ depth = {depth}, width = {width}, image_size = {size}, num_classes = 10, seed = {i} }}",
                  ""]
    lines += ["[pipelines.none]", "passes = []", "[pipelines.bn]", 'passes = ["fuse_bn_into_conv"]', ""]
    return "\n".join(lines)


def _check(suite: Path, out: Path, shard: str | None) -> tuple[float, int]:
    args = [sys.executable, "-m", "perfguard", "check", str(suite), "--against-pipeline", "none", "--json", str(out),
            "--quiet"] + (["--shard", shard] if shard else [])
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, check=False, cwd=REPO)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"perfguard check {shard or ''} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, proc.returncode


def shards_section(folder: Path, quick: bool) -> dict[str, object]:
    import math

    from perfguard.compare.check import FAMILIES
    from perfguard.compare.merge import corrected_union, family_plan
    from perfguard.compare.verdicts import load_verdicts
    from perfguard.flows.shards import shard_costs, static_costs
    from perfguard.stats import bh_adjust
    from perfguard.suite import load_suite

    suite = folder / "fleet.toml"
    suite.write_text(suite_text(quick))
    cases = load_suite(suite).select(None)
    estimate = shard_costs(static_costs(cases), cases, SHARDS)
    print(f"{len(cases)} cases; estimated shard seconds {[round(c, 1) for c in estimate]} "
          f"(balance {max(estimate) / statistics.mean(estimate):.3f})", flush=True)
    whole_wall, _ = _check(suite, folder / "whole.json", None)
    print(f"whole: {whole_wall:.1f} s", flush=True)
    walls, paths = [], []
    for k in range(1, SHARDS + 1):
        path = folder / f"shard-{k}.json"
        wall, _ = _check(suite, path, f"{k}/{SHARDS}")
        walls.append(wall)
        paths.append(path)
        print(f"shard {k}/{SHARDS}: {wall:.1f} s", flush=True)
    merged_path = folder / "merged.json"
    proc = subprocess.run([sys.executable, "-m", "perfguard", "merge", *map(str, paths), "--json", str(merged_path),
                           "--quiet"], capture_output=True, text=True, check=False, cwd=REPO)
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"perfguard merge failed ({proc.returncode}): {proc.stderr[-2000:]}")
    whole, merged = load_verdicts(folder / "whole.json"), load_verdicts(merged_path)
    shards = [load_verdicts(p) for p in paths]
    rows = [r for d in shards for r in d.verdicts]
    key = lambda r: (r.case, r.metric)  # noqa: E731
    family = sorted(corrected_union(rows, family_plan(shards[0].settings)), key=key)
    rule_holds = True
    for metric in FAMILIES:
        members = [r for r in merged.verdicts if r.metric == metric and r.gated and math.isfinite(r.comparison.p_value)]
        alpha = float(str(merged.settings["alpha"]))
        adjusted = bh_adjust([min(1.0, r.comparison.p_value * alpha / r.comparison.alpha) for r in members])
        rule_holds &= all(math.isclose(r.bh_adjusted_p or 0.0, p) and (r.decision == "different") ==
                          (r.comparison.decision == "different" and p <= alpha) for r, p in zip(members, adjusted, strict=True))
    latency = {r.case: r.decision for r in merged.verdicts if r.metric == "latency"}
    whole_latency = {r.case: r.decision for r in whole.verdicts if r.metric == "latency"}
    agree = sum(1 for case, d in latency.items() if whole_latency.get(case) == d)
    balance = max(walls) / statistics.mean(walls)
    out = {"cases": len(cases), "shards": SHARDS, "whole_wall_s": round(whole_wall, 1),
           "shard_wall_s": [round(w, 1) for w in walls], "balance_max_over_mean": round(balance, 3),
           "estimated_balance": round(max(estimate) / statistics.mean(estimate), 3),
           "merged_is_one_family": sorted(merged.verdicts, key=key) == family and rule_holds,
           "same_cases_as_whole": set(latency) == set(whole_latency),
           "latency_decisions_agreeing_with_the_whole": f"{agree}/{len(latency)}",
           "merged_summary": merged.summary.to_json(), "whole_summary": whole.summary.to_json()}
    print(f"balance of {SHARDS} shards (max/mean wall time): {balance:.3f} (goal <= 1.25); "
          f"merged = one family: {out['merged_is_one_family']}; same cases as whole: {out['same_cases_as_whole']}; "
          f"latency decisions agreeing with the whole: {agree}/{len(latency)}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--section", choices=("shards", "cache", "all"), default="all", help="which part to run")
    parser.add_argument("--quick", action="store_true",
                        help="fewer rounds, one look of 7 workers (no adaptive sampling) in the shards section")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    args = parser.parse_args(argv)
    numbers: dict[str, object] = {}
    if args.section in ("shards", "all"):
        with tempfile.TemporaryDirectory(prefix="perfguard-fleet-") as folder:
            numbers["shards"] = shards_section(Path(folder), args.quick)
    if args.section in ("cache", "all"):
        try:
            cache = importlib.import_module("benchmarks.fleet_cache")
        except ModuleNotFoundError:
            print("cache section: benchmarks/fleet_cache.py is not there; skipped")
        else:
            code = cache.main(["--json", args.json + ".cache.json"] if args.json else [])
            if code:
                return int(code)
    if args.json:
        Path(args.json).write_text(json.dumps(numbers, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
