"""What the nightly's explanation of a new culprit costs: one regression night run twice from the
same store, with and without ``--no-explain``.

A toy compiler in a temporary git repository (``tests/factories.py``): commit 2 makes its user pass
insert 48 no-op Mul/Add pairs (a real slowdown on a small ResNet). Night 1 at commit 1 starts the
chain; its store is copied, and night 2 at commit 2 (check, same-job re-check, bisection of the
one-commit range, alert) runs once on each copy: by default (the culprit profiled against its
parent, 3 workers x 20 runs per side) and with ``--no-explain``. Real compiles, measurements and
profiles under this machine's load.

    python benchmarks/nightly_explain.py [--repeats 1]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.factories import compiler_suite, git, make_compiler_repo, pass_source  # noqa: E402


def nightly(cwd: Path, suite: Path, store: Path, *extra: str) -> float:
    """One nightly's wall time, run in ``cwd`` (a fresh folder: a bisection's state file there
    would let a later run resume its probes instead of measuring them)."""
    cwd.mkdir(parents=True)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "perfguard", "nightly", str(suite), "--store", f"sqlite:///{store}",
                           "--quiet", *extra], cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"nightly exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nightly-explain-") as name:
        tmp = Path(name)
        repo, shas = make_compiler_repo(tmp / "cc", [
            ("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)}),
            ("commit 1", {"docs/n1.txt": "note\n"}),
            ("extra work", {"mycc/passes.py": pass_source(48)})])
        suite = tmp / "suite.toml"
        suite.write_text(compiler_suite(repo))
        git(repo, "checkout", "-q", shas[1])
        first = tmp / "first.sqlite"
        nightly(tmp / "night-1", suite, first)
        git(repo, "checkout", "-q", shas[2])
        for repeat in range(args.repeats):
            walls = {}
            for label, extra in (("explained", ()), ("--no-explain", ("--no-explain",))):
                store = tmp / f"{label.strip('-')}-{repeat}.sqlite"
                shutil.copy(first, store)
                walls[label] = nightly(tmp / f"{label.strip('-')}-{repeat}", suite, store, *extra)
            print(f"regression night: explained {walls['explained']:.1f} s, --no-explain {walls['--no-explain']:.1f} s, "
                  f"explanation {walls['explained'] - walls['--no-explain']:+.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
