"""Backends by name: built-in ones plus third parties through the entry-point group
``perfguard.backends`` (``name = "package.module:BackendClass"``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import ClassVar, Protocol

from perfguard.backends.base import (
    Artifact,
    Backend,
    Capabilities,
    CompileOutput,
    Executable,
    OptionEdit,
    PassInfo,
    PassRecord,
    PassTrace,
    ProfiledExecutable,
    check_case_runner,
)
from perfguard.errors import UserError, unknown_name_message
from perfguard.jsonfields import JsonDict
from perfguard.stats.modality import DEFAULT_USUAL_CV

__all__ = ["DEFAULT_BACKEND", "Artifact", "Backend", "Capabilities", "CompileOutput", "OptionEdit", "PassInfo",
           "PassRecord", "PassTrace", "ProfiledExecutable", "TraceExtension", "available_backends",
           "check_case_runner", "get_backend", "preload_default_backend", "reference_runtime", "trace_extensions", "usual_cv"]

#: The backend of a suite that names none, and of a pipeline that names none.
DEFAULT_BACKEND = "ort"

_BUILTIN = {
    "ort": "perfguard.backends.ort:OrtBackend",
    "mock": "perfguard.backends.mock:MockBackend",
    "iree": "perfguard.backends.iree:IreeBackend",
    "tvm": "perfguard.backends.tvm:TvmBackend",
    "inductor": "perfguard.backends.inductor:InductorBackend",
}

#: The typed trace fields of the built-in backends (``TraceExtension``), by ``module:class``.
_TRACE_EXTENSIONS = ("perfguard.backends.tvm.relax_trace:TvmStages",)


@lru_cache(maxsize=1)
def _registry() -> dict[str, str]:
    names = dict(_BUILTIN)
    from importlib.metadata import entry_points

    for entry in entry_points(group="perfguard.backends"):
        names.setdefault(entry.name, entry.value)
    return names


def available_backends() -> list[str]:
    return sorted(_registry())


@cache
def get_backend(name: str) -> Backend:
    """Return the backend registered as ``name``; the error lists the valid names."""
    registry = _registry()
    if name not in registry:
        raise UserError(unknown_name_message("backend", name, registry))
    module_name, _, attr = registry[name].partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except ImportError as exc:
        raise UserError(f"backend {name!r} cannot be loaded: {exc}; is its extra installed?") from None
    except AttributeError:
        raise UserError(f"backend {name!r}: {registry[name]} names no class") from None
    backend = cls()
    if not isinstance(backend, Backend):
        raise UserError(f"backend {name!r}: {registry[name]} is not a perfguard Backend subclass")
    return backend


#: The usual cv of a case's values by backend, measured on the 2-core machine (within-process cv
#: at one thread plus the spread between processes; docs/measured.md).
#: Inductor's is its level once every value runs the compiled graph (issue 45).
_USUAL_CV = {"ort": 0.03, "iree": 0.03, "tvm": 0.02, "inductor": 0.05}


def usual_cv(name: str) -> float:
    """The usual cv of the values of backend ``name`` (``perfguard.stats.modality.timing_quality``
    flags a cv far above it); ``DEFAULT_USUAL_CV`` for a backend that declares none. By name, with
    nothing imported: a report reads documents whose backend may not be installed here."""
    return _USUAL_CV.get(name, DEFAULT_USUAL_CV)


def reference_runtime(backend: Backend, model_path: Path) -> tuple[str, Callable[[], Executable]]:
    """What the correctness check runs for the expected outputs of the model at ``model_path``, in
    the words its errors use, and how to load it: ``backend``'s own reference
    (``Backend.reference``), or else ONNX Runtime with every optimization off on the CPU."""
    own = backend.reference(model_path)
    if own is not None:
        return f"the {backend.name} backend's reference", lambda: own

    def unoptimized() -> Executable:
        from perfguard.backends.ort import OrtExecutable, create_session

        settings = {"graph_optimization_level": "disabled", "disabled_optimizers": []}
        return OrtExecutable(create_session(str(model_path), settings, 1, ["CPUExecutionProvider"]))

    return "ONNX Runtime", unoptimized


def preload_default_backend() -> None:
    """Import the default backend and its runtime where they are installed, so a spare worker
    waits with them imported; nothing where they are not (the request says what it needs)."""
    try:
        get_backend(DEFAULT_BACKEND).preload()
    except (ImportError, UserError):
        pass


class TraceExtension(Protocol):
    """The fields one backend adds to its compile's trace, typed and validated when a result is
    read (``perfguard.results.result.Trace.extension``). They are written beside the trace's common
    keys, as that backend's trace has them, so a document reads and writes the same JSON whether or
    not the reader knows them as a type."""

    #: The trace keys this extension owns; a trace with none of them is not this backend's.
    KEYS: ClassVar[tuple[str, ...]]

    def to_json(self) -> JsonDict:
        """The extension's keys and values, merged into the trace's JSON."""
        ...

    @classmethod
    def from_trace(cls, data: Mapping[str, object]) -> TraceExtension | None:
        """The extension read from a trace's JSON; None when the trace holds none of :attr:`KEYS`
        (``FieldError`` for a trace with some of them missing or malformed)."""
        ...


@cache
def trace_extensions() -> tuple[type[TraceExtension], ...]:
    """The typed trace fields the backends declare, in the order a trace is matched against them."""
    found: list[type[TraceExtension]] = []
    for entry in _TRACE_EXTENSIONS:
        module_name, _, attr = entry.partition(":")
        found.append(getattr(importlib.import_module(module_name), attr))
    return tuple(found)
