"""Counted evidence on a real-size model (``benchmarks/counts.py --model``): where the time of a
counted child goes, phase by phase, under the plan of protocol 3 and of protocol 4, and what a
counted check of the model costs, cold and with its counts served from the artifact cache.

* **Phases** (``--phases``): one counted child of the model's ``none`` artifact, each phase timed
  from inside the process under the same Valgrind command perfguard runs (``counted_command``,
  ``counted_env``): Python's and ONNX Runtime's imports, the session, each warm-up inference
  uninstrumented, each instrumented one, each counted window. Three plans side by side, each in a
  process of its own, one after the other: protocol 3 (cache simulation, three warm-ups, one
  instrumented warm-up, a window of three, ``session.run``), protocol 4 (no cache simulation,
  the model's plan, the bound step) and protocol 4 with ``--counts-cache``.
* **Check** (``--check``): ``perfguard check SUITE --against-pipeline none --counts`` of the
  model under ``none`` and ``bn_folded``, with a fresh ``--artifact-cache``: cold (everything
  counted), then again (every count served); then with a cache that holds the base side's counts
  only (a counted ``run`` of ``none`` fills it), as a pull request's check finds it; wall and CPU
  time of each, and the timed check without ``--counts``. Run it from a checkout nobody edits
  meanwhile: the counts cache keys perfguard's own source.

    python benchmarks/counts.py --model resnet:depth=16,width=64,image_size=224 [--phases] [--check]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfguard.counting.plan import count_plan  # noqa: E402
from perfguard.counting.valgrind import counted_command, counted_env, valgrind_path  # noqa: E402
from perfguard.models.cost import model_macs  # noqa: E402

#: The child that times its own phases (run under Valgrind as a counted worker is).
PHASES = r'''
import gc, json, sys, time
start = time.monotonic()
marks = []
def mark(name):
    marks.append((name, time.monotonic() - start - sum(t for _, t in marks)))
import numpy as np
sys.path.insert(0, sys.argv[2])
from perfguard.backends.ort import create_session, OrtExecutable
from perfguard.backends.base import bound_step
from perfguard.counting.valgrind import ClientRequests
import onnxruntime
mark("imports (Python, numpy, ONNX Runtime)")
plan = json.loads(sys.argv[3])
session = create_session(sys.argv[1], {"graph_optimization_level": "disabled", "disabled_optimizers": []}, 1,
                         ["CPUExecutionProvider"])
executable = OrtExecutable(session)
inputs = session.get_inputs()
feeds = {i.name: np.random.default_rng(0).standard_normal([d if isinstance(d, int) else 1 for d in i.shape])
         .astype(np.float32) for i in inputs}
mark("session")
if plan["bound"]:
    step = bound_step(executable, feeds)
    mark("warm-up inference 1, uninstrumented (binds the step)")
else:
    step = lambda: executable.run(feeds)
for k in range(plan["warmup"] - (1 if plan["bound"] else 0)):
    step(); mark(f"warm-up inference {k + 1 + (1 if plan['bound'] else 0)}, uninstrumented")
client = ClientRequests()
gc.collect(); gc.disable()
client.start()
for k in range(plan["instrumented_warmup"]):
    step(); mark(f"warm-up inference {k + 1}, instrumented")
for k in range(plan["windows"]):
    zero, dump = client.window(f"w|{k}")
    zero()
    for _ in range(plan["per_window"]):
        step()
    dump(); mark(f"window {k + 1} ({plan['per_window']} inference(s)), instrumented")
client.stop()
print(json.dumps(marks))
'''


def _model(spec: str, folder: Path) -> Path:
    """The zoo model ``arch:k=v,...`` (ints), written to ``folder``."""
    import onnx

    from perfguard.models.zoo import build_model

    arch, _, params = spec.partition(":")
    values = {k: int(v) for k, v in (p.split("=") for p in params.split(",") if p)}
    path = folder / f"{arch}.onnx"
    onnx.save(build_model(arch, {"num_classes": 1000, **values}), path)
    return path


def _phases(model: Path, folder: Path) -> None:
    plan4 = count_plan(model, False)
    plans = {
        "protocol 3 (cache simulation, 3 + 1 warm-up, window of 3, session.run)":
            ({"bound": False, "warmup": 3, "instrumented_warmup": 1, "windows": 1, "per_window": 3}, True),
        f"protocol 4 (no cache simulation, {plan4.warmup} warm-up, {plan4.inferences} window(s) of 1, bound step)":
            ({"bound": True, "warmup": plan4.warmup, "instrumented_warmup": 0, "windows": plan4.inferences,
              "per_window": 1}, False),
        "protocol 4 with --counts-cache (1 instrumented warm-up)":
            ({"bound": True, "warmup": plan4.warmup, "instrumented_warmup": 1, "windows": plan4.inferences,
              "per_window": 1}, True),
    }
    script = folder / "phases.py"
    script.write_text(PHASES)
    valgrind = valgrind_path()
    for name, (plan, cache) in plans.items():
        out = folder / "out"
        out.mkdir(exist_ok=True)
        worker = [sys.executable, str(script), str(model), str(ROOT), json.dumps(plan)]
        command = counted_command(valgrind, out, worker, cache=cache)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        proc = subprocess.run(command, env=counted_env(worker, dict(os.environ)), capture_output=True, text=True,
                              check=False)
        wall = time.monotonic() - started
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before.ru_utime
        print(f"\n{name}: {wall:.0f} s wall, {cpu:.0f} s CPU")
        if proc.returncode != 0:
            print(f"  failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-3:]}")
            continue
        for phase, seconds in json.loads(proc.stdout.strip().splitlines()[-1]):
            print(f"  {seconds:8.1f} s  {phase}")


def _timed(command: list[str], cwd: Path) -> tuple[float, float, int, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (time.monotonic() - started, cpu.ru_utime + cpu.ru_stime - before.ru_utime - before.ru_stime,
            proc.returncode, proc.stderr)


def _check(model_spec: str, folder: Path) -> None:
    arch, _, params = model_spec.partition(":")
    table = ", ".join(f"{k} = {v}" for k, v in (p.split("=") for p in params.split(",") if p))
    suite = folder / "model.toml"
    suite.write_text(f'''[suite]
name = "model"
backend = "ort"
runners = ["cpu"]

[measure]
workers = 4
rounds = 4
min_time = "20ms"
timeout = "600s"
threads = 1

[models.m]
arch = "{arch}"
params = {{ {table}, num_classes = 1000 }}

[pipelines.none]
passes = []

[pipelines.bn_folded]
passes = ["fuse_bn_into_conv", "constant_folding"]

[[cases]]
model = "m"
''')
    perfguard = [sys.executable, "-m", "perfguard", "check", str(suite), "--against-pipeline", "none"]
    cache, base_only = folder / "cache", folder / "base-cache"
    runs = [("timed check (no --counts)", perfguard),
            ("counted check, cold (fresh artifact cache)", [*perfguard, "--counts", "--artifact-cache", str(cache)]),
            ("counted check, every count served", [*perfguard, "--counts", "--artifact-cache", str(cache)]),
            ("(a counted run of the base side alone, filling another cache)",
             [sys.executable, "-m", "perfguard", "run", str(suite), "--case", "m/none/*", "--counts",
              "--artifact-cache", str(base_only), "--out", str(folder / "base.json")]),
            ("counted check, base side served (a pull request's check)",
             [*perfguard, "--counts", "--artifact-cache", str(base_only)])]
    for name, command in runs:
        wall, cpu, code, err = _timed(command, folder)
        served = [line for line in err.splitlines() if "Valgrind" in line]
        print(f"{name}: {wall:.0f} s wall, {cpu:.0f} s CPU, exit {code}; {'; '.join(served) or '-'}")


def run(model_spec: str, phases: bool, check: bool) -> None:
    """The benchmark (see the module's docstring)."""
    with tempfile.TemporaryDirectory(prefix="counts-model-") as tmp:
        folder = Path(tmp)
        model = _model(model_spec, folder)
        print(f"model {model_spec}: {model_macs(model) / 1e9:.2f} G MACs an inference, "
              f"plan {count_plan(model, False)}")
        if phases:
            _phases(model, folder)
        if check:
            _check(model_spec, folder)
