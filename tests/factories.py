"""Fixture factories: real temporary git repositories of a small "compiler" package.

The compiler is a package ``mycc`` with user passes (ModelProto -> ModelProto). ``add_work(n)``
writes a pass that inserts ``n`` exact no-op Mul(1.0)/Add(0.0) pairs after the graph input: real
extra work that leaves the answer unchanged, so a commit can make the compiled model slower by a
chosen amount.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfguard.results import CaseEntry

# Source of ``add_work(model, pairs)``: inserts ``pairs`` exact no-op Mul(1)/Add(0) pairs between the
# first graph input and its consumers. Shared by the toy compiler, the flag passes of the bisect
# tests and benchmarks/detection.py, which write it into modules of their own.
WORK_FUNCTION = """
import onnx
from onnx import helper, numpy_helper
import numpy as np


def add_work(model, pairs):
    out = onnx.ModelProto()
    out.CopyFrom(model)
    if pairs == 0:
        return out
    graph = out.graph
    source = graph.input[0].name
    graph.initializer.extend([numpy_helper.from_array(np.array(1.0, np.float32), "work_one"),
                              numpy_helper.from_array(np.array(0.0, np.float32), "work_zero")])
    nodes, current = [], source
    for i in range(pairs):
        nodes.append(helper.make_node("Mul", [current, "work_one"], [f"work_m{i}"]))
        nodes.append(helper.make_node("Add", [f"work_m{i}", "work_zero"], [f"work_a{i}"]))
        current = f"work_a{i}"
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name == source:
                node.input[k] = current
    old = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + old)
    return out
"""

PASS_TEMPLATE = '''"""Passes of the toy compiler under test (version: {label})."""
{work_function}

WORK = {work}


def extra_work(model):
    """Insert WORK no-op Mul(1)/Add(0) pairs between the first input and its consumers."""
    return add_work(model, WORK)


def identity(model):
    return model
'''


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "Test Author", "GIT_AUTHOR_EMAIL": "author@example.com",
           "GIT_COMMITTER_NAME": "Test Author", "GIT_COMMITTER_EMAIL": "author@example.com",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
           "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env=env).stdout.strip()


def pass_source(work: int, label: str = "") -> str:
    return PASS_TEMPLATE.format(work=work, label=label or f"work={work}", work_function=WORK_FUNCTION)


def make_compiler_repo(root: Path, versions: list[tuple[str, dict[str, str | None]]]) -> tuple[Path, list[str]]:
    """Create a git repo at ``root`` with one commit per ``(subject, {relative path: text or None})``
    (None deletes the file).

    Returns the repo path and the commit shas in order (oldest first)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    shas = []
    for subject, files in versions:
        for relative, text in files.items():
            path = root / relative
            if text is None:  # delete the file in this commit
                git(root, "rm", "-q", relative)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
            git(root, "add", relative)
        git(root, "commit", "-q", "--allow-empty", "-m", subject)
        shas.append(git(root, "rev-parse", "HEAD"))
    return root, shas



def culprit_history(root: Path, commits: int, culprit: int, work: int = 24) -> tuple[Path, list[str]]:
    """A toy compiler's history (:func:`make_compiler_repo` at ``root``): an initial commit and
    ``commits`` more that each add a note, but commit ``culprit``, which also makes ``extra_work``
    insert ``work`` no-op pairs (a real slowdown). The repo and the shas, oldest first."""
    versions: list[tuple[str, dict[str, str | None]]] = [
        ("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)})]
    for i in range(1, commits + 1):
        files: dict[str, str | None] = {f"docs/n{i}.txt": f"note {i}\n"}
        if i == culprit:
            files["mycc/passes.py"] = pass_source(work, f"c{i}")
        versions.append((f"commit {i}", files))
    return make_compiler_repo(root, versions)

def compiler_suite(repo: Path, *, workers: int = 6, max_workers: int = 14, extra: str = "",
                   passes: Sequence[str] = ("mycc.passes:extra_work",)) -> str:
    """A suite whose pipeline runs the compiler's ``extra_work`` pass (or ``passes``) on a small ResNet."""
    return textwrap.dedent(f"""
        [suite]
        name = "toy"

        [compiler]
        repo = "{repo}"
        path = "{repo}"

        [measure]
        rounds = 6
        warmup = 2
        min_time = "3ms"
        compile_repeats = 3
        memory_probes = 1
        timeout = "120s"

        [check]
        workers = {workers}
        step_workers = 4
        max_workers = {max_workers}

        [models.r]
        arch = "resnet"
        params = {{ depth = 2, width = 8, image_size = 32, num_classes = 10 }}

        [pipelines.mycc]
        passes = {json.dumps(list(passes))}
        {extra}
    """)


def case_entry(per_worker: Sequence[Sequence[float]] | None, *, case: str = "m/p/cpu",
               worker_ids: Sequence[int] | None = None, telemetry: dict[str, Any] | None = None,
               summarize: bool = True, **metrics: Any) -> CaseEntry:
    """A measured result entry for comparison tests: per-worker latency values (and other metrics
    as keyword arguments, e.g. ``compile_times_s``), with a placeholder key and measurement.

    ``summarize=False`` skips the latency summary (zeros instead; comparisons read only the
    per-worker values), which keeps simulations of thousands of checks cheap."""
    from perfguard.results import CaseEntry, CaseKey, Latency, Measurement, Metrics

    model, pipeline, runner = case.split("/")
    latency = None
    if per_worker is not None:
        workers = tuple(tuple(float(v) for v in w) for w in per_worker)
        latency = (Latency.from_values(workers) if summarize
                   else Latency(workers, sum(len(w) for w in workers), *([0.0] * 8)))
    ids = tuple(worker_ids if worker_ids is not None else range(len(per_worker or ())))
    measurement = Measurement(f"{model}/{runner}", len(ids), len(ids), ids, 1, 0, len(per_worker[0]) if per_worker else 0,
                              0.0, 1, telemetry=telemetry)
    for key in ("compile_times_s", "peak_rss_bytes_probes", "session_rss_bytes_per_worker"):
        if metrics.get(key) is not None:
            metrics[key] = tuple(metrics[key])
    key = CaseKey({"name": model}, {"name": pipeline}, {"name": "mock"}, {"name": runner}, {})
    return CaseEntry(case, model, pipeline, runner, key, key.hash(), "2026-01-01T00:00:00Z",
                     metrics=Metrics(latency_s=latency, **metrics), measurement=measurement)


def result_json(path: str | Path) -> dict[str, Any]:
    """A result file as its JSON object, read through the one loader (version, schema, typed
    documents) and written back: tests that check the file format read it this way."""
    from perfguard.results import load_result

    return load_result(path).to_json()
