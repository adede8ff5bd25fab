"""Materialize a suite's models: build zoo architectures or read ``.onnx`` files, then check them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard.errors import UserError, first_line
from perfguard.models.inputs import InputSpec, input_specs
from perfguard.models.onnx_files import data_files, load_skeleton, model_digest, save_model
from perfguard.names import safe_filename
from perfguard.suite import ModelSpec

if TYPE_CHECKING:
    import onnx


@dataclass(frozen=True)
class LoadedModel:
    spec: ModelSpec
    path: Path
    sha256: str
    inputs: list[InputSpec]
    node_count: int
    opset: int


def materialize(spec: ModelSpec, folder: Path, compiler_path: Path | None = None) -> LoadedModel:
    """Write (zoo) or check (file) the model and describe it; ``UserError`` for a broken model.
    A PyTorch callable (``spec.torch``) is imported from ``compiler_path`` (the suite's
    ``[compiler] path``) and called in a child process, which writes its descriptor
    (``perfguard.models.torch_callable``).

    A file may keep its tensors in external data files next to it (``model.onnx`` +
    ``model.onnx.data``): they are found relative to the model, their bytes are part of the model
    hash, and the model is checked from its path (a >2 GB model cannot be checked in memory).

    An IR < 4 file whose initializers are also listed in ``graph.input`` (the older model-zoo
    exports; IR 3 requires that listing) is normalized once, here: those entries are dropped and
    ``ir_version`` becomes 4, written to ``folder`` as the model every case compiles and the
    reference runs. Why not keep IR 3 and make every pass keep ``graph.input`` in step: ONNX Runtime
    treats such initializers as constants, while onnxoptimizer (and most user passes) treat an
    input-listed initializer as a runtime input, so ``fuse_bn_into_conv`` never fires on an IR-3
    graph, and every pass would have to add its new initializers to the inputs. IR 4 differs from
    IR 3 only in allowing initializers that are not inputs, so the normalized model computes the same
    thing, stays valid for its IR version and passes ``onnx.checker`` (checked; where it would not,
    e.g. an IR 1-2 file without opset imports, the file is used as it is and perfguard's own passes
    still treat those initializers as constants).
    """
    import onnx

    if spec.torch is not None:
        from perfguard.models.torch_callable import describe

        path, described = describe(spec, folder, compiler_path)
        return LoadedModel(spec, path, described.sha256, list(described.inputs), described.node_count, 0)
    if spec.path is not None:
        model = read_model_file(spec.path, f"model {spec.name!r}")
        try:
            files = data_files(spec.path, model)
        except FileNotFoundError as exc:
            raise UserError(f"model {spec.name!r}: {exc}; copy it next to {spec.path}") from None
        _check(spec, str(spec.path) if files else model)
        path = spec.path
        normalized = constant_initializer_inputs_dropped(model)
        if normalized is not None and _is_valid(normalized):
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{safe_filename(spec.name)}.onnx"
            if files:
                from onnx.external_data_helper import load_external_data_for_model

                load_external_data_for_model(normalized, str(spec.path.parent))
            save_model(normalized, path, external=bool(files))
            model = load_skeleton(path)
            files = data_files(path, model)
    else:
        from perfguard.models.zoo import build_model

        model = build_model(str(spec.arch), spec.params)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{safe_filename(spec.name)}.onnx"
        onnx.save(model, str(path))
        files = []
        _check(spec, model)
    digest = model_digest(model, files)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return LoadedModel(spec, path, digest, input_specs(model, spec.input_settings), len(model.graph.node), opset)


def read_model_file(path: Path, where: str) -> onnx.ModelProto:
    """The ONNX model at ``path`` without its external data, or a ``UserError`` starting with
    ``where`` that says why it is none: missing, a folder or other non-file, unreadable, not ONNX, or
    without graph nodes. ``validate`` (through the preflight) and ``run`` refuse a model file here,
    so a suite that validates does not fail on its model later."""
    if path.is_dir():
        raise UserError(f"{where}: {path} is a folder, not an ONNX model file")
    if not path.exists():
        raise UserError(f"{where}: file not found: {path}")
    if not path.is_file():  # a device or a pipe: reading it may never end
        raise UserError(f"{where}: {path} is not a regular file; give an .onnx file")
    try:
        model = load_skeleton(path)
    except OSError as exc:
        raise UserError(f"{where}: cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    except Exception as exc:  # protobuf's DecodeError, onnx's own: what a non-ONNX file raises
        raise UserError(f"{where}: {path} is not a readable ONNX model ({type(exc).__name__}); "
                        "give an .onnx file") from None
    if not model.graph.node:
        raise UserError(f"{where}: {path} holds no graph nodes; is it an ONNX model?")
    return model


def _check(spec: ModelSpec, model: onnx.ModelProto | str) -> None:
    import onnx

    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        raise UserError(f"model {spec.name!r}: invalid ONNX model: {first_line(exc)}") from None


def _is_valid(model: onnx.ModelProto) -> bool:
    import onnx

    try:
        onnx.checker.check_model(model)
    except Exception:
        return False
    return True


def constant_initializer_inputs_dropped(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """For an IR < 4 model that lists initializers in ``graph.input``: a copy without those entries,
    at IR version 4 (they are constants, as ONNX Runtime treats them). ``None`` when there is
    nothing to normalize."""
    import onnx

    if model.ir_version >= 4:
        return None
    initializers = {init.name for init in model.graph.initializer}
    if not any(value.name in initializers for value in model.graph.input):
        return None
    normalized = onnx.ModelProto()
    normalized.CopyFrom(model)
    kept = [value for value in normalized.graph.input if value.name not in initializers]
    del normalized.graph.input[:]
    normalized.graph.input.extend(kept)
    normalized.ir_version = 4
    return normalized
