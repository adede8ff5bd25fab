"""How long does ``perfguard --help`` take, next to the interpreter's own start?

Runs ``python -m perfguard --help`` and ``python -c pass`` (the floor no command can go below)
alternately in fresh processes, and prints the median, minimum and maximum wall time of each, the
difference of the medians (what perfguard itself costs), and the heavy modules the ``--help``
process imported (target: at most 0.2 s, and none of onnx, onnxruntime, numpy, scipy, jinja2, git).

    python benchmarks/cli_startup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("onnx", "onnxruntime", "numpy", "scipy", "jinja2", "git")
# Runs ``perfguard --help`` in-process (output discarded) and lists the heavy modules it left loaded.
PROBE = ("import contextlib, io, sys\nfrom perfguard.cli import main\n"
         "with contextlib.redirect_stdout(io.StringIO()):\n"
         "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
         f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")


def _seconds(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs of each command (default 21)")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    commands = {"python -m perfguard --help": [sys.executable, "-m", "perfguard", "--help"],
                "python -c pass": [sys.executable, "-c", "pass"]}
    for command in commands.values():  # warm the file cache and the bytecode
        _seconds(command, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):  # alternating, so a slow moment of the machine hits both
        for name, command in commands.items():
            times[name].append(_seconds(command, env))
    print(f"{args.runs} runs each, {sys.executable} ({sys.version.split()[0]})")
    for name, values in times.items():
        print(f"  {name:28s} median {statistics.median(values) * 1000:7.1f} ms   "
              f"min {min(values) * 1000:7.1f} ms   max {max(values) * 1000:7.1f} ms")
    help_s, floor_s = (statistics.median(v) for v in times.values())
    print(f"  perfguard above the floor    {(help_s - floor_s) * 1000:7.1f} ms (median difference)")
    heavy = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                           check=True).stdout.strip()
    print(f"  heavy modules after --help:  {heavy or 'none'} (of {', '.join(HEAVY)})")
    print(f"  target <= 200 ms: {'met' if help_s <= 0.2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
