"""Where worker requests are built: from the suite's settings for a case, its model's inputs and
an artifact, into the typed requests of ``perfguard.workers.protocol``.

Every request of a run comes from one of these functions (the hybrid compile's two stages and
each measurement worker's request are derived from them: ``CompileRequest.hybrid_stages``,
``MeasureRequest.for_worker``), so what a worker is told about a case is decided in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.jsonfields import JsonDict
from perfguard.workers.protocol import (
    CheckTolerance,
    CompilePipeline,
    CompileRequest,
    MeasureRequest,
    MeasureVariant,
    MemoryRequest,
    ProfileRequest,
    VerifyRequest,
)

if TYPE_CHECKING:
    from perfguard.backends.base import Artifact
    from perfguard.models.inputs import InputSpec
    from perfguard.suite import CaseSpec, Suite


def runner_options(suite: Suite, runner: str) -> JsonDict:
    return suite.runner_options(runner).to_json()


def _tolerance(case: CaseSpec) -> CheckTolerance:
    return CheckTolerance(rtol=case.tolerance.rtol, atol=case.tolerance.atol, seed=case.tolerance.seed)


def compile_request(suite: Suite, case: CaseSpec, model_path: Path, inputs: Sequence[InputSpec], *,
                    compiler_path: Path | None, out_dir: Path, reference_cache: Path) -> CompileRequest:
    """Compile ``case``'s pipeline on the model file with the compiler at ``compiler_path``."""
    pipeline = case.pipeline
    return CompileRequest(
        backend=pipeline.backend, model_path=str(model_path),
        pipeline=CompilePipeline(pipeline.name, pipeline.backend, tuple(pipeline.passes), dict(pipeline.options)),
        out_dir=str(out_dir), compiler_path=str(compiler_path) if compiler_path else None, runner=case.runner,
        runner_options=runner_options(suite, case.runner), threads=case.measure.threads,
        compile_repeats=case.measure.compile_repeats, correctness=_tolerance(case), input_specs=tuple(inputs),
        reference_cache=str(reference_cache))


def memory_request(suite: Suite, case: CaseSpec, artifact: Artifact, inputs: Sequence[InputSpec],
                   probe: int) -> MemoryRequest:
    """Memory probe number ``probe`` of ``artifact`` (its inputs are seeded ``seed + probe``)."""
    measure = case.measure
    return MemoryRequest(artifact=artifact, runner=case.runner, runner_options=runner_options(suite, case.runner),
                         threads=measure.threads, warmup=measure.warmup, min_time=measure.min_time,
                         seed=measure.seed + probe,
                         input_specs=tuple(inputs))


def verify_request(suite: Suite, case: CaseSpec, artifact: Artifact, inputs: Sequence[InputSpec],
                   reference: Path) -> VerifyRequest:
    """Run ``artifact`` once on ``case``'s runner and compare with the outputs in ``reference``."""
    return VerifyRequest(artifact=artifact, runner=case.runner, runner_options=runner_options(suite, case.runner),
                         threads=case.measure.threads, input_specs=tuple(inputs), correctness=_tolerance(case),
                         reference=str(reference))


def measure_request(suite: Suite, case: CaseSpec, variants: Sequence[MeasureVariant], inputs: Sequence[InputSpec],
                    worker_offset: int = 0) -> MeasureRequest:
    """Measure ``variants`` (one group: same model, runner and settings as ``case``) in workers
    numbered from ``worker_offset``; each worker's request comes from ``for_worker``."""
    measure = case.measure
    return MeasureRequest(variants=tuple(variants), runner=case.runner,
                          runner_options=runner_options(suite, case.runner), threads=measure.threads,
                          warmup=measure.warmup, rounds=measure.rounds, min_time=measure.min_time, seed=measure.seed,
                          worker_index=worker_offset, input_specs=tuple(inputs), loops=None,
                          min_rounds=measure.min_rounds, max_time=measure.max_time)


def profile_request(suite: Suite, case: CaseSpec, variants: Sequence[MeasureVariant], inputs: Sequence[InputSpec],
                    worker: int, runs: int, trace_dir: Path | None) -> ProfileRequest:
    """Profile ``variants`` (the sides of one comparison) in profile worker number ``worker``
    (inputs seeded ``seed + worker``): the case's warm-up (at least one run), then ``runs``
    interleaved profiled rounds."""
    measure = case.measure
    return ProfileRequest(variants=tuple(variants), runner=case.runner, runner_options=runner_options(suite, case.runner),
                          threads=measure.threads, warmup=max(1, measure.warmup), runs=runs, seed=measure.seed + worker,
                          worker_index=worker, input_specs=tuple(inputs),
                          trace_dir=str(trace_dir) if trace_dir else None)
