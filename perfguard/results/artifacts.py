"""Compile here, measure there: artifact folders with a manifest.

Device runners often carry only a runtime. ``perfguard compile SUITE --out DIR`` compiles every case
on a build machine (pass traces, the correctness check against the reference) and writes DIR:

``manifest.json``
    format version, the suite (its text, name, sha256), the build machine's fingerprint, and per
    case its key, trace, correctness, compile metrics, measurement settings, runner and the artifact
    (backend, settings, relative path, sha256, size);
``suite.toml``
    a copy of the suite (pipelines and measurement settings travel with the artifacts);
``artifacts/NNN/...``
    the compiled files (an ONNX artifact with external data keeps its ``model.onnx.data`` beside
    it; the recorded sha256 and size cover both); ``refs/*.npz`` the reference outputs on the
    seeded inputs.

``perfguard run --artifacts DIR`` on the runner machine checks every artifact's sha256, runs each
artifact once on the runner and compares its outputs with the reference (a device that computes a
different answer fails the case), then measures them with the usual protocol and writes a normal
result document. Format history (``MANIFEST_VERSION``): 1. first format.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

from perfguard.backends.base import Artifact
from perfguard.compile.case import CompiledCase
from perfguard.errors import StorageError, UserError
from perfguard.measure.engine import run_worker
from perfguard.measure.job import Job
from perfguard.measure.progress import Progress
from perfguard.measure.requests import verify_request
from perfguard.models.inputs import InputSpec
from perfguard.models.loader import LoadedModel
from perfguard.models.onnx_files import artifact_sha256
from perfguard.results import utc_now, write_json_atomic
from perfguard.suite import CaseSpec, Suite, load_suite

MANIFEST_VERSION = 1


def compile_to_dir(suite: Suite, cases: list[CaseSpec], out: Path, progress: Progress) -> dict[str, Any]:
    """Compile ``cases`` and write the artifact folder; return the manifest."""
    if out.exists() and any(out.iterdir()):
        raise UserError(f"--out {out}: the folder exists and is not empty; choose a new one")
    work = out / ".work"
    job = Job(suite, cases, workdir=work, progress=progress)
    job.compile()
    entries = []
    for index, compiled in enumerate(job.compiled):
        entry = dict(compiled.entry)
        if compiled.artifact is not None:
            source = Path(compiled.artifact.path)
            target = out / "artifacts" / f"{index:03d}"
            shutil.copytree(source.parent, target)
            artifact = dataclasses.replace(compiled.artifact, path=str(Path("artifacts") / f"{index:03d}" / source.name))
            entry["artifact_file"] = artifact.to_json()
        entries.append(entry)
    if (work / "refs").is_dir():
        shutil.copytree(work / "refs", out / "refs")
    shutil.copyfile(suite.path, out / "suite.toml")
    manifest = {
        "version": MANIFEST_VERSION, "created_at": utc_now(),
        "suite": {"name": suite.name, "path": str(suite.path), "sha256": suite.sha256},
        "environment": job.ctx.environment,
        "models": {name: {"sha256": m.sha256, "nodes": m.node_count, "opset": m.opset, "source": m.spec.source(),
                          "inputs": [s.to_json() for s in m.inputs]} for name, m in job.models.items()},
        "cases": entries,
    }
    write_json_atomic(out / "manifest.json", manifest)
    shutil.rmtree(work, ignore_errors=True)
    return manifest


def load_manifest(folder: Path) -> dict[str, Any]:
    from perfguard.results.documents import read_json

    path = folder / "manifest.json"
    manifest = read_json(path, missing=f"{folder}: no manifest.json; write the folder with perfguard compile",
                         unreadable="{path}: corrupt manifest ({exc})", not_json="{path}: corrupt manifest ({exc})")
    if not isinstance(manifest, dict) or not isinstance(manifest.get("version"), int):
        raise StorageError(f"{path}: not a perfguard artifact manifest")
    if manifest["version"] > MANIFEST_VERSION:
        raise StorageError(f"{path}: manifest version {manifest['version']} is newer than this perfguard reads; "
                           "upgrade perfguard")
    for entry in manifest["cases"]:
        artifact = entry.get("artifact_file")
        if artifact is None:
            continue
        file = folder / artifact["path"]
        if not file.is_file():
            raise StorageError(f"{folder}: artifact of {entry['id']} is missing: {artifact['path']}")
        try:
            digest = artifact_sha256(file)
        except FileNotFoundError as exc:
            raise StorageError(f"{folder}: artifact of {entry['id']}: {exc}; copy the whole artifact folder") from None
        if digest != artifact["sha256"]:
            raise StorageError(f"{folder}: artifact of {entry['id']} does not match its sha256 (damaged in transit?)")
    return manifest


def run_from_dir(folder: Path, progress: Progress, *, workers: int | None = None,
                 rounds: int | None = None) -> dict[str, Any]:
    """Verify and measure the artifacts of ``folder`` on this machine; return a result document."""
    manifest = load_manifest(folder)
    suite = load_suite(folder / "suite.toml")
    by_id = {c.id: c for c in suite.cases}
    cases: list[CaseSpec] = []
    for entry in manifest["cases"]:
        if entry["status"] == "ok" and entry["id"] in by_id:
            case = by_id[entry["id"]]
            if workers or rounds:
                case = dataclasses.replace(case, measure=dataclasses.replace(
                    case.measure, workers=workers or case.measure.workers, rounds=rounds or case.measure.rounds))
            cases.append(case)
    if not cases:
        raise UserError(f"{folder}: the manifest holds no successfully compiled case")
    job = Job(suite, cases, progress=progress, check=False)
    try:
        job.ctx.environment = {name: _fingerprint(job, name) for name in sorted({c.runner for c in cases})}
        progress.start(len(cases) + len({c.model.name for c in cases}))
        entries = {e["id"]: e for e in manifest["cases"]}
        for case in cases:
            entry = dict(entries[case.id])
            model_info = manifest["models"][case.model.name]
            model = LoadedModel(case.model, Path(), model_info["sha256"],
                                [InputSpec.from_json(s) for s in model_info["inputs"]], model_info["nodes"],
                                model_info["opset"])
            artifact = Artifact.from_json(dict(entry.pop("artifact_file"),
                                               path=str(folder / entries[case.id]["artifact_file"]["path"])))
            entry.update(metrics={k: v for k, v in entry["metrics"].items()}, measurement=None,
                         started_at=utc_now(), compiled_on=manifest["environment"])
            entry.pop("finished_at", None)
            compiled = CompiledCase(case, model, entry, artifact)
            progress.advance(f"verify {case.id} on {case.runner}")
            _verify_on_runner(job, compiled, folder)
            job.compiled.append(compiled)
            job.models[case.model.name] = model
        job.measure()
        document = job.documents()["head"]
    finally:
        job.close()
    document["models"] = {name: manifest["models"][name] for name in document["models"]}
    document["artifacts"] = {"folder": str(folder), "manifest_created_at": manifest["created_at"]}
    return document


def _fingerprint(job: Job, runner: str) -> dict[str, Any]:
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
        compiled.entry.update(status="failed", error={"stage": "correctness", "message": f"on the runner: {message}"})
        compiled.artifact = None
        return
    compiled.entry["correctness_on_runner"] = response.correctness.to_json()
    if not response.correctness.passed:
        compiled.entry.update(status="failed", error={"stage": "correctness", "message":
                                                       f"wrong answer on runner {case.runner}: "
                                                       f"{response.correctness.reason}"})
        compiled.artifact = None
