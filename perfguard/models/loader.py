"""Materialize a suite's models: build zoo architectures or read ``.onnx`` files, then check them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from perfguard.errors import UserError
from perfguard.inputs import InputSpec, input_specs
from perfguard.suite import ModelSpec


@dataclass(frozen=True)
class LoadedModel:
    spec: ModelSpec
    path: Path
    sha256: str
    inputs: list[InputSpec]
    node_count: int
    opset: int


def materialize(spec: ModelSpec, folder: Path) -> LoadedModel:
    """Write (zoo) or check (file) the model and describe it; ``UserError`` for a broken model."""
    import onnx

    if spec.path is not None:
        if not spec.path.is_file():
            raise UserError(f"model {spec.name!r}: file not found: {spec.path}")
        try:
            model = onnx.load(str(spec.path))
        except Exception as exc:
            raise UserError(
                f"model {spec.name!r}: {spec.path} is not a readable ONNX model "
                f"({type(exc).__name__}); give an .onnx file"
            ) from None
        if not model.graph.node:
            raise UserError(f"model {spec.name!r}: {spec.path} holds no graph nodes; is it an ONNX model?")
        path = spec.path
    else:
        from perfguard.models.zoo import build_model

        model = build_model(str(spec.arch), spec.params)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{spec.name}.onnx"
        onnx.save(model, str(path))
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"model {spec.name!r}: invalid ONNX model: {first}") from None
    digest = hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return LoadedModel(spec, path, digest, input_specs(model, spec.input_settings), len(model.graph.node), opset)
