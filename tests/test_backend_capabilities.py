"""What a backend can do is declared by the backend (``perfguard.backends.base.Capabilities``,
``load_profiled``, ``tuning_moves``), and every stage asks it: a third-party backend from another
package (``tests/plugin_backend``, registered through the ``perfguard.backends`` entry-point
group) profiles and offers a tuning move, the mock exercises each capability, a missing ability
is a one-line error naming the backend and the ability, and no stage tests a backend's name.
"""

from __future__ import annotations

import ast
import json
import os
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from perfguard.backends import available_backends, get_backend
from perfguard.backends.base import ABILITIES, Capabilities, OptionEdit
from perfguard.backends.mock import MockBackend
from perfguard.errors import UserError
from perfguard.exit_codes import ExitCode
from perfguard.suite import PipelineSpec
from perfguard.workers.trace import aggregate, read_trace

from .conftest import REPO, TINY_MODELS, run_cli, smallest_measure

PLUGIN = REPO / "tests" / "plugin_backend"


def _clear_registry() -> None:
    from perfguard.backends import _registry

    _registry.cache_clear()
    get_backend.cache_clear()


@pytest.fixture
def example_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The ``example`` backend installed as a user installs one: its distribution metadata on
    the path (here and, through PYTHONPATH, in every worker and CLI process)."""
    monkeypatch.syspath_prepend(str(PLUGIN))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(PLUGIN), os.environ.get("PYTHONPATH")])))
    _clear_registry()
    yield
    _clear_registry()


SUITE = TINY_MODELS + smallest_measure(1) + """
[suite]
name = "plugin"
backend = "example"
runners = ["cpu"]
[check]
workers = 2
max_workers = 2
[pipelines.plain]
passes = ["noop"]
[pipelines.copy]
passes = ["noop", "add_copy"]
"""


def test_a_third_party_backend_is_found_through_its_entry_point_with_its_capabilities(example_backend: None) -> None:
    assert "example" in available_backends()
    backend = get_backend("example")
    assert backend.capabilities == Capabilities(profile=True)
    assert [e.describe for e in backend.tuning_moves({})] == ["fast -> true"]
    with pytest.raises(UserError, match="^backend 'example' cannot compile hybrids"):
        backend.require("hybrid_compile")


def test_the_built_in_backends_declare_what_the_stages_ask() -> None:
    assert get_backend("ort").capabilities == Capabilities(profile=True, hybrid_compile=True, user_passes=True,
                                                          counts=True, compile_counts=True)
    assert get_backend("mock").capabilities == Capabilities(profile=True, hybrid_compile=True, user_passes=True)
    # IREE has no runtime profiler here (a pair is explained from its dispatch counts), and its
    # artifact is a .vmfb no compile starts from. Its inferences are counted (local-sync), and its
    # compile as its two tools, each run whole under Valgrind; TVM's are both, pass by pass.
    assert get_backend("iree").capabilities == Capabilities(counts=True, compile_counts=True)
    assert get_backend("tvm").capabilities == Capabilities(counts=True, compile_counts=True)
    assert get_backend("ort").tuning_moves({"graph_optimization_level": "all"}) == []


@pytest.mark.parametrize("ability", sorted(ABILITIES))
def test_a_missing_ability_is_one_line_naming_the_backend_and_the_ability(ability: str) -> None:
    error = Capabilities().missing("iree", ability)  # IREE as a backend that declares nothing
    assert error is not None
    message = str(error)
    assert "\n" not in message and message.startswith("backend 'iree' cannot ")
    assert ABILITIES[ability] in message and f"Capabilities.{ability}" in message


def test_the_contract_defaults_say_cannot() -> None:
    class Minimal(MockBackend):
        name = "minimal"
        capabilities = Capabilities()
        tuning_moves = MockBackend.__bases__[0].tuning_moves  # the contract's default
        load_profiled = MockBackend.__bases__[0].load_profiled

    backend = Minimal()
    assert backend.tuning_moves({"speedup": False}) == []
    with pytest.raises(UserError, match="^backend 'minimal' cannot profile its artifacts"):
        backend.load_profiled(None, None, 1, "x")  # type: ignore[arg-type]


def test_the_contract_asks_nothing_of_a_runner_and_sizes_no_thread_pool(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A new backend inherits no ONNX Runtime check and no other runtime's thread variable: each
    backend declares its own (``ort``: its execution provider; ``tvm``: ``TVM_NUM_THREADS``)."""
    from perfguard.backends.base import Backend
    from perfguard.errors import RunnerUnavailable
    from perfguard.runners import get_runner
    from perfguard.workers.launch import _worker_env

    class Plain(MockBackend):
        name = "plain"
        check_runner = Backend.check_runner
        thread_env = Backend.thread_env

    runner = get_runner("npu:qnn")  # QNN's execution provider is not installed here
    Plain().check_runner(runner)
    with pytest.raises(RunnerUnavailable, match="QNN"):
        get_backend("ort").check_runner(runner)
    assert Plain().thread_env(3) == {}
    assert get_backend("tvm").thread_env(3) == {"TVM_NUM_THREADS": "3"}
    for var in ("TVM_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    assert "TVM_NUM_THREADS" not in _worker_env(3, tmp_path, ["ort", "mock"])
    env = _worker_env(3, tmp_path, ["ort", "tvm", "no-such-backend"])
    assert (env["TVM_NUM_THREADS"], env["OMP_NUM_THREADS"]) == ("3", "3")
    from perfguard.counting.valgrind import counted_env

    assert counted_env(["worker"], env)["TVM_NUM_THREADS"] == "1"  # a counted worker pins every pool


def test_a_worker_that_imports_onnx_runtime_holds_one_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ONNX Runtime 1.32's import starts a telemetry thread (more later) unless
    ``ORT_DISABLE_TELEMETRY`` is set: the ort backend's ``thread_env`` sets it for every worker
    (a real child process importing the real runtime; its threads read from ``/proc``)."""
    import subprocess
    import sys

    from perfguard.workers.launch import _worker_env

    monkeypatch.delenv("ORT_DISABLE_TELEMETRY", raising=False)
    probe = "import onnxruntime, os, time; time.sleep(0.5); print(len(os.listdir('/proc/self/task')))"
    env = _worker_env(1, tmp_path, ["ort"])
    assert env["ORT_DISABLE_TELEMETRY"] == "1"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "1"


def test_capabilities_and_option_edits_round_trip() -> None:
    caps = Capabilities(profile=True, user_passes=True)
    assert Capabilities.from_json(json.loads(json.dumps(caps.to_json()))) == caps
    # A newer perfguard's ability is left out; a missing one reads as "cannot".
    assert Capabilities.from_json({"profile": True, "teleport": True}) == Capabilities(profile=True)
    edit = OptionEdit("fast -> true", {"fast": True})
    assert OptionEdit.from_json(json.loads(json.dumps(edit.to_json()))) == edit


# -- the mock exercises each capability ---------------------------------------------------------

def _mock(tmp_path: Path, name: str, passes: tuple[str, ...], options: dict[str, object] | None = None,
          model: Path | None = None) -> float:
    pipeline = PipelineSpec(name, "mock", passes, options or {})
    artifact = MockBackend().compile(model or tmp_path / "none.onnx", pipeline, tmp_path / name).artifact
    return float(artifact.settings["latency"])


def test_the_mock_compiles_hybrids_from_a_prefix_artifact(tmp_path: Path) -> None:
    whole = _mock(tmp_path, "whole", ("slower_10pct", "faster_10pct", "slower_5pct"), {"latency": "2ms"})
    # Stage 1: the prefix without options; stage 2: the rest from stage 1's artifact.
    _mock(tmp_path, "prefix", ("slower_10pct",))
    hybrid = _mock(tmp_path, "rest", ("faster_10pct", "slower_5pct"), {"latency": "2ms"},
                   model=tmp_path / "prefix" / "mock.json")
    assert hybrid == pytest.approx(whole)


def test_the_mock_runs_user_passes_and_offers_a_tuning_move(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mypasses.py").write_text("def double(latency):\n    return latency * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _mock(tmp_path, "user", ("mypasses:double",), {"latency": "1ms"}) == pytest.approx(0.002)
    moves = MockBackend().tuning_moves({"latency": "1ms"})
    assert moves == [OptionEdit("speedup -> true", {"latency": "1ms", "speedup": True})]
    assert _mock(tmp_path, "fast", (), dict(moves[0].options)) == pytest.approx(0.001 / 1.10)


def test_the_mock_profiles_in_the_format_the_workers_read(tmp_path: Path) -> None:
    from perfguard.runners import get_runner

    pipeline = PipelineSpec("p", "mock", (), {"latency": "300us"})
    artifact = MockBackend().compile(tmp_path / "none.onnx", pipeline, tmp_path / "a").artifact
    executable = MockBackend().load_profiled(artifact, get_runner("cpu"), 1, str(tmp_path / "trace"))
    feeds = {"x": __import__("numpy").zeros(2, dtype="float32")}
    for _ in range(4):
        executable.run(feeds)
    profile = aggregate(read_trace(executable.end_profiling()), skip_runs=1)
    assert profile.runs == 3 and [op.op_type for op in profile.ops] == ["Mock"]
    assert 300 <= profile.ops[0].kernel_us <= profile.run_us


# -- the third-party backend through the stages ---------------------------------------------------

@pytest.mark.slow
def test_profile_profiles_through_a_third_party_backend(example_backend: None, tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(textwrap.dedent(SUITE))
    out = tmp_path / "profile.json"
    proc = run_cli("profile", str(suite), "--case", "resnet_t/copy/cpu", "--against-pipeline", "plain",
                   "--profile-workers", "1", "--profile-runs", "5", "--json", str(out), "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    explanation = json.loads(out.read_text())["explanations"][0]
    assert explanation["failures"] == []
    rows = {(row["op_type"], row["provider"]): row for row in explanation["diff"]["ops"]}
    assert set(rows) == {("Compute", "ExampleProvider"), ("Copy", "ExampleProvider")}
    copy = rows[("Copy", "ExampleProvider")]
    assert (copy["nodes_before"], copy["nodes_after"]) == (0, 1)  # the op add_copy appended, 300 us a run


@pytest.mark.slow
def test_tune_tries_a_third_party_backends_tuning_move(example_backend: None, tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(textwrap.dedent(SUITE))
    out = tmp_path / "tune.json"
    proc = run_cli("tune", str(suite), "--case", "resnet_t/plain/cpu", "--passes", "noop", "--budget", "3",
                   "--no-proof", "--screen-workers", "2", "--batch", "2", "--json", str(out),
                   "--state", str(tmp_path / "state.json"), "--quiet", cwd=tmp_path, timeout=600)
    # --no-proof: a search only, never "proved", so the exit code is INCONCLUSIVE whatever it found.
    assert proc.returncode == ExitCode.INCONCLUSIVE, proc.stdout + proc.stderr
    document = json.loads(out.read_text())
    tried = {p["move"]: p for p in document["points"]}
    assert "fast -> true" in tried, list(tried)
    move = tried["fast -> true"]
    # The backend's edit, compiled and timed against the incumbent like any pass-order move.
    assert move["candidate"] == {"passes": ["noop"], "options": {"fast": True}}
    assert move["status"] == "screened" and move["latency"]["workers"] >= 1


# -- no stage tests a backend's name ------------------------------------------------------------

BUILT_IN = {"ort", "iree", "mock", "tvm"}


def _names_a_backend(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in BUILT_IN
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_backend(e) for e in node.elts)
    return False


def test_no_stage_compares_a_backend_name_with_a_string_literal() -> None:
    """A comparison with a built-in backend's name (``backend == "ort"``, ``in ("ort",)``) is a
    capability some stage assumed instead of asking the backend for it."""
    found = []
    for path in sorted((REPO / "perfguard").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare) and any(map(_names_a_backend, [node.left, *node.comparators])):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


# -- no stage outside runners/ tests a runner's name --------------------------------------------

RUNNER_KINDS = {"cpu", "cuda", "npu"}
NAME_PARSING = {"split", "rsplit", "partition", "startswith", "removeprefix"}


def _names_a_runner(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and (node.value in RUNNER_KINDS or node.value.startswith("npu:"))
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_runner(e) for e in node.elts)
    return False


def _reads_a_runner(node: ast.AST) -> bool:
    """The expression names a runner: a variable or attribute called ``runner`` or ``*runner*``
    (``case.runner``, ``runner.name``, ``runner_kind``)."""
    return any((isinstance(n, ast.Name) and "runner" in n.id.lower())
               or (isinstance(n, ast.Attribute) and "runner" in n.attr.lower()) for n in ast.walk(node))


def _is_a_runner_name(node: ast.AST) -> bool:
    """The expression is a runner's name: ``runner``, ``<x>.runner`` or ``runner.name`` (not a
    history series' ``runner_class``, a key of the store's own format)."""
    return re.fullmatch(r"(.+\.)?runner(_name)?(\.name)?", ast.unparse(node)) is not None


def runner_name_tests(source: str) -> list[str]:
    """The places in ``source`` that compare a runner's name with a runner kind (``case.runner ==
    "cuda"``, ``runner_kind in ("cpu",)``) or take a runner's name apart (``runner.name.split(":")``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Compare) and _reads_a_runner(node)
                and any(map(_names_a_runner, [node.left, *node.comparators]))):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in NAME_PARSING
              and _is_a_runner_name(node.func.value)):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_runner_guard_finds_name_tests_and_leaves_other_devices_alone() -> None:
    source = textwrap.dedent("""
        a = case.runner == "cuda"
        b = runner_kind in ("cpu", "npu:qnn")
        c = runner.name.split(":")[0]
        d = settings.device == "cuda"  # a torch device, not a runner
        e = target != "cuda"  # an IREE target
        f = runner.kind != wanted  # the runner's own answer
    """)
    assert [line.split(":")[0] for line in runner_name_tests(source)] == ["2", "3", "4"]


def test_no_stage_outside_runners_compares_a_runner_name() -> None:
    """What a runner is (``Runner.kind``, ``host_cpu``, ``cuda_kernels``) is the runner's to say
    (``perfguard.runners``); a stage that tests a runner's name assumed it instead of asking."""
    found = []
    for path in sorted((REPO / "perfguard").rglob("*.py")):
        if "runners" in path.relative_to(REPO / "perfguard").parts[:1]:
            continue
        found += [f"{path.relative_to(REPO)}:{place}" for place in runner_name_tests(path.read_text())]
    assert found == []


def test_setting_readers_return_typed_settings_or_name_the_bad_one() -> None:
    """A backend reads its ``Artifact.settings`` (free-form JSON it wrote) through these: a
    setting missing or of another type is a BackendError naming the artifact and the key."""
    from perfguard.backends.base import setting_str, setting_str_map, setting_strs
    from perfguard.errors import BackendError

    settings = {"target": "llvm-cpu", "inputs": ["x", "y"], "flags": {"iree-opt-data-tiling": "true"}}
    assert setting_str(settings, "target", "a") == "llvm-cpu"
    assert setting_strs(settings, "inputs", "a") == ["x", "y"]
    assert setting_str_map(settings, "flags", "a") == {"iree-opt-data-tiling": "true"}
    for reader, key, bad in [(setting_str, "target", 3), (setting_strs, "inputs", ["x", 1]),
                             (setting_str_map, "flags", {"a": 1}), (setting_strs, "inputs", None)]:
        with pytest.raises(BackendError, match=f"^artifact a.vmfb: setting '{key}' must be"):
            reader({**settings, key: bad}, key, "artifact a.vmfb")
