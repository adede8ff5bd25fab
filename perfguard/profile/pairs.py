"""``perfguard profile``: compile one compared pair as ``check`` would (against another pipeline
or the compiler at a git ref), measure nothing (a profile is not a timing), and explain it
(``perfguard.profile.explain.explain_pair``); ``explain_versions`` does the same for two variants
of one case (a bisection's culprit). Apart from ``explain`` so that ``flows.check``
(``check --explain``) can use the explanation without an import cycle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfguard.profile.explain import ProfileSettings, compile_change, counted_attribution, explain_pair
from perfguard.results.explanation import Explanation

if TYPE_CHECKING:
    from perfguard.compile.case import CompiledCase, Side, Variant
    from perfguard.measure.job import Job
    from perfguard.progress import Progress
    from perfguard.suite import CaseSpec, Suite


def _one_case(suite: Suite, pattern: str | None) -> CaseSpec:
    from perfguard.errors import UserError

    cases = suite.select(pattern)
    if len(cases) != 1:
        raise UserError(f"--case {pattern!r} must name one case, it matches {len(cases)}: "
                        f"{', '.join(c.id for c in cases)}")
    return cases[0]


def _explain_job(suite: Suite, cases: list[CaseSpec], sides: list[Side] | None, pair: tuple[str, str],
                 labels: tuple[str, str], settings: ProfileSettings, progress: Progress) -> Explanation:
    from perfguard.measure.job import Job

    job = Job(suite, cases, sides=sides, progress=progress)
    try:
        job.compile(memory=False)
        by_variant = {c.variant_id: c for c in job.compiled}
        baseline, candidate = by_variant[pair[0]], by_variant[pair[1]]
        return _explain_compiled(suite, job, candidate.case.id, baseline, candidate, labels, settings, progress)
    finally:
        job.close()


def _explain_compiled(suite: Suite, job: Job, case: str, baseline: CompiledCase, candidate: CompiledCase,
                      labels: tuple[str, str], settings: ProfileSettings, progress: Progress) -> Explanation:
    """Profile a pair compiled in ``job`` (still open: its artifacts are on disk); a side that did
    not compile is a ``UserError`` naming it. A counted job (``--counts``, ``[measure] counts``)
    also counts both sides' inferences once and attributes their instruction change to functions
    (``counted_attribution``)."""
    from dataclasses import replace

    from perfguard.errors import UserError

    for compiled, label in ((baseline, labels[0]), (candidate, labels[1])):
        if compiled.entry.error is not None:
            raise UserError(f"{label}: {compiled.case.id} did not compile: {compiled.entry.error.message}")
    progress.log(f"profiling {case}: {settings.workers} workers per side")
    explanation = explain_pair(suite, case, baseline, candidate, labels, settings, job.ctx.workdir,
                               compile_change(baseline.entry, candidate.entry))
    if job.counts is None:
        return explanation
    job.count([baseline, candidate], compile=False)
    counted = counted_attribution(suite, case, baseline.entry, candidate.entry)
    if counted is None:
        progress.log(f"why, counted: {case}: no attribution (a side not counted, or its instructions within the floor)")
    return replace(explanation, counted=counted)


def explain_versions(suite: Suite, case: CaseSpec, before: Variant, after: Variant, settings: ProfileSettings,
                     progress: Progress) -> Explanation:
    """Compile ``case`` as two variants (two compiler versions, or two pass lists) in one job,
    measure nothing, and explain ``after`` against ``before``: what ``bisect`` asks of a culprit
    it found (its parent against it; the good pipeline against the smallest reproducing edit)."""
    from perfguard.measure.job import compile_variants

    job, compiled = compile_variants(suite, case, [before, after], progress)
    try:
        return _explain_compiled(suite, job, case.id, compiled[before.label], compiled[after.label],
                                 (before.label, after.label), settings, progress)
    finally:
        job.close()


def profile_against_pipeline(suite: Suite, pattern: str | None, reference: str, settings: ProfileSettings,
                             progress: Progress) -> Explanation:
    """Case ``pattern`` against the same model and runner under pipeline ``reference``."""
    from perfguard.errors import UserError
    from perfguard.workers.protocol import variant_id

    if reference not in suite.pipelines:
        raise UserError(f"--against-pipeline: unknown pipeline {reference!r}; defined: {', '.join(suite.pipelines)}")
    case = _one_case(suite, pattern)
    ref_id = str(case.case_id.with_pipeline(reference))
    if case.pipeline.name == reference:
        raise UserError(f"--against-pipeline {reference}: case {case.id} already uses that pipeline")
    reference_case = next((c for c in suite.cases if c.id == ref_id), None)
    if reference_case is None:
        raise UserError(f"--against-pipeline {reference}: the suite has no case {ref_id} to compare {case.id} with")
    return _explain_job(suite, [reference_case, case], None, (variant_id("head", ref_id), variant_id("head", case.id)),
                        (reference, case.pipeline.name), settings, progress)


def profile_against_ref(suite: Suite, pattern: str | None, ref: str, settings: ProfileSettings,
                        progress: Progress) -> Explanation:
    """Case ``pattern`` compiled by the compiler under test at ``ref`` and in the working tree."""
    from perfguard.compile.case import Side
    from perfguard.compile.checkout import checkout_at, pipelines_at, run_build, working_tree
    from perfguard.workers.protocol import variant_id

    case = _one_case(suite, pattern)
    head = working_tree(suite)
    with checkout_at(suite, ref, "base") as base:
        run_build(base, suite.compiler.build)
        run_build(head, suite.compiler.build)
        sides = [Side("base", base.pass_path, base.commit, base.subject, pipelines=pipelines_at(suite, base, progress)),
                 Side("head", suite.compiler.path, head.commit, "working tree")]
        return _explain_job(suite, [case], sides, (variant_id("base", case.id), variant_id("head", case.id)),
                            (f"base {ref}", "head"), settings, progress)
