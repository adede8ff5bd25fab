"""Counted evidence (``--counts``) measured, not assumed: its A/A spread, what it detects and what
it costs, with one core kept busy (``stress-ng --cpu 1`` if installed, else a Python busy loop).

For every model of the smoke suite (pipeline ``none``), on the product's own path (a real
compile, then ``perfguard.measure.counts.count_targets``: one counted process per call, a child
forked from it per count, as a counted check does):

* **A/A**: ``--runs`` counts of the same artifact, each in its own counted process (a separate
  ``count_targets`` call, as separate checks would be); the second call counts the detection
  pipelines' variants first, so a variant counted after others is in the spread too (and it is
  printed beside the median of those counted alone: the order effect). The spread ((max - min) / median) of
  instructions and estimated cycles per inference for both per-inference methods (``window``:
  N-inference window / N; ``difference``: (window of N - window of 1) / (N - 1)), and the exact
  verdict of every run against the first at the default floor (SAME expected every time).
* **Detection**: a pass that appends k Transpose pairs (each dimension order reversed and back) to
  the model's output, k sized from a calibration count to +0.5 %, +1 % and +2 % of the
  instructions, and a pass that puts two Transposes after every Conv: each counted once and
  compared with the A/A median at the default floor (REGRESSION expected).
* **Cost**: wall time of ``perfguard check suites/smoke.toml --against-pipeline none`` with and
  without ``--counts`` (``--cost``; it runs two real checks, one after the other; ``--cost-case``
  limits both to one case).

    python benchmarks/counts.py [--runs 20] [--models resnet_s,bert_s,yolo_s] [--cost]
    python benchmarks/counts.py --compile-runs 20 [--models ...]   # the A/A of counted compiles
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfguard.measure.counts import Counted, Target, count_targets  # noqa: E402
from perfguard.measure.job import Job  # noqa: E402
from perfguard.progress import Progress  # noqa: E402
from perfguard.results.counts import Counts  # noqa: E402
from perfguard.stats import compare_deterministic  # noqa: E402
from perfguard.stats.thresholds import parse_threshold  # noqa: E402
from perfguard.suite import load_suite  # noqa: E402
from perfguard.suite.gates import METRICS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CALIBRATION_PAIRS = 20
EFFECTS = (0.005, 0.01, 0.02)

PASSES = '''
import onnx
from onnx import helper


def _pairs(model, k):
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    output = graph.output[0].name
    rank = len(graph.output[0].type.tensor_type.shape.dim)
    perm = list(reversed(range(rank)))
    for node in graph.node:
        for i, name in enumerate(node.output):
            if name == output:
                node.output[i] = "bench_t0"
    current = "bench_t0"
    for i in range(2 * k):
        target = output if i == 2 * k - 1 else "bench_t" + str(i + 1)
        graph.node.append(helper.make_node("Transpose", [current], [target], perm=perm))
        current = target
    if k == 0:
        graph.node.append(helper.make_node("Identity", [current], [output]))
    return out


def two_transposes(model):
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes = []
    for node in out.graph.node:
        nodes.append(node)
        if node.op_type == "Conv":
            original = node.output[0]
            node.output[0] = original + "_conv"
            nodes.append(helper.make_node("Transpose", [original + "_conv"], [original + "_t"], perm=[0, 1, 3, 2]))
            nodes.append(helper.make_node("Transpose", [original + "_t"], [original], perm=[0, 1, 3, 2]))
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out
{functions}
'''

SUITE = """
[suite]
name = "counts-bench"
backend = "ort"
runners = ["cpu"]

[compiler]
path = "{compiler}"

[measure]
compile_repeats = 1
memory_probes = 0
{models}
{pipelines}
{cases}
"""


def _busy() -> subprocess.Popen[bytes]:
    """One core kept busy for the whole benchmark."""
    if shutil.which("stress-ng"):
        return subprocess.Popen(["stress-ng", "--cpu", "1", "--quiet"], stdout=subprocess.DEVNULL)
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _suite(folder: Path, models: list[str], pipelines: dict[str, str]) -> Path:
    smoke = load_suite(ROOT / "suites" / "smoke.toml")
    compiler = folder / "compiler"
    compiler.mkdir(parents=True, exist_ok=True)
    functions = "".join(f"\n\ndef {name}(model):\n    return _pairs(model, {int(k)})\n"
                        for name, k in pipelines.items() if k.isdigit())
    (compiler / "bench_passes.py").write_text(PASSES.replace("{functions}", functions))
    model_tables = "".join(
        f"\n[models.{m}]\narch = \"{smoke.models[m].arch}\"\nparams = {_toml(smoke.models[m].params)}\n" for m in models)
    pipe_tables = "\n[pipelines.none]\npasses = []\n" + "".join(
        f"\n[pipelines.{name}]\npasses = [\"bench_passes:{name if k.isdigit() else k}\"]\n"
        for name, k in pipelines.items())
    cases = "".join(f"\n[[cases]]\nmodel = \"{m}\"\n" for m in models)
    path = folder / f"suite-{len(pipelines)}.toml"
    path.write_text(SUITE.format(compiler=compiler, models=model_tables, pipelines=pipe_tables, cases=cases))
    return path


def _toml(params: Mapping[str, object]) -> str:
    return "{ " + ", ".join(f"{k} = {v}" for k, v in params.items()) + " }"


def _count_all(suite_path: Path, folder: Path, runs: int) -> dict[str, list[tuple[bool, dict[str, Counts]]]]:
    """Compile every case of the suite once; then ``runs`` counts of each ``none`` variant, one
    counted process per run, the other pipelines' variants counted first in the second run (once
    each). By case id: (counted after others?, counts by method) per count."""
    suite = load_suite(suite_path)
    job = Job(suite, list(suite.cases), workdir=folder / "job", progress=Progress())
    try:
        job.compile(memory=False)
        base = [c for c in job.compiled if c.case.pipeline.name == "none"]
        others = [c for c in job.compiled if c.case.pipeline.name != "none"]
        out: dict[str, list[tuple[bool, dict[str, Counts]]]] = {}
        for run in range(max(1, runs)):
            after = run == 1 or runs == 0
            members = [*others, *base] if after else base
            counted = count_targets(suite, [Target(c, compile=False) for c in members], folder / "ipc")
            for compiled, result in zip(members, counted, strict=True):
                _keep(out, compiled.case.id, after and compiled.case.pipeline.name == "none", result)
            others = [] if after else others
        return out
    finally:
        job.close()


def _keep(out: dict[str, list[tuple[bool, dict[str, Counts]]]], case: str, after: bool, result: Counted) -> None:
    if result.run.failure:
        print(f"  {case}: {result.run.failure}", file=sys.stderr)
        return
    out.setdefault(case, []).append((after, dict(result.run.counts)))
    window = result.run.counts.get("window")
    print(f"    count {case}{' (after others)' if after else ''}: {window.instructions if window else '-'}")


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def _verdict(base: float, value: float, metric: str) -> str:
    gate = parse_threshold(METRICS[metric].default, kind="count")
    comparison = compare_deterministic(base, value, gate)
    return "SAME" if comparison.decision == "same" else comparison.direction.upper()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--models", default="resnet_s,bert_s,yolo_s")
    parser.add_argument("--cost", action="store_true", help="also time a check with and without --counts")
    parser.add_argument("--cost-only", action="store_true", help="only the cost (two checks of the smoke suite)")
    parser.add_argument("--cost-case", default=None, help="the check's --case for the cost (default: every case)")
    parser.add_argument("--compile-runs", type=int, default=0, help="only the A/A of counted compiles, N runs")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # a log file sees each line
    models = args.models.split(",")
    if args.cost_only:
        with tempfile.TemporaryDirectory(prefix="counts-cost-") as tmp:
            _cost(Path(tmp), args.cost_case)
        return
    if args.compile_runs:
        busy = _busy()
        try:
            _compile_aa(args.compile_runs, models)
        finally:
            busy.terminate()
            busy.wait()
        return
    busy = _busy()
    started = time.time()
    try:
        with tempfile.TemporaryDirectory(prefix="counts-bench-") as tmp:
            folder = Path(tmp)
            first = _suite(folder, models, {"calib": str(CALIBRATION_PAIRS), "tp2": "two_transposes"})
            counted = _count_all(first, folder / "a", args.runs)
            print(f"A/A over {args.runs} counts per model, one core busy "
                  f"({'stress-ng --cpu 1' if shutil.which('stress-ng') else 'a Python busy loop'})")
            effects: dict[str, int] = {}
            for model in models:
                runs = [r for _, r in counted[f"{model}/none/cpu"]]
                for method in ("window", "difference"):
                    for metric in ("instructions", "estimated_cycles"):
                        values = [r[method].value(metric) for r in runs]
                        verdicts = [_verdict(values[0], v, metric) for v in values[1:]]
                        print(f"  {model:9s} {method:10s} {metric:16s} median {statistics.median(values):14,.0f} "
                              f"spread {_spread(values) * 100:.4f} %  SAME {verdicts.count('SAME')}/{len(verdicts)}")
                _order(model, counted[f"{model}/none/cpu"])
                base = statistics.median(r["window"].instructions for r in runs)
                calib = counted[f"{model}/calib/cpu"][0][1]["window"].instructions
                per_pair = (calib - base) / CALIBRATION_PAIRS
                for effect in EFFECTS:
                    effects[f"{model}:{effect}"] = max(1, round(effect * base / per_pair))
                tp2 = counted[f"{model}/tp2/cpu"][0][1]["window"].instructions
                print(f"  {model:9s} two Transposes per Conv: {tp2 / base - 1:+.2%} -> "
                      f"{_verdict(base, tp2, 'instructions')}; one output Transpose pair {per_pair:,.0f} instr")
            pipelines = {f"k{k}": str(k) for k in sorted(set(effects.values()))}
            second = _suite(folder, models, pipelines)
            sized = _count_all(second, folder / "b", 0)
            print("Detection (one count each against the A/A median, default floor "
                  f"{METRICS['instructions'].default}):")
            for model in models:
                base = statistics.median(r["window"].instructions for _, r in counted[f"{model}/none/cpu"])
                for effect in EFFECTS:
                    k = effects[f"{model}:{effect}"]
                    value = sized[f"{model}/k{k}/cpu"][0][1]["window"].instructions
                    print(f"  {model:9s} target +{effect:.1%}: {k} pairs, measured {value / base - 1:+.3%} -> "
                          f"{_verdict(base, value, 'instructions')}")
            print(f"counting took {time.time() - started:.0f} s")
            if args.cost:
                _cost(folder, args.cost_case)
    finally:
        busy.terminate()
        busy.wait()


def _compile_aa(runs: int, models: list[str]) -> None:
    """A/A of counted compiles: ``runs`` counted compiles of each model under the smoke suite's
    ``bn_fused_folded`` (an onnxoptimizer group and perfguard's constant folding); the spread of
    the total and of each pass."""
    suite = load_suite(ROOT / "suites" / "smoke.toml")
    cases = [c for c in suite.cases if c.pipeline.name == "bn_fused_folded" and c.model.name in models]
    with tempfile.TemporaryDirectory(prefix="counts-compile-") as tmp:
        job = Job(suite, cases, workdir=Path(tmp) / "job", progress=Progress())
        try:
            job.compile(memory=False)
            print(f"Counted compiles, A/A over {runs} per model (bn_fused_folded):")
            for compiled in job.compiled:
                counted = [count_targets(suite, [Target(compiled)], Path(tmp) / "ipc")[0] for _ in range(runs)]
                done = [c.compile for c in counted if c.compile is not None]
                totals = [float(f.total) for f in done]
                print(f"  {compiled.case.model.name:9s} total median {statistics.median(totals):14,.0f} "
                      f"spread {_spread(totals) * 100:.4f} % over {len(done)}")
                for index in sorted(done[0].per_pass):
                    values = [float(f.per_pass[index]) for f in done]
                    print(f"    pass {index}: median {statistics.median(values):14,.0f} "
                          f"spread {_spread(values) * 100:.4f} %")
        finally:
            job.close()


def _order(model: str, runs: list[tuple[bool, dict[str, Counts]]]) -> None:
    """The order effect: the median count of the variant counted alone against counted after the
    other pipelines' variants in the same counted process."""
    alone = [r["window"].instructions for after, r in runs if not after]
    after = [r["window"].instructions for after, r in runs if after]
    if alone and after:
        print(f"  {model:9s} order: alone median {statistics.median(alone):14,.0f} ({len(alone)}), after others "
              f"{statistics.median(after):14,.0f} ({len(after)}): {statistics.median(after) / statistics.median(alone) - 1:+.4%}")


def _cost(folder: Path, case: str | None) -> None:
    """Wall time of one timed check of the smoke suite (or of ``case``) and of the same check with
    --counts, one after the other."""
    import resource

    times, cpu = {}, {}
    where = ["--case", case] if case else []
    for label, extra in (("timed", []), ("counted", ["--counts"])):
        start, used = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run([sys.executable, "-m", "perfguard", "check", str(ROOT / "suites" / "smoke.toml"),
                               "--against-pipeline", "none", *where, "--quiet", *extra],
                              cwd=folder, env={**os.environ}, capture_output=True, text=True, check=False)
        times[label] = time.time() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[label] = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
        if proc.returncode not in (0, 1):
            print(f"  {label} check exited {proc.returncode}: {proc.stderr.strip()[-300:]}", file=sys.stderr)
    load = os.getloadavg()[0]
    print(f"cost ({case or 'the smoke suite'}): timed check {times['timed']:.0f} s, counted check "
          f"{times['counted']:.0f} s (x{times['counted'] / times['timed']:.2f}); CPU time {cpu['timed']:.0f} s and "
          f"{cpu['counted']:.0f} s (x{cpu['counted'] / cpu['timed']:.2f}); load average now {load:.1f}")


if __name__ == "__main__":
    main()
