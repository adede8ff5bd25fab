"""What does one PR comparison cost, and what does it catch? perfguard beside pytest-benchmark and asv.

In one run, on the same ONNX files and the same machine, for every model and condition:

* **perfguard**: ``perfguard check SUITE --against-pipeline base --case MODEL/COND/cpu`` (the real
  CLI in a fresh process: compiles of both sides, memory probes, interleaved workers, adaptive
  sampling), the verdict read from its ``--json``;
* **pytest-benchmark**: ``pytest --benchmark-save`` on the base artifact, then
  ``pytest --benchmark-compare --benchmark-compare-fail=median:5%`` on the candidate (exit 1 =
  flagged), both real pytest runs of one ``InferenceSession.run`` benchmark;
* **asv**: ``asv run --python=same --set-commit-hash`` for the base and the candidate (two commits of
  a throwaway repository whose benchmark loads the artifact), then ``asv compare --factor 1.1``
  (the factor ``asv continuous`` uses by default; flagged when it reports the benchmark worse).

Conditions: ``aa_identical`` (the same pass as base: a byte-identical artifact), ``aa_renamed`` (a
pass that renames every node: different bytes, the same computation), ``slow2``/``slow5``/``slow10``
(a pass that inserts exact no-op Mul/Add pairs calibrated to cost about 2 %, 5 % and 10 % of the
model's latency: the pair's cost is measured first by a ``perfguard check`` of a pipeline with
enough pairs to add >= 10 %). Models: a ResNet-50-sized zoo CNN (ResNet-34 layout at 224 px: 3.7 GMAC) and a
small one. One thread everywhere (ONNX Runtime pinned with every optimization off, as perfguard's
``ort`` backend does).

    python benchmarks/check_cost.py [--models small,large] [--trials 1]

Prints one table: seconds per comparison and the verdict per condition and tool, then per model
perfguard's seconds per changed comparison over asv's, and the A/A-identical check's wall time
over that of compiling both sides (``perfguard compile`` of the two pipelines).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import onnx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.detection import PROBE_PAIRS  # noqa: E402
from perfguard.models.zoo import build_model  # noqa: E402
from tests.factories import WORK_FUNCTION  # noqa: E402

MODELS = {
    "large": {"depth": 16, "width": 64, "image_size": 224, "num_classes": 1000},  # ResNet-34 layout, 3.7 GMAC
    "small": {"depth": 4, "width": 16, "image_size": 64, "num_classes": 100},
}
CONDITIONS = ("aa_identical", "aa_renamed", "slow2", "slow5", "slow10")
EFFECTS = {"slow2": 0.02, "slow5": 0.05, "slow10": 0.10}

PASSES = WORK_FUNCTION + '''

def base(model):
    return model


def aa_identical(model):
    return model


def aa_renamed(model):
    """Every node renamed: different bytes, the same computation."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for i, node in enumerate(out.graph.node):
        node.name = f"renamed_{i}"
    return out
{extra}
'''

PYTEST_BENCH = '''
import os

import numpy as np
import onnxruntime as ort


def test_inference(benchmark):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(os.environ["COST_MODEL"], options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    shape = [d if isinstance(d, int) else 1 for d in session.get_inputs()[0].shape]
    feeds = {name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    benchmark(session.run, None, feeds)
'''

ASV_BENCH = '''
from pathlib import Path

import numpy as np
import onnxruntime as ort

MODEL = (Path(__file__).resolve().parent / "model_path.txt").read_text().strip()


class Inference:
    def setup(self):
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(MODEL, options, providers=["CPUExecutionProvider"])
        name = self.session.get_inputs()[0].name
        shape = [d if isinstance(d, int) else 1 for d in self.session.get_inputs()[0].shape]
        self.feeds = {name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}

    def time_run(self):
        self.session.run(None, self.feeds)
'''


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc


def _pair_cost(folder: Path, name: str, params: dict[str, int], env: dict[str, str]) -> tuple[float, float]:
    """The model's latency and the cost of one Mul/Add pair on its input, measured by a real
    ``perfguard check`` of a pipeline with ``pairs`` of them against ``base`` (paired, interleaved,
    8 workers): in-process timing of two sessions one after the other misjudged the pair by 2.4x
    on the large model (and once gave 18 721 pairs for "+2 %"). The pairs grow until they add at
    least 10 %, so the estimate is well above the noise."""
    pairs = PROBE_PAIRS
    for _ in range(6):
        (folder / "cost_passes.py").write_text(PASSES.replace("{extra}", _defs({"probe": pairs})))
        suite = folder / f"{name}-probe.toml"
        suite.write_text(_suite(name, params, ("base", "probe")))
        out = folder / f"probe-{name}.json"
        _, proc = _run([sys.executable, "-m", "perfguard", "check", str(suite), "--against-pipeline", "base",
                        "--json", str(out), "--quiet"], folder, env)
        if proc.returncode not in (0, 1, 3):
            raise SystemExit(f"calibration check failed: {proc.stderr.strip()[-300:]}")
        row = next(r for r in json.loads(out.read_text())["verdicts"] if r["metric"] == "latency")
        ratio, latency = row["comparison"]["ratio"], row["comparison"]["baseline_median"]
        if ratio - 1.0 >= 0.10:
            return latency, (ratio - 1.0) * latency / pairs
        pairs *= 4
    raise SystemExit(f"cannot calibrate the slowdown pass: {pairs // 4} Mul/Add pairs added {ratio - 1:+.1%}")


def _defs(pairs: dict[str, int]) -> str:
    return "".join(f"\n\ndef {c}(model):\n    return add_work(model, {n})\n" for c, n in pairs.items())


def _suite(name: str, params: dict[str, int], pipelines_of: tuple[str, ...] = ("base", *CONDITIONS)) -> str:
    pipelines = "".join(f'[pipelines.{c}]\npasses = ["cost_passes:{c}"]\n' for c in pipelines_of)
    return textwrap.dedent(f"""
        [suite]
        name = "cost-{name}"
        [compiler]
        path = "."
        [measure]
        timeout = "900s"
        [thresholds]
        latency = "median:1.5%"
        [models.{name}]
        arch = "resnet"
        params = {{ depth = {params['depth']}, width = {params['width']}, image_size = {params['image_size']}, num_classes = {params['num_classes']} }}
    """) + pipelines


def perfguard(folder: Path, suite: Path, model: str, condition: str, env: dict[str, str]) -> tuple[float, str]:
    out = folder / f"verdicts-{model}-{condition}.json"
    seconds, proc = _run([sys.executable, "-m", "perfguard", "check", str(suite), "--against-pipeline", "base",
                          "--case", f"{model}/{condition}/cpu", "--json", str(out), "--quiet"], folder, env)
    if proc.returncode not in (0, 1, 3):
        return seconds, f"error {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
    row = next(r for r in json.loads(out.read_text())["verdicts"] if r["metric"] == "latency")
    verdict = row["direction"] if row["decision"] == "different" else row["decision"]
    if row["comparison"]["method"] == "identity":
        return seconds, f"{verdict} (not timed)"
    return seconds, f"{verdict} ({row['comparison']['ratio'] - 1:+.1%}, {row['comparison']['n_pairs']} workers)"


def compile_both(folder: Path, name: str, params: dict[str, int], env: dict[str, str]) -> float:
    """Wall time of compiling the two sides of an A/A-identical comparison with ``perfguard compile``
    (both compiles, their reference run and memory probes): what such a check may cost at most."""
    suite = folder / f"{name}-pair.toml"
    text = _suite(name, params)
    suite.write_text(text[:text.index("[pipelines.")] + '[pipelines.base]\npasses = ["cost_passes:base"]\n'
                     '[pipelines.aa_identical]\npasses = ["cost_passes:aa_identical"]\n')
    out = Path(tempfile.mkdtemp(prefix="compiled-", dir=folder)) / "out"
    seconds, proc = _run([sys.executable, "-m", "perfguard", "compile", str(suite), "--out", str(out), "--quiet"],
                         folder, env)
    if proc.returncode != 0:
        raise SystemExit(f"perfguard compile failed: {proc.stderr.strip()[-300:]}")
    return seconds


def pytest_benchmark(folder: Path, base: Path, candidate: Path, env: dict[str, str]) -> tuple[float, str]:
    work = Path(tempfile.mkdtemp(prefix="pb-", dir=folder))
    (work / "test_bench_cost.py").write_text(PYTEST_BENCH)
    common = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_bench_cost.py",
              f"--benchmark-storage={work / 'storage'}"]
    first, proc = _run([*common, "--benchmark-save=base"], work, {**env, "COST_MODEL": str(base)})
    if proc.returncode != 0:
        return first, f"error: {proc.stdout.strip().splitlines()[-1:]}"
    second, proc = _run([*common, "--benchmark-compare", "--benchmark-compare-fail=median:5%"], work,
                        {**env, "COST_MODEL": str(candidate)})
    flagged = proc.returncode != 0 and "Performance has regressed" in proc.stdout + proc.stderr
    if proc.returncode != 0 and not flagged:
        return first + second, f"error: {(proc.stdout + proc.stderr).strip().splitlines()[-1:]}"
    return first + second, "regression" if flagged else "not flagged"


def asv(folder: Path, base: Path, candidate: Path, env: dict[str, str]) -> tuple[float, str]:
    work = Path(tempfile.mkdtemp(prefix="asv-", dir=folder))
    (work / "benchmarks").mkdir()
    (work / "benchmarks" / "__init__.py").write_text("")
    (work / "benchmarks" / "bench_cost.py").write_text(ASV_BENCH)
    (work / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "cost", "repo": ".", "branches": ["main"], "environment_type": "existing",
        "benchmark_dir": "benchmarks", "results_dir": "results", "html_dir": "html"}))
    git_env = {**env, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b",
               "GIT_COMMITTER_EMAIL": "b@example.com", "HOME": str(work)}
    shas = []
    for label, model in (("base", base), ("candidate", candidate)):
        (work / "benchmarks" / "model_path.txt").write_text(str(model))
        if not shas:
            subprocess.run(["git", "init", "-q", "-b", "main"], cwd=work, env=git_env, check=True)
        subprocess.run(["git", "add", "-A"], cwd=work, env=git_env, check=True)
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", label], cwd=work, env=git_env, check=True)
        shas.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, env=git_env, check=True,
                                   capture_output=True, text=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--machine", "bench"], cwd=work, env=git_env,
                   check=True, capture_output=True)
    total = 0.0
    for sha, model in zip(shas, (base, candidate), strict=True):
        (work / "benchmarks" / "model_path.txt").write_text(str(model))
        seconds, proc = _run([sys.executable, "-m", "asv", "run", "--python=same", "--set-commit-hash", sha,
                              "--machine", "bench", "--show-stderr"], work, git_env)
        total += seconds
        if proc.returncode != 0:
            return total, f"error: {(proc.stdout + proc.stderr).strip().splitlines()[-1:]}"
    seconds, proc = _run([sys.executable, "-m", "asv", "compare", shas[0], shas[1], "--factor", "1.1",
                          "--machine", "bench"], work, git_env)
    total += seconds
    text = proc.stdout
    line = next((row for row in text.splitlines() if "Inference.time_run" in row), "")
    cells = [cell.strip() for cell in line.split("|")]
    ratio = f" ({cells[4]})" if len(cells) > 4 else " (no result)"
    if "PERFORMANCE DECREASED" in text:
        return total, "regression" + ratio
    if "PERFORMANCE INCREASED" in text:
        return total, "improvement" + ratio
    return total, "not flagged" + ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="small,large", help="comma-separated: small, large")
    parser.add_argument("--trials", type=int, default=1, help="repetitions of every comparison")
    parser.add_argument("--tools", default="perfguard,pytest-benchmark,asv")
    args = parser.parse_args()
    tools = args.tools.split(",")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
               OMP_NUM_THREADS="1")
    rows: list[tuple[str, str, str, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="check-cost-") as tmp:
        folder = Path(tmp)
        for name in args.models.split(","):
            params = MODELS[name]
            latency, pair_cost = _pair_cost(folder, name, params, env)
            pairs = {c: max(1, round(share * latency / pair_cost)) for c, share in EFFECTS.items()}
            (folder / "cost_passes.py").write_text(PASSES.replace("{extra}", _defs(pairs)))
            sys.path.insert(0, str(folder))
            import cost_passes  # type: ignore[import-not-found]

            model = build_model("resnet", params)
            print(f"{name}: {latency * 1e3:.2f} ms per inference (perfguard's median); Mul/Add pairs for 2/5/10 %: "
                  f"{list(pairs.values())}", flush=True)
            files = {}
            for condition in ("base", *CONDITIONS):
                files[condition] = folder / f"{name}-{condition}.onnx"
                onnx.save(getattr(cost_passes, condition)(model), str(files[condition]))
            suite = folder / f"{name}.toml"
            suite.write_text(_suite(name, params))
            if "perfguard" in tools:
                seconds = compile_both(folder, name, params, env)
                rows.append((name, "compile both sides", "perfguard compile", seconds, "-"))
                print(f"  {'compile both':13s} perfguard        {seconds:7.1f} s", flush=True)
            for _ in range(args.trials):
                for condition in CONDITIONS:
                    if "perfguard" in tools:
                        seconds, verdict = perfguard(folder, suite, name, condition, env)
                        rows.append((name, condition, "perfguard", seconds, verdict))
                        print(f"  {condition:13s} perfguard        {seconds:7.1f} s  {verdict}", flush=True)
                    if "pytest-benchmark" in tools:
                        seconds, verdict = pytest_benchmark(folder, files["base"], files[condition], env)
                        rows.append((name, condition, "pytest-benchmark", seconds, verdict))
                        print(f"  {condition:13s} pytest-benchmark {seconds:7.1f} s  {verdict}", flush=True)
                    if "asv" in tools:
                        seconds, verdict = asv(folder, files["base"], files[condition], env)
                        rows.append((name, condition, "asv", seconds, verdict))
                        print(f"  {condition:13s} asv              {seconds:7.1f} s  {verdict}", flush=True)
            sys.path.remove(str(folder))
            sys.modules.pop("cost_passes", None)
    print()
    print("| model | condition | tool | seconds per comparison (median) | verdicts |")
    print("|---|---|---|---|---|")
    order = ("compile both sides", *CONDITIONS)
    keys = sorted({(m, c, t) for m, c, t, _, _ in rows}, key=lambda k: (k[0], order.index(k[1]), k[2]))
    for model_name, condition, tool in keys:
        mine = [(s, v) for m, c, t, s, v in rows if (m, c, t) == (model_name, condition, tool)]
        verdicts = ", ".join(v for _, v in mine)
        print(f"| {model_name} | {condition} | {tool} | {statistics.median(s for s, _ in mine):.1f} | {verdicts} |")
    for model_name in sorted({m for m, *_ in rows}):
        changed = {tool: statistics.median(s for m, c, t, s, _ in rows if m == model_name and t == tool
                                           and c not in ("aa_identical", "compile both sides")) for tool in tools
                   if any(m == model_name and t == tool for m, _, t, _, _ in rows)}
        compiled = [s for m, c, _, s, _ in rows if m == model_name and c == "compile both sides"]
        identical = [s for m, c, t, s, _ in rows if m == model_name and c == "aa_identical" and t == "perfguard"]
        if compiled and identical:
            print(f"{model_name}: A/A-identical check {statistics.median(identical):.1f} s vs compiling both sides "
                  f"{compiled[0]:.1f} s ({statistics.median(identical) / compiled[0]:.2f}x)")
        if "perfguard" in changed and "asv" in changed:
            print(f"{model_name}: perfguard / asv seconds per changed comparison: "
                  f"{changed['perfguard'] / changed['asv']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
