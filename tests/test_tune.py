"""``perfguard tune``: the search space, the proof's judgement, the document, and real searches.

The real searches compile with onnxoptimizer and perfguard's passes, check correctness with ONNX
Runtime and measure in worker processes on a small ResNet-style model; two user passes of a
compiler folder make illegal candidates (one raises, one gives a wrong answer). One search is run
once per module (the fixture) and read by several tests.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from perfguard.bisect.document import VerdictSummary
from perfguard.compare.verdicts import Verdict
from perfguard.errors import StorageError
from perfguard.flows.tuning.order_search import improves
from perfguard.flows.tuning.proof import judge
from perfguard.report import parse_document, write_report
from perfguard.report.svg import trajectory
from perfguard.stats.verdict import Comparison
from perfguard.suite import load_suite
from perfguard.tune.document import TUNE_VERSION, tune_from_json
from perfguard.tune.space import Candidate, drops, inserts, moves, option_moves, pass_universe, unique

from .conftest import run_cli

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.slow

SUITE = """
[suite]
name = "tunesuite"
backend = "ort"
runners = ["cpu"]
[compiler]
path = "compiler"
[measure]
workers = 3
rounds = 5
warmup = 2
min_time = "3ms"
compile_repeats = 1
memory_probes = 0
timeout = "60s"
compile_timeout = "60s"
[check]
workers = 8
step_workers = 4
max_workers = 12
[models.r]
arch = "resnet"
params = { depth = 4, width = 16, image_size = 64, num_classes = 10 }
[models.r2]
arch = "resnet"
params = { depth = 2, width = 8, image_size = 32, num_classes = 10 }
[pipelines.unfolded]
passes = ["fuse_bn_into_conv"]
[pipelines.folded]
passes = ["fuse_bn_into_conv", "constant_folding"]
[[cases]]
model = "r"
[[cases]]
model = "r2"
pipelines = ["unfolded"]
"""

# Two passes of the compiler under test that make a candidate illegal.
BAD_PASSES = '''
import numpy as np
import onnx
from onnx import numpy_helper


def broken(model):
    raise RuntimeError("this pass always fails")


def wrong(model):
    """Scales the first initializer: the model still runs, with the wrong answer."""
    out = onnx.ModelProto(); out.CopyFrom(model)
    first = out.graph.initializer[0]
    first.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(first) * np.float32(3.0) + np.float32(1.0), first.name))
    return out
'''

PASSES = "constant_folding,eliminate_identity,badpasses:broken,badpasses:wrong"


def _setup(folder: Path) -> Path:
    (folder / "compiler").mkdir(exist_ok=True)
    (folder / "compiler" / "badpasses.py").write_text(BAD_PASSES)
    suite = folder / "tune.toml"
    suite.write_text(SUITE)
    return suite


def _tune(folder: Path, suite: Path, case: str, *extra: str):
    out = folder / "tune.json"
    proc = run_cli("tune", str(suite), "--case", case, "--json", str(out), "--state", str(folder / "state.json"),
                   "--quiet", *extra, cwd=folder, timeout=900)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tune")
    suite = _setup(folder)
    proc, document = _tune(folder, suite, "r/unfolded/cpu", "--passes", PASSES, "--budget", "14",
                           "--out", str(folder / "patch.toml"), "--report", str(folder / "report"))
    return folder, suite, proc, document


# -- the search space --------------------------------------------------------------------------

def test_neighbours_drop_insert_and_move_each_pass():
    start = Candidate(("a", "b", "c"))
    assert [m.candidate.passes for m in drops(start)] == [("b", "c"), ("a", "c"), ("a", "b")]
    added = [m.candidate.passes for m in inserts(start, ["x", "b"])]
    assert ("x", "a", "b", "c") in added and ("a", "b", "c", "x") in added and len(added) == 4 + 2
    assert ("a", "b", "b", "c") not in added  # the same pass twice in a row is never tried
    moved = {m.candidate.passes for m in moves(start)}
    assert moved == {("b", "a", "c"), ("b", "c", "a"), ("a", "c", "b"), ("c", "a", "b")}
    assert all(m.kind == "move" for m in moves(start))
    again = unique(drops(start) + drops(start), exclude={Candidate(("b", "c")).key})
    assert [m.candidate.passes for m in again] == [("a", "c"), ("a", "b")]
    assert start.describe() == "(a, b, c)" and Candidate(()).describe() == "(no passes)"


def test_iree_candidates_change_the_opt_level_and_toggle_known_flags(monkeypatch):
    # The moves are the backend's (Backend.tuning_moves), given the flags this iree-compile knows.
    monkeypatch.setattr("perfguard.backends.iree.compiler_flags", lambda: {"iree-opt-data-tiling": ""})
    start = Candidate((), {"opt_level": "O2", "flags": {"iree-opt-generalize-matmul": False}})
    found = {m.describe: m.candidate.options for m in option_moves(start, "iree")}
    assert all(m.candidate.passes == () and m.kind == "option" for m in option_moves(start, "iree"))
    assert {"opt_level O2 -> O0", "opt_level O2 -> O1", "opt_level O2 -> O3"} <= set(found)
    assert found["iree-opt-generalize-matmul -> true"]["flags"] == {"iree-opt-generalize-matmul": True}
    assert found["iree-opt-data-tiling -> true"]["flags"] == {"iree-opt-generalize-matmul": False,
                                                              "iree-opt-data-tiling": True}
    assert not any("aggressive" in d for d in found)  # a flag this iree-compile does not know is not tried
    assert option_moves(Candidate(("fuse_bn_into_conv",)), "ort") == []  # ORT keeps its pinned options


def test_pass_universe_from_the_suite_all_or_a_list(tmp_path):
    suite = load_suite(_setup(tmp_path))
    assert pass_universe(suite, "ort", None)[:2] == ("fuse_bn_into_conv", "constant_folding")
    assert "eliminate_unused" in pass_universe(suite, "ort", "suite")  # the backend's own passes
    assert len(pass_universe(suite, "ort", "all")) > 30
    (tmp_path / "passes.txt").write_text("# my passes\nconstant_folding\neliminate_identity  # cleanup\n")
    assert pass_universe(suite, "ort", str(tmp_path / "passes.txt")) == ("constant_folding", "eliminate_identity")
    with pytest.raises(Exception, match="unknown pass 'constant_fold'"):
        pass_universe(suite, "ort", "constant_fold")


# -- acceptance and the proof's judgement --------------------------------------------------------

def _verdict(case: str, metric: str, decision: str, direction: str, ratio: float) -> Verdict:
    comparison = Comparison(decision=decision, direction=direction, ratio=ratio, ci_low=ratio * 0.99,  # type: ignore[arg-type]
                            ci_high=ratio * 1.01, p_value=0.001, mde=0.01, n_pairs=8, baseline_median=1.0,
                            candidate_median=ratio, floor=0.02, reason="test row")
    return Verdict(case, metric, "s", True, "median:2%", "start", "tuned", True, comparison, decision,  # type: ignore[arg-type]
                   direction)


def test_the_proof_rejects_a_tuned_order_that_regresses_another_model():
    faster = _verdict("a/p_tuned/cpu", "latency", "different", "improvement", 0.8)
    same = _verdict("b/p_tuned/cpu", "latency", "same", "none", 1.0)
    slower = _verdict("b/p_tuned/cpu", "latency", "different", "regression", 1.1)
    assert judge([faster, same], "a/p_tuned/cpu", "latency")[0] == "proved"
    status, effects = judge([faster, slower], "a/p_tuned/cpu", "latency")
    assert status == "rejected" and effects[1].rejects and effects[1].rejects.startswith("latency +10.0%")
    memory = _verdict("b/p_tuned/cpu", "memory", "different", "regression", 1.5)
    assert judge([faster, same, memory], "a/p_tuned/cpu", "latency")[0] == "rejected"
    undecided = _verdict("a/p_tuned/cpu", "latency", "unknown", "none", 0.97)
    assert judge([undecided, same], "a/p_tuned/cpu", "latency")[0] == "no-gain"
    # A compile-time search is judged on compile time and must not slow inference down.
    ct = _verdict("a/p_tuned/cpu", "compile_time", "different", "improvement", 0.5)
    assert judge([ct, same], "a/p_tuned/cpu", "compile_time")[0] == "proved"


def test_a_move_is_accepted_only_on_a_decided_gain_that_costs_nothing_weighed():
    def s(decision: str, direction: str) -> VerdictSummary:
        return VerdictSummary(decision=decision, direction=direction, ratio=0.9)

    assert improves("latency", s("different", "improvement"), None)
    assert not improves("latency", s("same", "none"), s("different", "improvement"))
    assert improves("compile_time", s("same", "none"), s("different", "improvement"))
    assert not improves("compile_time", s("different", "regression"), s("different", "improvement"))
    assert improves("both", s("same", "none"), s("different", "improvement"))
    assert not improves("both", s("different", "improvement"), s("different", "regression"))


def test_trajectory_chart_is_numbers_only():
    chart = str(trajectory([(1, 0.8), (2, math.nan), (3, 1.2)], [(1, 0.8)], 3))
    assert chart.count("<circle") == 2 and 'class="best"' in chart and "-20%" in chart


# -- a real search -------------------------------------------------------------------------------

@pytest.mark.timing
def test_tune_finds_and_proves_a_faster_order(searched):
    folder, suite, proc, document = searched
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert document["status"] == "proved" and document["version"] == TUNE_VERSION
    # Leaving out the unfolded BN fusion is faster (its weight arithmetic runs on every inference).
    first = document["steps"][0]
    assert first["move"] == "drop fuse_bn_into_conv (#1)" and first["latency"]["direction"] == "improvement"
    effects = {e["case"]: e for e in document["proof"]["effects"]}
    # Proved on every model the pipeline runs on: r and r2.
    assert set(effects) == {"r/unfolded_tuned/cpu", "r2/unfolded_tuned/cpu"}
    tuned = effects["r/unfolded_tuned/cpu"]
    assert tuned["decision"] == "different" and tuned["ratio"] < 1.0 and not tuned["rejects"]
    assert "proved: the tuned order is faster" in proc.stdout


def test_illegal_candidates_are_recorded_with_their_reason_and_never_measured(searched):
    _, _, _, document = searched
    infeasible = {p["move"]: p for p in document["points"] if p["status"] == "infeasible"}
    broken = next(p for m, p in infeasible.items() if "badpasses:broken" in m)
    wrong = next(p for m, p in infeasible.items() if "badpasses:wrong" in m)
    assert "this pass always fails" in broken["reason"]
    assert wrong["reason"].startswith("correctness") and "wrong answer" in wrong["reason"]
    assert broken["latency"] is None and wrong["latency"] is None
    # eliminate_identity changes nothing in this model: identical artifacts, not timed.
    identical = [p for p in document["points"] if p["status"] == "identical"]
    assert identical and all(p["latency"]["reason"] == "identical artifact: not timed" for p in identical)


def test_the_suite_patch_loads_and_the_report_shows_the_search(searched):
    folder, suite, _, document = searched
    patch = (folder / "patch.toml").read_text()
    assert patch == document["patch"]
    table = tomllib.loads(patch)["pipelines"]["unfolded_tuned"]
    assert table["passes"] == document["best"]["passes"]
    patched = folder / "patched.toml"
    patched.write_text(suite.read_text() + "\n" + patch)  # the case of model r runs every pipeline
    assert "r/unfolded_tuned/cpu" in {c.id for c in load_suite(patched).cases}
    html = (folder / "report" / "index.html").read_text()
    assert 'id="tune"' in html and 'class="chart trajectory"' in html and "infeasible candidate" in html
    assert "this pass always fails" in html and "r2/unfolded_tuned" in html  # the proof's rows


def test_the_document_round_trips_and_a_newer_one_is_refused(searched, tmp_path):
    _, _, _, document = searched
    assert tune_from_json(document).to_json() == document
    assert parse_document(document).kind == "tune"
    write_report([tune_from_json(document)], tmp_path / "again")
    with pytest.raises(StorageError, match="upgrade perfguard"):
        tune_from_json({**document, "version": TUNE_VERSION + 1})


@pytest.mark.timing
def test_a_killed_search_resumes_from_its_state_without_measuring_again(searched):
    folder, suite, _, document = searched
    state = json.loads((folder / "state.json").read_text())
    proc, again = _tune(folder, suite, "r/unfolded/cpu", "--passes", PASSES, "--budget", "14", "--no-proof")
    assert proc.returncode == 3, proc.stdout + proc.stderr  # not proved: --no-proof
    assert json.loads((folder / "state.json").read_text())["order"] == state["order"]  # nothing new measured
    assert [p["candidate"] for p in again["points"]] == [p["candidate"] for p in document["points"]]
    assert again["best"] == document["best"] and again["status"] == "unproved"


@pytest.mark.timing
def test_a_budget_that_finds_nothing_better_says_what_it_could_have_detected(tmp_path):
    suite = _setup(tmp_path)
    proc, document = _tune(tmp_path, suite, "r/folded/cpu", "--passes", "eliminate_identity", "--budget", "5")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert document["status"] == "nothing-better" and document["best"] == document["start"]
    assert "nothing better within the budget" in proc.stdout and "a confirmation could detect" in proc.stdout
    # The best screen was confirmed past the budget: its MDE is what the search could have detected.
    assert document["confirmations"] >= 1
    assert document["confirm_mde"] is not None and 0 < document["confirm_mde"] < 0.5


@pytest.mark.parametrize("args, message", [
    (["--budget", "0"], "--budget must be >= 1"),
    (["--time", "soon"], "--time: cannot read duration"),
    (["--passes", "no_such_pass"], "unknown pass 'no_such_pass'"),
    (["--screen-workers", "1"], "--screen-workers must be >= 2"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    suite = _setup(tmp_path)
    proc = run_cli("tune", str(suite), "--case", "r/unfolded/cpu", "--state", str(tmp_path / "s.json"), *args,
                   cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "s.json").exists()


def test_a_case_pattern_must_select_one_case(tmp_path):
    proc = run_cli("tune", str(_setup(tmp_path)), "--case", "r/*", cwd=tmp_path)
    assert proc.returncode == 2 and "must select exactly one case" in proc.stderr


IREE_SUITE = """
[suite]
name = "iree-tune"
backend = "iree"
runners = ["cpu"]
[measure]
workers = 3
rounds = 5
warmup = 2
min_time = "5ms"
compile_repeats = 1
memory_probes = 0
timeout = "120s"
compile_timeout = "300s"
[check]
workers = 8
step_workers = 4
max_workers = 12
[models.resnet]
arch = "resnet"
params = { depth = 4, width = 16, image_size = 64, num_classes = 100 }
[pipelines.default]
passes = []
options = { opt_level = "O0" }
"""


@pytest.mark.timing
def test_iree_tune_searches_preprocessing_passes_and_opt_levels(tmp_path):
    from .test_iree import require_iree

    require_iree()
    suite = tmp_path / "iree.toml"
    suite.write_text(IREE_SUITE)
    # Budget: the option moves (3 other opt levels, up to 4 flag toggles) come first, then the insert.
    proc, document = _tune(tmp_path, suite, "resnet/default/cpu", "--budget", "9", "--no-proof",
                           "--passes", "iree-preprocessing-convert-conv-to-channels-last")
    assert proc.returncode == 3, proc.stdout + proc.stderr  # --no-proof: found, not proved
    moves = {p["move"]: p for p in document["points"]}
    # IREE 3.13's default is O0, and O1 compiles to the same module: identical, not timed.
    assert moves["opt_level O0 -> O1"]["status"] == "identical"
    # Channels-last preprocessing (-69..-71 % on convolution nets with IREE 3.13) is found and confirmed.
    assert document["best"]["passes"] == ["iree-preprocessing-convert-conv-to-channels-last"]
    assert document["steps"][0]["latency"]["direction"] == "improvement"
    assert document["best"]["options"]["opt_level"] == "O0"


BURN_PASSES = '''
import time


def burn(model):
    """Costs compile time, changes nothing."""
    time.sleep(1.0)
    return model
'''


@pytest.mark.timing
def test_a_compile_time_search_drops_a_pass_that_only_burns_compile_time(tmp_path):
    suite = _setup(tmp_path)
    (tmp_path / "compiler" / "burnpasses.py").write_text(BURN_PASSES)
    text = suite.read_text().replace("compile_repeats = 1", "compile_repeats = 6")
    text += '\n[pipelines.burning]\npasses = ["burnpasses:burn", "fuse_bn_into_conv", "constant_folding"]\n'
    text += '\n[[cases]]\nmodel = "r2"\npipelines = ["burning"]\n'  # r runs every pipeline already
    suite.write_text(text)
    proc, document = _tune(tmp_path, suite, "r2/burning/cpu", "--objective", "compile_time", "--budget", "3",
                           "--passes", "constant_folding")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    step = document["steps"][0]
    assert step["move"] == "drop burnpasses:burn (#1)"
    # The artifact is the same: latency SAME without timing, compile time decidedly shorter.
    assert step["latency"]["decision"] == "same" and step["compile_time"]["direction"] == "improvement"
    effects = {e["case"]: e for e in document["proof"]["effects"]}
    assert set(effects) == {"r/burning_tuned/cpu", "r2/burning_tuned/cpu"}  # every model `burning` runs on
    effect = effects["r2/burning_tuned/cpu"]
    assert effect["metric"] == "compile_time" and effect["decision"] == "different" and effect["ratio"] < 0.8
    assert document["status"] == "proved"
