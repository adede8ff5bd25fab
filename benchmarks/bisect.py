"""How many probes and how long does `perfguard bisect commits` take, and is it right?

Synthetic histories of N commits (8, 32, 128) of a toy compiler in a temporary git repository: one
commit at a seeded random position makes a user pass insert real extra work (about +40 % on a
small ResNet); every other commit touches documentation only. Each bisection is real: worktrees,
compiles, interleaved measurements under this machine's noise.

    python benchmarks/bisect.py [--lengths 8 32 128] [--trials 2]

Prints per length: probes (against ceil(log2 N) + 1 for the endpoint check), wall time, and how
many bisections named the right commit.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfguard.flows.bisection.commit_search import bisect_commits  # noqa: E402
from perfguard.progress import Progress  # noqa: E402
from perfguard.suite import load_suite  # noqa: E402
from tests.factories import compiler_suite, make_compiler_repo, pass_source  # noqa: E402


def one(root: Path, n: int, culprit: int) -> dict[str, object]:
    versions: list[tuple[str, dict[str, str | None]]] = [
        ("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)})]
    for i in range(1, n + 1):
        files: dict[str, str | None] = {f"docs/n{i}.txt": f"note {i}\n"}
        if i == culprit:
            files["mycc/passes.py"] = pass_source(24, f"c{i}")
        versions.append((f"commit {i}", files))
    repo, shas = make_compiler_repo(root / "cc", versions)
    suite_path = root / "suite.toml"
    suite_path.write_text(compiler_suite(repo, workers=10, max_workers=14,
                                         extra='[pipelines.multi]\npasses = ["mycc.passes:extra_work"]\n'))
    suite = load_suite(suite_path)
    case = next(c for c in suite.cases if c.pipeline.name == "multi")
    settings = suite.check.__class__(workers=10, step_workers=4, max_workers=14, alpha=0.01)
    start = time.perf_counter()
    report = bisect_commits(suite, case, shas[0], shas[-1], settings, Progress(), root / "state.json",
                            with_passes=False)
    wall = time.perf_counter() - start
    found = [c["commit"]["sha"] for c in report["culprits"]]
    return {"probes": report["total_probes"], "wall": wall, "correct": found == [shas[culprit]],
            "status": report["status"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"{'N':>5} {'log2':>5} {'probes':>14} {'wall s':>16} {'correct':>8}")
    for n in args.lengths:
        rows = []
        for _ in range(args.trials):
            culprit = rng.randint(1, n)
            with tempfile.TemporaryDirectory() as tmp:
                rows.append(one(Path(tmp), n, culprit))
        probes = [r["probes"] for r in rows]
        walls = [r["wall"] for r in rows]
        correct = sum(1 for r in rows if r["correct"])
        print(f"{n:>5} {math.ceil(math.log2(n)):>5} {statistics.median(probes):>6} ({min(probes)}-{max(probes)}) "
              f"{statistics.median(walls):>8.1f} ({min(walls):.0f}-{max(walls):.0f}) {correct:>5}/{len(rows)}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
