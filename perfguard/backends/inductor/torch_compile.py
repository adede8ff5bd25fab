"""One ``torch.compile`` of a zoo or user module under an ``inductor`` pipeline, with the caches in hand.

``compile_model`` builds the module, compiles it inside ``temporary_cache_dir`` (Inductor's own
context: ``TORCHINDUCTOR_CACHE_DIR`` set and the in-process caches cleared on entry and exit),
remote caches off, the user passes in a ``CustomGraphPass`` (their source in its ``uuid``), and
runs it once on seeded inputs so the compile happens there and then. It reads back what the
compile produced: the output code modules Inductor loaded from that folder (one per graph), their
kernels, the user passes' steps and Inductor's compilation metrics (phase times).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from perfguard.backends.base import PassRecord, PassTrace
from perfguard.backends.inductor.pipeline_config import (
    HOOKS,
    InductorSettings,
    PassStep,
    pipeline_pass,
    torch_module,
)
from perfguard.backends.inductor.torch_modules import build_module
from perfguard.errors import BackendError, first_line
from perfguard.jsonfields import JsonDict

if TYPE_CHECKING:
    import numpy as np
    import torch

#: Inductor's compilation-metrics fields (seconds or µs) reported as phase times, by phase name.
PHASES_S = {"dynamo": "entire_frame_compile_time_s", "aot_autograd": "backend_compile_time_s",
            "inductor": "inductor_compile_time_s", "codegen": "code_gen_time_s"}
PHASES_US = {"pre_grad_passes": "pre_grad_pass_time_us", "joint_graph_passes": "joint_graph_pass_time_us",
             "post_grad_passes": "post_grad_pass_time_us", "kernel_compile": "triton_compile_time_us"}


@dataclass
class InductorTrace(PassTrace):
    """The user passes' records plus Inductor's own phase times (``torch._dynamo.utils``
    compilation metrics, seconds, summed over graphs), the generated kernel, library call
    (``library_call_count``) and graph counts, the
    output code's hash, the FX graph cache hits of this compile (0 for a fresh cache folder) and
    the largest difference of the compiled outputs from eager PyTorch's."""

    phase_times: dict[str, float] = field(default_factory=dict)
    kernels: int = 0
    library_calls: int = 0
    graphs: int = 0
    output_code_sha256: str = ""
    fx_graph_cache_hits: int = 0
    eager_max_abs_error: float | None = None
    hooks: dict[str, list[JsonDict]] = field(default_factory=dict)


def kernel_count(code: str) -> int:
    """Kernels in one output code module: C++ (``async_compile.cpp_pybinding``) or Triton."""
    return len(re.findall(r"async_compile\.(?:cpp_pybinding|cpp|triton)\(", code))


#: What the output code holds of the compiling process rather than of the graph: the header's AOT ID
#: counts the compiles of that process (``# AOT ID: ['1_inference']``); under ``freezing`` the comment
#: after each frozen parameter ends with its tensor's address (``_frozen_param52 = None  #
#: device(type='cpu') torch.float32 (4, 3, 7, 7) (1, 0, 0, 0) 7ff1dc953700``), and the messages of
#: the pattern matcher's size asserts quote a function's repr (``<function ... at 0x7f7ca5bc2160>``).
_PROCESS_STATE = ((re.compile(r"^(# AOT ID: ).*$", re.MULTILINE), r"\1…"),
                  (re.compile(r"^(_frozen_param\d+ = None  # .*) [0-9a-f]{6,16}$", re.MULTILINE), r"\1"),
                  (re.compile(r"( at 0x)[0-9a-f]{6,16}(>)"), r"\1…\2"))


def without_addresses(code: str) -> str:
    """An output code module without what it holds of the compiling process (``_PROCESS_STATE``).
    Inductor's FX graph cache serves a measuring worker the artifact's own code, but a ``freezing``
    compile is not served from it: its code is generated again, and with those parts in the hash a
    frozen pipeline got a new identity on every compile and never matched its artifact in a
    measuring worker (measured 2026-12-06, torch 2.13: two compiles of a frozen ResNet differed in
    those parts only)."""
    for pattern, replacement in _PROCESS_STATE:
        code = pattern.sub(replacement, code)
    return code


def library_call_count(code: str) -> int:
    """Library calls the module's wrapper makes besides its own kernels: ``extern_kernels.*``
    (convolutions, matrix products Inductor hands to oneDNN/BLAS or cuBLAS) and fallback ATen ops."""
    extern = re.findall(r"\bextern_kernels\.\w+\(", code)
    fallback = re.findall(r"(?<![\w.'\"])(?:torch\.ops\.\w+|aten|inductor_ops|_quantized)\.\w+\.\w+\(", code)
    return len(extern) + len(fallback)


@dataclass
class CompiledModel:
    """A compiled module ready to run, and what its compile produced."""

    callable: Any
    inputs: list[str]
    device: str
    output_code: list[str]
    code_sha256: str
    kernels: int
    library_calls: int
    steps: list[PassStep]
    #: (pass name, source sha256, sys.path root its module was imported from)
    pass_sources: list[tuple[str, str, str]]
    phase_times: dict[str, float]
    cache_hits: int
    compile_time_s: float
    eager_max_abs_error: float | None
    #: the first passes the trace leaves out (a hybrid's prefix, traced by its own compile)
    traced_from: int = 0
    #: the output code modules the compile loaded (their globals are what ``call`` runs)
    modules: list[ModuleType] = field(default_factory=list)
    #: ``options.hooks``' passes per hook: name, source sha256, root and steps (``_hook_records``)
    hooks: dict[str, list[JsonDict]] = field(default_factory=dict)
    _arguments: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @classmethod
    def eager(cls, module: torch.nn.Module, inputs: list[str]) -> CompiledModel:
        """``module`` run as it is, not compiled, on the CPU: a PyTorch callable's reference."""
        return cls(module, inputs, "cpu", [], "", 0, 0, [], [], {}, 0, 0.0, None)

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        import numpy as np
        import torch

        with torch.no_grad():
            result = self.callable(*self._tensors(feeds))
        outputs = result if isinstance(result, (list, tuple)) else [result]
        return [np.asarray(o.detach().cpu().numpy()) for o in outputs]

    def _tensors(self, feeds: Mapping[str, np.ndarray]) -> list[Any]:
        import torch

        out = []
        for name in self.inputs:
            array = feeds[name]
            cached = self._arguments.get(name)
            if cached is None or cached[0] is not array:
                cached = (array, torch.from_numpy(array.copy()).to(self.device))
                self._arguments[name] = cached
            out.append(cached[1])
        return out

    def trace(self) -> InductorTrace:
        traced = max(1, len(self.pass_sources) - self.traced_from)
        records = [PassRecord(index=s.index - self.traced_from + s.graph * traced, name=s.name, source="user",
                              time_s=s.time_s, nodes_before=s.nodes_before, nodes_after=s.nodes_after,
                              op_histogram=s.op_histogram, ir_hash=s.hash_after, changed=s.hash_after != s.hash_before)
                   for s in self.steps if s.index >= self.traced_from]
        return InductorTrace(
            passes=records, input_hash=self.steps[0].hash_before if self.steps else "",
            final_hash=self.steps[-1].hash_after if self.steps else "", total_time_s=self.compile_time_s,
            note="inductor: per user FX pass and graph (post-grad hook): wall time, FX node count, hash of the graph; "
                 "Inductor's phases from torch._dynamo.utils compilation metrics",
            phase_times=self.phase_times, kernels=self.kernels, library_calls=self.library_calls,
            graphs=len(self.output_code),
            output_code_sha256=self.code_sha256, fx_graph_cache_hits=self.cache_hits,
            eager_max_abs_error=self.eager_max_abs_error, hooks=self.hooks)


def _feeds(model_path: Path) -> dict[str, np.ndarray]:
    import onnx

    from perfguard.models.inputs import input_specs, make_feeds
    from perfguard.models.torch_callable import TorchModel, is_torch_model

    if is_torch_model(model_path):
        return make_feeds(list(TorchModel.read(model_path).inputs), 0)
    return make_feeds(input_specs(onnx.load(str(model_path), load_external_data=False)), 0)


UserPasses = tuple[tuple[str, str], ...]
#: Dynamo's cache entries one code object may hold while a measuring worker loads its variants (torch's
#: default is 8: ``check --base-ref`` of a five-pipeline suite loads ten).
RECOMPILE_LIMIT = 256


def dynamo_events() -> dict[str, int]:
    """What Dynamo has done in this process so far: the frames it compiled (a first compile, or a
    recompilation after a guard failure: ``counters["frames"]["total"]``) and the graph breaks it
    met. A measuring worker reads them before and after timing: any change means some values ran
    something else than the compiled graphs the artifact holds."""
    from torch._dynamo.utils import counters

    return {"Dynamo compiles": int(counters["frames"]["total"]),
            "graph breaks": int(sum(counters["graph_break"].values()))}


def compile_model(model_path: Path, settings: InductorSettings, passes: UserPasses, cache_dir: Path,
                  device: str, *, check_eager: bool, traced_from: int = 0,
                  hooks: Mapping[str, UserPasses] | None = None, keep_loaded: bool = False) -> CompiledModel:
    """Compile the zoo model (or PyTorch callable) at ``model_path`` on ``device`` with its Inductor cache in ``cache_dir``;
    ``passes`` (post-grad) and each hook's passes (``options.hooks``) are ``(name, sys.path root)``.
    ``traced_from``: the trace leaves out the first passes (a hybrid's stage 2: its prefix's compile
    traced them).

    ``keep_loaded``: keep what this process compiled before (a measuring worker's other variants)
    instead of resetting Dynamo first. ``torch._dynamo.reset()`` drops the compiled code of every
    module in the process: a worker that loaded a case's variants one after another ran each but
    the last through a fresh Dynamo compile on its first timed call, outside this function's
    config (without the pipeline's passes, in torch's default cache folder: another code than the
    artifact's), inside the first worker's calibration (which then chose 4 runs a value where 26
    last its 20 ms) or the other workers' first timed round (issue 45: ``docs/measured.md``,
    "Inductor timings"; the float64 pipeline read +4 % instead of +231 %). Each variant is one more
    entry in Dynamo's cache of the modules' shared ``forward``, so the recompile limit is raised to
    fit a worker's variants and hitting it fails instead of falling back to eager."""
    torch = torch_module()
    from torch._dynamo.utils import clear_compilation_metrics, get_compilation_metrics
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

    module, inputs = build_module(model_path)
    module = module.to(device)
    feeds = _feeds(model_path)
    args = [torch.from_numpy(feeds[name]).to(device) for name in inputs]
    cache_dir.mkdir(parents=True, exist_ok=True)
    pipeline = pipeline_pass(passes) if passes else None
    hooked = {hook: pipeline_pass(names) for hook, names in (hooks or {}).items() if names}
    config = {**settings.inductor_config(), "fx_graph_cache": True, "fx_graph_remote_cache": False,
              "autotune_remote_cache": False, "post_grad_custom_post_pass": pipeline,
              **{HOOKS[hook]: hook_pass for hook, hook_pass in hooked.items()}}
    if not keep_loaded:
        torch._dynamo.reset()
    clear_compilation_metrics()
    known = {id(m) for m in PyCodeCache.modules}
    dynamo = {"recompile_limit": RECOMPILE_LIMIT, "accumulated_recompile_limit": RECOMPILE_LIMIT,
              "fail_on_recompile_limit_hit": True, **settings.dynamo}
    with temporary_cache_dir(str(cache_dir)), torch._inductor.config.patch(config), \
            torch._dynamo.config.patch(dynamo), torch.no_grad():
        compiled = torch.compile(module, mode=None if settings.mode == "default" else settings.mode,
                                 dynamic=settings.dynamic)
        start = time.perf_counter()
        try:
            got = compiled(*args)
        except Exception as exc:
            raise _unwrapped(exc) from None
        seconds = time.perf_counter() - start
        loaded = [m for m in PyCodeCache.modules if id(m) not in known and
                  str(getattr(m, "__file__", "")).startswith(str(cache_dir.resolve()))]
    if keep_loaded and not loaded:
        # Dynamo served an earlier compile of this process (the same module's code, the reference
        # run of a torch callable): none of this compile's code can be read, so compile it anew.
        return compile_model(model_path, settings, passes, cache_dir, device, check_eager=check_eager,
                             traced_from=traced_from, hooks=hooks, keep_loaded=False)
    code = sorted(without_addresses(Path(str(m.__file__)).read_text()) for m in loaded)
    error = None
    if check_eager:
        with torch.no_grad():
            expected = module(*args)
        error = max((float((a.float() - b.float()).abs().max()) for a, b in zip(_tuple(got), _tuple(expected),
                                                                                strict=True)), default=0.0)
    metrics = get_compilation_metrics()
    steps = list(pipeline.steps) if pipeline is not None else []
    sources = [(name, digest, root) for (name, root), digest in zip(passes, pipeline.digests, strict=True)] \
        if pipeline else []
    return CompiledModel(compiled, inputs, device, code, hashlib.sha256("\n".join(code).encode()).hexdigest(),
                         sum(kernel_count(text) for text in code), sum(library_call_count(text) for text in code),
                         steps, sources, _phases(metrics),
                         sum(int(getattr(m, "inductor_fx_local_cache_hit_count", 0) or 0) for m in metrics),
                         seconds, error, traced_from, loaded, _hook_records(hooks or {}, hooked))


def _hook_records(hooks: Mapping[str, UserPasses], hooked: Mapping[str, Any]) -> dict[str, list[JsonDict]]:
    """Per hook: each pass's source (name, sha256, root) and what it did to each graph."""
    return {hook: [{"name": name, "source_sha256": digest, "root": root,
                    "steps": [{"graph": s.graph, "time_s": round(s.time_s, 6), "nodes_before": s.nodes_before,
                               "nodes_after": s.nodes_after, "changed": s.hash_after != s.hash_before}
                              for s in hooked[hook].steps if s.index == index]}
                   for index, ((name, root), digest) in enumerate(zip(hooks[hook], hooked[hook].digests, strict=True))]
            for hook in hooked}


def _tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _phases(metrics: Sequence[object]) -> dict[str, float]:
    phases: dict[str, float] = {}
    for name, attr in PHASES_S.items():
        phases[name] = sum(float(getattr(m, attr, 0.0) or 0.0) for m in metrics)
    for name, attr in PHASES_US.items():
        phases[name] = sum(float(getattr(m, attr, 0) or 0) for m in metrics) / 1e6
    return {name: round(value, 6) for name, value in phases.items()}


def _unwrapped(exc: BaseException) -> BackendError:
    """The user pass's ``BackendError`` inside torch's wrapping, or one naming the failure."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BackendError):
            return seen
        inner = getattr(seen, "inner_exception", None)
        seen = inner if isinstance(inner, BaseException) else seen.__cause__ or seen.__context__
    return BackendError(f"torch.compile failed: {first_line(exc)}")
