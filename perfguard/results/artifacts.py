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

The document lives here; the workflow that writes and measures a folder is
:mod:`perfguard.flows.compile_here`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from perfguard import jsonfields as f
from perfguard.backends.base import Artifact
from perfguard.errors import StorageError
from perfguard.jsonfields import JsonDict
from perfguard.models.onnx_files import artifact_files, artifact_sha256
from perfguard.results import (
    CaseEntry,
    ModelInfo,
    SuiteInfo,
    read_json,
)
from perfguard.results.documents import current_format, typed_document

MANIFEST_VERSION = 1
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MIGRATIONS: dict[int, Callable[[JsonDict], JsonDict]] = {}


@dataclass(frozen=True)
class ManifestCase:
    """One case of the manifest: its result entry as compiled, and the artifact file (relative to
    the folder; None when the case failed to compile)."""

    entry: CaseEntry
    artifact_file: Artifact | None

    def to_json(self) -> JsonDict:
        out = self.entry.to_json()
        if self.artifact_file is not None:
            out["artifact_file"] = self.artifact_file.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ManifestCase:
        artifact = f.opt_obj(data, "artifact_file", "manifest case")
        entry = {k: v for k, v in data.items() if k != "artifact_file"}
        return cls(CaseEntry.from_json(entry), None if artifact is None else Artifact.from_json(artifact))


@dataclass(frozen=True)
class Manifest:
    """``manifest.json`` of an artifact folder."""

    created_at: str
    suite: SuiteInfo
    environment: dict[str, JsonDict]
    models: dict[str, ModelInfo]
    cases: tuple[ManifestCase, ...]
    version: int = MANIFEST_VERSION

    def to_json(self) -> JsonDict:
        return {"version": self.version, "created_at": self.created_at, "suite": self.suite.to_json(),
                "environment": self.environment, "models": {n: m.to_json() for n, m in self.models.items()},
                "cases": [c.to_json() for c in self.cases]}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Manifest:
        kind = "manifest"
        return cls(f.string(data, "created_at", kind), SuiteInfo.from_json(f.obj(data, "suite", kind)),
                   f.json_obj_map(data, "environment", kind),
                   {n: ModelInfo.from_json(m) for n, m in f.obj_map(data, "models", kind).items()},
                   tuple(ManifestCase.from_json(c) for c in f.objects(data, "cases", kind)),
                   f.integer(data, "version", kind))


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
