"""The distribution of every timed case of a run: is it one mode, at its backend's usual spread?

Runs ``perfguard run SUITE`` (default: ``suites/inductor-cpu.toml``) into a result file, or reads
one (``--result``), and prints per case: the values, workers and loops per value, the median, p75,
p90, p99, max and cv, and the timing-quality note (``perfguard.stats.modality``). Prints the load
average (``/proc/loadavg``) before and after, since the machine's load shapes the tail.

    python benchmarks/inductor_timing.py [--case 'resnet*'] [--suite FILE] [--workers N] [--rounds N] [--out FILE]
    python benchmarks/inductor_timing.py --result perfguard-results/inductor-cpu-....json

Written for issue 45 (every Inductor case bimodal: median 0.53 ms, p90 1-24 ms): the before and
after tables of ``docs/measured.md`` ("Inductor timings") are this script's output.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from perfguard.backends import usual_cv  # noqa: E402
from perfguard.stats.modality import timing_quality  # noqa: E402


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def _run(args: argparse.Namespace, out: Path) -> None:
    command = [sys.executable, "-m", "perfguard", "run", args.suite, "--out", str(out), "--quiet"]
    for flag in ("case", "workers", "rounds"):
        if getattr(args, flag) is not None:
            command += [f"--{flag}", str(getattr(args, flag))]
    print("$", " ".join(command[1:]), flush=True)
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    print(f"exit {proc.returncode} after {time.perf_counter() - started:.0f} s", flush=True)
    if proc.returncode not in (0, 1):
        print(proc.stdout[-3000:], proc.stderr[-3000:])


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def table(result: dict) -> list[str]:
    """The markdown table of a result document's timed cases."""
    lines = ["| case | n | workers x loops | median | p75 | p90 | p99 | max | cv | timing quality |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for case in result["cases"]:
        latency = case.get("metrics", {}).get("latency_s")
        if not latency:
            error = case.get("error") or {}
            lines.append(f"| {case['id']} | failed ({error.get('stage', '')}): {str(error.get('message', ''))[:120]} |"
                         + " |" * 8)
            continue
        per_worker = latency["per_worker"]
        values = np.array([v for w in per_worker for v in w])
        p75, p90, p99 = np.percentile(values, [75, 90, 99])
        loops = (case.get("measurement") or {}).get("loops")
        quality = timing_quality(per_worker, usual_cv(str(case["key"]["backend"]["name"])))
        lines.append(f"| {case['id']} | {values.size} | {len(per_worker)} x {loops} | {_ms(float(np.median(values)))} | "
                     f"{_ms(p75)} | {_ms(p90)} | {_ms(p99)} | {_ms(float(values.max()))} | "
                     f"{values.std(ddof=1) / values.mean():.3f} | {quality.verdict} |")
        if quality.flagged:
            lines.append(f"|  | {quality.note()} |" + " |" * 8)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="suites/inductor-cpu.toml")
    parser.add_argument("--case", help="only these cases (perfguard run --case)")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--result", type=Path, help="read this result file instead of running")
    parser.add_argument("--out", type=Path, help="keep the run's result file here")
    args = parser.parse_args()
    print(f"load average before: {_load()}")
    if args.result is None:
        with tempfile.TemporaryDirectory() as folder:
            out = args.out.resolve() if args.out else Path(folder) / "result.json"
            _run(args, out)
            result = json.loads(out.read_text())
    else:
        result = json.loads(args.result.read_text())
    print(f"load average after: {_load()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
