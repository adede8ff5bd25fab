"""Runners by name: ``cpu``, ``cuda`` and ``npu:<provider>``.

Exact names resolve through ``_RUNNERS``; names with a registered prefix (``npu:``) pass the rest
of the name to the runner class. An unknown name raises ``UserError`` listing the valid ones.
``runner_status`` says which runners this machine can serve and why the others cannot (what
``perfguard runners`` prints).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from perfguard.errors import UserError, unknown_name_message
from perfguard.jsonfields import JsonDict
from perfguard.runners.base import Runner
from perfguard.runners.cpu import CpuRunner
from perfguard.runners.cuda import CudaRunner
from perfguard.runners.npu import NPU_PROVIDERS, NpuRunner
from perfguard.runners.options import RunnerOptions

__all__ = ["BackendSupport", "Runner", "RunnerOptions", "RunnerStatus", "check_runner_options", "get_runner", "runner_names",
           "runner_status"]

_RUNNERS: dict[str, type[CpuRunner] | type[CudaRunner]] = {
    "cpu": CpuRunner,
    "cuda": CudaRunner,
}
# Runners whose name carries an argument after the prefix: the class takes it first.
_PREFIXES: dict[str, type[NpuRunner]] = {
    "npu:": NpuRunner,
}


def runner_names() -> list[str]:
    """Every runner name a suite may use (prefix runners shown as ``npu:<provider>``)."""
    return sorted(_RUNNERS) + [f"{prefix}<provider>" for prefix in sorted(_PREFIXES)]


def get_runner(name: str, repo: Path | None = None, options: RunnerOptions | JsonDict | None = None) -> Runner:
    """Return the runner called ``name`` configured with ``options`` (a ``RunnerOptions`` or its JSON).

    The error for an unknown name lists the runners this perfguard knows; for an ``npu:`` name
    with an unknown provider, the providers.
    """
    prefix, argument = _split_name(name)
    runner: Runner = _PREFIXES[prefix](argument, repo) if prefix else _RUNNERS[name](repo)
    if options is not None:
        runner.configure(options if isinstance(options, RunnerOptions) else RunnerOptions.from_json(options))
    return runner


def check_runner_options(name: str, options: RunnerOptions) -> None:
    """Raise ``UserError`` when ``name`` is no runner or the runner does not take one of ``options``.

    What ``get_runner(name, options=options)`` would refuse, found without making the runner: the
    suite parser checks its ``[runners.NAME]`` tables with it."""
    runner_class(name).check_options(name, options)


def runner_class(name: str) -> type[Runner]:
    """The class of the runner called ``name``, whose class attributes say what it is
    (``Runner.kind``, ``host_cpu``, ``cuda_kernels``) without making the runner; an unknown
    name is a ``UserError`` listing the runners this perfguard knows."""
    prefix, _ = _split_name(name)
    return _PREFIXES[prefix] if prefix else _RUNNERS[name]


def runner_kind(name: str) -> str:
    """The device kind a runner name names (``npu:QNNExecutionProvider`` -> ``npu``), also for a
    name this perfguard does not know (a stored document's): the part before any ``:``."""
    return name.partition(":")[0]


def _split_name(name: str) -> tuple[str, str]:
    """``(prefix, argument)`` of a runner name: ``("npu:", "qnn")``, or ``("", name)`` for an exact one."""
    if name in _RUNNERS:
        return "", name
    for prefix in _PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return prefix, name[len(prefix):]
    valid = [*_RUNNERS, *(f"{p}{short}" for p in _PREFIXES for short in NPU_PROVIDERS)]
    raise UserError(unknown_name_message("runner", name, valid) + ", or npu:<Name>ExecutionProvider")


@dataclass(frozen=True)
class BackendSupport:
    """Whether cases of one backend can run on a runner here; ``detail`` says why not ("" when they can)."""

    backend: str
    available: bool
    detail: str

    def to_json(self) -> JsonDict:
        return {"backend": self.backend, "available": self.available, "detail": self.detail}


@dataclass(frozen=True)
class RunnerStatus:
    """Whether this machine can serve a runner; ``detail`` is the device (available) or why not.

    ``backends``: one row per backend asked about (``runner_status(..., backends=...)``); the
    runner is then available when its device is there and at least one backend can use it."""

    name: str
    available: bool
    detail: str
    backends: tuple[BackendSupport, ...] = ()

    def to_json(self) -> JsonDict:
        data: JsonDict = {"name": self.name, "available": self.available, "detail": self.detail}
        if self.backends:
            data["backends"] = [b.to_json() for b in self.backends]
        return data


def _describe(runner: Runner) -> str:
    try:
        return runner.describe()
    except Exception as exc:  # a driver query failing here must not hide the other runners
        return f"available, but cannot describe the device: {exc}"


def _reason(check: Callable[[], None]) -> str:
    """"" when ``check()`` passes, else the first line of why not."""
    try:
        check()
    except UserError as exc:
        return str(exc)
    return ""


def runner_status(names: list[str] | None = None,
                  backends: Mapping[str, Callable[[Runner], None]] | None = None) -> list[RunnerStatus]:
    """Check each runner (default: ``cpu``, ``cuda`` and every known ``npu:`` provider).

    Without ``backends``, a runner is available when its device is there (``Runner.check_device``).
    With ``backends`` (backend name -> its ``check_runner``, given by a layer above, which knows the
    backends), each backend gets a row: it can run here when the runner's device is there and what
    that backend needs from the runner is there too."""
    if names is None:
        names = [*_RUNNERS, *(f"npu:{short}" for short in NPU_PROVIDERS)]
    statuses = []
    for name in names:
        runner = get_runner(name)
        if backends is None:
            reason = _reason(runner.check_device)
            statuses.append(RunnerStatus(name, not reason, reason or _describe(runner)))
            continue
        device = _reason(runner.check_device)
        rows = []
        for backend, check in backends.items():
            own = _reason(partial(check, runner))
            rows.append(BackendSupport(backend, not device and not own, own or device))
        if device:
            statuses.append(RunnerStatus(name, False, device, tuple(rows)))
        elif any(row.available for row in rows):
            statuses.append(RunnerStatus(name, True, _describe(runner), tuple(rows)))
        else:
            why = "; ".join(f"{row.backend}: {row.detail}" for row in rows) or "no backend given"
            statuses.append(RunnerStatus(name, False, f"no backend can use it: {why}", tuple(rows)))
    return statuses
