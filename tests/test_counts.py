"""Counted evidence (``--counts``): real Valgrind (callgrind) around a real ONNX Runtime worker.

One module-scoped counted check runs one Valgrind process that forks six counted children (a
counted run and a counted compile each of a tiny ResNet under pipeline ``none``, the same again,
and a pass that inserts two Transposes after every Conv); every assertion on real counts shares it. The rest are pure: the callgrind profile reader, the
per-inference arithmetic, the estimated-cycles formula and the exact verdict rule on known
numbers, and the one line of a missing Valgrind (PATH without it).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perfguard.compare.check import Pair, compare_pair
from perfguard.counting.child import window_label
from perfguard.counting.dumps import parse_dump
from perfguard.counting.plan import per_inference
from perfguard.results.counts import COUNT_PROTOCOL, Counts, estimated_cycles
from perfguard.suite.gates import ThresholdSet
from tests.factories import case_entry

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed "
                                    "(.ci/run installs it in CI)")

# A user pass of the "compiler under test": after every Conv, a Transpose and its inverse (H and
# W swapped and swapped back): the answer is unchanged, the work per inference is not.
TRANSPOSES = '''
import onnx
from onnx import helper


def two_transposes(model):
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    nodes = []
    for node in graph.node:
        nodes.append(node)
        if node.op_type != "Conv":
            continue
        original = node.output[0]
        node.output[0] = original + "_conv"
        nodes.append(helper.make_node("Transpose", [original + "_conv"], [original + "_t"], perm=[0, 1, 3, 2]))
        nodes.append(helper.make_node("Transpose", [original + "_t"], [original], perm=[0, 1, 3, 2]))
    del graph.node[:]
    graph.node.extend(nodes)
    return out
'''

SUITE = """
[suite]
name = "counted"
backend = "ort"
runners = ["cpu"]

[compiler]
path = "{compiler}"

[measure]
rounds = 3
warmup = 2
min_time = "3ms"
compile_repeats = 1
memory_probes = 1
timeout = "120s"
{counts}

[check]
workers = 2
step_workers = 2
max_workers = 2

[models.r]
arch = "resnet"
params = {{ depth = 2, width = 8, image_size = 32, num_classes = 10 }}

[pipelines.none]
passes = []

[pipelines.none_again]
passes = []

[pipelines.transposes]
passes = ["tp_passes:two_transposes"]
"""


def _suite(folder: Path, counts: str = "") -> Path:
    compiler = folder / "compiler"
    compiler.mkdir(parents=True, exist_ok=True)
    (compiler / "tp_passes.py").write_text(textwrap.dedent(TRANSPOSES))
    path = folder / "suite.toml"
    path.write_text(SUITE.format(compiler=compiler, counts=counts))
    return path


def _perfguard(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfguard", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=900, check=False)


@pytest.fixture(scope="module")
def counted_check(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict, Path]:
    """One real counted check with the cache simulation (``--counts-cache``): every pipeline
    against ``none``, identical artifacts timed and counted too (``--measure-identical``), so
    ``none_again`` is a real A/A in its own process."""
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (.ci/run installs it in CI)")
    folder = tmp_path_factory.mktemp("counted")
    suite = _suite(folder)
    out = folder / "verdicts.json"
    proc = _perfguard("check", str(suite), "--against-pipeline", "none", "--counts-cache", "--measure-identical",
                      "--artifact-cache", str(folder / "cache"), "--json", str(out), "--quiet", cwd=folder,
                      env={**os.environ, "COLUMNS": "200"})
    assert out.exists(), proc.stderr[-2000:]
    return proc, json.loads(out.read_text()), out


def _rows(document: dict, metric: str) -> dict[str, dict]:
    return {row["case"]: row for row in document["verdicts"] if row["metric"] == metric}


@pytest.mark.slow
@needs_valgrind
def test_an_aa_pair_is_same_on_instructions_and_two_transposes_per_conv_a_regression(counted_check) -> None:
    proc, document, _ = counted_check
    rows = _rows(document, "instructions")
    aa, changed = rows["r/none_again/cpu"], rows["r/transposes/cpu"]
    assert aa["decision"] == "same" and aa["comparison"]["method"] == "deterministic", aa
    assert abs(aa["comparison"]["ratio"] - 1.0) < 0.0025  # within the default 0.25 % floor
    assert changed["decision"] == "different" and changed["direction"] == "regression", changed
    assert changed["comparison"]["ratio"] > 1.0025
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # the regression gates the check
    assert "instructions" in proc.stdout  # shown beside latency in the terminal table


@pytest.mark.slow
@needs_valgrind
def test_counted_results_hold_per_inference_counts_from_the_cache_simulation(counted_check) -> None:
    _, document, _ = counted_check
    entries = [c for result in document["results"].values() for c in result["cases"]]
    counted = [c["metrics"]["counts"] for c in entries if "counts" in c["metrics"]]
    assert len(counted) == 3, [c["id"] for c in entries]
    for counts in counted:
        record = Counts.from_json(counts)  # the typed reader accepts what the run wrote
        assert record.instructions > 10_000 and record.method == "least" and record.tool.startswith("valgrind")
        assert record.cache and record.inferences == 3  # a small model: the least of three windows
        assert 0 < record.l1_misses < record.instructions + record.data_reads + record.data_writes
        assert record.ll_misses <= record.l1_misses
        assert record.estimated_cycles >= record.instructions  # every access costs at least a cycle
    assert _rows(document, "estimated_cycles")["r/transposes/cpu"]["decision"] == "different"


@pytest.mark.slow
@needs_valgrind
def test_a_counted_compile_gives_instructions_per_pass_and_a_gated_compile_total(counted_check) -> None:
    _, document, _ = counted_check
    entries = {c["id"]: c for result in document["results"].values() for c in result["cases"]}
    passes = entries["r/transposes/cpu"]["trace"]["passes"]
    assert [p["name"] for p in passes] == ["tp_passes:two_transposes"] and passes[0]["instructions"] > 0
    # The total is the passes' work and the session step, counted at every level: a pipeline with no
    # pass counts its session step too, so `--against-pipeline none` compares like with like.
    session = entries["r/none_again/cpu"]["metrics"]["compile_instructions"]
    assert session > 0 and abs(entries["r/none/cpu"]["metrics"]["compile_instructions"] / session - 1) < 0.005
    assert entries["r/transposes/cpu"]["metrics"]["compile_instructions"] > passes[0]["instructions"]
    row = _rows(document, "compile_instructions")["r/transposes/cpu"]
    assert row["decision"] == "different" and row["direction"] == "regression"


@pytest.mark.slow
@needs_valgrind
def test_the_report_and_the_pr_comment_show_instructions_beside_latency(counted_check, tmp_path: Path) -> None:
    _, _, verdicts = counted_check
    proc = _perfguard("report", str(verdicts), "--out", str(tmp_path / "report"))
    assert proc.returncode == 0, proc.stderr
    comment = (tmp_path / "report" / "comment.md").read_text()
    summary = (tmp_path / "report" / "summary.md").read_text()
    html = (tmp_path / "report" / "index.html").read_text()
    assert "instructions" in comment  # the regression on instructions needs attention
    assert summary.count("instructions") >= 2  # the SAME A/A row too, beside latency
    assert "instructions" in html and "compile_instructions" in html


@pytest.mark.slow
@needs_valgrind
def test_a_second_counted_check_takes_the_counts_the_artifact_cache_can_name(counted_check, tmp_path: Path) -> None:
    """The same check again with the same ``--artifact-cache``: ``none`` and ``none_again`` (no
    user pass: their compiles have a key) are served, run and compile; ``transposes`` names user
    passes in a folder outside git, so its compile has no key and the variant is counted again.
    ``none`` and ``none_again`` are one artifact (one key): counted side by side in the first
    check they differ by a few instructions (where in the counted process each ran), and the
    cache keeps the first stored, so both are served that one value."""
    _, first, verdicts = counted_check
    folder = verdicts.parent
    out = tmp_path / "again.json"
    proc = _perfguard("check", str(folder / "suite.toml"), "--against-pipeline", "none", "--counts-cache",
                      "--measure-identical", "--artifact-cache", str(folder / "cache"), "--json", str(out),
                      cwd=folder, env={**os.environ, "COLUMNS": "200"})
    assert out.exists(), proc.stderr[-2000:]
    log = proc.stdout + proc.stderr
    assert "count 1 variant(s) under Valgrind (2 more from the artifact cache)" in log, log[-3000:]
    # The counted one stores nothing: its run's document is kept from the first check (the first
    # stored stays) and a compile without a key is not stored.
    assert "counts: 2 served, 0 stored" in log

    def figures(document: dict) -> dict[str, tuple[float, int]]:
        return {c["id"]: (c["metrics"]["counts"]["instructions"], c["metrics"]["compile_instructions"])
                for result in document["results"].values() for c in result["cases"]}

    before, after = figures(first), figures(json.loads(out.read_text()))
    assert after["r/none/cpu"][0] == after["r/none_again/cpu"][0]  # one run document serves both
    assert after["r/none/cpu"][0] in (before["r/none/cpu"][0], before["r/none_again/cpu"][0])
    # Their compiles are two documents (two pipelines' compile keys), each its own first count: the
    # session step of two children reads within a few instructions, and each is served as stored.
    for case in ("r/none/cpu", "r/none_again/cpu"):
        assert after[case][1] == before[case][1]
    assert abs(after["r/none/cpu"][1] / after["r/none_again/cpu"][1] - 1) < 0.0001
    assert after["r/transposes/cpu"][1] > 0
    assert _rows(json.loads(out.read_text()), "instructions")["r/transposes/cpu"]["decision"] == "different"


def test_without_valgrind_a_counted_run_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """PATH holds only a folder with ``git`` (so the run gets as far as its first check), not
    Valgrind: ``--counts`` and ``[measure] counts = true`` both stop before any work."""
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {**os.environ, "PATH": str(bare)}
    for args, counts in ((("--counts",), ""), ((), "counts = true")):
        suite = _suite(tmp_path / f"s{len(args)}", counts)
        proc = _perfguard("run", str(suite), *args, "--out", str(tmp_path / "r.json"), "--quiet", env=env)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, proc.stderr
        assert len(lines) == 1 and "valgrind" in lines[0].lower() and "Traceback" not in proc.stderr
        assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(("line", "mode"), [("counts = true", "instructions"), ("counts = false", None),
                                            ('counts = "instructions"', "instructions"),
                                            ('counts = "cache"', "cache"), ("", None)])
def test_the_suite_reads_its_counts_as_a_typed_mode(tmp_path: Path, line: str, mode: str | None) -> None:
    from perfguard.suite import load_suite

    assert load_suite(_suite(tmp_path, line)).counts == mode


def test_the_suite_refuses_a_counts_that_is_not_a_boolean_or_cache(tmp_path: Path) -> None:
    suite = _suite(tmp_path, 'counts = "yes"')
    proc = _perfguard("run", str(suite), "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2 and "[measure].counts" in proc.stderr and 'true, false, "instructions" or "cache"' in proc.stderr


# -- pure parts, known numbers -------------------------------------------------------------------

DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 12157
cmd:  python -m perfguard.workers.worker
part: 2

desc: I1 cache: 32768 B, 64 B, 8-way associative
desc: Timerange: Basic block 1 - 2
desc: Trigger: Client Request: head:r/none/cpu|5

positions: line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
summary: 2417812 780640 194069 27886 17784 13119 97 101 124


totals: 2418113 780941 194069 27915 17789 13119 98 102 124
"""


def test_a_callgrind_dump_gives_its_label_and_summary() -> None:
    dump = parse_dump(DUMP)
    assert dump.label == "head:r/none/cpu|5"
    assert dump.events["Ir"] == 2417812 and dump.events["DLmw"] == 124


def test_estimated_cycles_is_l1_hits_plus_5_ll_hits_plus_35_ram_hits() -> None:
    events = {"Ir": 1000, "Dr": 300, "Dw": 100, "I1mr": 20, "D1mr": 30, "D1mw": 10, "ILmr": 2, "DLmr": 3, "DLmw": 1}
    # accesses 1400, L1 misses 60, LL misses 6: 1340 L1 hits, 54 LL hits, 6 RAM hits
    assert estimated_cycles(events) == 1340 + 5 * 54 + 35 * 6


def test_per_inference_is_the_least_of_its_windows_of_one_and_nothing_without_all_of_them() -> None:
    """Protocol 4: N windows of one inference; the figure is the least (an inference in which
    the runtime did its periodic bookkeeping too is left out); a missing window: no figure."""
    windows = {window_label("v", 3, 0): {"Ir": 1040, "Dr": 10}, window_label("v", 3, 1): {"Ir": 1000, "Dr": 9},
               window_label("v", 3, 2): {"Ir": 3100, "Dr": 50}}
    counts = per_inference(windows, "v", 3, "valgrind-3.19.0", cache=False)
    least = counts["window"]
    assert least.instructions == 1000 and least.data_reads == 9 and least.inferences == 3
    assert least.method == "least" and least.value("estimated_cycles") is None and least.value("instructions") == 1000
    del windows[window_label("v", 3, 1)]
    assert per_inference(windows, "v", 3, "valgrind-3.19.0") == {}


def test_a_count_with_the_cache_simulation_has_estimated_cycles_and_one_without_says_so() -> None:
    events = {"Ir": 1000, "Dr": 300, "Dw": 100, "I1mr": 20, "D1mr": 30, "D1mw": 10, "ILmr": 2, "DLmr": 3, "DLmw": 1}
    simulated = Counts.from_events(events, 1, "least", "v", cache=True, windows=3)
    plain = Counts.from_events(events, 1, "least", "v", cache=False, windows=3)
    assert simulated.value("estimated_cycles") == estimated_cycles(events) and plain.value("estimated_cycles") is None
    assert "cache" not in simulated.to_json() and plain.to_json()["cache"] is False
    assert Counts.from_json(plain.to_json()) == plain and Counts.from_json(simulated.to_json()) == simulated


def test_the_plan_counts_a_large_model_once_and_a_small_one_three_times(tmp_path: Path) -> None:
    """Warm-up and window sized by the model (its multiply-accumulates, one plan for all its
    pipelines); the instrumented warm-up only where the caches are simulated."""
    import onnx

    from perfguard.counting.plan import LARGE_MODEL_MACS, count_plan
    from perfguard.models.cost import model_macs
    from perfguard.models.zoo import build_model

    small, large = tmp_path / "small.onnx", tmp_path / "large.onnx"
    onnx.save(build_model("resnet", {"depth": 2, "width": 8, "image_size": 32, "num_classes": 10}), small)
    onnx.save(build_model("resnet", {"depth": 2, "width": 64, "image_size": 224, "num_classes": 10}), large)
    assert model_macs(small) < LARGE_MODEL_MACS <= model_macs(large)
    assert (count_plan(small, False).warmup, count_plan(small, False).inferences) == (3, 3)
    plan = count_plan(large, False)
    assert (plan.warmup, plan.inferences, plan.instrumented_warmup) == (1, 1, 0)
    assert count_plan(large, True).instrumented_warmup == 1
    assert count_plan(tmp_path / "missing.onnx", False).inferences == 3


def _counted(instructions: float | None, case: str = "m/p/cpu", protocol: int = COUNT_PROTOCOL):
    counts = None if instructions is None else Counts(instructions, 0, 0, 0, 0, instructions, 3, "window", "v",
                                                       protocol=protocol)
    return case_entry([[1.0, 1.0, 1.0]] * 6, case=case, compile_time_s=0.1, counts=counts)


def _instruction_row(before: float | None, after: float | None, before_protocol: int = COUNT_PROTOCOL):
    pair = Pair("m/p/cpu", _counted(before, protocol=before_protocol), _counted(after), True, "base", "head")
    rows = {r.metric: r for r in compare_pair(pair, ThresholdSet(), alpha=0.05, confidence=0.95)}
    return rows.get("instructions")


def test_counted_metrics_are_exact_with_a_quarter_percent_floor() -> None:
    same = _instruction_row(1_000_000, 1_002_000)  # +0.2 %: within 0.25 %
    assert same is not None and same.decision == "same" and same.direction == "regression"
    worse = _instruction_row(1_000_000, 1_003_000)  # +0.3 %
    assert worse is not None and worse.decision == "different" and worse.direction == "regression"
    assert worse.comparison.method == "deterministic" and worse.comparison.n_pairs == 1
    better = _instruction_row(1_000_000, 990_000)
    assert better is not None and better.decision == "different" and better.direction == "improvement"


def test_a_pair_nobody_counted_has_no_counted_row_and_a_one_sided_count_is_undecided() -> None:
    assert _instruction_row(None, None) is None
    one_sided = _instruction_row(1_000_000, None)
    assert one_sided is not None and one_sided.decision == "unknown"


def test_counts_taken_by_another_protocol_are_not_compared_and_older_documents_are_protocol_1() -> None:
    """A baseline counted before the protocol changed (2026-12-06: the same artifact read +0.8 %)
    against a count of today: no verdict on a change that is the counting's, one line saying
    so; and a counts record without ``protocol`` (every older document) reads as protocol 1."""
    row = _instruction_row(1_000_000, 1_008_000, before_protocol=1)
    assert row is not None and row.decision == "unknown"
    assert f"counted differently (v, window of 3, protocol 1 against v, window of 3, protocol {COUNT_PROTOCOL})" in row.comparison.reason
    old = Counts(1.0, 0, 0, 0, 0, 1.0, 5, "window", "valgrind-3.19.0").to_json()
    del old["protocol"]
    assert Counts.from_json(old).protocol == 1
    assert Counts.from_json(Counts(1.0, 0, 0, 0, 0, 1.0, 3, "window", "v", protocol=2).to_json()).protocol == 2


def test_a_new_counting_protocol_starts_a_counted_series_of_its_own() -> None:
    """History: instructions counted by two protocols are two series (a step between them would
    be an alert on the counting, not the compiler); latency stays one series."""
    from perfguard.results.result import ResultDocument, SuiteInfo
    from perfguard.store.extract import absolute_points

    keys = {}
    for protocol in (1, 2):
        document = ResultDocument(SuiteInfo("s", "s.toml", "0" * 64), "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z",
                                  {"cpu": {}}, {}, (_counted(1_000_000, protocol=protocol),), "0")
        keys[protocol] = {p.key.metric: p.key for p in absolute_points(document)}
    assert keys[1]["instructions"] != keys[2]["instructions"]
    assert "protocol 2" in keys[2]["instructions"].runner_class
    assert keys[1]["latency"] == keys[2]["latency"]


def test_bisection_on_counts_probes_each_version_once_in_at_most_ceil_log2_n_probes() -> None:
    """The search a counted bisection runs (``--metric instructions``: ``EXACT_PROBES``), on a
    fake history: versions 1..n, the count steps +1 % at the culprit (the fake is the value
    function; the real one counts each version under Valgrind). Every culprit of every n up to 64
    is found, no version is probed twice, and the probes never exceed ceil(log2 n), which the
    worst culprit reaches."""
    from perfguard.bisect.exact import probes_needed, search_exact
    from perfguard.flows.bisection.exact_probes import EXACT_PROBES
    from perfguard.suite.gates import DEFAULT_THRESHOLDS

    probe = EXACT_PROBES["instructions"]
    assert probe.how == "one counted run"
    step = DEFAULT_THRESHOLDS.gate("any", "instructions").relative_at(1_000_000.0)  # what the probe's min_step reads
    assert step == 0.0025
    for n in range(1, 65):
        worst = 0
        for culprit in range(1, n + 1):
            calls: list[int] = []

            def value(position: int, culprit: int = culprit, calls: list[int] = calls) -> float:
                calls.append(position)
                return 1_010_000.0 if position >= culprit else 1_000_000.0

            found = search_exact(n, 1_000_000.0, 1_010_000.0, value, step)
            assert found.culprit == culprit and found.status == "found", (n, culprit)
            assert len(calls) == len(set(calls)) == len(found.order) <= probes_needed(n)
            worst = max(worst, len(calls))
        assert worst == probes_needed(n) == (math.ceil(math.log2(n)) if n > 1 else 0)


def test_a_batch_item_that_crashed_or_left_nothing_is_a_one_line_failure(tmp_path: Path) -> None:
    """The parent side of a counted child (``do_count_batch`` collects each child's outcome):
    real child processes that end by SIGKILL, exit without writing, or write an outcome."""
    import signal

    from perfguard.counting.child import CountBatchResponse, CountResponse, ItemOutcome, _collected

    def status_of(code: str) -> int:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            if code == "crash":
                os.kill(os.getpid(), signal.SIGKILL)
            if code == "write":
                (tmp_path / "0.json").write_text(json.dumps(ItemOutcome(CountResponse(1, 42, ("v|5",))).to_json()))
            os._exit(3 if code == "silent" else 0)
        return os.waitpid(pid, 0)[1]

    crashed = _collected(status_of("crash"), tmp_path / "none.json", json.loads)
    assert crashed.response is None and crashed.failure == "counted child crashed (SIGKILL)"
    silent = _collected(status_of("silent"), tmp_path / "none.json", json.loads)
    assert silent.response is None and "exited with code 3 without an outcome" in (silent.failure or "")
    wrote = _collected(status_of("write"), tmp_path / "0.json", json.loads)
    assert wrote.response == CountResponse(1, 42, ("v|5",))
    batch = CountBatchResponse((wrote, crashed))
    assert CountBatchResponse.from_json(json.loads(json.dumps(batch.to_json()))) == batch
