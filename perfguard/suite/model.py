"""The specs a suite file becomes: frozen, validated by the parser, hashed into case keys."""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from perfguard.errors import UserError
from perfguard.jsonfields import JsonDict, JsonValue, json_object, json_value
from perfguard.names import CaseId
from perfguard.runners.options import RunnerOptions
from perfguard.suite.gates import CheckSettings, ThresholdSet


@dataclass(frozen=True)
class MeasureSettings:
    """How one case is measured (docs/reference/protocol.md, "What a run does")."""

    workers: int = 5
    rounds: int = 10
    # Rounds stop early once they lasted max_time and min_rounds were timed (asv's
    # repeat = (min, max, max_time)): 5 rounds of a 95 ms model pair, 10 of a 1 ms one.
    min_rounds: int = 5
    max_time: float = 1.0
    warmup: int = 3
    min_time: float = 0.02
    timeout: float = 300.0
    compile_timeout: float = 600.0
    compile_repeats: int = 5
    memory_probes: int = 3
    threads: int = 1
    seed: int = 0

    def to_json(self) -> JsonDict:
        return dataclasses.asdict(self)

    def overridden(self, workers: int | None, rounds: int | None) -> MeasureSettings:
        """These settings with ``run --workers``/``--rounds`` applied: ``--rounds N`` asks for N
        rounds in every worker, so no early stop before them either."""
        return dataclasses.replace(self, workers=workers or self.workers, rounds=rounds or self.rounds,
                                   min_rounds=rounds or self.min_rounds)


@dataclass(frozen=True)
class Tolerance:
    """Correctness tolerance: |got - ref| <= atol + rtol * |ref| elementwise."""

    rtol: float = 1e-3
    atol: float = 1e-4
    seed: int = 1234

    def to_json(self) -> JsonDict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class InputSetting:
    """Suite settings of one model input: its full ``shape`` and/or the ``[low, high)`` range of
    an integer input (``None``: taken from the model)."""

    shape: tuple[int, ...] | None = None
    low: int | None = None
    high: int | None = None

    def to_json(self) -> JsonDict:
        data: JsonDict = {}
        if self.shape is not None:
            data["shape"] = list(self.shape)
        if self.low is not None:
            data["low"] = self.low
        if self.high is not None:
            data["high"] = self.high
        return data


@dataclass(frozen=True)
class InputSettings:
    """Input settings of a model file: values of named symbolic dimensions (``dims``) and
    per-input settings (``inputs``). ``where`` prefixes errors (``FILE: [models.NAME]``)."""

    dims: Mapping[str, int] = field(default_factory=dict)
    inputs: Mapping[str, InputSetting] = field(default_factory=dict)
    where: str = ""

    def __bool__(self) -> bool:
        return bool(self.dims or self.inputs)

    def to_json(self) -> JsonDict:
        return {"dims": dict(sorted(self.dims.items())),
                "inputs": {name: self.inputs[name].to_json() for name in sorted(self.inputs)}}


@dataclass(frozen=True)
class ModelSpec:
    """A model: an architecture from the zoo with parameters, a path to an ``.onnx`` file, or a
    PyTorch callable ``package.module:callable`` returning ``(module, example_inputs)``
    (``torch``: only a backend whose ``Capabilities.torch_models`` is set compiles it)."""

    name: str
    arch: str | None = None
    params: Mapping[str, object] = field(default_factory=dict)
    path: Path | None = None
    input_settings: InputSettings = field(default_factory=InputSettings)
    torch: str | None = None

    def source(self) -> JsonDict:
        if self.torch is not None:
            return {"torch": self.torch}
        if self.path is not None:
            # Input settings decide what is measured: part of the model's identity (and case key)
            # when given; absent otherwise, so keys of suites without settings stay as they were.
            if self.input_settings:
                return {"path": str(self.path), "input_settings": self.input_settings.to_json()}
            return {"path": str(self.path)}
        return {"arch": self.arch, "params": json_object(dict(sorted(self.params.items())), f"model {self.name} params")}


@dataclass(frozen=True)
class PipelineSpec:
    """An ordered list of pass names plus the backend's other pinned settings."""

    name: str
    backend: str
    passes: tuple[str, ...]
    options: Mapping[str, object] = field(default_factory=dict)

    def key(self) -> JsonDict:
        """The part of the pipeline that decides the artifact; hashed into every case key."""
        return {"backend": self.backend, "passes": list(self.passes), "options": _canonical(self.options)}

    @property
    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.key(), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class CompilerSpec:
    """The compiler under test: where its user passes live and how to build it."""

    path: Path | None = None
    repo: Path | None = None
    build: str | None = None


@dataclass(frozen=True)
class CaseSpec:
    """One model x pipeline x runner, with its effective settings."""

    model: ModelSpec
    pipeline: PipelineSpec
    runner: str
    measure: MeasureSettings
    tolerance: Tolerance

    @property
    def case_id(self) -> CaseId:
        return CaseId(self.model.name, self.pipeline.name, self.runner)

    @property
    def id(self) -> str:
        return str(self.case_id)


#: How a run is counted under Valgrind (``[measure] counts``, ``--counts``; None: it is not):
#: ``instructions`` (``--counts``, ``counts = true``: no cache simulation, the cheap and exact
#: default) or ``cache`` (``--counts-cache``, ``counts = "cache"``: callgrind's cache simulation too,
#: for ``estimated_cycles`` and the misses; one more inference, instrumented, fills the simulated
#: caches before the window). ``perfguard.counting`` takes the counts.
CountMode = Literal["instructions", "cache"]
COUNT_MODES: tuple[CountMode, ...] = ("instructions", "cache")


@dataclass(frozen=True)
class Suite:
    path: Path
    name: str
    description: str
    compiler: CompilerSpec
    models: Mapping[str, ModelSpec]
    pipelines: Mapping[str, PipelineSpec]
    cases: tuple[CaseSpec, ...]
    sha256: str
    runners: Mapping[str, RunnerOptions] = field(default_factory=dict)
    check: CheckSettings = field(default_factory=CheckSettings)
    thresholds: ThresholdSet = field(default_factory=ThresholdSet)
    #: ``[measure] counts``: every case also counted under Valgrind, in this mode (None: not
    #: counted); ``--counts`` and ``--counts-cache`` set it too (:meth:`counted`).
    counts: CountMode | None = None

    def counted(self, mode: CountMode | None) -> Suite:
        """This suite counted as ``mode`` asks on top of its own ``[measure] counts``: the cache
        simulation when either asks for it; itself when ``mode`` is None (``--counts`` not given).
        Every job built from the suite reads its mode (``Job.counts``)."""
        if mode is None or self.counts == mode or self.counts == "cache":
            return self
        return dataclasses.replace(self, counts=mode)

    def runner_options(self, name: str) -> RunnerOptions:
        """Settings of runner ``name`` from its ``[runners.NAME]`` table (defaults without one)."""
        return self.runners.get(name, RunnerOptions())

    def select(self, pattern: str | None) -> list[CaseSpec]:
        """Cases whose id matches a glob (``resnet*/*/cpu``) or contains ``pattern`` as text."""
        if not pattern:
            return list(self.cases)
        chosen = [c for c in self.cases if fnmatch.fnmatchcase(c.id, pattern) or pattern in c.id]
        if not chosen:
            ids = ", ".join(c.id for c in self.cases)
            raise UserError(f"--case {pattern!r} matches no case of {self.path}; cases: {ids}")
        return chosen


def _canonical(value: object) -> JsonValue:
    """``value`` (a suite's TOML value) as JSON with its objects' keys sorted."""
    if isinstance(value, Mapping):
        return {str(k): _canonical(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return json_value(value)
