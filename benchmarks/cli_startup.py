"""How long do ``perfguard --help`` and a worker process's imports take, next to the interpreter's
own start?

Runs ``python -m perfguard --help``, ``python -c pass`` (the floor no command can go below), the
import of a worker process (``perfguard.workers.worker``: what each of the 12-20 measurement
workers of a check pays before its first value) and that import plus SciPy's statistics (what the
worker imported before its chain stopped going through ``perfguard.stats``) alternately in fresh
processes, and prints the median, minimum and maximum wall time of each, the difference of the
medians (what perfguard itself costs), and the heavy modules the ``--help`` process and the worker
imported, and ``import onnx`` (with the ml_dtypes version it loads) (targets: ``--help`` at most 0.2 s, and none of onnx, onnxruntime, numpy, scipy, jinja2,
git; a worker without scipy).

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
                "python -c pass": [sys.executable, "-c", "pass"],
                "worker imports": [sys.executable, "-c", "import perfguard.workers.worker"],
                "worker imports + scipy.stats": [sys.executable, "-c",
                                                 "import perfguard.workers.worker, perfguard.stats.compare"],
                # What the CLI, the user-pass check and every compile worker pay for onnx (its
                # ml_dtypes: 0.7.0 took 0.6-1.4 s here, 0.6.0 0.005 s; pyproject pins below 0.7).
                "import onnx": [sys.executable, "-c", "import onnx"]}
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
    help_s, floor_s, worker_s, before_s, onnx_s = (statistics.median(v) for v in times.values())
    print(f"  perfguard above the floor    {(help_s - floor_s) * 1000:7.1f} ms (median difference)")
    print(f"  worker start, scipy left out {(before_s - worker_s) * 1000:7.1f} ms saved per worker process "
          f"(ratio {worker_s / before_s:.2f})")
    ml_dtypes = subprocess.run([sys.executable, "-c", "import ml_dtypes; print(ml_dtypes.__version__)"],
                               capture_output=True, text=True, env=env, check=False).stdout.strip() or "absent"
    print(f"  import onnx above the floor  {(onnx_s - floor_s) * 1000:7.1f} ms (ml_dtypes {ml_dtypes})")
    heavy = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                           check=True).stdout.strip()
    print(f"  heavy modules after --help:  {heavy or 'none'} (of {', '.join(HEAVY)})")
    worker = subprocess.run([sys.executable, "-c", "import sys, perfguard.workers.worker\n"
                             f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"],
                            capture_output=True, text=True, env=env, check=True).stdout.strip()
    print(f"  heavy modules in a worker:   {worker or 'none'} (before its first request)")
    print(f"  target <= 200 ms: {'met' if help_s <= 0.2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
