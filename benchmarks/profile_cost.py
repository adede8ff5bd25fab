"""What `check --explain` costs: wall time of `perfguard check` with and without `--explain` on
one regressed case (a pass that inserts layout transposes into a zoo ResNet, the suite of
`tests/test_profile.py`), run alternately, medians and their ratio. Goal: profiling adds at most
20 % to a check that explains one regression.

    python benchmarks/profile_cost.py            # 3 pairs of runs
    python benchmarks/profile_cost.py --pairs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    from tests.test_profile import _suite  # the built regressions of the profile tests

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    times: dict[str, list[float]] = {"check": [], "check --explain": []}
    with tempfile.TemporaryDirectory(prefix="perfguard-profile-cost-") as tmp:
        suite = _suite(Path(tmp))
        base = [sys.executable, "-m", "perfguard", "check", str(suite), "--against-pipeline", "plain",
                "--case", "r/transposed/cpu", "--quiet"]
        for i in range(args.pairs):
            order = ("check", "check --explain") if i % 2 == 0 else ("check --explain", "check")
            for name in order:
                command = base + (["--explain"] if name.endswith("--explain") else [])
                started = time.perf_counter()
                proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
                times[name].append(time.perf_counter() - started)
                if proc.returncode != 1:
                    print(f"  ({name}: exit {proc.returncode}, the regression was not decided this run)")
                print(f"  {name:16s} {times[name][-1]:6.1f} s", flush=True)
    plain, explained = (statistics.median(times[k]) for k in ("check", "check --explain"))
    print(f"median check {plain:.1f} s, check --explain {explained:.1f} s: {explained / plain:.2f}x "
          f"(+{explained / plain - 1:.0%} for explaining one regression)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
