"""The backend contract: compile a model under a pinned pipeline into an artifact, then load it.

A backend is the adapter to one compiler. It has three jobs:

``compile(model_path, pipeline, out_dir) -> CompileOutput``
    Apply the pipeline's ordered passes and pinned settings, write the artifact under ``out_dir``
    and return it with a ``PassTrace`` (per pass: time, node count, op histogram, IR hash, changed).
    Runs inside a compile worker process, so a compiler that crashes or hangs fails one case.

``load(artifact, runner, threads) -> Executable``
    Turn an artifact into something that runs on a runner. Runs inside measurement workers.

``list_passes()`` / ``check_pipeline(pipeline)``
    What a pipeline may name, and a check before any work that raises ``UserError`` listing the
    valid names for a typo.
"""

from __future__ import annotations

import hashlib
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import numpy as np

    from perfguard.runners.base import Runner
    from perfguard.suite import PipelineSpec


@dataclass(frozen=True)
class PassInfo:
    """A pass name a pipeline may use, where it comes from, and one line about it."""

    name: str
    source: str
    summary: str = ""


@dataclass(frozen=True)
class PassRecord:
    """What one pass did: its time, the graph after it, and whether it changed anything."""

    index: int
    name: str
    source: str
    time_s: float
    nodes_before: int
    nodes_after: int
    op_histogram: dict[str, int]
    ir_hash: str
    changed: bool


@dataclass
class PassTrace:
    """Per-pass records of one compile, in pipeline order.

    ``exact`` is False when the per-pass records had to be replayed separately from the real
    compile (onnxoptimizer passes run as one call) and the replay did not reach the same graph;
    ``note`` then says why.
    """

    passes: list[PassRecord] = field(default_factory=list)
    input_hash: str = ""
    final_hash: str = ""
    total_time_s: float = 0.0
    exact: bool = True
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Artifact:
    """A compiled model on disk plus the runtime settings its pipeline pinned."""

    backend: str
    path: str
    settings: dict[str, Any]
    sha256: str
    size_bytes: int
    node_count: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Artifact:
        return cls(**dict(data))


@dataclass
class CompileOutput:
    artifact: Artifact
    trace: PassTrace
    #: The compile's own seconds (reading the model, the passes' real work, writing the
    #: artifact), without what perfguard adds to trace it (hashes, histograms, validity checks);
    #: None: the backend does not separate them, and the whole call is timed.
    work_time_s: float | None = None


class Executable(Protocol):
    """A loaded artifact: ``run`` takes named input arrays and returns the outputs in order."""

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]: ...


class Backend(ABC):
    """Base class of compiler adapters; register subclasses by name (see ``perfguard.backends``)."""

    name: ClassVar[str]

    @abstractmethod
    def versions(self) -> dict[str, str]:
        """Versions of the compiler and runtime packages this backend uses."""

    @abstractmethod
    def list_passes(self) -> list[PassInfo]:
        """Every pass name a pipeline of this backend may use (user passes aside)."""

    @abstractmethod
    def check_pipeline(self, pipeline: PipelineSpec) -> None:
        """Raise ``UserError`` for an unknown pass or option, before any work is done."""

    @abstractmethod
    def compile(self, model_path: Path, pipeline: PipelineSpec, out_dir: Path) -> CompileOutput:
        """Compile under the pinned pipeline; raise ``BackendError`` naming the failing pass."""

    def recompile_time(self, model_path: Path, pipeline: PipelineSpec, out_dir: Path) -> float:
        """Compile again for the time only (a compile-time repeat, after :meth:`compile` succeeded
        on the same input), in seconds, timed as :meth:`compile` times ``work_time_s``. The
        default times a whole :meth:`compile`."""
        start = time.perf_counter()
        self.compile(model_path, pipeline, out_dir)
        return time.perf_counter() - start

    @abstractmethod
    def load(self, artifact: Artifact, runner: Runner, threads: int) -> Executable:
        """Load an artifact for timed runs on ``runner`` with ``threads`` threads."""

    def execution_identity(self, artifact: Artifact) -> str:
        """A hash of everything that decides how ``artifact`` runs, the runner aside: its bytes
        (``sha256``, external data included), the runtime settings its pipeline pinned, and the
        versions of the runtime that loads it. Two artifacts with one identity on one runner
        run the same code, so ``perfguard check`` calls them SAME without timing them (LNT's
        ``ignore_same_hash``). A backend whose runtime depends on something else (a runtime
        library built from the compiler under test, say) must add it here."""
        part = {"backend": self.name, "sha256": artifact.sha256, "settings": artifact.settings,
                "runtime": self.versions()}
        return hashlib.sha256(json.dumps(part, sort_keys=True, default=str).encode()).hexdigest()[:16]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
