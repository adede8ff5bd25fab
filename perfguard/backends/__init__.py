"""Backends by name: built-in ones plus third parties through the entry-point group
``perfguard.backends`` (``name = "package.module:BackendClass"``)."""

from __future__ import annotations

import importlib
from functools import cache, lru_cache

from perfguard.backends.base import (
    Artifact,
    Backend,
    Capabilities,
    CompileOutput,
    OptionEdit,
    PassInfo,
    PassRecord,
    PassTrace,
    ProfiledExecutable,
    check_case_runner,
)
from perfguard.errors import UserError, unknown_name_message

__all__ = ["Artifact", "Backend", "Capabilities", "CompileOutput", "OptionEdit", "PassInfo", "PassRecord",
           "PassTrace", "ProfiledExecutable", "available_backends", "check_case_runner", "get_backend"]

_BUILTIN = {
    "ort": "perfguard.backends.ort:OrtBackend",
    "mock": "perfguard.backends.mock:MockBackend",
    "iree": "perfguard.backends.iree:IreeBackend",
    "tvm": "perfguard.backends.tvm:TvmBackend",
    "inductor": "perfguard.backends.inductor:InductorBackend",
}


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
