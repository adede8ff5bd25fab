"""A compared pair, explained: profiles of both sides -> per-op diff -> bottleneck dimension.

``explain_pair`` is what ``perfguard profile`` and ``perfguard check --explain`` share: it takes
two compiled cases whose artifacts are still on disk (inside an open ``Job``), profiles each in
fresh workers (``perfguard.profile.collect``), and returns an ``Explanation``.
``perfguard.profile.pairs`` compiles a pair first, as ``check`` would, but measures nothing (a
profile is not a timing), and explains it here.

Format history (``PROFILE_VERSION``, the document ``perfguard profile --json`` writes; the same
``Explanation`` objects, typed in ``perfguard.results.explanation``, sit in a verdicts and in a
bisect document under the optional key ``explanations``):

1. First format: version, kind "profile", explanations[] (case, baseline, candidate, dimension,
   diff or null, compile or null, failures, trace_file or null). An explanation of a ``cuda``
   pair adds the optional key ``gpu`` (``perfguard.results.explanation.GpuSection``: diff,
   nsight, skipped); one without it (the CPU, older documents) reads as before, so the
   version stays 1. A pair counted on both sides (``profile --counts``, a counted bisection's
   culprit) adds the optional key ``counted`` (``perfguard.results.counted_functions.CountedWhy``:
   total_delta, functions[], stripped[]), read the same way.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.jsonfields import JsonDict
from perfguard.profile.collect import SideProfiles, profile_sides
from perfguard.profile.diff import diff_profiles
from perfguard.profile.dimension import classify, classify_counts
from perfguard.results.explanation import CompileChange, Dimension, Explanation, GpuSection
from perfguard.runners import runner_class

if TYPE_CHECKING:
    from perfguard.compile.case import CompiledCase
    from perfguard.results import CaseEntry
    from perfguard.results.counted_functions import CountedWhy
    from perfguard.suite import Suite

PROFILE_VERSION = 1

# ``Explanation`` is a document type of ``perfguard.results.explanation``; the name stays
# importable from here for the callers of ``explain_pair``.
__all__ = ["PROFILE_VERSION", "Explanation", "ProfileSettings", "compile_change", "counted_attribution", "explain_pair",
           "profile_document", "unavailable"]


@dataclass(frozen=True)
class ProfileSettings:
    """How to profile: worker processes per side, profiled runs per worker, and where to write
    the Perfetto trace of the pair (None: no trace file)."""

    workers: int = 3
    runs: int = 20
    trace_dir: str | None = None


def unavailable(case: str, labels: tuple[str, str], reason: str) -> Explanation:
    """The explanation of a pair that could not be compiled or profiled (``bisect`` records it
    rather than fail a bisection that found its culprit): unclear, with the reason as evidence."""
    text = f"explanation unavailable: {reason}"
    return Explanation(case, labels[0], labels[1], Dimension("unclear", "unavailable", (text,), text), None)


def profile_document(explanations: list[Explanation]) -> JsonDict:
    """The ``perfguard profile --json`` document."""
    return {"version": PROFILE_VERSION, "kind": "profile", "explanations": [e.to_json() for e in explanations]}


def compile_change(baseline: CaseEntry, candidate: CaseEntry, ci_low: float | None = None) -> CompileChange | None:
    """The compile-time change of a pair from its entries (median compile times), if both have one."""
    before, after = baseline.metrics.compile_time_s, candidate.metrics.compile_time_s
    if before is None or after is None:
        return None
    return CompileChange(float(before), float(after), ci_low)


def counted_attribution(suite: Suite, case: str, baseline: CaseEntry, candidate: CaseEntry) -> CountedWhy | None:
    """Why, counted: the instruction change of a pair attributed to functions, when both sides
    were counted with their functions and the change is DIFFERENT past the suite's
    ``instructions`` floor (as ``check`` decides it: within the floor the functions' moves are
    the A/A spread, not a cause); else None."""
    from perfguard.results.counted_functions import attribute
    from perfguard.stats import compare_deterministic

    before, after = baseline.metrics.counts, candidate.metrics.counts
    if before is None or after is None or not before.functions or not after.functions:
        return None
    gate = suite.thresholds.gate(case, "instructions")
    if compare_deterministic(before.instructions, after.instructions,
                             gate.threshold(before.instructions)).decision != "different":
        return None
    why = attribute(before.functions, after.functions, after.instructions - before.instructions)
    return why if why.functions else None


def explain_pair(suite: Suite, case: str, baseline: CompiledCase, candidate: CompiledCase, labels: tuple[str, str],
                 settings: ProfileSettings, workdir: Path, change: CompileChange | None = None) -> Explanation:
    """Profile both sides of one compared pair and explain the change (a backend that cannot
    profile, ``Capabilities.profile``: from its artifacts' counts in its own words,
    ``classify_counts``)."""
    from perfguard.backends import get_backend

    backend = baseline.artifact.backend if baseline.artifact is not None else None
    if backend is not None and not get_backend(backend).capabilities.profile:
        counts = (baseline.entry.metrics.node_count, candidate.entry.metrics.node_count)
        wording = get_backend(backend).count_wording()
        return Explanation(case, labels[0], labels[1], classify_counts(*counts, change, wording), None, change,
                           (f"no runtime profiler for backend {backend!r}: explained from its compile statistics",))
    sides = profile_sides(suite, [(labels[0], baseline), (labels[1], candidate)], workers=settings.workers,
                          runs=settings.runs, workdir=workdir / "profile" / _folder_name(case),
                          keep_traces=settings.trace_dir is not None)
    before, after = sides
    failures = tuple(f"{s.label}: {reason}" for s in sides for reason in s.failures)
    diff = diff_profiles(before.runs, after.runs) if before.runs and after.runs else None
    from perfguard.compare.check import same_execution

    identical = same_execution(baseline.entry, candidate.entry)
    gpu = None
    if runner_class(baseline.case.runner).cuda_kernels:
        gpu = _gpu_section(suite, [(labels[0], baseline), (labels[1], candidate)], before, after, settings,
                           workdir / "nsight" / _folder_name(case))
    dimension = classify(diff, change, identical, gpu.diff if gpu is not None else None)
    explanation = Explanation(case, labels[0], labels[1], dimension, diff, change, failures, gpu=gpu)
    if settings.trace_dir is not None and before.trace_paths and after.trace_paths:
        explanation = replace(explanation, trace_file=str(_write_trace(settings.trace_dir, case, before, after)))
    return explanation


def _gpu_section(suite: Suite, sides: list[tuple[str, CompiledCase]], before: SideProfiles, after: SideProfiles,
                 settings: ProfileSettings, workdir: Path) -> GpuSection:
    """The GPU section of a ``cuda`` pair: ORT's kernels from the profiles, and nsys / ncu around
    one more worker per side where they are on PATH (``perfguard.profile.nsight``)."""
    from perfguard.profile.gpu_diff import build_section
    from perfguard.profile.nsight import nsight_sides

    top = [k.name for side in (before, after) for run in side.runs[:1] if run.gpu is not None for k in run.gpu.top[:3]]
    nsight = nsight_sides(suite, sides, settings.runs, workdir, list(dict.fromkeys(top)))
    if settings.trace_dir is not None:  # keep the tools' CSV outputs beside the trace (recorded fixtures)
        target = Path(settings.trace_dir) / workdir.name
        for index, role in enumerate(("baseline", "candidate")):
            for tool, name in (("nsys", "cuda_gpu_kern_sum.csv"), ("ncu", "metrics.csv")):
                found = workdir / f"side{index}" / tool / name
                if found.is_file():
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(found, target / f"{tool}-{role}.csv")
    return build_section([r.gpu for r in before.runs], [r.gpu for r in after.runs], nsight)


def _folder_name(case: str) -> str:
    """The folder of a case's profiles and trace: ``model_pipeline_runner`` where that is a safe
    file name, else made safe (``perfguard.names.safe_filename``; a case id of a document may hold
    anything)."""
    from perfguard.names import safe_filename

    return safe_filename(case.replace("/", "_"))


def _write_trace(folder: str, case: str, before: SideProfiles, after: SideProfiles) -> Path:
    from perfguard.profile.perfetto import write_trace
    from perfguard.workers.trace import read_trace

    target = Path(folder) / _folder_name(case)
    target.mkdir(parents=True, exist_ok=True)
    for role, side in (("baseline", before), ("candidate", after)):  # the raw ORT files, as ORT wrote them
        shutil.copyfile(side.trace_paths[0], target / f"ort-{role}.json")
    return write_trace(target, [(f"baseline: {before.label}", read_trace(before.trace_paths[0])),
                                (f"candidate: {after.label}", read_trace(after.trace_paths[0]))])
