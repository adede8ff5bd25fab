"""A seeded zoo of ONNX models shaped like the workloads AI compilers are tuned for.

perfguard needs models to compile and time without downloading anything, and it needs the *same*
model on every machine and every run: a baseline taken last week is only comparable if the graph
it timed is byte-identical today. So every model here is built from ``onnx.helper`` calls and
float32 weights drawn from ``numpy.random.default_rng(seed)``; the same parameters and seed give
the same ``SerializeToString(deterministic=True)`` bytes.

The graphs deliberately keep the patterns that compiler passes exist to rewrite, spelled the way
real exporters spell them:

``resnet``
    Conv + separate BatchNormalization + Relu, residual Adds, 1x1 projection shortcuts
    (targets: BN folding, Conv+Add+Relu fusion).
``bert``
    LayerNorm and GELU written out as primitive ops (ReduceMean/Sub/Pow/Sqrt/Div, Erf), attention
    as MatMul/Reshape/Transpose/Softmax with an additive mask bias (targets: LayerNorm, GELU and
    attention fusion).
``yolo``
    Conv + BN + SiLU (Sigmoid * x), nearest Resize + Concat feature pyramid, three detection heads
    decoded with Reshape/Transpose/Sigmoid (targets: SiLU fusion, layout passes).
``legacy_cnn``
    An opset-9 file in the style of older exports: a weight computed at run time
    (ConstantOfShape + Add), Sum, LRN, Dropout, a Shape/Gather/Concat-driven Reshape (targets:
    constant folding, dead-node elimination, old-opset handling).

Every model passes ``onnx.checker.check_model(model, full_check=True)`` and runs in onnxruntime
with finite outputs. Builders record ``perfguard.arch`` and ``perfguard.params`` (JSON) in the
model's ``metadata_props``; models with integer inputs also record ``perfguard.input_ranges``
(JSON ``{input: [low, high)}``) so input generators can stay inside the embedding table.
"""

from __future__ import annotations

import inspect
import json
import math
import typing
from collections.abc import Callable, Mapping

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from perfguard.errors import UserError, unknown_name_message
from perfguard.models._onnx_builder import GraphBuilder

#: Oldest opset the modern architectures are built for (Resize with ``scales`` needs 11).
MIN_OPSET = 11
#: The opsets ``build_legacy_cnn`` accepts: ConstantOfShape appears in 9, Dropout changes in 12.
LEGACY_OPSETS = range(9, 13)

# The published ResNet stage layouts for the block counts they name; other depths split evenly.
_RESNET_LAYOUTS: dict[int, tuple[int, ...]] = {8: (2, 2, 2, 2), 16: (3, 4, 6, 3)}


# -- validation -----------------------------------------------------------------------------------


def _require_int(name: str, value: object, minimum: int = 1) -> int:
    """Return ``value`` if it is an int >= ``minimum``; raise a UserError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"model parameter {name!r} must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise UserError(f"model parameter {name!r} must be {what}, got {value}")
    return value


def _validated(arch: str, params: dict[str, object], opsets: range) -> dict[str, object]:
    """Check a builder's arguments (sizes >= 1, seed >= 0, opset in ``opsets``) and return them.

    Builders call this with ``locals()`` first thing, so direct calls get the same checks as
    :func:`build_model`; ``None`` is let through for optional sizes (``ffn``).
    """
    for name, value in params.items():
        if value is not None:
            _require_int(name, value, minimum=0 if name == "seed" else 1)
    opset = params["opset"]
    if opset not in opsets:
        raise UserError(f"{arch}: opset {opset} is not supported; use {opsets.start}..{opsets.stop - 1}")
    return params


def _modern_opsets() -> range:
    # Newest opset the installed onnx knows; the checker rejects anything newer.
    return range(MIN_OPSET, onnx.defs.onnx_opset_version() + 1)


def _metadata(arch: str, params: Mapping[str, object], **extra: str) -> dict[str, str]:
    meta = {"perfguard.arch": arch, "perfguard.params": json.dumps(dict(params), sort_keys=True)}
    meta.update(extra)
    return meta


def parameter_count(model: onnx.ModelProto) -> int:
    """Total number of elements in the model's initializers (weights, biases, constants)."""
    return sum(math.prod(tensor.dims) for tensor in model.graph.initializer)


# -- ResNet -------------------------------------------------------------------------------------


def resnet_stage_layout(depth: int) -> tuple[int, ...]:
    """Residual blocks per stage for ``depth`` blocks in total.

    8 and 16 use the paper's ResNet-18 (2,2,2,2) and ResNet-34/50 (3,4,6,3) layouts. Other depths
    fill up to four stages evenly, extra blocks going to the third stage first (the deepest one in
    the paper); fewer than four blocks give one block per stage and fewer stages.
    """
    _require_int("depth", depth)
    if depth in _RESNET_LAYOUTS:
        return _RESNET_LAYOUTS[depth]
    stages = min(4, depth)
    base, extra = divmod(depth, stages)
    counts = [base] * stages
    for index in (2, 1, 3, 0)[:extra]:
        counts[index] += 1
    return tuple(counts)


def _basic_block(g: GraphBuilder, x: str, cin: int, cout: int, stride: int, prefix: str) -> str:
    y = g.conv(x, cin, cout, 3, stride, prefix=f"{prefix}.conv1")
    y = g.node("Relu", [g.batch_norm(y, cout, prefix=f"{prefix}.bn1")])
    y = g.conv(y, cout, cout, 3, prefix=f"{prefix}.conv2")
    # A smaller BN scale on the residual branch (like zero-init gamma, but not zero) keeps deep
    # stacks of blocks from growing activations block after block.
    y = g.batch_norm(y, cout, prefix=f"{prefix}.bn2", gamma=0.3)
    shortcut = x
    if stride != 1 or cin != cout:
        shortcut = g.conv(x, cin, cout, 1, stride, prefix=f"{prefix}.downsample.0")
        shortcut = g.batch_norm(shortcut, cout, prefix=f"{prefix}.downsample.1")
    return g.node("Relu", [g.node("Add", [y, shortcut])])


def build_resnet(
    depth: int = 18,
    width: int = 64,
    image_size: int = 224,
    num_classes: int = 1000,
    batch: int = 1,
    seed: int = 0,
    opset: int = 17,
) -> onnx.ModelProto:
    """A ResNet with basic residual blocks; input ``input`` [batch, 3, image_size, image_size].

    ``depth`` counts residual blocks (two 3x3 convs each), spread over up to four stages by
    :func:`resnet_stage_layout`; each stage after the first doubles the channels and halves the
    resolution through a strided block with a 1x1 Conv+BN projection. ``width`` is the stem's
    channel count. Output ``logits`` [batch, num_classes].

    Sizes (224x224, 1000 classes): ``depth=8`` is ResNet-18 (1.8 GMAC, 11.7 M parameters) and
    ``depth=16`` is ResNet-34 (3.7 GMAC, 21.8 M). The default ``depth=18, width=64`` is the
    **ResNet-50-like** config: 4.1 GMAC and 25.7 M parameters, ResNet-50's 4.1 GMAC and 25.6 M
    (with basic blocks rather than bottlenecks, so fewer, wider convolutions).
    """
    params = _validated("resnet", dict(locals()), _modern_opsets())
    layout = resnet_stage_layout(depth)

    g = GraphBuilder("resnet", opset, seed)
    x = g.add_input("input", TensorProto.FLOAT, [batch, 3, image_size, image_size])
    y = g.conv(x, 3, width, 7, 2, prefix="conv1")
    y = g.node("Relu", [g.batch_norm(y, width, prefix="bn1")])
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels = width
    for stage, blocks in enumerate(layout):
        stage_width = width * 2**stage
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            y = _basic_block(g, y, channels, stage_width, stride, prefix=f"layer{stage + 1}.{block}")
            channels = stage_width
    y = g.node("Flatten", [g.node("GlobalAveragePool", [y])], axis=1)
    g.gemm(y, channels, num_classes, prefix="fc", output="logits")
    g.add_output("logits", TensorProto.FLOAT, [batch, num_classes])
    return g.build(_metadata("resnet", params))


# -- BERT ---------------------------------------------------------------------------------------


def _layer_norm(g: GraphBuilder, x: str, hidden: int, prefix: str, output: str | None = None) -> str:
    # Spelled out the way pre-LayerNormalization exporters emit it, so LayerNorm fusion has work.
    mean = g.reduce_mean(x, [-1])
    centered = g.node("Sub", [x, mean])
    variance = g.reduce_mean(g.node("Pow", [centered, g.constant(2.0, np.float32)]), [-1])
    std = g.node("Sqrt", [g.node("Add", [variance, g.constant(1e-12, np.float32)])])
    normed = g.node("Div", [centered, std])
    scaled = g.node("Mul", [normed, g.uniform(f"{prefix}.weight", [hidden], 0.8, 1.2)])
    return g.node("Add", [scaled, g.normal(f"{prefix}.bias", [hidden], std=0.05)], output=output)


def _gelu(g: GraphBuilder, x: str) -> str:
    # x * 0.5 * (1 + erf(x / sqrt(2))): the erf form that GELU fusion passes pattern-match.
    erf = g.node("Erf", [g.node("Div", [x, g.constant(math.sqrt(2.0), np.float32)])])
    gated = g.node("Mul", [x, g.node("Add", [erf, g.constant(1.0, np.float32)])])
    return g.node("Mul", [gated, g.constant(0.5, np.float32)])


def _linear(g: GraphBuilder, x: str, fan_in: int, fan_out: int, prefix: str) -> str:
    # MatMul + Add, not Gemm: 3-D activations, as transformer exporters write nn.Linear.
    weight = g.normal(f"{prefix}.weight", [fan_in, fan_out], std=1.0 / math.sqrt(fan_in))
    return g.node("Add", [g.node("MatMul", [x, weight]), g.normal(f"{prefix}.bias", [fan_out], std=0.02)])


def _attention(g: GraphBuilder, x: str, mask_bias: str, dims: tuple[int, int, int, int], prefix: str) -> str:
    batch, seq_len, hidden, heads = dims
    head_dim = hidden // heads
    split_shape = g.constant([batch, seq_len, heads, head_dim], np.int64)

    def project(name: str, perm: list[int]) -> str:
        y = _linear(g, x, hidden, hidden, f"{prefix}.{name}")
        return g.node("Transpose", [g.node("Reshape", [y, split_shape])], perm=perm)

    query = project("query", [0, 2, 1, 3])
    key = project("key", [0, 2, 3, 1])  # pre-transposed for Q @ K^T
    value = project("value", [0, 2, 1, 3])
    scores = g.node("Div", [g.node("MatMul", [query, key]), g.constant(math.sqrt(head_dim), np.float32)])
    probs = g.node("Softmax", [g.node("Add", [scores, mask_bias])], axis=-1)
    context = g.node("Transpose", [g.node("MatMul", [probs, value])], perm=[0, 2, 1, 3])
    context = g.node("Reshape", [context, g.constant([batch, seq_len, hidden], np.int64)])
    return _linear(g, context, hidden, hidden, f"{prefix}.output")


def build_bert(
    layers: int = 4,
    hidden: int = 256,
    heads: int = 4,
    seq_len: int = 128,
    ffn: int | None = None,
    vocab: int = 30522,
    batch: int = 1,
    seed: int = 0,
    opset: int = 17,
) -> onnx.ModelProto:
    """A BERT encoder; inputs ``input_ids`` and ``attention_mask``, int64 [batch, seq_len].

    Word embeddings are a Gather, position embeddings an initializer Add; each layer is post-norm
    self-attention plus a GELU feed-forward block of width ``ffn`` (default ``4 * hidden``). The
    mask becomes an additive bias (1 - mask) * -10000 shared by all layers. Output
    ``last_hidden_state`` [batch, seq_len, hidden]. ``input_ids`` must lie in [0, vocab).

    BERT-base is ``layers=12, hidden=768, heads=12`` (~86 M parameters plus 23 M of embeddings);
    ``layers=4, hidden=512, heads=8`` is a BERT-small that stays quick on a 2-core machine.
    """
    params = _validated("bert", dict(locals()), _modern_opsets())
    ffn = params["ffn"] = 4 * hidden if ffn is None else ffn
    if hidden % heads:
        raise UserError(f"bert: hidden ({hidden}) must be divisible by heads ({heads})")

    g = GraphBuilder("bert", opset, seed)
    ids = g.add_input("input_ids", TensorProto.INT64, [batch, seq_len])
    mask = g.add_input("attention_mask", TensorProto.INT64, [batch, seq_len])
    table = g.normal("embeddings.word_embeddings.weight", [vocab, hidden], std=0.02)
    words = g.node("Gather", [table, ids], axis=0)
    embedded = g.node("Add", [words, g.normal("embeddings.position_embeddings", [seq_len, hidden], std=0.02)])
    x = _layer_norm(g, embedded, hidden, "embeddings.LayerNorm")

    mask_bias = g.node("Cast", [g.unsqueeze(mask, [1, 2])], to=TensorProto.FLOAT)
    mask_bias = g.node("Sub", [g.constant(1.0, np.float32), mask_bias])
    mask_bias = g.node("Mul", [mask_bias, g.constant(-10000.0, np.float32)])

    for layer in range(layers):
        prefix = f"encoder.layer.{layer}"
        attended = _attention(g, x, mask_bias, (batch, seq_len, hidden, heads), f"{prefix}.attention")
        x = _layer_norm(g, g.node("Add", [attended, x]), hidden, f"{prefix}.attention.LayerNorm")
        inner = _gelu(g, _linear(g, x, hidden, ffn, f"{prefix}.intermediate"))
        out = _linear(g, inner, ffn, hidden, f"{prefix}.output")
        last = layer == layers - 1
        x = _layer_norm(
            g,
            g.node("Add", [out, x]),
            hidden,
            f"{prefix}.output.LayerNorm",
            output="last_hidden_state" if last else None,
        )
    g.add_output("last_hidden_state", TensorProto.FLOAT, [batch, seq_len, hidden])
    ranges = json.dumps({"attention_mask": [0, 2], "input_ids": [0, vocab]}, sort_keys=True)
    return g.build(_metadata("bert", params, **{"perfguard.input_ranges": ranges}))


# -- YOLO ---------------------------------------------------------------------------------------


def _conv_bn_silu(
    g: GraphBuilder, x: str, cin: int, cout: int, kernel: int, stride: int, prefix: str, gamma: float = 1.0
) -> str:
    y = g.conv(x, cin, cout, kernel, stride, prefix=f"{prefix}.conv")
    y = g.batch_norm(y, cout, prefix=f"{prefix}.bn", gamma=gamma)
    return g.node("Mul", [y, g.node("Sigmoid", [y])])  # SiLU as exporters write it: x * sigmoid(x)


def _bottleneck(g: GraphBuilder, x: str, channels: int, prefix: str) -> str:
    y = _conv_bn_silu(g, x, channels, channels // 2, 1, 1, f"{prefix}.cv1")
    # Small BN scale on the residual branch, as in the ResNet blocks: keeps activations bounded.
    y = _conv_bn_silu(g, y, channels // 2, channels, 3, 1, f"{prefix}.cv2", gamma=0.3)
    return g.node("Add", [x, y])


def build_yolo(
    width: int = 16,
    image_size: int = 256,
    num_classes: int = 20,
    num_anchors: int = 3,
    batch: int = 1,
    seed: int = 0,
    opset: int = 17,
) -> onnx.ModelProto:
    """A YOLO-style detector; input ``images`` [batch, 3, image_size, image_size].

    Backbone: five stride-2 Conv+BN+SiLU stages (``width`` .. ``16 * width`` channels) with
    residual bottlenecks; a top-down pyramid of nearest Resize x2 + Concat; 1x1 heads at strides
    8, 16 and 32 with ``num_anchors * (5 + num_classes)`` channels, each reshaped to
    [batch, anchors * h * w, 5 + num_classes] and passed through Sigmoid. Output ``detections``
    [batch, N, 5 + num_classes], N = num_anchors * (s/8)^2 * 21/16 for s = image_size.
    ``image_size`` must be a multiple of 32. ``width=32, image_size=416`` is a YOLOv5s-sized run.
    """
    params = _validated("yolo", dict(locals()), _modern_opsets())
    if image_size % 32:
        raise UserError(f"yolo: image_size must be a multiple of 32 (the coarsest stride), got {image_size}")

    g = GraphBuilder("yolo", opset, seed)
    w = width
    x = g.add_input("images", TensorProto.FLOAT, [batch, 3, image_size, image_size])
    y = _conv_bn_silu(g, x, 3, w, 3, 2, "backbone.0")
    y = _bottleneck(g, _conv_bn_silu(g, y, w, 2 * w, 3, 2, "backbone.1"), 2 * w, "backbone.2")
    p3 = _bottleneck(g, _conv_bn_silu(g, y, 2 * w, 4 * w, 3, 2, "backbone.3"), 4 * w, "backbone.4")
    p4 = _bottleneck(g, _conv_bn_silu(g, p3, 4 * w, 8 * w, 3, 2, "backbone.5"), 8 * w, "backbone.6")
    p5 = _bottleneck(g, _conv_bn_silu(g, p4, 8 * w, 16 * w, 3, 2, "backbone.7"), 16 * w, "backbone.8")

    n5 = _conv_bn_silu(g, p5, 16 * w, 8 * w, 1, 1, "neck.lateral5")
    n4 = g.node("Concat", [g.resize_nearest(n5, 2.0), p4], axis=1)
    n4 = _conv_bn_silu(g, n4, 16 * w, 8 * w, 3, 1, "neck.merge4")
    n3 = _conv_bn_silu(g, n4, 8 * w, 4 * w, 1, 1, "neck.lateral4")
    n3 = g.node("Concat", [g.resize_nearest(n3, 2.0), p3], axis=1)
    n3 = _conv_bn_silu(g, n3, 8 * w, 4 * w, 3, 1, "neck.merge3")

    outputs = 5 + num_classes
    decoded, total = [], 0
    for index, (feature, channels, stride) in enumerate(((n3, 4 * w, 8), (n4, 8 * w, 16), (n5, 8 * w, 32))):
        cells = image_size // stride
        head = g.conv(
            feature, channels, num_anchors * outputs, 1, bias=True, prefix=f"head.{index}", gain=0.2
        )
        head = g.node("Reshape", [head, g.constant([batch, num_anchors, outputs, cells, cells], np.int64)])
        head = g.node("Transpose", [head], perm=[0, 1, 3, 4, 2])
        head = g.node("Reshape", [head, g.constant([batch, num_anchors * cells * cells, outputs], np.int64)])
        decoded.append(g.node("Sigmoid", [head]))
        total += num_anchors * cells * cells
    g.node("Concat", decoded, axis=1, output="detections")
    g.add_output("detections", TensorProto.FLOAT, [batch, total, outputs])
    return g.build(_metadata("yolo", params))


# -- legacy CNN ---------------------------------------------------------------------------------


def build_legacy_cnn(seed: int = 0, opset: int = 9) -> onnx.ModelProto:
    """A small classifier in the style of older exported files; input ``data`` [1, 3, 32, 32].

    Opset 9 by default (9..12 accepted). The first Conv's weight is computed at run time
    (ConstantOfShape zeros + an initializer), LRN follows it, a Sum joins three branches (3x3,
    1x1, identity), Dropout sits before each Gemm, and the flatten is ``x.view(x.size(0), -1)``
    as older PyTorch exported it (Shape, Gather, Unsqueeze, Concat, Reshape). Output ``prob``
    [1, 10] (Softmax).
    """
    params = _validated("legacy_cnn", dict(locals()), LEGACY_OPSETS)
    g = GraphBuilder("legacy_cnn", opset, seed)
    x = g.add_input("data", TensorProto.FLOAT, [1, 3, 32, 32])

    zeros = g.node(
        "ConstantOfShape",
        [g.constant([16, 3, 5, 5], np.int64)],
        value=numpy_helper.from_array(np.zeros(1, np.float32)),
    )
    weight = g.node("Add", [zeros, g.he_normal("conv1.weight", [16, 3, 5, 5], 3 * 25)])
    y = g.node(
        "Conv", [x, weight, g.uniform("conv1.bias", [16], -0.1, 0.1)], kernel_shape=[5, 5], pads=[2, 2, 2, 2]
    )
    y = g.node("LRN", [g.node("Relu", [y])], size=5, alpha=1e-4, beta=0.75, bias=1.0)
    y = g.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])

    branch3 = g.conv(y, 16, 16, 3, bias=True, prefix="mix.branch3x3")
    branch1 = g.conv(y, 16, 16, 1, bias=True, prefix="mix.branch1x1")
    y = g.node("Relu", [g.node("Sum", [branch3, branch1, y])])
    y = g.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = g.node("Relu", [g.conv(y, 16, 32, 3, bias=True, prefix="conv3")])
    y = g.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])

    batch_dim = g.node("Gather", [g.node("Shape", [y]), g.constant(0, np.int64)], axis=0)
    flat_shape = g.node("Concat", [g.unsqueeze(batch_dim, [0]), g.constant([-1], np.int64)], axis=0)
    y = g.node("Reshape", [y, flat_shape])
    y = g.node("Relu", [g.gemm(g.dropout(y, 0.5), 32 * 4 * 4, 64, prefix="fc1")])
    y = g.gemm(g.dropout(y, 0.5), 64, 10, prefix="fc2", gain=0.2)
    g.node("Softmax", [y], axis=1, output="prob")
    g.add_output("prob", TensorProto.FLOAT, [1, 10])
    return g.build(_metadata("legacy_cnn", params))


# -- registry -----------------------------------------------------------------------------------

ARCHITECTURES: dict[str, Callable[..., onnx.ModelProto]] = {
    "resnet": build_resnet,
    "bert": build_bert,
    "yolo": build_yolo,
    "legacy_cnn": build_legacy_cnn,
}


def _builder(arch: str) -> Callable[..., onnx.ModelProto]:
    # isinstance first: a suite file can hand over a list or a number where a name belongs.
    if not isinstance(arch, str) or arch not in ARCHITECTURES:
        raise UserError(unknown_name_message("architecture", str(arch), ARCHITECTURES))
    return ARCHITECTURES[arch]


def architecture_params(arch: str) -> dict[str, object]:
    """The parameters ``arch`` accepts, with their defaults (``ffn=None`` means ``4 * hidden``)."""
    return {name: p.default for name, p in inspect.signature(_builder(arch)).parameters.items()}


def _type_error(arch: str, name: str, hint: object, value: object) -> str | None:
    """Why ``value`` does not fit the annotation ``hint``, or None if it does.

    Suites come from YAML/JSON, so ``true`` or ``"18"`` can reach here; bool is refused for int
    parameters even though Python treats it as one.
    """
    allowed = typing.get_args(hint) or (hint,)
    if value is None and type(None) in allowed:
        return None
    if not isinstance(value, bool) and any(isinstance(value, t) for t in allowed if t is not type(None)):
        return None
    names = " or ".join("null" if t is type(None) else "an integer" if t is int else str(t) for t in allowed)
    return f"{arch}: model parameter {name!r} must be {names}, got {type(value).__name__} {value!r}"


def build_model(arch: str, params: Mapping[str, object]) -> onnx.ModelProto:
    """Build ``arch`` with ``params`` (a suite's ``model:`` section), validating names and types.

    Raises ``UserError`` for an unknown architecture or parameter (listing the valid names), a
    value of the wrong type, or an invalid size.
    """
    builder = _builder(arch)
    valid = list(inspect.signature(builder).parameters)
    hints = typing.get_type_hints(builder)
    for name, value in params.items():
        if name not in valid:
            raise UserError(f"{arch}: " + unknown_name_message("parameter", str(name), valid))
        problem = _type_error(arch, name, hints[name], value)
        if problem:
            raise UserError(problem)
    return builder(**params)


__all__ = [
    "ARCHITECTURES",
    "LEGACY_OPSETS",
    "MIN_OPSET",
    "architecture_params",
    "build_bert",
    "build_legacy_cnn",
    "build_model",
    "build_resnet",
    "build_yolo",
    "parameter_count",
    "resnet_stage_layout",
]
