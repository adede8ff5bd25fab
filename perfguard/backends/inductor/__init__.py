"""The ``inductor`` backend: a zoo model as a ``torch.nn.Module``, or the user's own module from a
PyTorch callable (``[models.NAME] torch``, ``Capabilities.torch_models``) -> ``torch.compile`` (TorchDynamo +
AOTAutograd + Inductor: C++/OpenMP kernels on the CPU, Triton on the GPU) under a pinned pipeline.
Install with ``pip install 'perfguard[torch]'``; what a pipeline pins is
``perfguard.backends.inductor.pipeline_config`` (user FX passes, ``mode``, ``dynamic``, ``freezing``,
Inductor and Dynamo config keys).

What the artifact is, and why: a compiled ``torch.compile`` callable lives in the process that
compiled it and does not serialize, and AOTInductor (``torch.export`` + a ``.pt2`` package) would
measure a different compiler path (export's tracing, a C++ runner) from the ``torch.compile`` a team
ships. So the artifact is a folder: the model, the checked pipeline (``inductor.json``), Inductor's
generated output code (``output_code/``, one Python module per graph, C++ or Triton source inside)
and the compile's own Inductor cache. A measurement worker compiles again from that cache (a warm
FX graph cache hit: the same generated code, seconds instead of a cold compile) and refuses to run
when the code it got is not the artifact's (``BackendError``: the cache did not serve it).

Cache control: every compile runs with its own ``TORCHINDUCTOR_CACHE_DIR`` (a fresh folder in the
artifact), the in-process caches cleared, the remote caches off and the user passes inside a
``CustomGraphPass`` whose ``uuid()`` hashes their source, so a changed pass is never served a stale
artifact. The identity (``Artifact.sha256``) hashes the generated output code of every graph, the
torch version, the checked options and each user pass's source. Its ``node_count`` is what the
generated code launches per inference: Inductor's own kernels plus the library calls of its wrapper
(convolutions and GEMMs handed to oneDNN/BLAS, fallback ATen ops), so ``bisect --metric node_count``
names a pass that adds a kernel or a convolution by compiling only.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfguard.backends.base import (
    Artifact,
    Backend,
    Capabilities,
    CompileOutput,
    CountWording,
    OptionEdit,
    PassInfo,
)
from perfguard.backends.inductor.pipeline_config import (
    INSTALL_HINT,
    InductorSettings,
    check_pass_names,
    config_defaults,
    import_from,
    inductor_settings,
    load_pass,
    pass_root,
    torch_module,
    tuning_edits,
)
from perfguard.backends.inductor.torch_compile import (
    CompiledModel,
    InductorTrace,
    compile_model,
    dynamo_events,
    kernel_count,
)
from perfguard.backends.inductor.torch_modules import build_module
from perfguard.errors import BackendError, RunnerUnavailable, UserError, first_line
from perfguard.jsonfields import json_object
from perfguard.models.torch_callable import SUFFIX as TORCH_SUFFIX, is_torch_model

if TYPE_CHECKING:
    import numpy as np

    from perfguard.backends.inductor.kernel_profile import InductorProfiledExecutable
    from perfguard.runners.base import Runner
    from perfguard.suite import PipelineSpec

RECIPE = "inductor.json"


def _device(runner: Runner) -> str:
    """The torch device of ``runner``'s artifacts: the host CPU, or a CUDA GPU."""
    if runner.host_cpu:
        return "cpu"
    if runner.cuda_kernels:
        return "cuda"
    raise BackendError(f"the inductor backend runs on runners 'cpu' and 'cuda', not {runner.name!r}")


class InductorExecutable:
    """A compiled module on one device; inputs are copied to torch tensors once per array object.

    ``jit_events``: Dynamo's compiles and graph breaks in this process so far. The measuring worker
    reads them after every variant has loaded and run once more, and after the timed rounds; a
    change fails the case in one line (the values would not all be the compiled graphs')."""

    def __init__(self, compiled: CompiledModel) -> None:
        self.compiled = compiled

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return self.compiled.run(feeds)

    def jit_events(self) -> dict[str, int]:
        return dynamo_events()


class InductorBackend(Backend):
    """PyTorch's ``torch.compile`` with Inductor (``capabilities``: user FX passes)."""

    name = "inductor"
    capabilities = Capabilities(profile=True, hybrid_compile=True, user_passes=True, torch_models=True)
    user_pass_signature = "torch.fx.Graph -> None, run in order at Inductor's post-grad hook"

    def versions(self) -> dict[str, str]:
        from perfguard.runners.fingerprint import library_versions

        return library_versions(("torch", "triton"))

    def list_passes(self) -> list[PassInfo]:
        """The config keys a pipeline may pin (``options.inductor`` / ``options.dynamo``); its
        passes are user FX passes, which no list can hold."""
        from perfguard.backends.inductor.pipeline_config import RESERVED

        inductor, dynamo = config_defaults()
        infos = [PassInfo(key, "inductor.config", f"default {value!r}"[:100])
                 for key, value in sorted(inductor.items()) if key not in RESERVED and not key.startswith("_")]
        infos += [PassInfo(key, "dynamo.config", f"default {value!r}"[:100])
                  for key, value in sorted(dynamo.items()) if not key.startswith("_")]
        return infos

    def check_pipeline(self, pipeline: PipelineSpec) -> None:
        where = f"pipeline {pipeline.name!r}"
        inductor_settings(pipeline.options, where)
        check_pass_names(pipeline.passes, where)

    def tuning_moves(self, options: Mapping[str, Any]) -> list[OptionEdit]:
        """``freezing`` flipped, the other ``torch.compile`` modes of the pipeline's device, and each
        config key of ``pipeline_config.TUNING_KEYS`` the installed torch has moved to each other
        value (``pipeline_config.tuning_edits``)."""
        return [OptionEdit(describe, edited) for describe, edited in tuning_edits(options)]

    def reference(self, model_path: Path) -> InductorExecutable | None:
        """A PyTorch callable's reference: its module run eagerly on the CPU in float32 as its
        callable built it (seeded weights), no compile. A zoo model's is ONNX Runtime's (None),
        whose ONNX file holds the same weights."""
        from perfguard.models.torch_callable import is_torch_model

        if not is_torch_model(model_path):
            return None
        torch_module()  # the install hint when torch is missing
        return InductorExecutable(CompiledModel.eager(*build_module(model_path)))

    def compile(self, model_path: Path, pipeline: PipelineSpec, out_dir: Path) -> CompileOutput:
        """Compile the zoo model (or PyTorch callable) at ``model_path``; or, when ``model_path`` is another inductor
        artifact (``inductor.json``: stage 1 of a hybrid compile), its model with its passes, each
        from the checkout it came from, then this pipeline's passes."""
        where = f"pipeline {pipeline.name!r}"
        settings = inductor_settings(pipeline.options, where)
        check_pass_names(pipeline.passes, where)
        own = tuple((name, pass_root(name)) for name in pipeline.passes)  # before a prefix's imports
        hooks = {hook: tuple((name, pass_root(name)) for name in names) for hook, names in settings.hooks.items()}
        model_path, prefix = _hybrid_prefix(model_path)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
        model_copy = out_dir / ("model" + TORCH_SUFFIX if is_torch_model(model_path) else "model.onnx")
        shutil.copyfile(model_path, model_copy)
        if settings.device == "cuda" and not torch_module().cuda.is_available():
            raise BackendError(f"{where} compiles for device 'cuda' (Triton kernels), but torch "
                               f"{torch_module().__version__} sees no CUDA device here; compile it on the GPU machine")
        compiled = compile_model(model_copy, settings, prefix + own, out_dir / "cache",
                                 settings.device, check_eager=True, traced_from=len(prefix), hooks=hooks)
        recipe = self._write_recipe(out_dir, pipeline, settings, compiled, model_copy.name)
        identity = {k: recipe[k] for k in ("options", "output_code_sha256", "torch")}
        passes = [(n, d) for n, d, _ in compiled.pass_sources]
        identity["passes"] = passes
        if compiled.hooks:  # absent when unused: the identities of pipelines without hooks are unchanged
            identity["hooks"] = {hook: [(e["name"], e["source_sha256"]) for e in entries]
                                 for hook, entries in compiled.hooks.items()}
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
        artifact = Artifact(backend=self.name, path=str(out_dir / RECIPE),
                            settings={"options": json_object(settings.to_json(), f"{where} options"), "passes": passes,
                                      "output_code_sha256": compiled.code_sha256},
                            sha256=digest, size_bytes=sum(len(t.encode()) for t in compiled.output_code),
                            node_count=compiled.kernels + compiled.library_calls)
        return CompileOutput(artifact=artifact, trace=compiled.trace(), work_time_s=compiled.compile_time_s)

    def _write_recipe(self, out_dir: Path, pipeline: PipelineSpec, settings: InductorSettings,
                      compiled: CompiledModel, model: str) -> Mapping[str, object]:
        """``output_code/graphN.py`` and ``inductor.json``: what a measuring worker compiles again."""
        code_dir = out_dir / "output_code"
        code_dir.mkdir()
        for index, text in enumerate(compiled.output_code):
            (code_dir / f"graph{index}.py").write_text(text)
        recipe = {"version": 1, "model": model, "pipeline_options": dict(pipeline.options),
                  "inputs": compiled.inputs, "options": settings.to_json(),
                  "passes": [{"name": n, "source_sha256": d, "root": r} for n, d, r in compiled.pass_sources],
                  "hooks": {hook: [{k: e[k] for k in ("name", "source_sha256", "root")} for e in entries]
                            for hook, entries in compiled.hooks.items()},
                  "output_code_sha256": compiled.code_sha256, "kernels": compiled.kernels,
                  "library_calls": compiled.library_calls, "torch": self.versions()["torch"]}
        (out_dir / RECIPE).write_text(json.dumps(recipe, indent=1, sort_keys=True))
        return recipe

    def load(self, artifact: Artifact, runner: Runner, threads: int) -> InductorExecutable:
        device = _device(runner)
        torch = torch_module()
        torch.set_num_threads(threads)
        folder = Path(artifact.path).parent
        try:
            recipe = json.loads(Path(artifact.path).read_text())
        except (OSError, ValueError) as exc:
            raise BackendError(f"cannot read the inductor artifact {artifact.path}: {first_line(exc)}") from None
        _check_sources(recipe)
        settings = inductor_settings(recipe["pipeline_options"], artifact.path)
        if settings.device != device:
            raise BackendError(f"this artifact holds Inductor code for device {settings.device!r}, not for runner "
                               f"{runner.name!r}; set the pipeline's options.device to {device!r}")
        compiled = compile_model(folder / recipe["model"], settings, _recorded_passes(recipe), folder / "cache",
                                 device, check_eager=False, hooks={hook: _recorded_passes({"passes": entries})
                                                                  for hook, entries in recipe.get("hooks", {}).items()},
                                 keep_loaded=True)  # the worker's other variants keep their code (issue 45)
        if compiled.code_sha256 != recipe["output_code_sha256"]:
            raise BackendError("the compile in the measuring worker generated other code than the artifact's "
                               f"({compiled.code_sha256[:12]} vs {recipe['output_code_sha256'][:12]}): its cache did "
                               "not serve it; is this the torch, CPU and thread count (OMP_NUM_THREADS) that compiled it?")
        return InductorExecutable(compiled)

    def count_wording(self) -> CountWording:
        """The kernels Inductor generated and the library calls it made (``node_count``)."""
        return CountWording("kernel", "kernels", "Inductor's generated code (kernels and library calls it emitted)",
                            "Inductor's compiled graphs", "kernels")

    def load_profiled(self, artifact: Artifact, runner: Runner, threads: int,
                      trace_prefix: str) -> InductorProfiledExecutable:
        """The artifact loaded as ``load`` does, its kernels and library calls timed per call
        (``perfguard.backends.inductor.kernel_profile``: the torch profiler does not see Inductor's C++
        kernels without changing their code)."""
        from perfguard.backends.inductor.kernel_profile import InductorProfiledExecutable

        return InductorProfiledExecutable(self.load(artifact, runner, threads).compiled, trace_prefix)

    def check_runner(self, runner: Runner) -> None:
        """CPU: torch and a C++ compiler (Inductor compiles its C++ kernels). CUDA: torch with a
        visible GPU and Triton, which writes Inductor's GPU kernels."""
        try:
            torch = torch_module()
        except UserError as exc:
            raise RunnerUnavailable(str(exc)) from None
        if runner.host_cpu:
            if shutil.which("g++") is None and shutil.which("c++") is None:
                raise RunnerUnavailable("Inductor's CPU backend compiles C++: no g++ or c++ on PATH")
            return
        if not runner.cuda_kernels:
            raise RunnerUnavailable(f"the inductor backend runs on runners 'cpu' and 'cuda', not {runner.name!r}")
        reasons = []
        if not torch.cuda.is_available():
            build = "; this is a CPU-only build" if torch.version.cuda is None else ""
            reasons.append(f"torch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is False{build})")
        try:
            import triton  # noqa: F401
        except ImportError as exc:
            reasons.append(f"Triton is not importable ({first_line(exc)})")
        if reasons:
            raise RunnerUnavailable("; ".join(reasons) + ": Inductor's GPU kernels need a CUDA build of torch, a GPU "
                                    "and Triton (pip install triton)")

    def artifact_key(self, pipeline: PipelineSpec) -> str:
        """The architecture and the CPU capability Inductor's C++ code is vectorized for (AVX2,
        AVX512): an artifact compiled on one is not the code another would generate."""
        torch = torch_module()
        part = {"machine": platform.machine(), "cpu": str(torch.backends.cpu.get_cpu_capability())}
        return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:32]


def _recorded_passes(recipe: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((str(e["name"]), str(e["root"])) for e in recipe["passes"])


def _check_sources(recipe: Mapping[str, Any]) -> None:
    """Refuse an artifact whose passes' source changed since its compile (each read from its root)."""
    for entry in [*recipe["passes"], *(e for entries in recipe.get("hooks", {}).values() for e in entries)]:
        import_from(entry["root"], entry["name"].partition(":")[0])
        _, digest = load_pass(entry["name"])
        if digest != entry["source_sha256"]:
            raise BackendError(f"user pass {entry['name']!r} changed since the artifact was compiled; compile again")


def _hybrid_prefix(model_path: Path) -> tuple[Path, tuple[tuple[str, str], ...]]:
    """A zoo model: itself, no prefix. An inductor artifact (a hybrid's stage 1, whose path
    ``Capabilities.hybrid_compile`` lets a compile start from): its model and its passes with their
    roots, checked against their recorded source."""
    if model_path.name != RECIPE:
        return model_path, ()
    try:
        recipe = json.loads(model_path.read_text())
    except (OSError, ValueError) as exc:
        raise BackendError(f"cannot read the hybrid's first stage {model_path}: {first_line(exc)}") from None
    _check_sources(recipe)
    return model_path.parent / recipe["model"], _recorded_passes(recipe)


__all__ = ["INSTALL_HINT", "InductorBackend", "InductorTrace", "kernel_count"]
