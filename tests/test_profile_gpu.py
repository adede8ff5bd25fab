"""The GPU path of ``perfguard profile`` (``cuda`` runner): ORT's ``Kernel`` events, Nsight Systems'
kernel summary and Nsight Compute's metrics, the GPU rules G1-G5, the skip reasons, and the GPU
section in JSON, in the printout and in the Perfetto trace.

The fixtures under ``tests/data/`` are constructed, not recorded on a device (none was available
where these were written):

* ``ort-cuda-profile-constructed.json``: constructed to the format of ONNX Runtime's CUDA profiler
  (``onnxruntime/core/providers/cuda/cupti_manager.cc`` ``ProcessActivityBuffers``,
  ``onnxruntime/core/common/gpu_profiler_common.h`` ``MergeEvents``, ``profiler.cc``);
* ``nsys-kern-sum-{before,after}-constructed.csv``: constructed to the format of ``nsys stats
  --report cuda_gpu_kern_sum --format csv`` (Nsight Systems Analysis Guide);
* ``ncu-metrics-constructed.csv``: constructed to the format of ``ncu --csv --metrics ...``
  (Nsight Compute CLI manual, details page).

Replace each with a recording when a device session runs ``benchmarks/gpu_check.sh`` (it copies
the raw ORT profile and the nsys CSV into its output folder).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from perfguard.errors import NsightError
from perfguard.profile.diff import diff_profiles
from perfguard.profile.dimension import classify
from perfguard.profile.gpu_diff import (
    build_section,
    diff_nsys,
    gpu_lines,
    with_ncu,
)
from perfguard.profile.nsight import (
    nsight_side,
    parse_kern_sum,
    parse_ncu_csv,
    tool_skips,
)
from perfguard.profile.perfetto import merge_traces, trace_problems
from perfguard.results.explanation import (
    Change,
    Explanation,
    GpuDiff,
    GpuSection,
    KernelDelta,
    NsightSide,
    Spread,
)
from perfguard.workers.gpu import GpuProfile, KernelStat
from perfguard.workers.trace import ProfileRun, aggregate, read_trace

from .conftest import REPO, run_cli
from .test_profile import BASE, RECORDED, _side

DATA = REPO / "tests" / "data"
ORT_CUDA = DATA / "ort-cuda-profile-constructed.json"
NSYS_BEFORE = DATA / "nsys-kern-sum-before-constructed.csv"
NSYS_AFTER = DATA / "nsys-kern-sum-after-constructed.csv"
NCU = DATA / "ncu-metrics-constructed.csv"
CONV = "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>"
ADD = "void onnxruntime::cuda::_BinaryElementWiseSimple<true, true, float, float, float"
TRANSPOSE = "void onnxruntime::cuda::TransposeKernel<int>"


def _named(kernels: Any, prefix: str) -> Any:
    return next(k for k in kernels if k.name.startswith(prefix))


# -- ORT's Kernel events ---------------------------------------------------------------------------


def test_ort_kernel_events_are_aggregated_per_inference_exactly() -> None:
    profile = aggregate(read_trace(ORT_CUDA), skip_runs=1)
    gpu = profile.gpu
    assert gpu is not None
    # Kept runs 2 and 3: 4 and 5 kernels (the 5th has no parent node and falls in run 3 by its ts).
    assert gpu.launches == 4.5
    assert gpu.kernel_us == 192.5  # median of 180 and 205 µs
    # Busy: the union of the kernels' intervals over model_run: 180/400 and 200/500 (two kernels
    # overlap by 5 µs in run 3); the median of 0.45 and 0.40.
    assert gpu.busy == pytest.approx(0.425)
    assert (gpu.copies, gpu.copy_us) == (1.0, 8.0)  # the MemcpyDeviceToHost record, not a kernel
    conv = _named(gpu.top, CONV)
    assert gpu.top[0] == conv and (conv.launches, conv.us) == (1.0, 130.0)  # the warm-up's 900 µs left out
    # The Transpose kernel's own ts lies past run 2's end: it counts in run 2 through its parent node.
    assert (_named(gpu.top, TRANSPOSE).launches, _named(gpu.top, TRANSPOSE).us) == (1.0, 30.0)
    assert [(k.name, k.launches, k.us) for k in gpu.by_op] == [
        ("Conv", 2.0, 140.0), ("Transpose", 1.0, 30.0), ("Relu", 1.0, 20.0), ("?", 0.5, 2.5)]
    # The CPU aggregate of the same file reads the Node events as before (the host's launch time).
    assert {o.provider for o in profile.ops} == {"CUDAExecutionProvider"}
    assert profile.kernel_sum_us == (85.0, 85.0) and profile.model_run_us == (400.0, 500.0)


def test_a_cpu_profile_has_no_gpu_part_and_old_documents_still_load() -> None:
    cpu = aggregate(read_trace(RECORDED), skip_runs=1)
    assert cpu.gpu is None and "gpu" not in cpu.to_json()
    assert ProfileRun.from_json(json.loads(json.dumps(cpu.to_json()))) == cpu
    gpu = aggregate(read_trace(ORT_CUDA), skip_runs=1)
    assert ProfileRun.from_json(json.loads(json.dumps(gpu.to_json()))) == gpu


# -- nsys and ncu outputs ----------------------------------------------------------------------------


def test_nsys_kernel_summary_is_read_after_the_progress_lines() -> None:
    before = parse_kern_sum(NSYS_BEFORE.read_text())
    assert [k.instances for k in before] == [22, 22, 22, 22]
    assert before[0].name.startswith(CONV) and before[0].total_ns == 2_640_000
    after = NsightSide("after", 22, parse_kern_sum(NSYS_AFTER.read_text()))
    assert after.nsys is not None and after.nsys[0].name.startswith(ADD) and after.nsys[0].instances == 2640
    assert (NsightSide("before", 22, before).launches, NsightSide("before", 22, before).kernel_us) == (4.0, 180.0)
    assert (after.launches, after.kernel_us) == (124.0, 420.0)
    # --timeunit us: the unit is read from the header; separators are dropped.
    text = '"Time (%)","Total Time (us)","Instances","Name"\n"100.0","1,500.5","3","k"\n'
    assert parse_kern_sum(text)[0].total_ns == 1_500_500.0
    with pytest.raises(NsightError, match="no cuda_gpu_kern_sum header"):
        parse_kern_sum("SKIPPED: report.sqlite does not contain CUDA kernel data.\n")


def test_ncu_metrics_are_averaged_per_kernel_over_its_launches() -> None:
    conv, add = parse_ncu_csv(NCU.read_text())
    assert conv.name.startswith(CONV) and add.name.startswith(ADD)
    # 120.45 and 119.55 usecond; 2,016 and 1,984 nsecond: in ns, per kernel.
    assert (conv.launches, conv.time_ns, conv.sm_pct, conv.dram_pct) == (2, pytest.approx(120_000.0), 71.0, 38.4)
    assert (add.launches, add.time_ns, add.sm_pct, add.dram_pct) == (2, 2000.0, 10.0, 23.0)  # n/a left out
    with pytest.raises(NsightError, match="no ncu details header"):
        parse_ncu_csv("==PROF== ERROR: the application returned an error code (1)\n")


# -- running the tools, and skipping them -----------------------------------------------------------


class _Request(SimpleNamespace):
    """What ``nsight_side`` uses of a ``ProfileRequest``."""

    def to_json(self) -> dict[str, Any]:
        return {"mode": "profile"}

    def parse_response(self, data: Any) -> Any:
        return data


def _request(runner: str = "cuda") -> Any:
    return _Request(runner=runner, warmup=2, runs=20)


def test_missing_tools_and_other_runners_are_skipped_with_the_reason(tmp_path: Path) -> None:
    assert tool_skips("cuda", lambda tool: None) == {"nsys": "skipped: nsys not on PATH",
                                                      "ncu": "skipped: ncu not on PATH"}
    assert tool_skips("cpu", lambda tool: "/usr/bin/" + tool)["ncu"] == (
        "skipped: ncu profiles CUDA kernels; runner 'cpu' is not cuda")

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no tool may run")

    side = nsight_side("base", _request(), tmp_path, 60, [CONV], which=lambda tool: None, run=never)
    assert (side.nsys, side.ncu, side.skipped) == (None, None, ("skipped: nsys not on PATH",
                                                                 "skipped: ncu not on PATH"))
    # Both sides skipped alike: the reason is said once; no ORT kernels either: no diff, no error.
    section = build_section([None], [None], [side, NsightSide("head", 22, skipped=side.skipped)])
    assert section.diff is None
    assert section.skipped[0].startswith("skipped: ORT kernels: the profiles hold no Kernel events")
    assert section.skipped[1:] == ("skipped: nsys not on PATH", "skipped: ncu not on PATH")


def test_nsys_and_ncu_wrap_a_worker_and_their_csv_is_parsed(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        if command[1] == "stats":
            return subprocess.CompletedProcess(command, 0, NSYS_AFTER.read_text(), "")
        if command[0].endswith("ncu"):
            Path(command[command.index("--log-file") + 1]).parent.mkdir(parents=True, exist_ok=True)
            Path(command[command.index("--log-file") + 1]).write_text(NCU.read_text())
        Path(command[-1]).write_text(json.dumps({"profiles": {}, "trace_paths": {}, "pid": 1}))
        return subprocess.CompletedProcess(command, 0, "", "")

    side = nsight_side("head", _request(), tmp_path, 60, [CONV + "(int)"], which=lambda tool: f"/opt/{tool}", run=run)
    profile, stats, ncu = calls
    assert profile[:6] == ["/opt/nsys", "profile", "-t", "cuda", "--force-overwrite", "true"]
    assert "perfguard.workers.worker" in profile and stats[1:4] == ["stats", "--report", "cuda_gpu_kern_sum"]
    assert ncu[ncu.index("--metrics") + 1] == ("gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,"
                                              "dram__throughput.avg.pct_of_peak_sustained_elapsed")
    assert ncu[ncu.index("-k") + 1].startswith("regex:^(void\\ implicit_convolve_sgemm")
    assert ncu[ncu.index("--launch-count") + 1] == "3"
    assert side.inferences == 22 and side.skipped == ()
    assert side.nsys is not None and len(side.nsys) == 5 and side.ncu is not None and len(side.ncu) == 2
    assert (tmp_path / "nsys" / "cuda_gpu_kern_sum.csv").exists()  # kept for the device session's recording


def test_a_failing_tool_is_skipped_with_its_message_not_raised(tmp_path: Path) -> None:
    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, "", "==ERROR== ERR_NVGPUCTRPERM: no permission to profile\n")

    side = nsight_side("head", _request(), tmp_path, 60, [CONV], which=lambda tool: f"/opt/{tool}", run=run)
    assert side.skipped == (
        "skipped: nsys run failed: exit code 1: ==ERROR== ERR_NVGPUCTRPERM: no permission to profile",
        "skipped: ncu run failed: exit code 1: ==ERROR== ERR_NVGPUCTRPERM: no permission to profile")



def test_an_nsys_stats_that_hangs_is_skipped_with_the_reason_not_raised(tmp_path: Path) -> None:
    """Fakes the tools: the profiled worker answers, ``nsys stats`` times out."""
    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if command[1] == "stats":
            raise subprocess.TimeoutExpired(command, kwargs["timeout"])
        Path(command[-1]).write_text(json.dumps({"profiles": {}, "trace_paths": {}, "pid": 1}))
        return subprocess.CompletedProcess(command, 0, "", "")

    side = nsight_side("head", _request(), tmp_path, 60, [], which=lambda tool: "/opt/nsys" if tool == "nsys" else None,
                       run=run)
    assert side.nsys is None
    assert side.skipped[0] == "skipped: ncu not on PATH"
    assert side.skipped[1].startswith("skipped: nsys run failed: nsys stats: Command ") and "timed out" in side.skipped[1]

# -- the GPU rules, on constructed diffs ----------------------------------------------------------


def _c(before: float, after: float) -> Change:
    return Change(Spread(before, before, before), Spread(after, after, after))


def _gpu(launches: tuple[float, float], kernel: tuple[float, float], rows: list[KernelDelta],
         busy: tuple[float, float] | None = None) -> GpuDiff:
    return GpuDiff("ort", _c(*launches), _c(*kernel), None if busy is None else _c(*busy), tuple(rows))


def _row(name: str, us: tuple[float, float], sm: float | None = None, dram: float | None = None,
         launches: tuple[float, float] = (1, 1)) -> KernelDelta:
    return KernelDelta(name, _c(*launches), _c(*us), sm, dram)


SLOWER = diff_profiles(_side(BASE), _side({**BASE, "Conv": (6, 600.0)}))  # +300 µs of run time


def test_more_small_launches_are_scheduling_from_the_nsys_summaries() -> None:
    before = NsightSide("base", 22, parse_kern_sum(NSYS_BEFORE.read_text()))
    after = NsightSide("head", 22, parse_kern_sum(NSYS_AFTER.read_text()))
    gpu = diff_nsys(before, after)
    assert (gpu.launches.delta, gpu.kernel_us.delta, gpu.busy) == (120.0, 240.0, None)
    assert gpu.kernels[0].name.startswith(ADD) and gpu.kernels[0].launches.after.mean == 120.0
    dim = classify(SLOWER, gpu=gpu)
    assert (dim.label, dim.rule) == ("scheduling", "more-launches")
    assert dim.headline == "+300 us with +120 kernel launches: scheduling"
    assert "each added launch adds 2 us of kernel time, against 45 us per launch before" in dim.evidence


def test_a_gpu_waiting_on_the_host_is_scheduling() -> None:
    gpu = _gpu((40, 40), (200, 210), [_row(CONV, (100, 110))], busy=(0.6, 0.35))
    assert classify(SLOWER, gpu=gpu).rule == "gpu-idle"


def test_grown_kernels_ncu_sees_dram_bound_are_memory_and_sm_bound_are_compute() -> None:
    memory = classify(SLOWER, gpu=_gpu((40, 40), (200, 480), [_row(TRANSPOSE + "()", (30, 290), sm=31.0, dram=88.0),
                                                                _row(CONV + "()", (100, 120), sm=70.0, dram=30.0)]))
    assert (memory.label, memory.rule) == ("memory", "dram-bound")
    assert memory.headline == "+260 us in TransposeKernel, DRAM-bound: memory"
    assert "SM 31% DRAM 88% of peak" in memory.evidence[2]
    compute = classify(SLOWER, gpu=_gpu((40, 40), (200, 480), [_row(CONV + "()", (100, 380), sm=82.0, dram=35.0)]))
    assert (compute.label, compute.rule) == ("compute", "sm-bound")


def test_longer_kernels_at_the_same_launch_count_without_ncu_are_compute_with_a_caveat() -> None:
    dim = classify(SLOWER, gpu=_gpu((40, 41), (200, 480), [_row(CONV + "()", (100, 380))]))
    assert (dim.label, dim.rule) == ("compute", "kernel-time")
    assert any("memory-bound kernels cannot be ruled out" in line for line in dim.evidence)


def test_nothing_dominating_on_the_gpu_is_unclear() -> None:
    latency = _gpu((40, 40), (200, 480), [_row(CONV + "()", (100, 380), sm=22.0, dram=18.0)])
    dim = classify(SLOWER, gpu=latency)
    assert (dim.label, dim.rule) == ("unclear", "gpu-mixed")
    assert "neither SM nor DRAM throughput reaches 60%" in dim.evidence[1]
    host = _gpu((40, 40), (200, 230), [_row(CONV + "()", (100, 130))])  # the GPU explains 10 % of the change
    assert classify(SLOWER, gpu=host).label == "unclear"


def test_the_cpu_rules_are_unchanged_without_gpu_evidence() -> None:
    assert classify(SLOWER).rule == classify(SLOWER, gpu=None).rule == "arithmetic"
    flat = diff_profiles(_side(BASE), _side(BASE))
    assert classify(flat, gpu=_gpu((40, 400), (200, 480), [])).rule == "no-slowdown"  # rules 1-2 first


# -- where it shows: JSON, printout, Perfetto ---------------------------------------------------------


def _section() -> GpuSection:
    profile = aggregate(read_trace(ORT_CUDA), skip_runs=1).gpu
    assert profile is not None
    slower = GpuProfile(profile.launches, profile.kernel_us + 100, 0.5, profile.copies, profile.copy_us,
                        (KernelStat(profile.top[0].name, 1.0, 230.0), *profile.top[1:]), profile.by_op)
    ncu = NsightSide("head", 22, None, parse_ncu_csv(NCU.read_text()), ("skipped: nsys not on PATH",))
    return build_section([profile, profile], [slower, slower], [NsightSide("base", 22, skipped=ncu.skipped), ncu])


def test_the_gpu_section_round_trips_and_only_cuda_explanations_carry_it() -> None:
    section = _section()
    assert section.diff is not None and section.diff.source == "ort"
    top = section.diff.kernels[0]
    assert top.name.startswith(CONV) and top.us.delta == 100.0 and (top.sm_pct, top.dram_pct) == (71.0, 38.4)
    assert section.skipped == ("skipped: nsys not on PATH",)
    explanation = Explanation("r/p/cuda", "a", "b", classify(SLOWER, gpu=section.diff), SLOWER, gpu=section)
    data = json.loads(json.dumps(explanation.to_json()))
    assert data["gpu"]["diff"]["kernels"][0]["sm_pct"] == 71.0
    assert Explanation.from_json(data) == explanation
    cpu = Explanation("r/p/cpu", "a", "b", classify(SLOWER), SLOWER)
    assert "gpu" not in cpu.to_json() and Explanation.from_json(cpu.to_json()).gpu is None
    assert with_ncu(section.diff, None) == section.diff


def test_the_printout_has_a_short_gpu_block() -> None:
    from perfguard.profile.dimension import us

    lines = gpu_lines(_section(), us)
    assert lines[0] == ("GPU (ort): 4 -> 4 kernel launches per inference, kernel time 192 us -> 292 us (+100 us), "
                        "GPU busy 43% -> 50% of model_run")
    assert lines[1].startswith("  +100 us void implicit_convolve_sgemm") and lines[1].endswith(
        "(1 -> 1 launches, ncu SM 71% DRAM 38%)")
    assert lines[-1] == "  skipped: nsys not on PATH"


def test_kernel_events_of_both_sides_go_to_gpu_stream_tracks_in_the_trace() -> None:
    events = read_trace(ORT_CUDA)
    data = merge_traces([("baseline: a", events), ("candidate: b", events)])
    assert trace_problems(data) == []
    kernels = [e for e in data["traceEvents"] if e.get("cat") == "Kernel"]
    assert len(kernels) == 2 * sum(1 for e in events if e["cat"] == "Kernel")
    names = {(e["pid"], e["args"]["name"]) for e in data["traceEvents"] if e["name"] == "thread_name"}
    assert {(1, "GPU stream 7"), (1, "GPU stream 14"), (2, "GPU stream 7"), (1, "onnxruntime thread 4242")} <= names


# -- the real thing ------------------------------------------------------------------------------


def _real_cuda_or_skip() -> None:
    from perfguard.backends import check_case_runner, get_backend
    from perfguard.errors import RunnerUnavailable
    from perfguard.runners.cuda import CudaRunner

    try:
        check_case_runner(get_backend("ort"), CudaRunner())
    except RunnerUnavailable as exc:
        pytest.skip(f"no CUDA runner here: {exc}")


CUDA_SUITE = """
[suite]
name = "gpu-why"
backend = "ort"
runners = ["cuda"]
[measure]
workers = 2
rounds = 2
warmup = 3
min_time = "1ms"
compile_repeats = 1
memory_probes = 0
timeout = "300s"
[models.r]
arch = "resnet"
params = { depth = 2, width = 16, image_size = 64, num_classes = 10 }
[pipelines.plain]
passes = []
[pipelines.ort_all]
passes = []
options = { graph_optimization_level = "all" }
"""


@pytest.mark.gpu
def test_real_cuda_profile_has_a_gpu_section(tmp_path: Path) -> None:
    _real_cuda_or_skip()
    suite = tmp_path / "gpu.toml"
    suite.write_text(CUDA_SUITE)
    out, traces = tmp_path / "why.json", tmp_path / "traces"
    proc = run_cli("profile", str(suite), "--case", "r/ort_all/cuda", "--against-pipeline", "plain", "--quiet",
                   "--json", str(out), "--trace-out", str(traces), timeout=900)
    assert proc.returncode == 0, proc.stderr
    (explanation,) = json.loads(out.read_text())["explanations"]
    section = GpuSection.from_json(explanation["gpu"])
    # Either ORT recorded kernels (a build with CUDA profiling), or nsys did, or each says why not.
    assert section.diff is not None or any("Kernel events" in s for s in section.skipped), section
    assert all(s.startswith("skipped: ") or ": skipped: " in s for s in section.skipped)
    assert "GPU" in proc.stdout or "skipped:" in proc.stdout
    assert trace_problems(json.loads(Path(explanation["trace_file"]).read_text())) == []
    if section.diff is None:
        # Every profiler was skipped, so nothing above saw a kernel: that must not read as a pass.
        # With nsys on PATH a kernel source was there and perfguard lost it; without it (and with
        # the PyPI onnxruntime-gpu, which records no Kernel events) this machine cannot test it.
        assert shutil.which("nsys") is None, f"nsys is on PATH but no kernels were diffed: {section.skipped}"
        pytest.skip("no profiler recorded CUDA kernels on this machine: " + "; ".join(section.skipped))
    # Both ResNet pipelines launch convolution kernels on the GPU: a diff without rows saw nothing.
    diff = section.diff
    assert diff.kernels and diff.launches.before.mean > 0 and diff.launches.after.mean > 0, diff
    assert f"GPU ({diff.source})" in proc.stdout, proc.stdout
