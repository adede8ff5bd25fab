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
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfguard import jsonfields as f
from perfguard.backends.base import Artifact
from perfguard.compile.case import CompiledCase
from perfguard.errors import StorageError, UserError
from perfguard.jsonfields import JsonObject
from perfguard.measure.engine import run_worker
from perfguard.measure.job import Job
from perfguard.measure.progress import Progress
from perfguard.measure.requests import verify_request
from perfguard.models.loader import LoadedModel
from perfguard.models.onnx_files import artifact_files, artifact_sha256
from perfguard.results import (
    CaseEntry,
    ModelInfo,
    ResultDocument,
    SuiteInfo,
    read_json,
    utc_now,
    write_json_atomic,
)
from perfguard.results.documents import current_format, typed_document
from perfguard.results.result import ArtifactsOrigin
from perfguard.suite import CaseSpec, Suite, load_suite

MANIFEST_VERSION = 1
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MIGRATIONS: dict[int, Callable[[JsonObject], JsonObject]] = {}


@dataclass(frozen=True)
class ManifestCase:
    """One case of the manifest: its result entry as compiled, and the artifact file (relative to
    the folder; None when the case failed to compile)."""

    entry: CaseEntry
    artifact_file: Artifact | None

    def to_json(self) -> JsonObject:
        out = self.entry.to_json()
        if self.artifact_file is not None:
            out["artifact_file"] = self.artifact_file.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ManifestCase:
        artifact = data.get("artifact_file")
        entry = {k: v for k, v in data.items() if k != "artifact_file"}
        return cls(CaseEntry.from_json(entry), None if artifact is None else Artifact.from_json(artifact))


@dataclass(frozen=True)
class Manifest:
    """``manifest.json`` of an artifact folder."""

    created_at: str
    suite: SuiteInfo
    environment: dict[str, JsonObject]
    models: dict[str, ModelInfo]
    cases: tuple[ManifestCase, ...]
    version: int = MANIFEST_VERSION

    def to_json(self) -> JsonObject:
        return {"version": self.version, "created_at": self.created_at, "suite": self.suite.to_json(),
                "environment": self.environment, "models": {n: m.to_json() for n, m in self.models.items()},
                "cases": [c.to_json() for c in self.cases]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Manifest:
        kind = "manifest"
        return cls(f.string(data, "created_at", kind), SuiteInfo.from_json(f.obj(data, "suite", kind)),
                   dict(f.obj(data, "environment", kind)),
                   {n: ModelInfo.from_json(m) for n, m in f.obj(data, "models", kind).items()},
                   tuple(ManifestCase.from_json(c) for c in f.objects(data, "cases", kind)),
                   f.integer(data, "version", kind))


def compile_to_dir(suite: Suite, cases: list[CaseSpec], out: Path, progress: Progress) -> Manifest:
    """Compile ``cases`` and write the artifact folder; return the manifest."""
    if out.exists() and any(out.iterdir()):
        raise UserError(f"--out {out}: the folder exists and is not empty; choose a new one")
    work = out / ".work"
    job = Job(suite, cases, workdir=work, progress=progress)
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


def load_manifest(folder: Path) -> Manifest:
    """The manifest of an artifact folder, with every path it names checked to stay inside the
    folder (:func:`_inside`) and every artifact file checked against its sha256."""
    path = folder / "manifest.json"
    for entry in ("manifest.json", "suite.toml", "refs"):  # the fixed entries may not leave it either
        _inside(folder, entry, str(folder))
    data = read_json(path, missing=f"{folder}: no manifest.json; write the folder with perfguard compile",
                     unreadable="{path}: corrupt manifest ({exc})", not_json="{path}: corrupt manifest ({exc})")
    data = current_format(data, path, kind="manifest", title="perfguard artifact manifest", version=MANIFEST_VERSION,
                          migrations=_MIGRATIONS)
    manifest = typed_document(data, path, Manifest.from_json, corrupt="manifest")
    for name, info in manifest.models.items():  # a reference's file name is built from it (refs/)
        if not _SHA256.fullmatch(info.sha256):
            raise StorageError(f"{path}: models.{name}.sha256: {info.sha256!r} is not a sha256 (64 hex digits)")
    for case in manifest.cases:
        artifact = case.artifact_file
        if artifact is None:
            continue
        case_id = case.entry.id
        if case.entry.model not in manifest.models:  # run_from_dir reads the model's inputs from there
            raise StorageError(f"{path}: case {case_id!r} names model {case.entry.model!r}, which the manifest's "
                               f"models do not hold ({', '.join(map(repr, sorted(manifest.models))) or 'none'})")
        if not isinstance(artifact.path, str):
            raise StorageError(f"{path}: artifact_file.path of {case_id} must be a string, found {artifact.path!r}")
        file = _inside(folder, artifact.path, f"{path}: artifact of {case_id}")
        if not file.is_file():
            raise StorageError(f"{folder}: artifact of {case_id} is missing: {artifact.path}")
        try:
            files = artifact_files(file)
            for extra in files[1:]:  # an ONNX artifact's external data: locations written inside the model
                if not extra.resolve().is_relative_to(folder.resolve()):
                    raise StorageError(f"{path}: artifact of {case_id}: its external data {str(extra)!r} leads "
                                       "outside the folder; every path of an artifact folder must stay inside it")
            digest = artifact_sha256(file, files)
        except FileNotFoundError as exc:
            raise StorageError(f"{folder}: artifact of {case_id}: {exc}; copy the whole artifact folder") from None
        if digest != artifact.sha256:
            raise StorageError(f"{folder}: artifact of {case_id} does not match its sha256 (damaged in transit?)")
    return manifest


def _inside(folder: Path, name: str, where: str) -> Path:
    """``folder / name``, refused (``StorageError`` naming ``where``) unless it stays inside ``folder``.

    An artifact folder is data, written by whoever made it: its manifest's sha256 of a file vouches
    for nothing if the file may be anywhere (``../outside/model.onnx``, ``/etc/...``, or a symlink,
    of the file or of a folder above it, that leaves the folder). ``resolve()`` follows every
    symlink, so the resolved path must lie in the resolved folder."""
    relative = Path(name)
    if relative.is_absolute():
        reason = "is an absolute path"
    elif ".." in relative.parts:
        reason = "has a '..' component"
    else:
        target = (folder / relative).resolve()
        if target.is_relative_to(folder.resolve()):
            return folder / relative
        reason = f"leads outside the folder through a symlink (to {target})"
    raise StorageError(f"{where}: {name!r} {reason}; every path of an artifact folder must stay inside it")


def run_from_dir(folder: Path, progress: Progress, *, workers: int | None = None,
                 rounds: int | None = None) -> ResultDocument:
    """Verify and measure the artifacts of ``folder`` on this machine; return a result document."""
    manifest = load_manifest(folder)
    suite = load_suite(folder / "suite.toml")
    by_id = {c.id: c for c in suite.cases}
    cases: list[CaseSpec] = []
    for item in manifest.cases:
        if item.entry.ok and item.entry.id in by_id:
            case = by_id[item.entry.id]
            if workers or rounds:
                case = dataclasses.replace(case, measure=case.measure.overridden(workers, rounds))
            cases.append(case)
    if not cases:
        raise UserError(f"{folder}: the manifest holds no successfully compiled case")
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
        job.measure()
        document = job.documents()["head"]
    finally:
        job.close()
    return dataclasses.replace(document, models={name: manifest.models[name] for name in document.models},
                               artifacts=ArtifactsOrigin(str(folder), manifest.created_at))


def _fingerprint(job: Job, runner: str) -> JsonObject:
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
