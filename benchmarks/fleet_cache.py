"""What does the artifact cache save a nightly? Wall time and compiles with and without it.

A real compiler repository (user passes in ``src/mycc``, notes in ``docs/``) and a suite of three
zoo models x two pipelines (``work``: the ``extra_work`` pass; ``plain``: ``identity``), 6 cases.
The same three nights run twice, each time with a fresh history store, once without a cache and
once with ``--artifact-cache`` (an empty folder at the start), every night a real
``perfguard nightly --no-bisect --no-recheck`` in a fresh process:

1. ``first``: the first night (measures the commit; fills the cache);
2. ``unchanged``: a commit that touches only ``docs/`` (the compiler's tree is the same);
3. ``pass changed``: a commit that makes ``extra_work`` slower (the tree changes).

Compiles are counted from the progress lines (``compile ID`` against ``compile ID (from the
artifact cache)``).

    python benchmarks/fleet_cache.py [--json PATH]

``main(argv)`` is what ``benchmarks/fleet.py`` calls.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.factories import git, make_compiler_repo, pass_source  # noqa: E402

NIGHTS = ("first", "unchanged", "pass changed")
SUITE = """
[suite]
name = "fleet-cache"

[compiler]
repo = "{repo}"
path = "{repo}/src"

[measure]
rounds = 6
warmup = 2
min_time = "3ms"
compile_repeats = 3
memory_probes = 1
timeout = "120s"

[check]
workers = 4
step_workers = 4
max_workers = 8

[models.resnet_s]
arch = "resnet"
params = {{ depth = 4, width = 16, image_size = 64, num_classes = 100 }}

[models.bert_s]
arch = "bert"
params = {{ layers = 2, hidden = 128, heads = 2, seq_len = 64, vocab = 1000 }}

[models.yolo_s]
arch = "yolo"
params = {{ width = 8, image_size = 128, num_classes = 10 }}

[pipelines.work]
passes = ["mycc.passes:extra_work"]

[pipelines.plain]
passes = ["mycc.passes:identity"]
"""


def _history(root: Path) -> tuple[Path, list[str]]:
    """The compiler's repository: one commit per night."""
    return make_compiler_repo(root, [
        ("initial", {"src/mycc/__init__.py": "", "src/mycc/passes.py": pass_source(0), "docs/notes.txt": "v0\n"}),
        ("docs only", {"docs/notes.txt": "v1\n"}),
        ("slower extra_work", {"src/mycc/passes.py": pass_source(24, "slower")}),
    ])


def _night(suite: Path, store: str, cache: Path | None, cwd: Path) -> dict[str, float | int]:
    command = [sys.executable, "-m", "perfguard", "nightly", str(suite), "--store", store, "--no-bisect",
               "--no-recheck"]
    if cache is not None:
        command += ["--artifact-cache", str(cache)]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=cwd, check=False, timeout=1800)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"nightly failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    lines = [line for line in proc.stderr.splitlines() if line.startswith("perfguard: compile ")]
    served = sum(1 for line in lines if line.endswith("(from the artifact cache)"))
    return {"wall_s": round(wall, 1), "compiles": len(lines) - served, "served": served, "exit": proc.returncode}


def run(work: Path) -> dict[str, dict[str, dict[str, float | int]]]:
    repo, shas = _history(work / "cc")
    suite = work / "suite.toml"
    suite.write_text(textwrap.dedent(SUITE.format(repo=repo)))
    results: dict[str, dict[str, dict[str, float | int]]] = {}
    for mode in ("without cache", "with cache"):
        store = f"sqlite:///{work / (mode.replace(' ', '-') + '.sqlite')}"
        cache = work / "artifact-cache" if mode == "with cache" else None
        results[mode] = {}
        for name, sha in zip(NIGHTS, shas, strict=True):
            git(repo, "checkout", "-q", sha)
            results[mode][name] = _night(suite, store, cache, work)
            print(f"{mode:14} {name:13} {results[mode][name]}", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="perfguard-fleet-cache-") as folder:
        results = run(Path(folder))
    print()
    print(f"{'night':14} {'without cache':>24} {'with cache':>24}")
    for name in NIGHTS:
        plain, cached = results["without cache"][name], results["with cache"][name]
        print(f"{name:14} {plain['wall_s']:>10} s {plain['compiles']:>3} compiles "
              f"{cached['wall_s']:>10} s {cached['compiles']:>3} compiles ({cached['served']} from the cache)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
