"""How a variant is counted and what a count gives: the plan (warm-up and window, sized by the
model: :func:`count_plan`), the targets of a job (:class:`Target`), and the figures read from a
count's windows (:func:`per_inference`, :func:`compile_counts`). Taking the counts is
``perfguard.counting.take``; the records are ``perfguard.results.counts``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.counting.child import window_label
from perfguard.results.counts import CompileCounts, Counts

if TYPE_CHECKING:
    from perfguard.compile.case import CompiledCase

#: How much a count runs (``CountPlan``, per model: ``count_plan``). A small model: three
#: warm-up inferences uninstrumented (the heap reaches its steady state), a window of three.
#: A large one (at least :data:`LARGE_MODEL_MACS` multiply-accumulates an inference,
#: ``perfguard.models.cost``): one warm-up and a window of one, since each inference under
#: Valgrind costs about a minute there (ResNet-34 at 224x224: 77 s uninstrumented, 92 s counted,
#: docs/measured.md) and a fixed cost of a few hundred instructions is nothing against its
#: 10^9 an inference.
COUNT_INFERENCES = 3
COUNT_WARMUP = 3
LARGE_MODEL_MACS = 100_000_000
#: Where a count's per-inference figure is kept (the key of ``CountOutcome.counts``), and how it
#: is made since protocol 4 (``Counts.method``): ``least``, the least of N windows of one
#: inference (:func:`least_window`). Before, ``window``: the window of N / N
#: (``benchmarks/counts.py`` measured a third, the difference of two windows: it spread 20x more).
DEFAULT_METHOD = "window"
LEAST = "least"


@dataclass(frozen=True)
class CountPlan:
    """How one variant is counted: ``warmup`` inferences uninstrumented, ``instrumented_warmup``
    instrumented (1 with the cache simulation: the simulated caches then hold the model; 0
    without, where nothing is warmed by it), then a window of ``inferences``."""

    warmup: int
    inferences: int
    instrumented_warmup: int
    cache: bool


def count_plan(model_path: str | Path, cache: bool) -> CountPlan:
    """The plan of every variant of the model at ``model_path`` (its source: one plan for all its
    pipelines, so that both sides of a comparison are counted alike)."""
    from perfguard.models.cost import model_macs

    large = model_macs(model_path) >= LARGE_MODEL_MACS
    return CountPlan(1 if large else COUNT_WARMUP, 1 if large else COUNT_INFERENCES, 1 if cache else 0, cache)


def target_plan(target: Target, cache: bool) -> CountPlan:
    """:func:`count_plan` of ``target``'s model."""
    return count_plan(target.compiled.model.path, cache)


@dataclass(frozen=True)
class CountOutcome:
    """What counting one variant gave: per-inference counts by method, or the failure in one line."""

    counts: Mapping[str, Counts]
    failure: str | None = None


def least_window(windows: Mapping[str, Mapping[str, int]], variant: str, inferences: int) -> str | None:
    """The label of the window of one inference with the fewest instructions among the
    ``inferences`` windows of ``variant`` (None when one is missing). Every inference of a
    warmed-up artifact runs the same code; an inference that ran more did something else too
    (a runtime's periodic bookkeeping: ONNX Runtime ran ~2,000 more instructions, in code that
    calls ``isalnum``, in one inference of some processes), which the least leaves out."""
    labels = [window_label(variant, inferences, k) for k in range(inferences)]
    if not labels or any(label not in windows for label in labels):
        return None
    return min(labels, key=lambda label: windows[label]["Ir"])


def per_inference(windows: Mapping[str, Mapping[str, int]], variant: str, inferences: int,
                  tool: str, cache: bool = True) -> dict[str, Counts]:
    """Per-inference counts of ``variant`` from its windows, by method (``least``: the least of
    ``inferences`` windows of one inference); empty when a window is missing."""
    label = least_window(windows, variant, inferences)
    if label is None:
        return {}
    return {DEFAULT_METHOD: Counts.from_events(windows[label], 1, LEAST, tool, cache=cache, windows=inferences)}


def compile_counts(windows: Mapping[str, Mapping[str, int]]) -> CompileCounts:
    """The compile's figures from its windows (labels: ``backends.counting_hooks.COUNT_WINDOW``): a pass's own
    figure is its replay window inside an onnxoptimizer group, else its work window."""
    work: dict[int, int] = {}
    replay: dict[int, int] = {}
    steps: dict[str, int] = {}
    for label, events in windows.items():
        kind, _, name = label.partition("|")
        if kind == "work":
            work[int(name)] = events["Ir"]
        elif kind == "replay":
            replay[int(name)] = events["Ir"]
        elif kind == "step":
            steps[name] = events["Ir"]
    return CompileCounts(sum(work.values()) + sum(steps.values()), {**work, **replay}, steps)


@dataclass(frozen=True)
class Target:
    """One variant to count: its inferences, and its compile too when ``compile`` (with the
    compiler under test at ``compiler_path``)."""

    compiled: CompiledCase
    compile: bool = True
    compiler_path: Path | None = None


@dataclass(frozen=True)
class Counted:
    """What counting one target gave: its run's outcome, and its compile's figures or the reason
    it has none (None and None: its compile was not asked for)."""

    run: CountOutcome
    compile: CompileCounts | None = None
    compile_failure: str | None = None
