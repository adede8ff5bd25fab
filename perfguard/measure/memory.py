"""Memory probes: the peak RSS of fresh processes that load only one artifact.

Each measurement worker is a memory probe of the variant it loads first (its samples arrive with
the measurement); a variant that too few workers loaded first gets probes of its own here, each a
worker process that loads it and reports its peak (``VmHWM``).
"""

from __future__ import annotations

from collections.abc import Sequence

from perfguard.compile.case import CompiledCase, RunContext
from perfguard.results import CaseEntry
from perfguard.workers.launch import run_worker
from perfguard.workers.requests import memory_request


def probe_memory(ctx: RunContext, compiled: CompiledCase) -> None:
    """Peak RSS of fresh processes that load only this artifact: as many probes as the entry's
    memory samples (from measurement workers that loaded it first) fall short of
    ``memory_probes``."""
    measure = compiled.case.measure
    if compiled.artifact is None:
        return
    peaks = list(compiled.entry.metrics.peak_rss_bytes_probes or ())
    for probe in range(len(peaks), measure.memory_probes):
        request = memory_request(ctx.suite, compiled.case, compiled.artifact, compiled.model.inputs, probe)
        outcome = run_worker(request, measure.timeout, ctx.workdir / "ipc")
        if outcome.response is not None:
            peaks.append(outcome.response.peak_rss_bytes)
    if peaks:
        compiled.entry = with_memory(compiled.entry, peaks)


def with_memory(entry: CaseEntry, samples: Sequence[int]) -> CaseEntry:
    """``entry`` with its memory samples (peaks of fresh processes that had loaded only this
    artifact: probes and first loads of measurement workers) and their median."""
    return entry.with_metrics(peak_rss_bytes_probes=tuple(samples),
                              peak_rss_bytes=int(sorted(samples)[len(samples) // 2]))
