"""The ``ort`` backend: a pinned ONNX-level pass list, then ONNX Runtime with pinned settings.

Pipeline options (all pinned and hashed into the case key):

``graph_optimization_level``
    ``disabled`` (default: the pinned pass list alone decides), ``basic``, ``extended``, ``layout``
    or ``all``.
``disabled_optimizers``
    ORT graph transformers or rewrite rules switched off by name. ORT ignores unknown names without a
    word and its session-config form splits on ``;``, so names are checked against the list of
    this ORT version before they are passed (as the ``disabled_optimizers`` keyword, never joined).

A model whose tensors live in external data files compiles to an artifact that keeps them in a side
file (``model.onnx`` + ``model.onnx.data`` in the artifact folder): an inline copy of a >2 GB model
cannot be written. The artifact's sha256 and size cover both files.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfguard.backends.base import Artifact, Backend, Capabilities, CompileOutput, PassInfo
from perfguard.backends.counting_hooks import counted, counting_compile
from perfguard.backends.ort.execution_providers import check_providers, check_session, session_providers
from perfguard.backends.ort.onnx_passes import (
    apply_pipeline,
    check_pass_names,
    list_onnx_passes,
    onnxoptimizer_version,
    run_pipeline,
)
from perfguard.backends.settings import check_option_keys, option_choice
from perfguard.errors import BackendError, CountedCompileDone, UserError, first_line, unknown_name_message
from perfguard.jsonfields import JsonDict

if TYPE_CHECKING:
    import numpy as np

    from perfguard.runners.base import Runner
    from perfguard.suite import PipelineSpec

LEVELS = {
    "disabled": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}

# Graph transformers registered by ONNX Runtime 1.32 (read from a VERBOSE session log) and the
# rewrite rules inside its rule-based transformers (graph_transformer_utils.cc). Both kinds can be
# disabled by name.
ORT_TRANSFORMERS = (
    "Level1_RuleBasedTransformer", "DoubleQDQPairsRemover", "ConstantSharing", "CommonSubexpressionElimination",
    "ConstantFolding", "MatMulAddFusion", "ReshapeFusion", "FreeDimensionOverrideTransformer",
    "SliceConcatToSpaceToDepthFusion", "GeluFusionL1", "LayerNormFusionL1", "QDQPropagationTransformer",
    "WeightBiasQuantization", "EnsureUniqueDQForNodeUnit", "WhereDummyDq", "TransposeOptimizer",
    "Level2_RuleBasedTransformer", "TransposeOptimizer_CPUExecutionProvider", "QDQS8ToU8Transformer",
    "QDQSelectorActionTransformer", "GemmActivationFusion", "MatMulIntegerToFloatFusion",
    "DynamicQuantizeMatMulFusion", "ConvActivationFusion", "GeluFusionL2", "LayerNormFusionL2",
    "SimplifiedLayerNormFusion", "AttentionFusion", "EmbedLayerNormFusion", "GatherSliceToSplitFusion",
    "GatherToSliceFusion", "MatmulTransposeFusion", "BiasGeluFusion", "GroupQueryAttentionFusion",
    "SkipLayerNormFusion", "BiasSkipLayerNormFusion", "FastGeluFusion", "QuickGeluFusion", "SwiGluFusion",
    "BiasSoftmaxFusion", "BiasDropoutFusion", "MatMulScaleFusion", "MatMulActivationFusion",
    "MatMulNBitsFusion", "GroupQueryAttentionPreNormFusion", "QDQFinalCleanupTransformer",
    "NchwcTransformer", "NhwcTransformer", "ConvAddActivationFusion", "FuseFp16InitializerToFp32NodeTransformer",
)
ORT_RULES = (
    "EliminateIdentity", "EliminateSlice", "UnsqueezeElimination", "EliminateDropout", "ExpandElimination",
    "CastElimination", "PreShapeNodeElimination", "NoopElimination", "DivMulFusion", "FuseReluClip",
    "GemmSumFusion", "GemmTransposeFusion", "NotWhereFusion", "ConvAddFusion", "ConvMulFusion", "ConvBNFusion",
    "PadFusion", "MatmulBNFusion", "LabelEncoderFusion",
)
OPTION_KEYS = ("graph_optimization_level", "disabled_optimizers")


def ort_settings(options: Mapping[str, Any], where: str) -> JsonDict:
    """Validate a pipeline's ORT options and return them in canonical form."""
    check_option_keys(options, OPTION_KEYS, "ort", where)
    level = option_choice(options, "graph_optimization_level", "disabled", LEVELS, "level", where)
    disabled = options.get("disabled_optimizers", [])
    if not isinstance(disabled, list) or not all(isinstance(d, str) for d in disabled):
        raise UserError(f"{where}: disabled_optimizers: expected a list of optimizer names")
    known = ORT_TRANSFORMERS + ORT_RULES
    for name in disabled:
        if name not in known:
            raise UserError(f"{where}: disabled_optimizers: " + unknown_name_message("ORT optimizer", name, known))
    return {"graph_optimization_level": level, "disabled_optimizers": sorted(set(disabled))}


def session_options(settings: Mapping[str, Any], threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[settings["graph_optimization_level"]])
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return options


class OrtExecutable:
    def __init__(self, session: Any) -> None:
        self.session = session
        self.output_names = [o.name for o in session.get_outputs()]
        self._bound: list[object] = []  # the values ``bind`` bound, alive as long as it is

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        outputs: list[np.ndarray] = self.session.run(self.output_names, dict(feeds))
        return outputs

    def bind(self, feeds: Mapping[str, np.ndarray]) -> Callable[[], object]:
        """One inference per call with inputs and outputs bound once (ORT's IOBinding) to values
        in ONNX Runtime's own memory (its allocator aligns them as its kernels expect; a numpy
        array is only aligned to 16 bytes), the outputs shaped by a first run: no numpy conversion, no
        output allocation and no Python attribute lookup per call (``BindableExecutable``)."""
        import functools

        import numpy as np
        import onnxruntime as ort

        first = self.run(feeds)
        binding = self.session.io_binding()
        for name, value in feeds.items():
            bound = ort.OrtValue.ortvalue_from_shape_and_type(list(value.shape), value.dtype, "cpu")
            bound.update_inplace(np.ascontiguousarray(value))
            binding.bind_ortvalue_input(name, bound)
            self._bound.append(bound)
        for name, out in zip(self.output_names, first, strict=True):
            array = np.asarray(out)
            bound = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), array.dtype, "cpu")
            binding.bind_ortvalue_output(name, bound)
            self._bound.append(bound)
        raw, sess = getattr(binding, "_iobinding", None), getattr(self.session, "_sess", None)
        if raw is not None and sess is not None:  # the C++ call itself: no wrapper frame per call
            return functools.partial(sess.run_with_iobinding, raw, None)
        return functools.partial(self.session.run_with_iobinding, binding)

    def end_profiling(self) -> str:
        """The trace of a session made with a ``profile_prefix`` (ORT's own JSON events, the
        format ``perfguard.workers.trace`` reads)."""
        return str(self.session.end_profiling())


def create_session(path: str, settings: Mapping[str, Any], threads: int, providers: list[Any],
                   optimized_path: str | None = None, profile_prefix: str | None = None) -> Any:
    """An ONNX Runtime session with the pipeline's pinned ``settings``; ``profile_prefix``: with
    the profiler on, writing its trace to ``PREFIX_<date>.json`` (``end_profiling()`` returns the
    path). Nothing else changes, so a profiled session runs the same optimized graph."""
    import onnxruntime as ort

    options = session_options(settings, threads)
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    if optimized_path:
        options.optimized_model_filepath = optimized_path
        # Large weights go to a side file, so the optimized copy of a >2 GB model can be written.
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                         os.path.basename(optimized_path) + ".data")
    session = ort.InferenceSession(path, options, providers=providers,
                                   disabled_optimizers=list(settings["disabled_optimizers"]) or None)
    return session


class OrtBackend(Backend):
    name = "ort"
    # ONNX Runtime's profiler; an artifact is an ONNX model another compile can start from; its
    # passes are ONNX-level, so the compiler under test's own passes (onnx_passes) run here too.
    capabilities = Capabilities(profile=True, hybrid_compile=True, user_passes=True, counts=True,
                                compile_counts=True)

    def versions(self) -> dict[str, str]:
        import onnx
        import onnxruntime

        return {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
                "onnxoptimizer": onnxoptimizer_version()}

    def list_passes(self) -> list[PassInfo]:
        return list_onnx_passes()

    def check_pipeline(self, pipeline: PipelineSpec) -> None:
        where = f"pipeline {pipeline.name!r}"
        check_pass_names(pipeline.passes, where)
        ort_settings(pipeline.options, where)

    def compile(self, model_path: Path, pipeline: PipelineSpec, out_dir: Path) -> CompileOutput:
        from perfguard.models.onnx_files import artifact_sha256, artifact_size, load_model, save_model

        settings = ort_settings(pipeline.options, f"pipeline {pipeline.name!r}")
        start = time.perf_counter()
        try:
            model, external = load_model(model_path)
        except FileNotFoundError as exc:
            raise BackendError(f"cannot read {model_path}: {first_line(exc)}") from None
        loaded = time.perf_counter() - start
        compiled, trace = apply_pipeline(model, list(pipeline.passes))
        out_dir.mkdir(parents=True, exist_ok=True)
        artifact_path = out_dir / "model.onnx"
        node_count = len(compiled.graph.node)
        start = time.perf_counter()
        save_model(compiled, artifact_path, external=external)
        work_time = loaded + trace.total_time_s + time.perf_counter() - start
        # A counted compile counts the session step at every level, "disabled" too (ONNX Runtime
        # still partitions the graph and creates its kernels): a pipeline with no passes then
        # compares like with like against one with passes, not 0 against a total.
        if settings["graph_optimization_level"] != "disabled" or counting_compile():
            with counted("step|ort_session_optimization"):
                node_count = self._ort_node_count(artifact_path, settings)
        if counting_compile():
            raise CountedCompileDone  # the last window: a counted compile's artifact is discarded unhashed
        artifact = Artifact(backend=self.name, path=str(artifact_path), settings=settings,
                            sha256=artifact_sha256(artifact_path), size_bytes=artifact_size(artifact_path),
                            node_count=node_count)
        return CompileOutput(artifact=artifact, trace=trace, work_time_s=work_time)

    def rehearse_counted_compile(self, folder: Path) -> bool:
        """Compile a tiny ResNet and a tiny BERT under no pass, at the levels ``disabled`` and ``all``:
        ONNX Runtime's session step, its optimizers and kernel creation for convolutions,
        normalizations and attention, what most of a counted compile's instructions run (the same
        models in every job, so every job's counted compiles start from one state)."""
        import onnx

        from perfguard.models.zoo import build_bert, build_resnet
        from perfguard.suite import PipelineSpec

        models = (build_resnet(depth=1, width=4, image_size=8, num_classes=4),
                  build_bert(layers=1, hidden=16, heads=2, seq_len=4, vocab=16))
        for index, model in enumerate(models):
            path = folder / f"rehearsal-{index}.onnx"
            onnx.save(model, path)
            for level in ("disabled", "all"):
                pipeline = PipelineSpec("rehearsal", self.name, (), {"graph_optimization_level": level})
                with contextlib.suppress(CountedCompileDone):  # as a counted compile ends
                    self.compile(path, pipeline, folder / f"rehearsal-{index}-{level}")
        return True

    def recompile_time(self, model_path: Path, pipeline: PipelineSpec, out_dir: Path) -> float:
        """Read, run the passes (untraced: ``onnx_passes.run_pipeline``), write: what
        ``compile`` times as ``work_time_s``, without the trace's hashes and checks (0.5 s of
        every 1.0 s compile of a 85 MB model)."""
        from perfguard.models.onnx_files import load_model, save_model

        start = time.perf_counter()
        model, external = load_model(model_path)
        compiled = run_pipeline(model, list(pipeline.passes))
        out_dir.mkdir(parents=True, exist_ok=True)
        save_model(compiled, out_dir / "model.onnx", external=external)
        return time.perf_counter() - start

    def _ort_node_count(self, path: Path, settings: Mapping[str, Any]) -> int:
        """Nodes left after ORT's own pinned optimizers ran (what really executes)."""
        import onnx

        with tempfile.TemporaryDirectory() as tmp:
            optimized = os.path.join(tmp, "ort_optimized.onnx")
            try:
                create_session(str(path), settings, 1, ["CPUExecutionProvider"], optimized_path=optimized)
            except Exception as exc:
                raise BackendError(f"ONNX Runtime cannot load the compiled model: {first_line(exc)}") from None
            return len(onnx.load(optimized, load_external_data=False).graph.node)

    def check_runner(self, runner: Runner) -> None:
        """An ONNX Runtime session on the runner's execution provider (``execution_providers.check_providers``)."""
        check_providers(runner)

    def thread_env(self, threads: int) -> dict[str, str]:
        """ONNX Runtime's telemetry off: from 1.32 its import starts an uploader thread (three
        more later, and a SQLite file under ``~/.cache``) at moments the load decides, in every
        worker that imports it; its pools are sized by the session options, not the environment."""
        return {"ORT_DISABLE_TELEMETRY": "1"}

    def preload(self) -> None:
        """ONNX Runtime's Python module (its import starts no thread with ``thread_env``; a session does)."""
        import onnxruntime  # noqa: F401

    def load(self, artifact: Artifact, runner: Runner, threads: int,
             profile_prefix: str | None = None) -> OrtExecutable:
        """Load for ``runner``; ``profile_prefix``: with the profiler on (``create_session``)."""
        providers = session_providers(runner)
        try:
            session = create_session(artifact.path, artifact.settings, threads, providers,
                                     profile_prefix=profile_prefix)
        except Exception as exc:
            raise BackendError(f"ONNX Runtime cannot load {artifact.path}: {first_line(exc)}") from None
        check_session(runner, session)
        return OrtExecutable(session)

    def load_profiled(self, artifact: Artifact, runner: Runner, threads: int, trace_prefix: str) -> OrtExecutable:
        return self.load(artifact, runner, threads, profile_prefix=trace_prefix)
