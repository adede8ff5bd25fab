"""Counted evidence (``--counts``) measured, not assumed: its A/A spread, what it detects and what
it costs, with one core kept busy (``stress-ng --cpu 1`` if installed, else a Python busy loop).

For every model of the smoke suite (pipeline ``none``), on the product's own path (a real
compile, then ``perfguard.counting.take.count_targets``: one counted process per call, a child
forked from it per count, as a counted check does):

* **Calibration** (one counted process): ``none``, a pass that puts 20 Transpose pairs (each
  dimension order reversed and back) after the model's smallest computed tensor, and a pass that
  puts two Transposes after every Conv and MatMul, counted once each. The pairs give k, the number of pairs for +0.5 %, +1 % and
  +2 % of the model's instructions; the Conv/MatMul pass is compared with ``none`` at the default floor
  (REGRESSION expected).
* **Runs** (``--runs`` counted processes, as separate checks would be): ``none`` and the three
  sized variants of every model, ``none`` counted first in even runs and last in odd ones.
  A/A: the spread ((max - min) / median) of ``none``'s instructions and estimated cycles per
  inference over the runs, and each run's exact verdict against the calibration's count at the
  default floor (SAME expected every time); the order effect (``none`` counted first against
  last). Detection: each run's sized variant against the same run's ``none`` (REGRESSION
  expected every time).
* **Cost**: wall and CPU time of ``perfguard check suites/smoke.toml --against-pipeline none``
  with and without ``--counts`` (``--cost``; real checks, one after the other; ``--cost-case``
  limits them to one case), then both again with a fresh ``--artifact-cache``, once filling it
  and once served from it; each counted check against the timed one beside it.

    python benchmarks/counts.py [--runs 20] [--models resnet_s,bert_s,yolo_s] [--cost]
    python benchmarks/counts.py --compile-runs 20 [--models ...]   # the A/A of counted compiles
    python benchmarks/counts.py --from-kept DIR [--models ...]     # the report of a --keep DIR's runs
    python benchmarks/counts.py --drift [--runs 20] [--busy 2] [--model resnet:K=V,...]  # one tiny artifact in separate processes
    python benchmarks/counts.py --model resnet:depth=16,width=64,image_size=224 [--phases] [--check]
        # a real-size model: one counted child phase by phase (protocols 3 and 4), a counted check's cost
    python benchmarks/counts.py --split [--models resnet_s]       # a small model's counted inferences vs compiles
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfguard.counting.plan import Counted, Target  # noqa: E402
from perfguard.counting.take import count_targets  # noqa: E402

if TYPE_CHECKING:
    from perfguard.compile.case import CompiledCase
from perfguard.measure.job import Job  # noqa: E402
from perfguard.progress import Progress  # noqa: E402
from perfguard.results.counts import Counts  # noqa: E402
from perfguard.stats import compare_deterministic  # noqa: E402
from perfguard.suite import load_suite  # noqa: E402
from perfguard.suite.gates import DEFAULT_THRESHOLDS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CALIBRATION_PAIRS = 20
EFFECTS = (0.005, 0.01, 0.02)

PASSES = '''
import onnx
from onnx import helper


def _smallest(model):
    """The name, rank and producer index of the graph's smallest computed tensor of rank >= 2
    (all dimensions known): Transpose pairs there cost little each, so k sizes an effect finely."""
    inferred = onnx.shape_inference.infer_shapes(model)
    sizes = {}
    for value in inferred.graph.value_info:
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if len(dims) >= 2 and all(d > 0 for d in dims):
            size = 1
            for d in dims:
                size *= d
            sizes[value.name] = (size, len(dims))
    best = None
    for index, node in enumerate(model.graph.node):
        if node.op_type == "Constant":
            continue
        for name in node.output:
            if name in sizes and (best is None or sizes[name][0] < sizes[best[0]][0]):
                best = (name, sizes[name][1], index)
    return best


def _pairs(model, k):
    """k Transpose pairs (every axis reversed and back) after the smallest computed tensor."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    name, rank, index = _smallest(out)
    perm = list(reversed(range(rank)))
    producer = out.graph.node[index]
    producer.output[list(producer.output).index(name)] = "bench_t0"
    chain = []
    for i in range(2 * k):
        target = name if i == 2 * k - 1 else "bench_t" + str(i + 1)
        chain.append(helper.make_node("Transpose", ["bench_t" + str(i)], [target], perm=perm))
    if k == 0:
        chain.append(helper.make_node("Identity", ["bench_t0"], [name]))
    nodes = list(out.graph.node)
    del out.graph.node[:]
    out.graph.node.extend(nodes[:index + 1] + chain + nodes[index + 1:])
    return out


def two_transposes(model):
    """Two Transposes (the last two axes swapped and back) after every Conv and MatMul: the
    per-layer change a BERT without convolutions shows too."""
    out = onnx.shape_inference.infer_shapes(model)
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in (*out.graph.value_info, *out.graph.output)}
    nodes = []
    for node in out.graph.node:
        nodes.append(node)
        rank = ranks.get(node.output[0], 0)
        if node.op_type in ("Conv", "MatMul") and rank >= 2:
            perm = [*range(rank - 2), rank - 1, rank - 2]
            original = node.output[0]
            node.output[0] = original + "_op"
            nodes.append(helper.make_node("Transpose", [original + "_op"], [original + "_t"], perm=perm))
            nodes.append(helper.make_node("Transpose", [original + "_t"], [original], perm=perm))
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
    """One core kept busy for the whole benchmark, and not a moment longer: the busy process dies
    with the benchmark even when it is killed (``PR_SET_PDEATHSIG``; a killed benchmark once left
    five ``stress-ng`` behind)."""
    command = (["stress-ng", "--cpu", "1", "--quiet"] if shutil.which("stress-ng")
               else [sys.executable, "-c", "while True: pass"])
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, preexec_fn=_end_with_benchmark)


def _end_with_benchmark() -> None:
    import ctypes
    import signal

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG; stress-ng stops its workers on TERM


def _suite(folder: Path, models: list[str], pipelines: dict[str, str],
           per_model: Mapping[str, list[str]] | None = None) -> Path:
    """The benchmark's suite: ``models`` under ``none`` and ``pipelines`` (name: a pass of
    ``PASSES`` or a number of Transpose pairs), each model under ``per_model[model]`` of them
    when given (else all)."""
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
    cases = "".join(f"\n[[cases]]\nmodel = \"{m}\"\n" + (
        f"pipelines = {json.dumps(['none', *per_model[m]])}\n" if per_model is not None else "") for m in models)
    path = folder / f"suite-{len(pipelines)}.toml"
    path.write_text(SUITE.format(compiler=compiler, models=model_tables, pipelines=pipe_tables, cases=cases))
    return path


def _toml(params: Mapping[str, object]) -> str:
    return "{ " + ", ".join(f"{k} = {v}" for k, v in params.items()) + " }"


def _count_runs(suite_path: Path, folder: Path, runs: int, keep: Path | None = None) -> list[dict[str, Counts]]:
    """Compile every case of the suite once, then count all its variants ``runs`` times, one
    counted process per run, ``none`` first in even runs and last in odd ones. Per run: the
    ``window`` counts by case id (a failed count is left out and printed); ``keep``: a folder
    that gets each run's counts as JSON (with their largest functions: what to diff when one
    count stands out)."""
    suite = load_suite(suite_path)
    job = Job(suite, list(suite.cases), workdir=folder / "job", progress=Progress())
    try:
        job.compile(memory=False)
        base = [c for c in job.compiled if c.case.pipeline.name == "none"]
        others = [c for c in job.compiled if c.case.pipeline.name != "none"]
        out: list[dict[str, Counts]] = []
        for run in range(runs):
            members = [*base, *others] if run % 2 == 0 else [*others, *base]
            counted = count_targets(suite, [Target(c, compile=False) for c in members], folder / "ipc")
            out.append(_kept(members, counted))
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                (keep / f"{folder.name}-run{run + 1}.json").write_text(
                    json.dumps({case: c.to_json() for case, c in out[-1].items()}, indent=1))
            print(f"    run {run + 1}/{runs}: " + ", ".join(
                f"{case} {counts.instructions:,.0f}" for case, counts in sorted(out[-1].items())))
        return out
    finally:
        job.close()


def _kept(members: list[CompiledCase], counted: list[Counted]) -> dict[str, Counts]:
    out: dict[str, Counts] = {}
    for compiled, result in zip(members, counted, strict=True):
        window = result.run.counts.get("window")
        if window is None:
            print(f"  {compiled.case.id}: {result.run.failure}", file=sys.stderr)
        else:
            out[compiled.case.id] = window
    return out


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def _verdict(base: float, value: float, metric: str) -> str:
    gate = DEFAULT_THRESHOLDS.gate("benchmark", metric).threshold(base)
    comparison = compare_deterministic(base, value, gate)
    return "SAME" if comparison.decision == "same" else comparison.direction.upper()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--models", default="resnet_s,bert_s,yolo_s")
    parser.add_argument("--cost", action="store_true", help="also time a check with and without --counts")
    parser.add_argument("--cost-only", action="store_true", help="only the cost (two checks of the smoke suite)")
    parser.add_argument("--cost-case", default=None, help="the check's --case for the cost (default: every case)")
    parser.add_argument("--keep", type=Path, default=None, help="write every run's counts (JSON) to this folder")
    parser.add_argument("--from-kept", type=Path, default=None,
                        help="count nothing: report the runs a --keep folder holds (an interrupted benchmark's too)")
    parser.add_argument("--compile-runs", type=int, default=0, help="only the A/A of counted compiles, N runs")
    parser.add_argument("--model", default=None, metavar="ARCH:K=V,...",
                        help="a real-size zoo model (resnet:depth=16,width=64,image_size=224 is ResNet-34): the "
                             "phases of one counted child (--phases) and a counted check's cost (--check)")
    parser.add_argument("--phases", action="store_true", help="with --model: one counted child, phase by phase")
    parser.add_argument("--check", action="store_true", help="with --model: a counted check, cold and served")
    parser.add_argument("--drift", action="store_true",
                        help="one tiny artifact counted in --runs separate processes: spread and A/A (--busy N cores)")
    parser.add_argument("--busy", type=int, default=2, help="with --drift: cores kept busy (stress-ng --cpu N)")
    parser.add_argument("--split", action="store_true",
                        help="a smoke model's counting cost: its inferences only, then with its compiles")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # a log file sees each line
    models = args.models.split(",")
    if args.split:
        from counts_split import run as run_split

        run_split(models[0] if args.models != parser.get_default("models") else "resnet_s")
        return
    if args.drift:
        from counts_drift import run as run_drift

        params = None
        if args.model:  # another tiny ResNet: resnet:depth=1,width=2,image_size=4
            arch, _, text = args.model.partition(":")
            if arch != "resnet":
                parser.error("--drift --model takes a ResNet's parameters: resnet:depth=D,width=W,image_size=S")
            params = {k: int(v) for k, v in (item.split("=", 1) for item in text.split(",") if item)}
        run_drift(args.runs, args.busy, params)
        return
    if args.model:
        from counts_model import run as run_model

        run_model(args.model, args.phases or not args.check, args.check or not args.phases)
        return
    if args.cost_only:
        with tempfile.TemporaryDirectory(prefix="counts-cost-") as tmp:
            _cost(Path(tmp), args.cost_case)
        return
    if args.from_kept:
        _from_kept(args.from_kept, models)
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
            calibration = _count_runs(_suite(folder, models, {"calib": str(CALIBRATION_PAIRS),
                                                              "tp2": "two_transposes"}), folder / "a", 1, args.keep)[0]
            sizes = _sizes(models, calibration)
            if not args.runs:
                return
            ks = sorted({k for per_model in sizes.values() for k in per_model.values()})
            own = {m: sorted({f"k{k}" for k in sizes[m].values()}) for m in models}  # a model's own sizes only
            runs = _count_runs(_suite(folder, models, {f"k{k}": str(k) for k in ks}, own), folder / "b", args.runs,
                               args.keep)
            print(f"{args.runs} counted processes, one core busy "
                  f"({'stress-ng --cpu 1' if shutil.which('stress-ng') else 'a Python busy loop'})")
            _reports(models, calibration, runs, sizes)
            print(f"counting took {time.time() - started:.0f} s")
            if args.cost:
                _cost(folder, args.cost_case)
    finally:
        busy.terminate()
        busy.wait()


def _reports(models: list[str], calibration: Mapping[str, Counts], runs: list[dict[str, Counts]],
             sizes: Mapping[str, Mapping[float, int]]) -> None:
    print(f"floors: {DEFAULT_THRESHOLDS.gate('benchmark', 'instructions').text} (instructions), "
          f"{DEFAULT_THRESHOLDS.gate('benchmark', 'estimated_cycles').text} (estimated cycles); {len(runs)} runs")
    for model in models:
        _report(model, calibration, runs, sizes[model])


def _from_kept(folder: Path, models: list[str]) -> None:
    """The report of the runs a ``--keep`` folder holds: the calibration (``a-run1.json``) and
    every ``b-runN.json`` written so far."""
    def read(path: Path) -> dict[str, Counts]:
        return {case: Counts.from_json(data) for case, data in json.loads(path.read_text()).items()}

    calibration = read(folder / "a-run1.json")
    runs = [read(path) for path in sorted(folder.glob("b-run*.json"), key=lambda p: int(p.stem.split("run")[1]))]
    _reports(models, calibration, runs, _sizes(models, calibration))


def _sizes(models: list[str], calibration: Mapping[str, Counts]) -> dict[str, dict[float, int]]:
    """By model and effect: the Transpose pairs that add that share of ``none``'s instructions;
    prints the two-Transposes-per-Conv verdict on the way."""
    out: dict[str, dict[float, int]] = {}
    print("Calibration (one count each):")
    for model in models:
        base = calibration[f"{model}/none/cpu"].instructions
        per_pair = (calibration[f"{model}/calib/cpu"].instructions - base) / CALIBRATION_PAIRS
        tp2 = calibration[f"{model}/tp2/cpu"].instructions
        print(f"  {model:9s} one Transpose pair {per_pair:,.0f} instructions; two Transposes per Conv/MatMul "
              f"{tp2 / base - 1:+.2%} -> {_verdict(base, tp2, 'instructions')}")
        out[model] = {effect: max(1, round(effect * base / per_pair)) for effect in EFFECTS}
    return out


def _report(model: str, calibration: Mapping[str, Counts], runs: list[dict[str, Counts]],
            sizes: Mapping[float, int]) -> None:
    """One model's A/A spread and verdicts, order effect, and detection over the runs."""
    case = f"{model}/none/cpu"
    base = [r[case] for r in runs if case in r]
    for metric in ("instructions", "estimated_cycles"):
        values = [c.value(metric) for c in base]
        verdicts = [_verdict(calibration[case].value(metric), v, metric) for v in values]
        print(f"  {model:9s} A/A {metric:16s} median {statistics.median(values):14,.0f} "
              f"spread {_spread(values) * 100:.4f} %  SAME {verdicts.count('SAME')}/{len(verdicts)}")
    first = [r[case].instructions for i, r in enumerate(runs) if case in r and i % 2 == 0]
    last = [r[case].instructions for i, r in enumerate(runs) if case in r and i % 2 == 1]
    if first and last:
        print(f"  {model:9s} order: none counted first {statistics.median(first):14,.0f} ({len(first)}), last "
              f"{statistics.median(last):14,.0f} ({len(last)}): {statistics.median(last) / statistics.median(first) - 1:+.4%}")
    for effect, k in sorted(sizes.items()):
        pairs = [(r[case].instructions, r[f"{model}/k{k}/cpu"].instructions) for r in runs
                 if case in r and f"{model}/k{k}/cpu" in r]
        verdicts = [_verdict(a, b, "instructions") for a, b in pairs]
        changes = [b / a - 1 for a, b in pairs]
        print(f"  {model:9s} target +{effect:.1%} ({k} pairs): measured median {statistics.median(changes):+.3%} "
              f"[{min(changes):+.3%}, {max(changes):+.3%}], REGRESSION {verdicts.count('REGRESSION')}/{len(verdicts)}")


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
                      f"spread {_spread(totals) * 100:.4f} % over {len(done)} ({len(set(totals))} distinct, "
                      f"{min(totals):,.0f} to {max(totals):,.0f})")
                for index in sorted(done[0].per_pass):
                    values = [float(f.per_pass[index]) for f in done]
                    print(f"    pass {index}: median {statistics.median(values):14,.0f} "
                          f"spread {_spread(values) * 100:.4f} %")
        finally:
            job.close()


def _cost(folder: Path, case: str | None) -> None:
    """Wall and CPU time of a timed check of the smoke suite (or of ``case``) and of the same check
    with --counts, one after the other; then both again with an artifact cache, once to fill it and
    once served from it (a counted check whose variants were all counted before)."""
    import resource

    times, cpu = {}, {}
    where = ["--case", case] if case else []
    cache = ["--artifact-cache", str(folder / "cache")]
    checks = (("timed", []), ("counted", ["--counts"]), ("timed, filling the cache", cache),
              ("counted, filling the cache", ["--counts", *cache]), ("timed, cache warm", cache),
              ("counted, cache warm", ["--counts", *cache]))
    for label, extra in checks:
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
    print(f"cost ({case or 'the smoke suite'}), wall and CPU seconds, load average now {load:.1f}:")
    for label, _ in checks:
        base = label.replace("counted", "timed")  # a counted check against the timed one beside it
        print(f"  {label:28} {times[label]:6.0f} s wall (x{times[label] / times[base]:.2f})  "
              f"{cpu[label]:6.0f} s CPU (x{cpu[label] / cpu[base]:.2f})")


if __name__ == "__main__":
    main()
