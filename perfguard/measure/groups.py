"""The measurement protocol driven from the parent: groups of fresh workers, their values.

For a group of variants (the pipelines of one model on one runner) perfguard starts ``workers`` fresh processes one after another (each started ahead
of its turn as a :class:`~perfguard.workers.launch.Spare` that has only imported, while the previous one works). Each loads every
variant in a rotated order (its peak memory after the first load is that variant's memory
sample), discards ``warmup`` runs of each (fewer once they lasted ``warmup * min_time``), then
times ``rounds`` rounds, or stops after ``min_rounds`` once they lasted ``max_time``; a round is
``loops`` steps, in each of which every variant runs once, in a fresh random order, each run timed
on its own (``perfguard.workers.worker``). ``loops`` is calibrated by the first worker so that one
value lasts at least ``min_time`` (one count for every variant), and reused by the others.

A worker that crashes or outlives ``timeout`` is recorded and the run goes on. When its last status
line names a variant (it was loading or running it), that variant is dropped from later workers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perfguard.jsonfields import JsonDict, json_object
from perfguard.workers.launch import Spare, run_worker
from perfguard.workers.protocol import MeasureRequest, MeasureVariant, status_variant


@dataclass
class VariantValues:
    """All values of one variant: ``per_worker[i]`` came from worker ``worker_ids[i]``."""

    per_worker: list[list[float]] = field(default_factory=list)
    worker_ids: list[int] = field(default_factory=list)
    loops: int | None = None
    rss_delta_bytes: list[int] = field(default_factory=list)
    peak_rss_bytes: list[int] = field(default_factory=list)
    # The peak of each worker that loaded this variant first, before any other: a memory sample.
    memory_samples: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    dropped: str | None = None
    # Device telemetry record of each worker in ``worker_ids`` (None: the runner has none); the
    # variants of one worker share it, since they ran interleaved on the same device.
    telemetry: list[JsonDict | None] = field(default_factory=list)


def measure_group(request: MeasureRequest, *, timeout: float, workers: int, workdir: Path) -> dict[str, VariantValues]:
    """Measure the variants of ``request`` interleaved across ``workers`` fresh workers, numbered
    on from ``request.worker_index`` (adaptive sampling adds workers to an earlier call's)."""
    results = {v.id: VariantValues() for v in request.variants}
    live = list(request.variants)
    loops: dict[str, int] = {}
    # The next worker starts (as a spare: imports only) while this one loads its models.
    current: Spare | None = None
    spare: Spare | None = Spare(workdir, request.threads, request.backends) if workers > 0 else None
    try:
        for index in range(workers):
            if not live:
                break
            current, spare = spare, (Spare(workdir, request.threads, request.backends) if index + 1 < workers else None)
            _measure_one(request, index, current, live, loops, results, timeout, workdir)
            live = [v for v in live if results[v.id].dropped is None]
    finally:
        for left in (current, spare):
            if left is not None:
                left.close()
    return results


def _measure_one(request: MeasureRequest, index: int, spare: Spare | None, live: list[MeasureVariant],
                 loops: dict[str, int], results: dict[str, VariantValues], timeout: float, workdir: Path) -> None:
    """One worker of ``measure_group`` (in ``spare``), its values added to ``results``."""
    worker_index = request.worker_index + index
    outcome = run_worker(request.for_worker(worker_index, live, loops), timeout, workdir, spare)
    if outcome.failure or outcome.error or outcome.response is None:
        reason = outcome.failure or (outcome.error.message if outcome.error else "no response")
        if outcome.stderr_tail and outcome.failure:
            reason += f": {outcome.stderr_tail.splitlines()[-1][:200]}"
        culprit = status_variant(outcome.last_status, [v.id for v in live])
        if culprit is not None:
            results[culprit].failures.append(f"worker {worker_index}: {reason}")
            results[culprit].dropped = f"dropped after worker {worker_index}: {reason}"
        else:
            for variant in live:
                results[variant.id].failures.append(f"worker {worker_index}: {reason}")
        return
    response = outcome.response
    for variant_id, values in response.values.items():
        entry = results[variant_id]
        entry.per_worker.append(list(values))
        entry.worker_ids.append(worker_index)
        entry.loops = response.loops[variant_id]
        entry.rss_delta_bytes.append(response.rss_delta_bytes[variant_id])
        entry.peak_rss_bytes.append(response.peak_rss_bytes)
        entry.telemetry.append(json_object(response.telemetry, "telemetry") if response.telemetry is not None else None)
        loops.setdefault(variant_id, response.loops[variant_id])
    if response.first_peak_rss_bytes is not None and response.load_order:
        results[response.load_order[0]].memory_samples.append(response.first_peak_rss_bytes)
