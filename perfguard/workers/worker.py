"""Worker processes: ``python -m perfguard.workers.worker REQUEST.json RESPONSE.json`` (or
``--spare``: started ahead, the paths then come on stdin).

Compiling and timing happen in fresh child processes, so a compiler or runtime that crashes or
hangs costs one case (or one worker), never the run, and process-level effects (allocation, layout,
caches) become part of the measured spread instead of a hidden bias.

``compile`` requests compile one case, run the reference (``Backend.reference``; by default ORT,
all optimizations off) and check the artifact's outputs against it. ``measure`` requests load every variant of a case group and time
them interleaved: in each round every variant runs its ``loops`` times, in blocks whose order is
shuffled afresh (short runs in 10 blocks a round, each after one untimed run), so drift hits all
variants alike. The worker reports progress on stderr (``perfguard-worker: loading ID``) so the parent can
name the variant a crash happened in.
"""

from __future__ import annotations

import dataclasses
import gc
import io
import json
import math
import os
import random
import resource
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from perfguard.atomic import write_atomic
from perfguard.backends import check_case_runner, get_backend, preload_default_backend, reference_runtime
from perfguard.backends.base import Artifact, Backend, Executable
from perfguard.errors import BackendError, PerfguardError, RunnerUnavailable, first_line
from perfguard.models.inputs import InputSpec, make_feeds
from perfguard.results.result import CorrectnessCheck
from perfguard.runners import get_runner
from perfguard.runners.base import Runner
from perfguard.suite import PipelineSpec
from perfguard.workers.jit import check_still_compiled, prove_compiled
from perfguard.workers.protocol import (
    STATUS_PREFIX,
    CheckTolerance,
    CompileRequest,
    CompileResponse,
    MeasureRequest,
    MeasureResponse,
    MemoryRequest,
    MemoryResponse,
    ProfileRequest,
    ProtocolError,
    VerifyRequest,
    VerifyResponse,
    WorkerError,
    WorkerResponse,
    encode_response,
    request_from_json,
    status_line,
    variant_status,
)

__all__ = ["STATUS_PREFIX", "blindness", "compare_outputs", "main", "probe_inputs"]

MAX_LOOPS = 1_000_000
#: The largest over the smallest calibrated run count that :func:`common_loops` gives every variant.
LOOPS_SPREAD = 4
#: Blocks of a round whose runs are short (:func:`round_blocks`), and the fewest runs in a block.
ROUND_BLOCKS = 10
MIN_BLOCK_RUNS = 4


def _status(message: str) -> None:
    sys.stderr.write(status_line(message))
    sys.stderr.flush()


def _rss_bytes() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # psutil missing or /proc unreadable
        return 0


def peak_rss_bytes() -> int:
    """This process's own peak resident memory: the high-water mark of its address space
    (``VmHWM`` in ``/proc/self/status`` on Linux).

    Not ``getrusage(RUSAGE_SELF).ru_maxrss``: on Linux that survives fork and exec, so a worker
    started by a parent that holds 150 MB reports at least 150 MB whatever it loads (measured:
    a child of a 313 MB parent read 313 MB there and 13 MB here). The memory metric would then
    follow perfguard's own imports instead of the artifact. ``ru_maxrss`` (KiB on Linux, bytes on
    macOS) is the fallback where ``/proc`` is missing."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _load_outputs(path: str) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[f"out{i}"] for i in range(len(data.files))]


def _save_outputs(path: str, outputs: list[np.ndarray]) -> None:
    arrays: dict[str, Any] = {f"out{i}": np.asarray(o) for i, o in enumerate(outputs)}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    write_atomic(path, buffer.getvalue())


def _probe_cache(cache: str | None) -> str | None:
    if not cache:
        return None
    return (cache[:-len(".npz")] if cache.endswith(".npz") else cache) + "-probe.npz"


def _reference_outputs(backend: Backend, model_path: str, feeds: dict[str, np.ndarray], cache: str | None,
                       probe_feeds: dict[str, np.ndarray] | None = None
                       ) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Outputs of the unoptimized model on ``feeds`` and (when given) on the differently seeded
    ``probe_feeds`` of the blindness probe: ``backend.reference`` (eager PyTorch for a PyTorch
    callable), or by default ONNX Runtime with every optimization off.

    The reference file ``cache`` keeps its format (``out0``, ``out1``...: shipped with artifacts);
    the probe's outputs sit beside it (``...-probe.npz``)."""
    probe_path = _probe_cache(cache)
    have_ref = bool(cache and os.path.exists(cache))
    have_probe = probe_feeds is None or bool(probe_path and os.path.exists(probe_path))
    if have_ref and have_probe:
        return _load_outputs(str(cache)), _load_outputs(str(probe_path)) if probe_feeds is not None else None
    runtime, load_reference = reference_runtime(backend, Path(model_path))
    try:
        executable = load_reference()
        outputs = [np.asarray(o) for o in executable.run(feeds)]
        probe = [np.asarray(o) for o in executable.run(probe_feeds)] if probe_feeds is not None else None
    except PerfguardError:
        raise
    except Exception as exc:
        raise BackendError(f"the model itself does not run in {runtime}: {first_line(exc)}") from None
    if cache:
        _save_outputs(cache, outputs)
        if probe is not None and probe_path:
            _save_outputs(probe_path, probe)
    return outputs, probe


def probe_inputs(specs: list[InputSpec], seed: int, feeds: dict[str, np.ndarray],
                tries: int = 3) -> tuple[int, dict[str, np.ndarray]] | None:
    """Inputs from the next seeds that differ from ``feeds`` in at least one input, with their
    seed; ``None`` when no seed gives different inputs (no inputs, or inputs that cannot vary:
    the check then covers every input there is)."""
    for probe_seed in range(seed + 1, seed + 1 + tries):
        other = make_feeds(specs, probe_seed)
        if any(not np.array_equal(feeds[name], other[name]) for name in feeds):
            return probe_seed, other
    return None


def blindness(reference: list[np.ndarray], probe: list[np.ndarray], rtol: float, atol: float) -> bool:
    """Whether the reference outputs on two different inputs agree within the tolerance: then the
    outputs do not (measurably) depend on the inputs, and a check against them is blind."""
    return bool(compare_outputs(reference, probe, rtol, atol)["passed"])


class Compared(TypedDict):
    """What :func:`compare_outputs` found: pass or fail, why, and the largest errors."""

    passed: bool
    reason: str
    max_abs_error: float | None
    max_rel_error: float | None


def compare_outputs(reference: list[np.ndarray], got: list[np.ndarray], rtol: float, atol: float) -> Compared:
    """Elementwise |got - ref| <= atol + rtol*|ref|; NaN where the reference is finite fails."""
    if len(reference) != len(got):
        return {"passed": False, "reason": f"{len(got)} outputs, the reference has {len(reference)}",
                "max_abs_error": None, "max_rel_error": None}
    max_abs = max_rel = 0.0
    for index, (ref, out) in enumerate(zip(reference, got, strict=False)):
        out = np.asarray(out)
        if ref.shape != out.shape:
            return {"passed": False, "reason": f"output {index} has shape {list(out.shape)}, the reference "
                    f"{list(ref.shape)}", "max_abs_error": None, "max_rel_error": None}
        if not np.issubdtype(ref.dtype, np.number) and ref.dtype != np.bool_:
            continue
        ref64, out64 = ref.astype(np.float64), out.astype(np.float64)
        diff = np.abs(ref64 - out64)
        diff = np.where(np.isnan(ref64) & np.isnan(out64), 0.0, diff)
        if diff.size:
            max_abs = max(max_abs, float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))))
            rel = diff / np.maximum(np.abs(ref64), 1e-12)
            max_rel = max(max_rel, float(np.max(np.where(np.isnan(rel), np.inf, rel))))
        if not np.all(diff <= atol + rtol * np.abs(ref64)):
            return {"passed": False, "reason": f"output {index} differs from the reference beyond tolerance",
                    "max_abs_error": max_abs, "max_rel_error": max_rel}
    return {"passed": True, "reason": "", "max_abs_error": max_abs, "max_rel_error": max_rel}


def _check(compared: Compared, tolerance: CheckTolerance, status: str | None = None,
           probe_seed: int | None = None) -> CorrectnessCheck:
    """``compare_outputs``'s verdict with the tolerance and seed it was judged by."""
    return CorrectnessCheck(passed=bool(compared["passed"]), reason=str(compared["reason"]),
                            max_abs_error=compared["max_abs_error"], max_rel_error=compared["max_rel_error"],
                            rtol=tolerance.rtol, atol=tolerance.atol, seed=tolerance.seed, status=status,
                            probe_seed=probe_seed)


def do_compile(request: CompileRequest) -> tuple[CompileResponse | None, WorkerError | None]:
    """Compile, then check against the reference; a wrong answer returns the body and an error."""
    if request.compiler_path:
        sys.path.insert(0, request.compiler_path)
    backend = get_backend(request.backend)
    runner = get_runner(request.runner, options=request.runner_options)
    pipeline = PipelineSpec(name=request.pipeline.name, backend=request.pipeline.backend,
                            passes=request.pipeline.passes, options=request.pipeline.options)
    specs = list(request.input_specs)
    tolerance = request.correctness
    feeds = make_feeds(specs, tolerance.seed)
    # The blindness probe: the reference on a second, differently seeded input. Outputs that do
    # not change with the input (weights all one constant, say) cannot tell a wrong pass apart.
    probe = probe_inputs(specs, tolerance.seed, feeds)
    stage = "reference"
    try:
        _status("reference")
        reference, probe_outputs = _reference_outputs(backend, request.model_path, feeds, request.reference_cache,
                                                      probe[1] if probe else None)
        stage = "compile"
        _status("compile")
        # Compile time is a noisy metric too: compile ``compile_repeats`` times, keep every time.
        # The first compile makes the artifact and its trace; the repeats only time the work
        # (in a scratch folder), as the first compile's ``work_time_s`` times it.
        start = time.perf_counter()
        output = backend.compile(Path(request.model_path), pipeline, Path(request.out_dir))
        wall = time.perf_counter() - start
        compile_times = [wall if output.work_time_s is None else output.work_time_s]
        scratch = Path(request.out_dir) / "repeat"
        for _ in range(1, max(1, request.compile_repeats)):
            compile_times.append(backend.recompile_time(Path(request.model_path), pipeline, scratch))
        shutil.rmtree(scratch, ignore_errors=True)
        compile_time = float(np.median(compile_times))
        stage = "correctness"
        _status("correctness")
        elsewhere = _runner_elsewhere(backend, runner)
        if elsewhere:  # compiled here for another machine's runner (perfguard compile)
            check = _check({"passed": True, "reason": elsewhere, "max_abs_error": None, "max_rel_error": None},
                           tolerance, status="deferred")
            return CompileResponse(artifact=output.artifact, trace=output.trace.to_json(), compile_time_s=compile_time,
                                   compile_times_s=tuple(compile_times), correctness=check), None
        executable = backend.load(output.artifact, runner, request.threads)
        got = executable.run(feeds)
        compared = compare_outputs(reference, got, tolerance.rtol, tolerance.atol)
        check = _check(compared, tolerance, status="verified" if compared["passed"] else "failed",
                       probe_seed=probe[0] if probe is not None else None)
        if check.passed and probe is not None and probe_outputs is not None and blindness(
                reference, probe_outputs, tolerance.rtol, tolerance.atol):
            # Not a failure (the artifact matches the reference), but never "verified".
            check = dataclasses.replace(check, status="blind", reason=(
                f"blind: the reference outputs on two different seeded inputs (seeds {tolerance.seed} and "
                f"{probe[0]}) agree within rtol={tolerance.rtol}, atol={tolerance.atol}; they do not depend "
                "on the inputs, so this check cannot tell a wrong pass from a right one"))
        result = CompileResponse(artifact=output.artifact, trace=output.trace.to_json(), compile_time_s=compile_time,
                                 compile_times_s=tuple(compile_times), correctness=check)
        if not check.passed:
            detail = (f" (max abs error {check.max_abs_error:.3g}, max rel error {check.max_rel_error or 0.0:.3g};"
                      f" rtol={tolerance.rtol}, atol={tolerance.atol})"
                      if check.max_abs_error is not None else "")
            return result, WorkerError("correctness", f"wrong answer: {check.reason}{detail}; a fast wrong answer is "
                                       "not a result (loosen [correctness] rtol/atol only if the difference is expected)")
        return result, None
    except PerfguardError as exc:
        return None, WorkerError(stage, str(exc))


def _runner_elsewhere(backend: Backend, runner: Runner) -> str:
    """Why the artifact cannot be checked here ("" when it can): this machine cannot serve the
    runner for the backend. Preflight refuses such a case for ``run``; only ``perfguard compile``
    (compile here, measure there) reaches the compile with it, and ``run --artifacts`` checks the
    artifact on the runner against the reference outputs written here."""
    try:
        check_case_runner(backend, runner)
    except RunnerUnavailable as exc:
        return f"deferred to the runner: {exc}"
    return ""


def load_warm(artifact: Artifact, runner: Runner, threads: int, feeds: dict[str, np.ndarray], warmup: int,
              min_time: float) -> Executable:
    """Load ``artifact`` and warm it up: ``warmup`` runs, or fewer once the warm-up has lasted
    ``warmup * min_time`` (one 95 ms run warms a session as well as three: the first run is the
    one that allocates), never fewer than one run nor than the runner's ``min_warmup``."""
    executable = get_backend(artifact.backend).load(artifact, runner, threads)
    runs, least, budget = max(1, runner.min_warmup, warmup), max(1, runner.min_warmup), warmup * min_time
    start = time.perf_counter()
    for done in range(1, runs + 1):
        executable.run(feeds)
        if done >= least and time.perf_counter() - start >= budget:
            break
    runner.synchronize()
    return executable


def _calibrate(executable: Executable, feeds: dict[str, np.ndarray], min_time: float,
               synchronize: Callable[[], None] | None = None) -> int:
    """Loops per value so that one value lasts at least ``min_time``: each try aims at 1.1x
    ``min_time`` from the last try's time per loop, and grows by one loop at least. Not pyperf's
    doubling: a try that falls just short doubles, and values then last up to twice ``min_time``
    (a 0.4 ms model: 51-61 loops, once 88, where 38-54 reach the same 20 ms), which the timed
    rounds pay for in every worker."""
    loops = 1
    while loops < MAX_LOOPS:
        start = time.perf_counter()
        for _ in range(loops):
            executable.run(feeds)
        if synchronize is not None:
            synchronize()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return loops
        if elapsed <= 0:
            loops *= 10
            continue
        loops = min(MAX_LOOPS, max(loops + 1, math.ceil(loops * min_time / elapsed * 1.1)))
    return MAX_LOOPS


def common_loops(loops: dict[str, int]) -> dict[str, int]:
    """One run count for every variant of a round: the largest calibrated count, but at most
    ``LOOPS_SPREAD`` times the smallest (so every value lasts at least ``min_time``, and a variant
    10x slower than the fastest runs 4x, not 10x, its own count).

    Why equal counts: every variant's blocks then hold the same runs and take turns evenly. Run by
    run without untimed runs (a design measured and not kept: see :func:`_interleaved_round`), an
    A/A of one 0.4 ms model under two node namings, calibrated to 49 and 64 runs, read the 64-run
    side 1.8 % faster in all 8 workers (p = 0.008): it followed itself more often."""
    if not loops:
        return {}
    common = min(max(loops.values()), LOOPS_SPREAD * min(loops.values()))
    return dict.fromkeys(loops, common)


def round_blocks(count: int) -> tuple[int, int]:
    """How one variant's ``count`` runs of a round are timed: ``(blocks, runs per block)``.
    ``ROUND_BLOCKS`` blocks when each holds at least ``MIN_BLOCK_RUNS`` runs (a run shorter than
    ``min_time / 40``: 0.5 ms by default), else one block of ``count``, as long as the runs take."""
    if count >= ROUND_BLOCKS * MIN_BLOCK_RUNS:
        return ROUND_BLOCKS, math.ceil(count / ROUND_BLOCKS)
    return 1, count


def _interleaved_round(executables: dict[str, Executable], loops: dict[str, int], feeds: dict[str, np.ndarray],
                       sync: Callable[[], None], rng: random.Random, values: dict[str, list[float]]) -> float:
    """One timed round: every variant's runs (one count for all: :func:`common_loops`) in blocks
    (:func:`round_blocks`); the blocks of all variants interleave, in a fresh random order for
    each block, and a variant's value is its mean time per run. A round of several blocks runs
    each block after one untimed run of the same variant. Returns the seconds timed.

    Why blocks: on the 2-core machine the speed wanders on every time scale from a millisecond
    up, and only runs close in time see the same machine. For the smoke suite's 0.4 ms ResNet
    (``python benchmarks/interleave.py --rounds 60``, twice), the per-round log ratio of its
    pipelines to ``none`` spread 6-11 % with one 50-run block per variant and round, 3-7 % with
    10 blocks of 5 runs. Why the untimed run: a run that follows another model's run finds the
    caches holding that model. Timed run by run, the ratios moved by up to 9 points
    (``bn_fused_unfolded`` +25.1 / +29.2 %, ``ort_all`` -55.4 / -53.6 %, against +22.3 / +22.5 %
    and -60.9 / -63.4 % in one block, which is what a steady loop reads); with the untimed run
    first, 10 blocks read +23.5 / +24.6 % and -61.9 / -62.4 %. A variant whose value is a few
    runs (fewer than ``ROUND_BLOCKS * MIN_BLOCK_RUNS``) is timed in one block, as before.

    The status line names each variant before its first block of the round; a crash inside the
    interleaved blocks is put on the variant named last (a variant that crashes every time does
    so already in its warm-up, where it runs alone).
    """
    order = list(executables)
    blocks, size = round_blocks(max(loops[variant_id] for variant_id in order))  # equal for all
    totals = dict.fromkeys(order, 0)
    runs = {variant_id: executable.run for variant_id, executable in executables.items()}
    clock = time.perf_counter_ns
    for block in range(blocks):
        rng.shuffle(order)
        for variant_id in order:
            if block == 0:
                _status(variant_status("running", variant_id))
            run = runs[variant_id]
            if blocks > 1:  # untimed: this variant's caches, not its neighbour's
                run(feeds)
                sync()
            start = clock()
            for _ in range(size):
                run(feeds)
            sync()
            totals[variant_id] += clock() - start
    for variant_id, total in totals.items():
        values[variant_id].append(total / 1e9 / (blocks * size))
    return sum(totals.values()) / 1e9


def do_measure(request: MeasureRequest) -> MeasureResponse:
    runner = get_runner(request.runner, options=request.runner_options)
    threads = request.threads
    worker_index = request.worker_index
    rng = random.Random(request.seed * 100_003 + worker_index)
    feeds = make_feeds(list(request.input_specs), request.seed + 1 + worker_index)
    variants = list(request.variants)
    executables: dict[str, Executable] = {}
    rss_delta: dict[str, int] = {}
    # Creation order biases a session by 1-2 %: rotate it by worker index so every variant is
    # created first equally often (exact balance; a coin flip per worker leaves 2-3 % A/A alarms).
    load_order = sorted(v.id for v in variants)
    shift = worker_index % len(load_order) if load_order else 0
    load_order = load_order[shift:] + load_order[:shift]
    by_id = {v.id: v for v in variants}
    first_peak = None
    for variant_id in load_order:
        _status(variant_status("loading", variant_id))
        before = _rss_bytes()
        executables[variant_id] = load_warm(by_id[variant_id].artifact, runner, threads, feeds,
                                            request.warmup, request.min_time)
        rss_delta[variant_id] = max(0, _rss_bytes() - before)
        if first_peak is None:
            # Only this variant is loaded yet: the process is a memory probe of it.
            first_peak = peak_rss_bytes()
    compile_counts = prove_compiled(executables, feeds, runner.synchronize)  # every value runs the artifact's code
    loops = dict(request.loops or {})
    for variant_id, executable in executables.items():
        if variant_id not in loops:
            _status(variant_status("calibrating", variant_id))
            loops[variant_id] = _calibrate(executable, feeds, float(request.min_time), runner.synchronize)
    loops = common_loops(loops)
    values: dict[str, list[float]] = {v: [] for v in executables}
    _status("measuring")
    sync = runner.synchronize  # device runners wait for queued work before the clock is read
    sampler = runner.telemetry()  # device state sampled in a thread while the timed rounds run
    telemetry = None
    gc_was_enabled = gc.isenabled()
    gc.disable()
    if sampler is not None:
        sampler.start()
    timed = 0.0
    try:
        for done in range(request.rounds):
            if done >= max(1, request.min_rounds) and request.max_time > 0 and timed >= request.max_time:
                break  # every variant has the same rounds: a round is never cut short
            timed += _interleaved_round(executables, loops, feeds, sync, rng, values)
    finally:
        if sampler is not None:
            telemetry = sampler.stop()
        if gc_was_enabled:
            gc.enable()
    check_still_compiled(executables, compile_counts)
    peak = peak_rss_bytes()
    return MeasureResponse(values={k: tuple(v) for k, v in values.items()}, loops=loops, rss_delta_bytes=rss_delta,
                           peak_rss_bytes=peak, load_order=tuple(load_order), pid=os.getpid(), telemetry=telemetry,
                           first_peak_rss_bytes=first_peak)


def do_memory(request: MemoryRequest) -> MemoryResponse:
    """Peak memory of a fresh process that loads one artifact and runs it: the memory metric.

    A fresh process per probe makes the number reproducible (a session's share of a shared worker
    depends on what was loaded before it and on allocator reuse). A measurement worker takes the
    same sample of the variant it loads first (``load_warm``, then the peak), so a probe is only
    needed for variants no worker loaded first often enough."""
    runner = get_runner(request.runner, options=request.runner_options)
    feeds = make_feeds(list(request.input_specs), request.seed)
    before = _rss_bytes()
    load_warm(request.artifact, runner, request.threads, feeds, request.warmup, request.min_time)
    return MemoryResponse(peak_rss_bytes=peak_rss_bytes(),
                          session_rss_bytes=max(0, _rss_bytes() - before))


def do_verify(request: VerifyRequest) -> tuple[VerifyResponse | None, WorkerError | None]:
    """Run an artifact compiled elsewhere once on this runner; compare with the shipped reference."""
    runner = get_runner(request.runner, options=request.runner_options)
    tolerance = request.correctness
    feeds = make_feeds(list(request.input_specs), tolerance.seed)
    try:
        with np.load(request.reference) as data:
            reference = [data[f"out{i}"] for i in range(len(data.files))]
    except OSError as exc:
        return None, WorkerError("correctness", f"reference outputs missing: {exc}")
    artifact = request.artifact
    executable = get_backend(artifact.backend).load(artifact, runner, request.threads)
    compared = compare_outputs(reference, executable.run(feeds), tolerance.rtol, tolerance.atol)
    return VerifyResponse(_check(compared, tolerance)), None


def serve(request: CompileRequest | MeasureRequest | MemoryRequest | VerifyRequest | ProfileRequest
          ) -> tuple[WorkerResponse | None, WorkerError | None]:
    """Do what ``request`` asks: its response body and, when it failed, the error."""
    if isinstance(request, ProfileRequest):
        from perfguard.workers.profile import do_profile

        return do_profile(request), None
    if isinstance(request, CompileRequest):
        return do_compile(request)
    if isinstance(request, VerifyRequest):
        return do_verify(request)
    if isinstance(request, MemoryRequest):
        return do_memory(request), None
    if isinstance(request, MeasureRequest):
        return do_measure(request), None
    raise ProtocolError(f"no worker serves {type(request).__name__}")


def _wait_as_spare() -> list[str] | None:
    """``--spare``: import what a measure worker needs, then wait for ``REQUEST\tRESPONSE`` on
    stdin (``perfguard.workers.launch.Spare``); None when stdin closes first (not needed)."""
    preload_default_backend()
    line = sys.stdin.readline().strip()
    return line.split("\t") if line else None


def die_with_parent() -> None:
    """Make this worker end with the perfguard process that started it, even when that process is
    SIGKILLed (no handler of its own then stops its children): on Linux the kernel sends SIGKILL
    here when the parent dies (``PR_SET_PDEATHSIG``; to the kernel the parent is the thread that
    started this worker, and perfguard waits for each worker in the thread that started it). A
    parent that died before this ran is checked by pid (``perfguard.children.PARENT_PID_ENV``):
    then this worker exits at once. Elsewhere (macOS) nothing is set up: a signal the parent
    handles still kills the worker's group."""
    import ctypes
    import signal

    from perfguard.children import PARENT_PID_ENV

    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no libc prctl: the parent's handlers still kill the group
        return
    parent = os.environ.get(PARENT_PID_ENV, "")
    if not parent.isdigit() or os.getppid() == int(parent):
        return  # started by perfguard itself (which lives: it is still the parent), or by hand
    try:  # started through a wrapper (nsys, ncu), or perfguard is gone and this was reparented
        os.kill(int(parent), 0)
    except ProcessLookupError:
        os._exit(1)
    except OSError:  # alive, owned by someone else
        pass


def main(argv: list[str]) -> int:
    from perfguard import quiet_known_warnings

    quiet_known_warnings()
    if argv == ["--spare"]:
        paths = _wait_as_spare()
        if paths is None:
            return 0
        argv = paths
    request_path, response_path = argv
    return answer(request_path, response_path, lambda request: encode_response(*serve(request_from_json(request))))


def answer(request_path: str, response_path: str, handle: Callable[[dict[str, object]], object]) -> int:
    """Answer the request in ``request_path`` with ``handle``'s response, written atomically to
    ``response_path``; a failure is the response's ``error`` (one line), never an exit. Every
    worker entry point answers this way: this module's, and the counted process's
    (``python -m perfguard.counting``)."""
    request = json.loads(Path(request_path).read_text())
    os.environ["PERFGUARD_WORKER_MODE"] = str(request.get("mode"))
    try:
        response = handle(request)
    except PerfguardError as exc:
        response = {"error": {"stage": request["mode"], "message": str(exc)}}
    except Exception as exc:  # report the worker's own failure to the parent as one line
        tail = traceback.format_exc().strip().splitlines()[-1]
        response = {"error": {"stage": request["mode"], "message": f"{type(exc).__name__}: {exc}"[:500],
                              "detail": tail}}
    write_atomic(response_path, json.dumps(response))
    return 0


if __name__ == "__main__":
    die_with_parent()
    sys.exit(main(sys.argv[1:]))
