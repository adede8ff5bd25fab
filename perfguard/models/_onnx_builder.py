"""A tiny ONNX graph builder for the model zoo.

``onnx.helper`` builds one proto at a time and leaves naming, initializer bookkeeping and opset
differences to the caller. The zoo builds graphs with hundreds of nodes, so this module keeps that
bookkeeping in one place:

* **Names are unique and deterministic.** Node and tensor names come from per-prefix counters, so
  the same build calls give the same names, and so byte-identical protos (a result baseline keyed on
  a model hash must not change because a name did).
* **Weights come from one seeded generator.** Every initializer is drawn from the builder's
  ``numpy.random.Generator`` in call order, so a model is a pure function of its parameters and seed.
* **Opset differences live here.** ``Unsqueeze`` and ``ReduceMean`` moved their ``axes`` from an
  attribute to an input (opsets 13 and 18), ``Resize`` gained and then relaxed its ``roi`` input,
  ``Dropout`` lost its ``ratio`` attribute in opset 12. Model code calls one method and gets the
  spelling the target opset expects.

This is a private helper of :mod:`perfguard.models.zoo`, not a general graph-building API.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

#: IR version the zoo writes unless the opset needs a newer one (IR 8 pairs with opsets 17-18).
DEFAULT_IR_VERSION = 8


class GraphBuilder:
    """Accumulates nodes, initializers and graph inputs/outputs for one ONNX graph.

    Methods that add a node return the name of its (first) output, so model code reads like a
    forward pass: ``y = g.relu(g.conv(x, w))``.
    """

    def __init__(self, name: str, opset: int, seed: int) -> None:
        self.name = name
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self._nodes: list[onnx.NodeProto] = []
        self._initializers: list[onnx.TensorProto] = []
        self._inputs: list[onnx.ValueInfoProto] = []
        self._outputs: list[onnx.ValueInfoProto] = []
        self._counters: dict[str, int] = {}
        self._constants: dict[tuple[str, bytes, tuple[int, ...]], str] = {}

    # -- naming and bookkeeping ---------------------------------------------------------------

    def unique(self, prefix: str) -> str:
        """Return ``prefix_N`` with N counting uses of ``prefix`` (deterministic, never reused)."""
        count = self._counters.get(prefix, 0)
        self._counters[prefix] = count + 1
        return f"{prefix}_{count}"

    @property
    def node_count(self) -> int:
        """Number of nodes added so far."""
        return len(self._nodes)

    def add_input(self, name: str, elem_type: int, shape: Sequence[int]) -> str:
        """Declare a graph input with a fixed shape; returns its name."""
        self._inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        return name

    def add_output(self, name: str, elem_type: int, shape: Sequence[int]) -> None:
        """Declare a graph output; a node must produce ``name`` (pass ``output=name`` to it)."""
        self._outputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))

    def initializer(self, prefix: str, array: np.ndarray) -> str:
        """Add ``array`` as an initializer under a unique name derived from ``prefix``."""
        name = self.unique(prefix)
        self._initializers.append(numpy_helper.from_array(array, name))
        return name

    def constant(self, values: Sequence[int] | Sequence[float] | float | int, dtype: type) -> str:
        """Add a small constant initializer (shapes, axes, scalars), shared between equal uses.

        Exporters emit one constant per use; sharing them keeps the graph smaller without changing
        what the passes under test see (they fold or ignore initializers either way).
        """
        array: np.ndarray = np.asarray(values, dtype=dtype)
        key = (array.dtype.str, array.tobytes(), array.shape)
        if key not in self._constants:
            self._constants[key] = self.initializer("const", array)
        return self._constants[key]

    def node(
        self,
        op_type: str,
        inputs: Sequence[str],
        *,
        output: str | None = None,
        **attrs: Any,
    ) -> str:
        """Add one node with a single output and return the output's name."""
        out = output if output is not None else self.unique(f"{op_type.lower()}_out")
        self._nodes.append(helper.make_node(op_type, list(inputs), [out], name=self.unique(op_type), **attrs))
        return out

    # -- seeded weights -------------------------------------------------------------------------

    def normal(self, prefix: str, shape: Sequence[int], std: float, mean: float = 0.0) -> str:
        """A float32 initializer drawn from N(mean, std^2)."""
        array = self.rng.normal(mean, std, size=tuple(shape)).astype(np.float32)
        return self.initializer(prefix, array)

    def uniform(self, prefix: str, shape: Sequence[int], low: float, high: float) -> str:
        """A float32 initializer drawn from U(low, high)."""
        array = self.rng.uniform(low, high, size=tuple(shape)).astype(np.float32)
        return self.initializer(prefix, array)

    def he_normal(self, prefix: str, shape: Sequence[int], fan_in: int) -> str:
        """He (Kaiming) initialization: keeps activations' scale steady through ReLU-like layers."""
        return self.normal(prefix, shape, std=float(np.sqrt(2.0 / fan_in)))

    # -- layers shared by several architectures ----------------------------------------------

    def conv(
        self,
        x: str,
        cin: int,
        cout: int,
        kernel: int,
        stride: int = 1,
        *,
        bias: bool = False,
        prefix: str = "conv",
        gain: float = 1.0,
    ) -> str:
        """A square Conv with "same" padding and He-initialized weights (bias-free before BN).

        ``gain`` scales the He standard deviation; detection heads use a small one so that their
        Sigmoid outputs are spread over (0, 1) rather than stuck at 0 or 1.
        """
        fan_in = cin * kernel**2
        std = gain * float(np.sqrt(2.0 / fan_in))
        inputs = [x, self.normal(f"{prefix}.weight", [cout, cin, kernel, kernel], std=std)]
        if bias:
            inputs.append(self.uniform(f"{prefix}.bias", [cout], -0.1, 0.1))
        pad = kernel // 2
        return self.node(
            "Conv",
            inputs,
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[pad, pad, pad, pad],
        )

    def batch_norm(self, x: str, channels: int, *, prefix: str = "bn", gamma: float = 1.0) -> str:
        """Inference BatchNormalization with random statistics (positive variance).

        ``gamma`` scales the random scale parameter; residual branches use a smaller one so the
        sum of many blocks stays in a comfortable float32 range.
        """
        scale = self.uniform(f"{prefix}.weight", [channels], 0.5 * gamma, 1.5 * gamma)
        shift = self.uniform(f"{prefix}.bias", [channels], -0.2, 0.2)
        mean = self.normal(f"{prefix}.running_mean", [channels], std=0.1)
        var = self.uniform(f"{prefix}.running_var", [channels], 0.5, 1.5)
        return self.node("BatchNormalization", [x, scale, shift, mean, var], epsilon=1e-5)

    def gemm(
        self,
        x: str,
        fan_in: int,
        fan_out: int,
        *,
        prefix: str = "fc",
        output: str | None = None,
        gain: float = 1.0,
    ) -> str:
        """Fully connected layer as ``Gemm(transB=1)``, the way PyTorch exports ``nn.Linear``.

        Weights are N(0, gain^2 / fan_in); a ``gain`` below 1 keeps logits that feed a Softmax from
        saturating it into a one-hot vector (which would hide numerical differences).
        """
        weight = self.normal(f"{prefix}.weight", [fan_out, fan_in], std=gain / float(np.sqrt(fan_in)))
        bias = self.uniform(f"{prefix}.bias", [fan_out], -0.1, 0.1)
        return self.node("Gemm", [x, weight, bias], output=output, transB=1)

    # -- ops whose spelling depends on the opset -----------------------------------------------

    def unsqueeze(self, x: str, axes: Sequence[int]) -> str:
        """``Unsqueeze``: axes are an attribute before opset 13, an input from 13 on."""
        if self.opset >= 13:
            return self.node("Unsqueeze", [x, self.constant(list(axes), np.int64)])
        return self.node("Unsqueeze", [x], axes=list(axes))

    def reduce_mean(self, x: str, axes: Sequence[int], keepdims: bool = True) -> str:
        """``ReduceMean``: axes are an attribute before opset 18, an input from 18 on."""
        if self.opset >= 18:
            return self.node("ReduceMean", [x, self.constant(list(axes), np.int64)], keepdims=int(keepdims))
        return self.node("ReduceMean", [x], axes=list(axes), keepdims=int(keepdims))

    def resize_nearest(self, x: str, scale: float) -> str:
        """Nearest-neighbour upsampling by ``scale`` on H and W, as YOLO exporters write it.

        Opsets 11-12 need an (empty) ``roi`` tensor; from 13 on the input may be left out. Needs
        opset 11 or newer.
        """
        scales = self.constant([1.0, 1.0, scale, scale], np.float32)
        roi = "" if self.opset >= 13 else self.constant(np.zeros(0, np.float32).tolist(), np.float32)
        return self.node(
            "Resize",
            [x, roi, scales],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        )

    def dropout(self, x: str, ratio: float) -> str:
        """Inference ``Dropout`` (an identity at run time that older exporters left in)."""
        if self.opset >= 12:
            return self.node("Dropout", [x, self.constant(ratio, np.float32)])
        return self.node("Dropout", [x], ratio=ratio)

    # -- finishing ----------------------------------------------------------------------------

    def build(self, metadata: dict[str, str] | None = None) -> onnx.ModelProto:
        """Assemble the model: IR version 8 unless the opset needs newer, producer ``perfguard``."""
        graph = helper.make_graph(
            self._nodes, self.name, self._inputs, self._outputs, initializer=self._initializers
        )
        opset = helper.make_opsetid("", self.opset)
        model = helper.make_model(graph, opset_imports=[opset], producer_name="perfguard.zoo")
        model.ir_version = max(DEFAULT_IR_VERSION, helper.find_min_ir_version_for([opset]))
        for key, value in sorted((metadata or {}).items()):
            entry = model.metadata_props.add()
            entry.key, entry.value = key, value
        return model


__all__ = ["DEFAULT_IR_VERSION", "GraphBuilder"]
