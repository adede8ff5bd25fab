"""The hostile-input probes of the reliability issue, run against this checkout: each probe runs
a real ``perfguard`` command in a scratch folder and prints its exit code and the first line of
stderr. Nothing here asserts (the tests do); the table is for a reviewer and the closing note.

    .venv/bin/python benchmarks/hostile_probes.py [--quick]

``--quick`` skips the probes that compile and measure (run, SIGTERM)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "v1" / "result-run.json"
PERFGUARD = [sys.executable, "-m", "perfguard"]

TINY = """
[suite]
name = "probe"
[measure]
workers = 1
rounds = 2
warmup = 1
min_time = "{min_time}"
timeout = "60s"
[models.{model}]
arch = "resnet"
params = {{ depth = 2, width = 8, image_size = 32, num_classes = 10 }}
[pipelines.{pipeline}]
passes = []
"""


def suite(folder: Path, model: str = "r", pipeline: str = "p", min_time: str = "1ms", extra: str = "") -> Path:
    path = folder / "suite.toml"
    path.write_text(TINY.format(model=json.dumps(model)[1:-1] if model.isidentifier() else json.dumps(model),
                                pipeline=pipeline if pipeline.isidentifier() else json.dumps(pipeline),
                                min_time=min_time) + extra)
    return path


def perfguard(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = subprocess.run([*PERFGUARD, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    first = (lines[0] if proc.returncode else lines[-1]) if lines else "(no stderr)"
    if "Traceback" in proc.stderr:
        first = "TRACEBACK: " + lines[-1]
    return proc.returncode, first


def result_with(folder: Path, name: str, change) -> Path:
    data = json.loads(GOLDEN.read_text())
    change(data["cases"][0])
    path = folder / name
    path.write_text(json.dumps(data))
    return path


def probes(quick: bool):
    scratch = Path(tempfile.mkdtemp(prefix="hostile-probes-"))

    def fresh(name: str) -> Path:
        path = scratch / name
        path.mkdir()
        return path

    yield "validate: pipeline named a[/bold]b", perfguard("validate", str(suite(fresh("v1"), pipeline="a[/bold]b")), cwd=scratch)
    yield "validate: model named a/b", perfguard("validate", str(suite(fresh("v2"), model="a/b")), cwd=scratch)
    yield "validate: model named ../../x", perfguard("validate", str(suite(fresh("v3"), model="../../x")), cwd=scratch)
    yield "validate: min_time = 1e400s", perfguard("validate", str(suite(fresh("v4"), min_time="1e400s")), cwd=scratch)
    folder = fresh("v5")
    (folder / "suite.toml").write_text('[suite]\nname = "p"\n[models.m]\npath = "/etc/passwd"\n[pipelines.p]\npasses = []\n')
    yield "validate: model path /etc/passwd", perfguard("validate", str(folder / "suite.toml"), cwd=scratch)

    def nan(case):
        case["metrics"]["latency_s"]["per_worker"] = [[float("nan")] * 3, [float("inf")] * 3]
    folder = fresh("c1")
    base = folder / "base.json"
    shutil.copy(GOLDEN, base)
    bad = result_with(folder, "nan.json", nan)
    yield "compare: NaN/Infinity latencies", perfguard("compare", str(base), str(bad), cwd=folder)
    yield "report: NaN/Infinity latencies", perfguard("report", str(bad), "--out", str(folder / "r.html"), cwd=folder)
    yield "history ingest: NaN/Infinity latencies", perfguard("history", "ingest", str(bad), "--store", str(folder / "h.db"), cwd=folder)
    huge = folder / "huge.json"
    huge.write_text(GOLDEN.read_text().replace('"node_count": 41', '"node_count": 1' + "0" * 400, 1))
    yield "compare: node_count 10**400", perfguard("compare", str(base), str(huge), cwd=folder)
    yield "report: node_count 10**400", perfguard("report", str(huge), "--out", str(folder / "r2.html"), cwd=folder)
    yield "history ingest: node_count 10**400", perfguard("history", "ingest", str(huge), "--store", str(folder / "h2.db"), cwd=folder)
    deep = folder / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    yield "compare: JSON nested 100,000 deep", perfguard("compare", str(base), str(deep), cwd=folder)
    folder = fresh("s1")
    yield "internal error with --store URL password", perfguard(
        "history", "list", "--store", "postgresql://user:S3cretPW@127.0.0.1:1/db", cwd=folder)
    leaked = [p for p in Path(tempfile.gettempdir()).glob("perfguard-traceback-*") if "S3cretPW" in p.read_text()]
    yield "traceback files holding the password", (len(leaked), ", ".join(map(str, leaked)) or "none")
    if quick:
        return
    folder = fresh("r1")
    yield "run: pipeline named a[/bold]b", perfguard("run", str(suite(folder, pipeline="a[/bold]b")), "--out", str(folder / "o.json"), cwd=folder)
    folder = fresh("r2")
    yield "run: pipeline named test_sum[float32]", perfguard("run", str(suite(folder, pipeline="test_sum[float32]")), "--out", str(folder / "o.json"), cwd=folder)
    folder = fresh("t1")
    tmp = fresh("t1-tmp")
    slow = suite(folder, min_time="200ms").read_text().replace("workers = 1\nrounds = 2", "workers = 4\nrounds = 30")
    (folder / "suite.toml").write_text(slow)
    proc = subprocess.Popen([*PERFGUARD, "run", str(folder / "suite.toml"), "--out", str(folder / "o.json")],
                            cwd=folder, env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    time.sleep(3.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    time.sleep(1)
    left = sorted(p.name for p in tmp.iterdir() if p.name != ".ses")  # ONNX Runtime 1.32 writes .ses on import
    try:
        os.killpg(proc.pid, 0)
        group = "processes of its group still alive"
    except ProcessLookupError:
        group = "no process of its group left"
    yield "run: SIGTERM after 3.5 s", (proc.returncode, f"{(err.strip().splitlines() or ['(none)'])[-1]}; "
                                     f"{group}; TMPDIR left: {left or 'nothing'}")
    shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    quick = "--quick" in sys.argv
    width = 44
    print(f"{'probe':<{width}} exit  first line of stderr")
    for name, (code, line) in probes(quick):
        print(f"{name:<{width}} {code:>4}  {line[:160]}")


if __name__ == "__main__":
    main()
