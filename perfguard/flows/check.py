"""The three baselines of ``perfguard check`` (and ``compare``) built on one Job.

* ``check_against_ref``: the compiler under test at a git ref vs the working tree, both compiled
  and measured interleaved in the same worker processes (paired).
* ``check_against_pipeline``: every pipeline vs a reference pipeline of the same model (paired:
  pipelines of a model are always measured together).
* ``check_against_baseline``: the working tree vs a stored baseline file (unpaired, conservative).

The comparison of two result documents (a stored baseline here, two files for ``compare``) is
:mod:`perfguard.compare.documents`, which also holds the environment rule of unpaired comparisons.
The A/A of ``perfguard calibrate`` is :mod:`perfguard.flows.calibrate`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.compare.check import (
    Pair,
    adaptive_check,
    same_execution,
    unmeasured_variants,
)
from perfguard.compare.documents import environment_warnings, unpaired_pairs
from perfguard.compare.verdicts import CheckMode, ComparedResults, Verdict, VerdictsDocument, VerdictsSettings
from perfguard.compile.case import CompiledCase, Side
from perfguard.compile.checkout import checkout_at, pipelines_at, run_build, working_tree
from perfguard.errors import UserError
from perfguard.measure.job import Job
from perfguard.progress import Progress
from perfguard.results import ResultDocument, load_result
from perfguard.results.result import WORKING_TREE
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings
from perfguard.workers.protocol import variant_id

if TYPE_CHECKING:
    from perfguard.profile.explain import ProfileSettings
    from perfguard.results.explanation import Explanation
    from perfguard.suite.model import CountMode


def compile_while_importing(job: Job) -> None:
    """``job.compile(memory=False)`` while a thread imports ``scipy.special``, which only the
    verdicts need (0.34 s on the 2-core machine: ``perfguard.stats.estimators._special``). The import is
    over before the measurement starts, which runs alone on the machine. It starts once the
    models are built: beside the Python work of building a zoo model it fought for the GIL and
    built the model 1.7 s slower (3.0 s against 1.3 s, an 87 MB ResNet-34), where the compiles
    leave this process idle."""
    job.prepare()

    def warm() -> None:
        with contextlib.suppress(Exception):  # a broken SciPy fails where it is used, with its error
            importlib.import_module("scipy.special")

    thread = threading.Thread(target=warm, name="perfguard-warm-imports", daemon=True)
    thread.start()
    try:
        job.compile(memory=False)
    finally:
        thread.join()


#: Builds a check's pairs from the current entries of the job's variants (by variant id).
MakePairs = Callable[[dict[str, CompiledCase]], list[Pair]]


def _paired(case: str, baseline: CompiledCase, candidate: CompiledCase, base_label: str, cand_label: str,
            settings: CheckSettings) -> Pair:
    identical = not settings.measure_identical and same_execution(baseline.entry, candidate.entry)
    return Pair(case, baseline.entry, candidate.entry, True, base_label, cand_label,
                frozenset({baseline.variant_id, candidate.variant_id}), identical)


def side_results(documents: dict[str, ResultDocument]) -> ComparedResults:
    """A job's result documents by side (``head``, and ``base`` in a check against a ref) as the
    candidate and the baseline; one document holds both sides of a check of pipelines."""
    return ComparedResults(documents["head"], documents.get("base"))


def measure_paired(job: Job, pairs: list[Pair], by_variant: dict[str, CompiledCase], workers: int) -> None:
    """The first look's measurement of a same-job comparison: every variant but those whose
    every pair has two identical artifacts (marked ``not_measured``, no memory probes, no
    timing). The workers sample each variant's memory as they load it first; memory probes
    only for variants that too few workers loaded first. ``job`` was compiled with
    ``memory=False``."""
    skip = unmeasured_variants(pairs)
    for variant, reason in skip.items():
        compiled = by_variant[variant]
        compiled.entry = dataclasses.replace(compiled.entry, not_measured=reason)
    job.measure(workers=workers, skip=skip)
    job.probe_memory(skip=skip)


def _paired_check(suite: Suite, cases: list[CaseSpec], job: Job, settings: CheckSettings,
                  make_pairs: MakePairs, mode: CheckMode, explain: ProfileSettings | None = None
                  ) -> VerdictsDocument:
    try:
        compile_while_importing(job)
        by_variant = {c.variant_id: c for c in job.compiled}
        measure_paired(job, make_pairs(by_variant), by_variant, settings.workers)
        rows, info = adaptive_check(lambda: make_pairs(by_variant), lambda ids, n: job.measure(only=ids, workers=n),
                                    suite.thresholds, settings, adaptive=True)
        documents = job.documents()
        explanations = _explain_regressions(suite, job, make_pairs(by_variant), by_variant, rows, explain)
    finally:
        job.close()
    document = VerdictsDocument.of(mode, rows, VerdictsSettings.of(info, settings.alpha),
                                   side_results(documents), [])
    return dataclasses.replace(document, explanations=tuple(explanations))


def _explain_regressions(suite: Suite, job: Job, pairs: list[Pair], by_variant: dict[str, CompiledCase],
                         rows: list[Verdict], explain: ProfileSettings | None) -> list[Explanation]:
    """``check --explain``: profile both sides of every case whose latency regressed (after the
    verdicts, in fresh workers, never a timed run) while the job's artifacts are still there."""
    if explain is None:
        return []
    from perfguard.profile.explain import compile_change, explain_pair

    regressed = {r.case for r in rows if r.metric == "latency" and r.is_regression}
    out = []
    for pair in pairs:
        if pair.case not in regressed:
            continue
        compiled = [by_variant[v] for v in pair.variants]
        base = next(c for c in compiled if c.entry is pair.baseline)
        cand = next(c for c in compiled if c.entry is pair.candidate)
        job.ctx.progress.log(f"explaining {pair.case}: profiling both sides ({explain.workers} workers)")
        out.append(explain_pair(suite, pair.case, base, cand, (pair.baseline_label, pair.candidate_label), explain,
                                job.ctx.workdir, compile_change(pair.baseline, pair.candidate)))
    return out


def check_against_ref(suite: Suite, cases: list[CaseSpec], ref: str, settings: CheckSettings,
                      progress: Progress, explain: ProfileSettings | None = None, *,
                      head_built: bool = False, head_subject: str = WORKING_TREE) -> VerdictsDocument:
    """``head_built``: the caller already ran the build command in the working tree (the night
    builds it once to tell a broken compiler from a good one), so it is not run again.
    ``head_subject``: what the head side is called in the document; the night, which measures its
    commit, gives that commit's subject (the history site labels the night's points with it)."""
    head = working_tree(suite)
    with checkout_at(suite, ref, "base") as base:
        progress.log(f"base: {ref} = {base.commit[:10] if base.commit else '?'} {base.subject}")
        run_build(base, suite.compiler.build)
        if not head_built:
            run_build(head, suite.compiler.build)
        changed = pipelines_at(suite, base, progress)
        sides = [Side("base", base.pass_path, base.commit, base.subject, pipelines=changed),
                 Side("head", suite.compiler.path, head.commit, head_subject)]
        job = Job(suite, cases, sides=sides, progress=progress)

        def make_pairs(by_variant: dict[str, CompiledCase]) -> list[Pair]:
            return [_paired(c.id, by_variant[variant_id("base", c.id)], by_variant[variant_id("head", c.id)],
                            f"base {ref}", "head", settings) for c in cases]

        # base_pipelines: compiled as the suite at REF defined them
        mode = CheckMode("base-ref", f"{ref} ({(base.commit or '')[:10]})", "head", ref=ref, base_commit=base.commit,
                         base_subject=base.subject, head_commit=head.commit, base_pipelines=tuple(sorted(changed)))
        return _paired_check(suite, cases, job, settings, make_pairs, mode, explain)


def check_against_pipeline(suite: Suite, cases: list[CaseSpec], reference: str, settings: CheckSettings,
                           progress: Progress, explain: ProfileSettings | None = None) -> VerdictsDocument:
    if reference not in suite.pipelines:
        raise UserError(f"--against-pipeline: unknown pipeline {reference!r}; defined: {', '.join(suite.pipelines)}")
    by_id = {c.id: c for c in suite.cases}
    needed: dict[str, CaseSpec] = {}
    targets = [c for c in cases if c.pipeline.name != reference]
    if not targets:
        raise UserError(f"--against-pipeline {reference}: no selected case uses another pipeline")
    for case in targets:
        ref_id = str(case.case_id.with_pipeline(reference))
        if ref_id not in by_id:
            raise UserError(f"--against-pipeline {reference}: the suite has no case {ref_id} to compare {case.id} with")
        needed[ref_id] = by_id[ref_id]
        needed[case.id] = case
    job = Job(suite, list(needed.values()), progress=progress)

    def make_pairs(by_variant: dict[str, CompiledCase]) -> list[Pair]:
        return [_paired(c.id, by_variant[variant_id("head", str(c.case_id.with_pipeline(reference)))],
                        by_variant[variant_id("head", c.id)], reference, c.pipeline.name, settings) for c in targets]

    mode = CheckMode("pipeline", f"pipeline {reference}", "other pipelines")
    return _paired_check(suite, list(needed.values()), job, settings, make_pairs, mode, explain)


def check_artifacts_against_pipeline(folder: Path, reference: str, settings: CheckSettings | None,
                                     progress: Progress, pattern: str | None = None,
                                     counts: CountMode | None = None) -> VerdictsDocument:
    """``check --artifacts DIR --against-pipeline NAME``: the pipelines of an artifact folder
    (``perfguard compile``) against pipeline ``reference``, verified and measured here,
    interleaved in the same workers (paired), as ``check_against_pipeline`` measures a suite it
    compiles. ``settings``: the folder suite's ``[check]`` when None; ``counts``: counted as it asks,
    on top of the folder suite's ``[measure] counts``."""
    from perfguard.flows.compile_here import artifact_job, with_artifact_origin

    job, manifest = artifact_job(folder, progress, pattern=pattern, counts=counts)
    suite = job.ctx.suite
    settings = settings or suite.check
    if reference not in suite.pipelines:
        job.close()
        raise UserError(f"--against-pipeline: unknown pipeline {reference!r}; the folder's suite defines: "
                        f"{', '.join(suite.pipelines)}")
    try:
        by_variant = {c.variant_id: c for c in job.compiled if c.artifact is not None}
        ok = {c.case.id: c for c in by_variant.values()}
        targets = [c.case for c in by_variant.values() if c.case.pipeline.name != reference
                   and str(c.case.case_id.with_pipeline(reference)) in ok]
        if not targets:
            raise UserError(f"--against-pipeline {reference}: {folder} holds no verified pair of pipeline {reference!r} "
                            "and another pipeline of the same model and runner")

        def make_pairs(variants: dict[str, CompiledCase]) -> list[Pair]:
            return [_paired(c.id, ok[str(c.case_id.with_pipeline(reference))], ok[c.id], reference,
                            c.pipeline.name, settings) for c in targets]

        measure_paired(job, make_pairs(by_variant), by_variant, settings.workers)
        rows, info = adaptive_check(lambda: make_pairs(by_variant), lambda ids, n: job.measure(only=ids, workers=n),
                                    suite.thresholds, settings, adaptive=True)
        documents = {side: with_artifact_origin(d, folder, manifest) for side, d in job.documents().items()}
    finally:
        job.close()
    return VerdictsDocument.of(CheckMode("pipeline", f"pipeline {reference}", "other pipelines", artifacts=str(folder)),
                               rows, VerdictsSettings.of(info, settings.alpha), side_results(documents), [])


STORE_BASELINE = "store:"


def _stored_results(suite: Suite, cases: list[CaseSpec], spec: str) -> list[ResultDocument]:
    """The suite's result documents in the history store named after ``store:`` (empty: the
    default store), newest first; the ones measured on this machine's comparable fingerprint
    (every runner of ``cases``) first. ``UserError`` when the store holds none."""
    from perfguard.results.result import parse_result
    from perfguard.runners import get_runner
    from perfguard.runners.fingerprint import fingerprint_hash
    from perfguard.store import Store, display_url, store_url

    with Store.open(store_url(spec or None), create=False) as store:
        stored = store.latest_results(suite.name)
        if not stored:
            raise UserError(f"--baseline {STORE_BASELINE}{display_url(spec)}: the history store {store.url} holds no result of "
                            f"suite {suite.name!r} (`perfguard nightly` or `perfguard history ingest` stores them)")
        documents = [parse_result(data, f"{store.url} document {doc_id}") for doc_id, data in stored]
    where = suite.compiler.repo or suite.path
    mine = {name: fingerprint_hash(get_runner(name, where, suite.runner_options(name)).fingerprint())
            for name in sorted({c.runner for c in cases})}

    def same_machine(document: ResultDocument) -> bool:
        return all(name in document.environment and fingerprint_hash(document.environment[name]) == h
                   for name, h in mine.items())

    return sorted(documents, key=same_machine, reverse=True)  # stable: newest first within each group


def check_against_baseline(suite: Suite, cases: list[CaseSpec], path: str, settings: CheckSettings,
                           progress: Progress, strict_env: bool) -> VerdictsDocument:
    """The working tree against a stored baseline: a result file, or ``store:[URL]``, the newest
    result of the suite in the history store with this machine's comparable fingerprint (else
    the newest of another machine, with the environment warning ``--baseline FILE`` gives)."""
    if path.startswith(STORE_BASELINE):
        baseline = _stored_results(suite, cases, path[len(STORE_BASELINE):])[0]
        label = f"{path} ({baseline.finished_at})"
    else:
        baseline, label = load_result(path), path
    job = Job(suite, cases, progress=progress)
    try:
        compile_while_importing(job)
        job.measure(workers=settings.workers)
        job.probe_memory()
        candidate = job.documents()["head"]
    finally:
        job.close()
    warnings = environment_warnings(baseline, candidate, strict_env)
    pairs, more = unpaired_pairs(baseline, candidate, f"baseline {label}", "head")
    rows, info = adaptive_check(lambda: pairs, lambda ids, n: None, suite.thresholds, settings, adaptive=False)
    mode = CheckMode("baseline", f"stored baseline {label}", "head", baseline_created=baseline.finished_at)
    return VerdictsDocument.of(mode, rows, VerdictsSettings.of(info, settings.alpha),
                               ComparedResults(candidate, baseline), warnings + more)

