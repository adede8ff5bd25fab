"""What ``perfguard tune`` finds, per case, within a stated budget: the figures for the README.

    python benchmarks/tune_suite.py smoke            # resnet_s from bn_fused_unfolded, then the tuned
                                                     # order checked against bn_fused_folded
    python benchmarks/tune_suite.py cpu --time 20m   # each cpu-suite model from onnx_cleanup
    python benchmarks/tune_suite.py cpu --time 8m --case yolo_s/onnx_cleanup/cpu

Runs the real command (``python -m perfguard tune ... --json``) for each case in a scratch folder,
then prints one table: candidates tried (screened / identical / infeasible), confirmations, wall
time, the best order, the proof's effect per model with its interval, and the status. For the
smoke suite it also appends the suite patch to a copy of the suite and runs
``check --against-pipeline bn_fused_folded`` on it: the tuned order must be at least as fast as
the hand-written folded pipeline (SAME or an improvement).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLANS = {
    "smoke": ("suites/smoke.toml", ["resnet_s/bn_fused_unfolded/cpu"]),
    "cpu": ("suites/cpu.toml", ["resnet50/onnx_cleanup/cpu", "yolo_s/onnx_cleanup/cpu", "bert_small/onnx_cleanup/cpu"]),
}


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{(value - 1) * 100:+.1f}%"


def mde(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def tune(suite: Path, case: str, folder: Path, extra: list[str]) -> tuple[dict, float, int]:
    out = folder / (case.replace("/", "_") + ".json")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "perfguard", "tune", str(suite), "--case", case, "--json", str(out),
                           "--state", str(folder / (case.replace("/", "_") + "-state.json")), "--quiet", *extra],
                          cwd=folder, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if not out.exists():
        sys.exit(f"tune {case} failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    return json.loads(out.read_text()), wall, proc.returncode


def against_folded(suite: Path, document: dict, folder: Path) -> str:
    """The tuned order against bn_fused_folded on resnet_s, in one fresh check."""
    if not document.get("patch"):
        return "no proved order to check"
    patched = folder / "smoke-tuned.toml"
    name = document["proof"]["pipeline"]
    text = suite.read_text() + "\n" + document["patch"]
    # smoke's resnet_s case names no pipelines: it runs every pipeline, the tuned one included.
    patched.write_text(text)
    out = folder / "against-folded.json"
    proc = subprocess.run([sys.executable, "-m", "perfguard", "check", str(patched), "--against-pipeline",
                           "bn_fused_folded", "--case", f"resnet_s/{name}/cpu", "--json", str(out), "--quiet"],
                          cwd=folder, capture_output=True, text=True)
    if not out.exists():
        return f"check against bn_fused_folded failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"
    data = json.loads(out.read_text())
    row = next(r for r in data["verdicts"] if r["metric"] == "latency")
    c = row["comparison"]
    return (f"{name} vs bn_fused_folded on resnet_s: {pct(c.get('ratio'))} [{pct(c.get('ci_low'))}, "
            f"{pct(c.get('ci_high'))}] {row['decision']} {row['direction']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", choices=sorted(PLANS))
    parser.add_argument("--time", help="search time per case (e.g. 6m)")
    parser.add_argument("--budget", type=int, help="candidates per case (with --time alone: unlimited)")
    parser.add_argument("--passes", help="what an insert may add (tune --passes; default: suite)")
    parser.add_argument("--case", action="append", help="only these cases of the plan (repeatable)")
    args = parser.parse_args()
    suite_name, cases = PLANS[args.plan]
    cases = [c for c in cases if not args.case or c in args.case]
    if args.time and not args.budget:
        args.budget = 100_000  # the time is the budget
    suite = ROOT / suite_name
    extra = (["--time", args.time] if args.time else []) + (["--budget", str(args.budget)] if args.budget else [])
    extra += ["--passes", args.passes] if args.passes else []
    rows = []
    with tempfile.TemporaryDirectory(prefix="perfguard-tune-bench-") as tmp:
        folder = Path(tmp)
        for case in cases:
            document, wall, code = tune(suite, case, folder, extra)
            points = document["points"]
            counts = {s: sum(1 for p in points if p["status"] == s) for s in ("screened", "identical", "infeasible")}
            proof = "; ".join(f"{e['case'].split('/')[0]} {pct(e.get('ratio'))} [{pct(e.get('ci_low'))}, "
                              f"{pct(e.get('ci_high'))}] {e['decision']}" + (" REJECTS" if e.get("rejects") else "")
                              for e in document["proof"]["effects"]) or "-"
            best = ", ".join(document["best"]["passes"]) or "no passes"
            note = ""
            if document["status"] == "nothing-better":
                note = (f"floor {document['floor'] * 100:.1f}%, confirmation MDE {mde(document['confirm_mde'])}, "
                        f"screen MDE {mde(document['screen_mde'])}")
            rows.append((case, len(points), counts, document["confirmations"], wall, best, proof, document["status"],
                         code, note))
        folded = against_folded(suite, rows and json.loads((folder / (cases[0].replace("/", "_") + ".json"))
                                                           .read_text()), folder) if args.plan == "smoke" else ""
    print(f"perfguard tune on {suite_name} ({' '.join(extra)})")
    print("| case | tried (screened/identical/infeasible) | confirmations | wall s | best order | proof per model "
          "| status (exit) |")
    print("|---|---|---|---|---|---|---|")
    for case, tried, counts, confirms, wall, best, proof, status, code, note in rows:
        print(f"| {case} | {tried} ({counts['screened']}/{counts['identical']}/{counts['infeasible']}) | {confirms} "
              f"| {wall:.0f} | {best} | {proof} | {status} ({code}){' ' + note if note else ''} |")
    if folded:
        print(folded)


if __name__ == "__main__":
    main()
