"""What an ``inductor`` pipeline pins, checked against the installed torch, and the user FX passes.

A pipeline's ``passes`` are user FX passes, ``package.module:function`` taking a
``torch.fx.Graph`` and returning None, run in that order at Inductor's post-grad custom pass hook
(``post_grad_custom_post_pass``). Its ``options``:

``device``    where the code runs and so what Inductor generates: ``"cpu"`` (C++/OpenMP, the default)
              or ``"cuda"`` (Triton; compiled on the GPU machine, measured on the ``cuda`` runner)
``mode``      ``torch.compile``'s mode (``torch._inductor.list_mode_options()``), default ``"default"``
``dynamic``   ``torch.compile``'s ``dynamic`` (true, false; absent: torch's own choice)
``freezing``  Inductor's ``freezing`` (weights become constants: conv+BN folding, weight prepacking)
``inductor``  a table of ``torch._inductor.config`` keys (``"cpp.simdlen" = 1``)
``dynamo``    a table of ``torch._dynamo.config`` keys
``hooks``     user FX passes for Inductor's other hooks, a table of ordered lists:
              ``pre_grad`` (``pre_grad_custom_pass``: the Torch-IR graph Dynamo captured, before
              AOTAutograd), ``joint_pre`` / ``joint_post`` (``joint_custom_pre_pass`` /
              ``joint_custom_post_pass``: the ATen graph before and after Inductor's joint-graph
              passes). They are pinned like ``passes`` (each one's source in the identity and the
              cache key) but are not bisected: ``bisect passes`` searches ``passes``.

Config keys are checked against the installed torch's config (a typo names the close ones) and
their values against the type of the default. The custom pass hooks and the cache switches are
not config a pipeline may set: passes go in ``passes``, and perfguard owns the caches.

Why the passes travel inside a ``CustomGraphPass``: Inductor's FX graph cache keys a compile on its
config, and a plain function in ``post_grad_custom_post_pass`` is not part of that key (its config
is ignored by the cache), so a compile with a changed pass was served the previous pass's code
(measured 2026-12-04: 0.4 s, same kernels). ``PipelinePass.uuid()`` hashes every pass's source, so
the key changes with the passes.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perfguard.errors import BackendError, UserError, did_you_mean, first_line

if TYPE_CHECKING:
    import torch

INSTALL_HINT = "pip install 'perfguard[torch]' (torch 2.13)"
OPTION_KEYS = ("device", "mode", "dynamic", "freezing", "inductor", "dynamo", "hooks")
#: The hooks ``options.hooks`` may fill, by the Inductor config key each one sets.
HOOKS = {"pre_grad": "pre_grad_custom_pass", "joint_pre": "joint_custom_pre_pass",
         "joint_post": "joint_custom_post_pass"}
DEVICES = ("cpu", "cuda")
#: Config a pipeline may not set: the pass hooks (``passes`` fills them) and the caches (perfguard
#: gives every compile its own cache folder; a remote cache would serve another machine's code).
RESERVED = ("pre_grad_custom_pass", "joint_custom_pre_pass", "joint_custom_post_pass", "post_grad_custom_pre_pass",
            "post_grad_custom_post_pass", "fx_graph_cache", "fx_graph_remote_cache", "autotune_local_cache",
            "autotune_remote_cache", "bundled_autotune_remote_cache", "force_disable_caches")


def torch_module() -> Any:
    """``torch``, or the one-line install hint (exit 2) when it is missing."""
    try:
        import torch
        import torch._dynamo
        import torch._inductor.config  # noqa: F401
    except ImportError as exc:
        raise UserError(f"backend 'inductor' needs PyTorch ({first_line(exc)}); {INSTALL_HINT}") from None
    return torch


@dataclass(frozen=True)
class InductorSettings:
    """A pipeline's options, checked."""

    device: str = "cpu"
    mode: str = "default"
    dynamic: bool | None = None
    freezing: bool | None = None
    inductor: Mapping[str, object] = field(default_factory=dict)
    dynamo: Mapping[str, object] = field(default_factory=dict)
    hooks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def inductor_config(self) -> dict[str, object]:
        config = dict(self.inductor)
        if self.freezing is not None:
            config["freezing"] = self.freezing
        return config

    def to_json(self) -> dict[str, object]:
        return {"device": self.device, "mode": self.mode, "dynamic": self.dynamic, "freezing": self.freezing,
                "inductor": dict(sorted(self.inductor.items())), "dynamo": dict(sorted(self.dynamo.items())),
                **({"hooks": {hook: list(names) for hook, names in sorted(self.hooks.items())}} if self.hooks else {})}


def config_defaults() -> tuple[dict[str, object], dict[str, object]]:
    """The installed torch's Inductor and Dynamo config keys with their defaults."""
    torch = torch_module()
    return torch._inductor.config.get_config_copy(), torch._dynamo.config.get_config_copy()


def inductor_settings(options: Mapping[str, Any], where: str) -> InductorSettings:
    """Check a pipeline's options against this torch; ``UserError`` names the key to fix."""
    for key in options:
        if key not in OPTION_KEYS:
            raise UserError(f"{where}: unknown inductor option {key!r}{did_you_mean(key, OPTION_KEYS)}; "
                            f"expected {', '.join(OPTION_KEYS)}")
    device = options.get("device", "cpu")
    if device not in DEVICES:
        raise UserError(f"{where}: options.device {device!r} is not one of {', '.join(DEVICES)}"
                        f"{did_you_mean(str(device), DEVICES)}")
    torch = torch_module()
    modes = sorted(torch._inductor.list_mode_options())
    mode = options.get("mode", "default")
    if mode not in modes:
        raise UserError(f"{where}: options.mode {mode!r} is not a torch.compile mode{did_you_mean(str(mode), modes)}; "
                        f"expected one of {', '.join(modes)}")
    for key in ("dynamic", "freezing"):
        if key in options and not isinstance(options[key], bool):
            raise UserError(f"{where}: options.{key} must be true or false, got {options[key]!r}")
    inductor_defaults, dynamo_defaults = config_defaults()
    tables = {}
    for table, defaults in (("inductor", inductor_defaults), ("dynamo", dynamo_defaults)):
        given = options.get(table, {})
        if not isinstance(given, Mapping):
            raise UserError(f"{where}: options.{table} must be a table of config keys, got {given!r}")
        tables[table] = _checked_config(given, defaults, f"{where}: options.{table}", table)
    return InductorSettings(str(device), str(mode), options.get("dynamic"), options.get("freezing"),
                            tables["inductor"], tables["dynamo"], _checked_hooks(options.get("hooks", {}), where))


def _checked_hooks(given: object, where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(given, Mapping):
        raise UserError(f"{where}: options.hooks must be a table of pass lists ({', '.join(HOOKS)}), got {given!r}")
    hooks = {}
    for hook, names in given.items():
        if hook not in HOOKS:
            raise UserError(f"{where}: options.hooks.{hook}: no such Inductor hook{did_you_mean(hook, HOOKS)}; "
                            f"expected {', '.join(HOOKS)} (post-grad passes go in the pipeline's passes)")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise UserError(f"{where}: options.hooks.{hook} must be a list of package.module:function, got {names!r}")
        check_pass_names(names, f"{where}: options.hooks.{hook}")
        if names:
            hooks[hook] = tuple(names)
    return hooks


def _checked_config(given: Mapping[str, Any], defaults: Mapping[str, Any], where: str, table: str) -> dict[str, object]:
    checked: dict[str, object] = {}
    for key, value in given.items():
        if key in RESERVED:
            raise UserError(f"{where}: {key!r} is perfguard's to set (custom passes go in the pipeline's passes; "
                            "every compile gets its own cache folder)")
        if key not in defaults:
            raise UserError(f"{where}: torch {_version()} has no {table} config key {key!r}"
                            f"{did_you_mean(key, defaults)}; `perfguard passes --backend inductor` lists them")
        default = defaults[key]
        if default is not None and not _same_kind(default, value):
            raise UserError(f"{where}: {key!r} must be {type(default).__name__} like its default {default!r}, "
                            f"got {value!r}")
        checked[key] = value
    return dict(sorted(checked.items()))


def _same_kind(default: object, value: object) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float))
    return isinstance(value, type(default)) or isinstance(default, (list, tuple)) and isinstance(value, list)


def _version() -> str:
    return str(torch_module().__version__)


# -- what perfguard tune moves -----------------------------------------------------------------------

#: ``torch._inductor.config`` keys ``perfguard tune`` moves, each with the values it tries: a boolean
#: flips, an enum moves to each other value. Chosen for the CPU, where each changes the generated C++
#: or what Inductor hands to oneDNN: fusion (``epilogue_fusion``, ``aggressive_fusion``), the pattern
#: matcher (conv/linear + pointwise fusions, ``pattern_matcher``), channels-last convolutions
#: (``layout_optimization``), oneDNN weight prepacking under freezing (``cpp.weight_prepack``),
#: vectorized loop tails and tiling (``cpp.enable_loop_tail_vec``, ``cpp.enable_tiling_heuristics``)
#: and the C++ compiler's floating-point contraction (``cpp.enable_floating_point_contract_flag``:
#: FMA; a result outside the suite's tolerance fails correctness like any other). A key the installed
#: torch lacks, or whose default is of another type than the values, is left out (``tuning_keys``).
TUNING_KEYS: dict[str, tuple[object, ...]] = {
    "epilogue_fusion": (True, False),
    "pattern_matcher": (True, False),
    "aggressive_fusion": (True, False),
    "layout_optimization": (True, False),
    "cpp.weight_prepack": (True, False),
    "cpp.enable_loop_tail_vec": (True, False),
    "cpp.enable_tiling_heuristics": (True, False),
    "cpp.enable_floating_point_contract_flag": ("off", "on", "fast"),
}
#: ``torch.compile`` modes ``perfguard tune`` moves between, by device (CUDA graphs only on a GPU),
#: those ``torch._inductor.list_mode_options()`` lists.
TUNING_MODES = {"cpu": ("default", "max-autotune-no-cudagraphs"),
                "cuda": ("default", "max-autotune-no-cudagraphs", "max-autotune", "reduce-overhead")}


def tuning_keys() -> dict[str, tuple[object, ...]]:
    """``TUNING_KEYS`` checked against the installed torch's config: present, and every value of
    its default's kind."""
    defaults, _ = config_defaults()
    return {key: values for key, values in TUNING_KEYS.items()
            if key in defaults and all(defaults[key] is None or _same_kind(defaults[key], v) for v in values)}


def tuning_edits(options: Mapping[str, object]) -> list[tuple[str, dict[str, object]]]:
    """Each one-edit neighbour of a pipeline's ``options``: ``freezing`` flipped, every other mode
    of ``TUNING_MODES`` for its device, and each key of ``tuning_keys`` moved from its current
    value (the pipeline's, or torch's default) to each other value; ``(what changed, options)``."""
    defaults, _ = config_defaults()
    edits: list[tuple[str, dict[str, object]]] = []
    freezing = options.get("freezing", defaults["freezing"])
    edits.append((f"freezing {freezing} -> {not freezing}", {**options, "freezing": not freezing}))
    mode = options.get("mode", "default")
    listed = set(torch_module()._inductor.list_mode_options())
    for other in TUNING_MODES.get(str(options.get("device", "cpu")), ()):
        if other != mode and other in listed:
            edits.append((f"mode {mode} -> {other}", {**options, "mode": other}))
    given = options.get("inductor", {})
    table = dict(given) if isinstance(given, Mapping) else {}
    for key, values in tuning_keys().items():
        current = table.get(key, defaults[key])
        for value in values:
            if value != current:
                edits.append((f"{key} {current} -> {value}", {**options, "inductor": {**table, key: value}}))
    return edits


# -- user FX passes ---------------------------------------------------------------------------------


def check_pass_names(passes: tuple[str, ...] | list[str], where: str) -> None:
    for name in passes:
        module, sep, function = name.partition(":")
        if not sep or not module or not function:
            raise UserError(f"{where}: pass {name!r}: an inductor pipeline's passes are user FX passes "
                            "written package.module:function (a function of a torch.fx.Graph)")


def load_pass(name: str) -> tuple[Callable[[Any], None], str]:
    """The function ``package.module:function`` and the sha256 of its module's source."""
    module_name, _, function_name = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise BackendError(f"user pass {name!r} does not import: {first_line(exc)}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise BackendError(f"user pass {name!r}: module {module_name} has no function {function_name!r}")
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        source = name
    return function, hashlib.sha256(source.encode()).hexdigest()


@dataclass(frozen=True)
class PassStep:
    """What one user pass did to one graph: its time, the node count and structural hash after it."""

    graph: int
    index: int
    name: str
    time_s: float
    nodes_before: int
    nodes_after: int
    hash_before: str
    hash_after: str
    op_histogram: dict[str, int]


def graph_hash(graph: torch.fx.Graph) -> str:
    """sha256 of the graph's nodes (op, target, arguments): equal graphs hash equal across processes."""
    return hashlib.sha256(str(graph).encode()).hexdigest()[:16]


def op_histogram(graph: torch.fx.Graph) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in graph.nodes:
        if node.op == "call_function":
            name = str(node.target)
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def import_from(root: str, module_name: str) -> None:
    """Make the next import of ``module_name`` read it from ``root``: a measuring worker loads the
    artifacts of two checkouts (``check --base-ref``, bisection) whose passes share module names,
    and a hybrid compile runs one checkout's first passes and another's rest; a module cached from
    the first would be the second's pass. Loaded pass functions keep their own module's globals."""
    if not root:
        return
    top = module_name.split(".")[0]
    stale = [name for name, module in list(sys.modules.items()) if (name == top or name.startswith(top + "."))
             and not str(getattr(module, "__file__", "") or "").startswith(root + os.sep)]
    for name in stale:
        del sys.modules[name]
    if stale or root not in sys.path:
        if root in sys.path:
            sys.path.remove(root)
        sys.path.insert(0, root)
        importlib.invalidate_caches()


def pass_root(name: str) -> str:
    """The ``sys.path`` entry the module of pass ``name`` imports from here ("" when it has no file)."""
    from perfguard.models.torch_callable import module_root

    module_name = name.partition(":")[0]
    load_pass(name)
    return module_root(module_name, sys.modules.get(module_name))


def pipeline_pass(passes: tuple[tuple[str, str], ...]) -> Any:
    """A ``CustomGraphPass`` that runs the user passes in order, each ``(name, root)`` imported from
    its ``sys.path`` root (``pass_root``; a hybrid's first passes come from another checkout),
    records a ``PassStep`` per pass and graph in ``steps``, and whose ``uuid()`` hashes the passes'
    names and sources."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    loaded = []
    for name, root in passes:
        import_from(root, name.partition(":")[0])
        loaded.append((name, *load_pass(name)))

    class PipelinePass(CustomGraphPass):
        def __init__(self) -> None:
            self.steps: list[PassStep] = []
            self.graphs = 0
            self.digests = [digest for _, _, digest in loaded]

        def __call__(self, graph: torch.fx.Graph) -> None:
            self.graphs += 1
            for index, (name, function, _) in enumerate(loaded):
                before, count = graph_hash(graph), len(graph.nodes)
                start = time.perf_counter()
                try:
                    function(graph)
                    graph.lint()
                except Exception as exc:
                    raise BackendError(f"user pass #{index + 1} {name!r} failed: {first_line(exc)}") from None
                seconds = time.perf_counter() - start
                self.steps.append(PassStep(self.graphs - 1, index, name, seconds, count, len(graph.nodes), before,
                                           graph_hash(graph), op_histogram(graph)))

        def uuid(self) -> str:
            return hashlib.sha256(repr([(name, digest) for name, _, digest in loaded]).encode()).hexdigest()

    return PipelinePass()
