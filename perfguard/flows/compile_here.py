"""Compile here, measure there: the workflow over an artifact folder (its manifest document is
:mod:`perfguard.results.artifacts`).

``compile_to_dir`` compiles every case on the build machine and writes the folder;
``run_from_dir`` verifies each artifact on the runner machine against the build machine's reference
outputs, then measures them with the usual protocol and returns a normal result document.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from perfguard.compile.case import CompiledCase
from perfguard.errors import UserError
from perfguard.jsonfields import JsonDict
from perfguard.measure.job import Job
from perfguard.models.loader import LoadedModel
from perfguard.progress import Progress
from perfguard.results import ResultDocument, SuiteInfo, utc_now, write_json_atomic
from perfguard.results.artifacts import Manifest, ManifestCase, load_manifest
from perfguard.results.result import ArtifactsOrigin
from perfguard.suite import CaseSpec, Suite, load_suite
from perfguard.suite.model import CountMode
from perfguard.workers.launch import run_worker
from perfguard.workers.requests import verify_request


def compile_to_dir(suite: Suite, cases: list[CaseSpec], out: Path, progress: Progress) -> Manifest:
    """Compile ``cases`` and write the artifact folder; return the manifest."""
    if out.exists() and any(out.iterdir()):
        raise UserError(f"--out {out}: the folder exists and is not empty; choose a new one")
    work = out / ".work"
    # The runners are the measuring machine's: a cuda case compiles on a machine without a GPU,
    # and its correctness is checked there, against the reference outputs written here.
    job = Job(suite, cases, workdir=work, progress=progress, check_runners=False)
    job.compile()
    entries = []
    for index, compiled in enumerate(job.compiled):
        artifact = None
        if compiled.artifact is not None:
            source = Path(compiled.artifact.path)
            target = out / "artifacts" / f"{index:03d}"
            shutil.copytree(source.parent, target)
            artifact = dataclasses.replace(compiled.artifact, path=str(Path("artifacts") / f"{index:03d}" / source.name))
        entries.append(ManifestCase(compiled.entry, artifact))
    if (work / "refs").is_dir():
        shutil.copytree(work / "refs", out / "refs")
    shutil.copyfile(suite.path, out / "suite.toml")
    manifest = Manifest(utc_now(), SuiteInfo(suite.name, str(suite.path), suite.sha256), job.ctx.environment,
                        job.model_infos(), tuple(entries))
    write_json_atomic(out / "manifest.json", manifest.to_json())
    shutil.rmtree(work, ignore_errors=True)
    return manifest


def run_from_dir(folder: Path, progress: Progress, *, workers: int | None = None,
                 rounds: int | None = None, counts: CountMode | None = None) -> ResultDocument:
    """Verify and measure the artifacts of ``folder`` on this machine (counted as ``counts`` asks,
    on top of the folder suite's ``[measure] counts``); return a result document."""
    job, manifest = artifact_job(folder, progress, workers=workers, rounds=rounds, counts=counts)
    try:
        job.measure()
        document = job.documents()["head"]
    finally:
        job.close()
    return with_artifact_origin(document, folder, manifest)


def with_artifact_origin(document: ResultDocument, folder: Path, manifest: Manifest) -> ResultDocument:
    """``document`` measured from ``folder``: the build machine's model records and the folder's origin."""
    return dataclasses.replace(document, models={name: manifest.models[name] for name in document.models},
                               artifacts=ArtifactsOrigin(str(folder), manifest.created_at))


def artifact_job(folder: Path, progress: Progress, *, workers: int | None = None, rounds: int | None = None,
                 pattern: str | None = None, counts: CountMode | None = None) -> tuple[Job, Manifest]:
    """A job over the artifacts of ``folder`` (cases whose id matches ``pattern``), each verified on
    its runner against the build machine's reference outputs and ready to measure: ``job.compiled``
    holds them as a compile would. The caller measures and closes the job."""
    manifest = load_manifest(folder)
    suite = load_suite(folder / "suite.toml").counted(counts)
    by_id = {c.id: c for c in suite.select(pattern)}
    cases: list[CaseSpec] = []
    for item in manifest.cases:
        if item.entry.ok and item.entry.id in by_id:
            case = by_id[item.entry.id]
            if workers or rounds:
                case = dataclasses.replace(case, measure=case.measure.overridden(workers, rounds))
            cases.append(case)
    if not cases:
        raise UserError(f"{folder}: the manifest holds no successfully compiled case" + (
            f" matching {pattern!r}" if pattern else ""))
    _check_runners(suite, cases)
    job = Job(suite, cases, progress=progress, check=False)
    try:
        job.ctx.environment = {name: _fingerprint(job, name) for name in sorted({c.runner for c in cases})}
        progress.start(len(cases) + len({c.model.name for c in cases}))
        items = {c.entry.id: c for c in manifest.cases}
        for case in cases:
            item = items[case.id]
            info = manifest.models[case.model.name]
            model = LoadedModel(case.model, Path(), info.sha256, list(info.inputs), info.nodes, info.opset)
            assert item.artifact_file is not None  # an ok entry has its artifact
            artifact = dataclasses.replace(item.artifact_file, path=str(folder / item.artifact_file.path))
            entry = dataclasses.replace(item.entry, measurement=None, started_at=utc_now(), finished_at=None,
                                        compiled_on=manifest.environment)
            compiled = CompiledCase(case, model, entry, artifact)
            progress.advance(f"verify {case.id} on {case.runner}")
            _verify_on_runner(job, compiled, folder)
            job.compiled.append(compiled)
            job.models[case.model.name] = model
    except BaseException:
        job.close()
        raise
    return job, manifest


def _check_runners(suite: Suite, cases: list[CaseSpec]) -> None:
    """Refuse, before any work, a case whose runner this machine cannot serve for its backend."""
    from perfguard.backends import check_case_runner, get_backend
    from perfguard.runners import get_runner

    for backend, runner in sorted({(c.pipeline.backend, c.runner) for c in cases}):
        check_case_runner(get_backend(backend), get_runner(runner, options=suite.runner_options(runner)))


def _fingerprint(job: Job, runner: str) -> JsonDict:
    from perfguard.runners import get_runner

    return get_runner(runner, options=job.ctx.suite.runner_options(runner)).fingerprint()


def _verify_on_runner(job: Job, compiled: CompiledCase, folder: Path) -> None:
    """Run the artifact once on the runner and compare with the build machine's reference."""
    case = compiled.case
    reference = folder / "refs" / f"{compiled.model.sha256[:16]}-{case.tolerance.seed}.npz"
    if compiled.artifact is None:
        return
    request = verify_request(job.ctx.suite, case, compiled.artifact, compiled.model.inputs, reference)
    outcome = run_worker(request, case.measure.timeout, job.ctx.workdir / "ipc")
    response = outcome.response
    if outcome.failure or outcome.error or response is None:
        message = outcome.failure or (outcome.error.message if outcome.error else "no response")
        compiled.entry = compiled.entry.failed("correctness", f"on the runner: {message}")
        compiled.artifact = None
        return
    compiled.entry = dataclasses.replace(compiled.entry, correctness_on_runner=response.correctness)
    if not response.correctness.passed:
        compiled.entry = compiled.entry.failed("correctness", f"wrong answer on runner {case.runner}: "
                                                              f"{response.correctness.reason}")
        compiled.artifact = None
