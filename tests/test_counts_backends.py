"""Counted evidence beyond ONNX Runtime: TVM and IREE counted under real Valgrind (an inference
in the calling thread; TVM's compile pass by pass, IREE's as its two tools), and "why, counted"
(the change attributed to the functions of the counted windows).

Two module-scoped counted checks of the smallest ResNet share every assertion on real counts,
both slow: TVM (the fused CPU pipeline against the same without fusion; four Valgrind processes)
and IREE (a real A/A and a module built for another CPU; three, and each compile counted too:
``iree-import-onnx`` and ``iree-compile`` run whole under cachegrind). The rest are pure: the
callgrind function reader on a profile written here (a fake: the text is typed in, in
callgrind's documented format; so is a cachegrind file), the attribution arithmetic, the counts
document with and without functions, and the AVX-512 blocker.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from perfguard.counting.dumps import function_costs, functions_of_profile
from perfguard.results.counted_functions import MAX_FUNCTIONS, NO_SYMBOL, FunctionCount, attribute
from perfguard.results.counts import Counts

# A callgrind profile as callgrind 3.19 writes one (format: its manual, "Callgrind Format
# Specification"), with name compression: main calls conv (inclusive 900, not main's own cost),
# two stripped functions of libstripped.so, relative positions.
PROFILE = """# callgrind format
version: 1
creator: callgrind-3.19.0
desc: Trigger: Client Request: v|5
positions: line
events: Ir Dr Dw
summary: 1160 10 5

ob=(1) /x/model.so
fl=(1) ???
fn=(1) main_compute_
0 100 1 1
+2 50
cob=(1)
cfn=(2) conv2d_compute_
calls=5 0
0 900 9 4
fn=(2)
0 900 9 4
ob=(2) /usr/lib/libstripped.so
fn=(3) 0x00000000000061b0
0 60
fn=(4) 0x0000000000002510
* 40
ob=(1)
fn=(1)
0 10
totals: 1160 10 5
"""


def test_function_costs_are_self_costs_with_names_decompressed() -> None:
    costs = function_costs(PROFILE)
    assert costs == {("model.so", "main_compute_"): 160, ("model.so", "conv2d_compute_"): 900,
                     ("libstripped.so", "0x00000000000061b0"): 60, ("libstripped.so", "0x0000000000002510"): 40}
    assert sum(costs.values()) == 1160  # self costs add up to the profile's totals


def test_code_without_symbols_is_one_entry_per_object_and_figures_are_per_inference() -> None:
    functions = functions_of_profile(PROFILE, 5)
    assert functions[0] == FunctionCount("conv2d_compute_", "model.so", 180.0)
    assert FunctionCount(NO_SYMBOL, "libstripped.so", 20.0) in functions
    assert len(functions) == 3


def test_only_the_largest_functions_are_kept() -> None:
    many = {("m.so", f"f{i}"): i + 1 for i in range(50)}
    from perfguard.counting.dumps import top_functions

    kept = top_functions(many, 1)
    assert len(kept) == MAX_FUNCTIONS and kept[0].name == "f49" and kept[-1].instructions == 50 - MAX_FUNCTIONS + 1


def test_attribution_names_added_removed_and_changed_functions_with_their_share() -> None:
    base = (FunctionCount("conv2d_compute_", "model.so", 1000.0), FunctionCount("relu_compute_", "model.so", 200.0),
            FunctionCount("_PyEval", "libpython.so", 300.0))
    cand = (FunctionCount("fused_conv2d_relu_compute_", "model.so", 1100.0),
            FunctionCount("_PyEval", "libpython.so", 250.0))
    why = attribute(base, cand, total_delta=-150.0)
    by_name = {d.name: d for d in why.functions}
    assert by_name["fused_conv2d_relu_compute_"].kind == "added" and by_name["fused_conv2d_relu_compute_"].delta == 1100
    assert by_name["conv2d_compute_"].kind == "removed" and by_name["conv2d_compute_"].delta == -1000
    assert by_name["_PyEval"].kind == "changed" and by_name["_PyEval"].share == pytest.approx(50 / 150)
    assert [d.name for d in why.functions][0] == "fused_conv2d_relu_compute_"  # largest change first


def test_a_stripped_library_is_said_to_be_stripped_not_shown_as_addresses() -> None:
    from perfguard.report.counted_why import stripped_line

    why = attribute((FunctionCount(NO_SYMBOL, "libonnxruntime.so.1.32.0", 1000.0),),
                    (FunctionCount(NO_SYMBOL, "libonnxruntime.so.1.32.0", 1100.0),), 100.0)
    assert why.stripped == ("libonnxruntime.so.1.32.0",)
    line = stripped_line(why.functions[0])
    assert "no symbols" in line and "0x" not in line and "libonnxruntime" in line


def _counts(functions: tuple[FunctionCount, ...] = ()) -> Counts:
    return Counts(1000.0, 10.0, 5.0, 3.0, 1.0, 1100.0, 5, "window", "valgrind-3.19.0", functions)


def test_the_counts_document_keeps_functions_and_reads_older_documents_without_them() -> None:
    record = _counts((FunctionCount("conv2d_compute_", "model.so", 800.0),))
    data = json.loads(json.dumps(record.to_json()))
    assert Counts.from_json(data) == record
    old = _counts().to_json()
    assert "functions" not in old and Counts.from_json(old).functions == ()


def test_a_library_built_for_avx512_is_not_counted_with_the_pin_that_fixes_it() -> None:
    pytest.importorskip("tvm")
    from perfguard.backends.tvm import avx512_blocker

    blocked = avx512_blocker({"kind": "llvm", "mcpu": "skylake-avx512"})
    assert blocked is not None and "AVX-512" in blocked and "haswell" in blocked
    assert avx512_blocker({"kind": "llvm", "mcpu": "haswell"}) is None


# --- real counts: TVM under Valgrind --------------------------------------------------------------

LOWER = ["RewriteDataflowReshape", "ToNonDataflow", "RemovePurityChecking", "CallTIRRewrite", "StaticPlanBlockMemory",
         "LowerAllocTensor", "KillAfterLastUse", "LowerRuntimeBuiltin", "ComputePrimValue", "VMShapeLower",
         "AttachGlobalSymbol"]
# No FoldConstant: it runs the model's constant parts through a VM, and counted it alone took
# 6 minutes of a loaded 2-core machine.
FUSED = ["LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR", *LOWER]
UNFUSED = ["LegalizeOps", *LOWER]
TARGET = '{ target = { kind = "llvm", mcpu = "haswell" } }'  # AVX2: Valgrind runs no AVX-512

HEADER = """
[suite]
name = "counted-{backend}"
backend = "{backend}"
runners = ["cpu"]

[measure]
rounds = 3
warmup = 2
min_time = "3ms"
compile_repeats = 1
memory_probes = 1
timeout = "120s"

[check]
workers = 2
step_workers = 2
max_workers = 2

[models.r]
arch = "resnet"
params = {{ depth = 1, width = 4, image_size = 16, num_classes = 4 }}
"""


def suite_text(backend: str, pipelines: dict[str, tuple[list[str], str]]) -> str:
    """A one-model suite of ``backend`` (the smallest ResNet) with ``pipelines`` (passes, options)."""
    parts = [HEADER.format(backend=backend)]
    for name, (passes, options) in pipelines.items():
        parts.append(f"[pipelines.{name}]\npasses = {json.dumps(passes)}\noptions = {options}\n")
    return "\n".join(parts)


TVM_SUITE = suite_text("tvm", {"fused": (FUSED, TARGET), "unfused": (UNFUSED, TARGET)}).replace(
    'arch = "resnet"\nparams = { depth = 1, width = 4, image_size = 16, num_classes = 4 }', 'path = "conv.onnx"')


def conv_model() -> onnx.ModelProto:
    """Conv + bias Add + Relu on a 1x3x8x8 input, seeded weights: the smallest model whose
    fusion TVM can change (three PrimFuncs unfused, one fused); a counted TVM compile of even the
    smallest zoo ResNet takes minutes."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal((1, 4, 1, 1)).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["c", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [weight, bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def counted_check(factory: pytest.TempPathFactory, module: str, suite: str, against: str, *extra: str
                  ) -> tuple[subprocess.CompletedProcess[str], dict, Path]:
    """One real counted check of ``suite`` against pipeline ``against`` (``extra``: more options),
    skipped without Valgrind or the backend's ``module``."""
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (.ci/run installs it in CI)")
    pytest.importorskip(module)
    folder = factory.mktemp(f"counted-{module}")
    (folder / "suite.toml").write_text(suite)
    onnx.save(conv_model(), str(folder / "conv.onnx"))
    out = folder / "verdicts.json"
    proc = subprocess.run([sys.executable, "-m", "perfguard", "check", "suite.toml", "--against-pipeline", against,
                           "--counts", *extra, "--json", str(out)], capture_output=True,
                          text=True, cwd=folder, env={**os.environ, "COLUMNS": "200"}, timeout=2400, check=False)
    assert out.exists(), proc.stderr[-3000:]
    return proc, json.loads(out.read_text()), out


@pytest.fixture(scope="module")
def tvm_check(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict, Path]:
    """``unfused`` is a real pipeline change. No A/A pair here: each TVM variant costs a counted
    compile of minutes (docs/measured.md, "Counted evidence" has the A/A)."""
    return counted_check(tmp_path_factory, "tvm", TVM_SUITE, "fused")


def _rows(document: dict, metric: str) -> dict[str, dict]:
    return {row["case"]: row for row in document["verdicts"] if row["metric"] == metric}


def _entries(document: dict) -> dict[str, dict]:
    return {c["id"]: c for result in document["results"].values() for c in result["cases"]}


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the shared counted check: minutes under Valgrind
def test_tvm_a_pipeline_change_is_different_on_instructions(tvm_check) -> None:
    _, document, _ = tvm_check
    changed = _rows(document, "instructions")["r/unfused/cpu"]
    assert changed["decision"] == "different" and changed["comparison"]["method"] == "deterministic", changed


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the shared counted check: minutes under Valgrind
def test_tvm_counts_carry_the_compiled_modules_functions(tvm_check) -> None:
    _, document, _ = tvm_check
    counts = Counts.from_json(_entries(document)["r/fused/cpu"]["metrics"]["counts"])
    objects = {f.object for f in counts.functions}
    assert "model.so" in objects, counts.functions  # the PrimFuncs of the library, by name
    assert any("conv2d" in f.name for f in counts.functions if f.object == "model.so")
    assert sum(f.instructions for f in counts.functions) <= counts.instructions * 1.0001


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the shared counted check: minutes under Valgrind
def test_tvm_compile_is_counted_per_relax_pass(tvm_check) -> None:
    _, document, _ = tvm_check
    entry = _entries(document)["r/fused/cpu"]
    passes = entry["trace"]["passes"]
    assert [p["name"] for p in passes] == FUSED
    assert all(p["instructions"] and p["instructions"] > 0 for p in passes), passes
    total = entry["metrics"]["compile_instructions"]
    assert total > sum(p["instructions"] for p in passes)  # plus the ONNX import step


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the shared counted check: minutes under Valgrind
def test_the_report_says_why_counted_by_function(tvm_check, tmp_path: Path) -> None:
    _, _, verdicts = tvm_check
    proc = subprocess.run([sys.executable, "-m", "perfguard", "report", str(verdicts), "--out", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    comment = (tmp_path / "r" / "comment.md").read_text()
    html = (tmp_path / "r" / "index.html").read_text()
    assert "why, counted, r/unfused/cpu" in comment and "model.so" in comment
    assert 'id="why-counted"' in html


def test_an_iree_module_is_counted_only_on_local_sync_and_off_avx512() -> None:
    from perfguard.backends.iree.valgrind_runtime import count_blocker, host_has_avx512

    base = {"target": "llvm-cpu", "driver": "local-sync", "target_cpu": "haswell"}
    assert count_blocker(base) is None
    assert "local-sync" in (count_blocker({**base, "driver": "local-task"}) or "")
    assert count_blocker({**base, "target": "cuda", "driver": "cuda"}) is not None
    host = count_blocker({**base, "target_cpu": "host"})
    assert (host is not None and "haswell" in host) == host_has_avx512()


def test_natively_no_seccomp_filter_is_installed_for_iree() -> None:
    from perfguard.backends.iree import valgrind_runtime

    assert not valgrind_runtime.under_valgrind()  # the test itself runs natively
    valgrind_runtime.keep_off_io_uring()
    assert not valgrind_runtime._installed
    assert len(valgrind_runtime.filter_program()) == 7 * 8  # seven classic-BPF instructions


def test_iree_and_tvm_declare_counts_and_counted_compiles() -> None:
    from perfguard.backends import get_backend

    iree, tvm = get_backend("iree").capabilities, get_backend("tvm").capabilities
    assert iree.counts and iree.compile_counts
    assert tvm.counts and tvm.compile_counts
    assert iree.missing("iree", "compile_counts") is None


def test_a_tool_run_whole_is_counted_by_cachegrind_without_its_cache_and_reported_as_a_step() -> None:
    from perfguard.backends.counting_hooks import COUNT_PROCESS, counted_process
    from perfguard.counting.child import CountResponse
    from perfguard.counting.dumps import parse_dump
    from perfguard.counting.plan import compile_counts
    from perfguard.counting.valgrind import tool_command

    assert counted_process("step|iree-compile", ["iree-compile", "-"]) == ["iree-compile", "-"]  # not counting
    token = COUNT_PROCESS.set(lambda label, argv: ["counted", label, *argv])
    try:
        assert counted_process("step|iree-compile", ["iree-compile", "-"]) == ["counted", "step|iree-compile",
                                                                                "iree-compile", "-"]
    finally:
        COUNT_PROCESS.reset(token)
    command = tool_command("/usr/bin/valgrind", Path("/tmp/x.out"), ["iree-compile", "-"])
    assert command[1:4] == ["--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/tmp/x.out"]
    # cachegrind's file (its documented format: "events:" and "summary:" lines) reads as a dump at exit
    dump = parse_dump("desc: I1 cache: 32768 B\ncmd: iree-compile -\nevents: Ir\nfl=x\nfn=f\n1 10\nsummary: 1234\n")
    assert dump.label is None and dump.events["Ir"] == 1234 and dump.events["D1mr"] == 0
    response = CountResponse(1, 7, ("work|0",), {"step|iree-compile": dump.events})
    assert CountResponse.from_json(json.loads(json.dumps(response.to_json()))) == response
    assert CountResponse.from_json({"valgrind": 1, "pid": 7, "windows": []}).processes == {}  # as before
    figures = compile_counts({"work|0": {"Ir": 100}, **response.processes, "step|iree-import-onnx": {"Ir": 50}})
    assert (figures.total, figures.per_pass, dict(figures.steps)) == (
        1384, {0: 100}, {"iree-compile": 1234, "iree-import-onnx": 50})


# --- real counts: IREE under Valgrind ------------------------------------------------------------

IREE_OPTIONS = '{{ target_cpu = "{cpu}", flags = {{ "iree-llvmcpu-link-embedded" = false }} }}'
IREE_SUITE = suite_text("iree", {"avx2": ([], IREE_OPTIONS.format(cpu="haswell")),
                                 "avx2_again": ([], IREE_OPTIONS.format(cpu="haswell")),
                                 "sse2": ([], IREE_OPTIONS.format(cpu="x86-64"))})


@pytest.fixture(scope="module")
def iree_check(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict, Path]:
    """IREE on ``local-sync``, the module linked as ``system-dylib`` so its dispatches have symbols:
    ``avx2_again`` is a real A/A, ``sse2`` the same model built for generic x86-64 (SSE2 vectors
    instead of AVX2): a real change of the code that runs."""
    return counted_check(tmp_path_factory, "iree.runtime", IREE_SUITE, "avx2", "--measure-identical")


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the shared counted check: its compiles too, minutes under Valgrind
def test_iree_an_aa_pair_is_same_and_another_cpu_is_different_on_instructions(iree_check) -> None:
    proc, document, _ = iree_check
    rows = _rows(document, "instructions")
    aa, changed = rows["r/avx2_again/cpu"], rows["r/sse2/cpu"]
    assert aa["decision"] == "same" and abs(aa["comparison"]["ratio"] - 1.0) < 0.0025, aa
    assert changed["decision"] == "different", changed
    assert "why, counted, r/sse2/cpu" in proc.stdout and "dispatch" in proc.stdout  # the terminal names dispatches


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the shared counted check: its compiles too, minutes under Valgrind
def test_iree_counts_name_dispatches(iree_check) -> None:
    _, document, _ = iree_check
    entry = _entries(document)["r/avx2/cpu"]
    counts = Counts.from_json(entry["metrics"]["counts"])
    dispatches = [f for f in counts.functions if "dispatch" in f.name]
    assert dispatches and all(f.object == "iree_dylib_mem_.so" for f in dispatches)  # the random part dropped


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the shared counted check: its compiles too, minutes under Valgrind
def test_iree_compile_is_counted_as_its_two_tools_and_is_stable_across_an_aa_pair(iree_check) -> None:
    proc, document, _ = iree_check
    entries = _entries(document)
    totals = [entries[case]["metrics"]["compile_instructions"] for case in ("r/avx2/cpu", "r/avx2_again/cpu")]
    assert all(t is not None and t > 0 for t in totals), totals
    imported = [p for p in entries["r/avx2/cpu"]["trace"]["passes"] if p["name"] == "iree-import-onnx"]
    assert len(imported) == 1 and 0 < imported[0]["instructions"] < totals[0]  # one step; iree-compile the rest
    aa = _rows(document, "compile_instructions")["r/avx2_again/cpu"]
    assert aa["decision"] == "same" and abs(aa["comparison"]["ratio"] - 1.0) < 0.005, aa
    assert "COMPILE NOT COUNTED" not in proc.stderr


def test_a_pair_with_functions_on_both_sides_reads_as_lines_and_one_without_is_not_shown() -> None:
    from perfguard.report.counted_why import counted_why
    from tests.factories import case_entry

    base = case_entry(None, case="m/a/cpu", counts=_counts((FunctionCount("conv2d_compute_", "model.so", 800.0),
                                                              FunctionCount(NO_SYMBOL, "libort.so", 100.0))))
    cand = case_entry(None, case="m/b/cpu", counts=dataclasses.replace(_counts((
        FunctionCount("fused_conv2d_relu_compute_", "model.so", 700.0), FunctionCount(NO_SYMBOL, "libort.so", 130.0))),
        instructions=930.0))
    view = counted_why("m/b/cpu", ("a", "b"), base, cand)
    assert view is not None and view.headline.startswith("-70 instructions per inference (b vs a)")
    lines = view.lines()
    assert lines[0].startswith("-800") and "conv2d_compute_ (model.so): removed" in lines[0]
    assert "+700" in lines[1] and "added" in lines[1]
    assert "libort.so, which has no symbols (stripped)" in lines[-1]
    assert counted_why("m/b/cpu", ("a", "b"), case_entry(None, counts=_counts()), cand) is None  # an older count
