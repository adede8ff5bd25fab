"""A model's arithmetic, estimated from its ONNX graph: the multiply-accumulates of its Conv,
ConvTranspose, MatMul and Gemm nodes at the shapes ONNX's shape inference gives (other
operators are counted as nothing: on the CNNs and transformers users bring, these four are
nearly all of the work).

What it is for: a counted run (``perfguard.counting.plan``) sizes its warm-up and window by
the model, one plan for every pipeline of that model (so both sides of a check are counted
alike and compare): a model of 3.6 G MACs (ResNet-34 at 224x224) runs about 1 G instructions
per inference, where one inference is exact, and each inference under Valgrind costs a minute.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

#: The operators whose multiply-accumulates are counted.
COUNTED_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")


def model_macs(path: str | Path) -> int:
    """The multiply-accumulates of one inference of the ONNX model at ``path`` (0 for a file
    that is not an ONNX model or whose shapes cannot be inferred: such a model gets the plan of
    a small one, which is exact, only dearer)."""
    try:
        stat = Path(path).stat()
    except OSError:
        return 0
    return _macs(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _macs(path: str, size: int, mtime_ns: int) -> int:  # size and mtime: a rewritten file is read again
    import onnx

    try:
        model = onnx.load(path, load_external_data=False)
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - not an ONNX model, or shapes it cannot infer: no estimate
        return 0
    shapes = _shapes(inferred.graph)
    total = 0
    for node in inferred.graph.node:
        if node.op_type in COUNTED_OPS:
            total += _node_macs(node, shapes)
    return total


def _shapes(graph: object) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape where all its dimensions are known (inputs, initializers, values)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for init in getattr(graph, "initializer", ()):
        shapes[init.name] = tuple(int(d) for d in init.dims)
    for value in (*getattr(graph, "input", ()), *getattr(graph, "value_info", ()), *getattr(graph, "output", ())):
        dims = value.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
            shapes[value.name] = tuple(int(d.dim_value) for d in dims)
    return shapes


def _node_macs(node: object, shapes: dict[str, tuple[int, ...]]) -> int:
    """One node's multiply-accumulates: output elements times the reduction length (a
    convolution's input channels per group times its kernel; a product's inner dimension)."""
    inputs, outputs = list(getattr(node, "input", ())), list(getattr(node, "output", ()))
    out = shapes.get(outputs[0]) if outputs else None
    if out is None or len(inputs) < 2:
        return 0
    other = shapes.get(inputs[1])
    if other is None:
        return 0
    op = getattr(node, "op_type", "")
    if op == "Conv":  # weight: (M, C/group, k...)
        return math.prod(out) * math.prod(other[1:])
    if op == "ConvTranspose":  # weight: (C, M/group, k...): each input element feeds M/group x k outputs
        first = shapes.get(inputs[0])
        return 0 if first is None else math.prod(first) * math.prod(other[1:])
    if op == "Gemm":
        first = shapes.get(inputs[0])
        return 0 if first is None else math.prod(out) * (first[0] if _trans_a(node) else first[-1])
    first = shapes.get(inputs[0])  # MatMul: (..., n, k) x (..., k, m)
    return 0 if first is None else math.prod(out) * first[-1]


def _trans_a(node: object) -> bool:
    return any(a.name == "transA" and a.i == 1 for a in getattr(node, "attribute", ()))
