"""perfguard's own graph passes: constant folding and dead-node removal.

Constant folding matters for pinned pipelines: onnxoptimizer's ``fuse_bn_into_conv`` writes the
folded weight arithmetic as graph nodes, which then run on every inference unless folding follows
(a ResNet grew 68 -> 248 nodes and got 5-8 % slower). Nodes are evaluated with ONNX's reference
evaluator under the model's own opset, one node at a time, so a node the evaluator cannot run is
simply left in the graph rather than failing the pass.

Which initializers are constants follows ONNX Runtime: in an IR >= 4 model an initializer that is
also a graph input is only a default value the caller may override, so it is a runtime input and
never folded; in an IR < 4 model every initializer must be listed as an input and all of them are
constants. perfguard normalizes such files to IR 4 on load (``perfguard.models.loader``), but these
passes also get IR-3 models directly (user passes, other tools), so they apply the same rule and keep
an IR-3 graph valid: a new initializer is listed in ``graph.input`` too, and an unused one leaves it.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx
from onnx import helper, numpy_helper

# Ops whose output is not a function of their inputs: never folded.
_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                     "Multinomial", "Bernoulli"}
# Folding these would materialize large tensors or change nothing useful.
_SKIP = {"Dropout"}


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return any(attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for attr in node.attribute)


def _subgraph_names(graph: onnx.GraphProto) -> set[str]:
    """Names read inside nested graphs (If/Loop/Scan bodies may read outer values)."""
    used: set[str] = set()
    for node in graph.node:
        for attr in node.attribute:
            bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for body in bodies:
                for inner in body.node:
                    used.update(i for i in inner.input if i)
                used |= _subgraph_names(body)
    return used


def constant_names(model: onnx.ModelProto) -> set[str]:
    """Initializers that are constants: all of them below IR 4, else those not listed as inputs."""
    graph = model.graph
    if model.ir_version < 4:
        return {init.name for init in graph.initializer}
    inputs = {value.name for value in graph.input}
    return {init.name for init in graph.initializer if init.name not in inputs}


def _evaluate(node: onnx.NodeProto, values: dict[str, np.ndarray],
              opsets: Iterable[onnx.OperatorSetIdProto]) -> list[np.ndarray] | None:
    from onnx.reference import ReferenceEvaluator

    inputs = [i for i in node.input if i]
    graph = helper.make_graph(
        [node], "fold",
        [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(values[name].dtype),
                                       list(values[name].shape)) for name in inputs],
        [onnx.ValueInfoProto(name=o) for o in node.output if o],
    )
    model = helper.make_model(graph, opset_imports=list(opsets))
    try:
        outputs = ReferenceEvaluator(model).run(None, {name: values[name] for name in inputs})
    except Exception:
        return None
    return [np.asarray(o) for o in outputs]


def fold_constants(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace every node whose inputs are all constant by initializers holding its outputs."""
    graph = model.graph
    constants = constant_names(model)
    values: dict[str, np.ndarray] = {
        init.name: numpy_helper.to_array(init) for init in graph.initializer if init.name in constants
    }
    folded: list[onnx.NodeProto] = []
    kept: list[onnx.NodeProto] = []
    opsets = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
    for node in graph.node:
        inputs = [i for i in node.input if i]
        foldable = (
            node.domain in ("", "ai.onnx")
            and node.op_type not in _NONDETERMINISTIC | _SKIP
            and not _has_subgraph(node)
            and all(i in values for i in inputs)
        )
        outputs = _evaluate(node, values, opsets) if foldable else None
        if outputs is None or len(outputs) != len([o for o in node.output if o]):
            kept.append(node)
            continue
        for name, value in zip([o for o in node.output if o], outputs, strict=False):
            values[name] = value
        folded.append(node)
    if not folded:
        return model

    needed = {i for node in kept for i in node.input if i} | {o.name for o in graph.output} | _subgraph_names(graph)
    new_model = onnx.ModelProto()
    new_model.CopyFrom(model)
    new_graph = new_model.graph
    del new_graph.node[:]
    new_graph.node.extend(kept)
    existing = {init.name for init in graph.initializer}
    produced = [o for node in folded for o in node.output if o]
    for name in produced:
        if name in needed and name not in existing:
            tensor = numpy_helper.from_array(values[name], name)
            new_graph.initializer.append(tensor)
            if model.ir_version < 4:  # IR 3 requires every initializer to be listed as an input
                new_graph.input.append(helper.make_tensor_value_info(name, tensor.data_type, list(tensor.dims)))
    # Value infos of folded values would now describe initializers; drop them.
    keep_infos = [vi for vi in new_graph.value_info if vi.name not in set(produced)]
    del new_graph.value_info[:]
    new_graph.value_info.extend(keep_infos)
    return remove_dead_nodes(new_model)


def remove_dead_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop nodes no graph output depends on, then initializers nothing reads.

    An IR >= 4 initializer listed as a graph input is part of the model's interface and stays; below
    IR 4 such a listing is only the format's requirement, so an unused one goes with its input entry.
    """
    graph = model.graph
    needed = {o.name for o in graph.output} | _subgraph_names(graph)
    live: list[onnx.NodeProto] = []
    for node in reversed(graph.node):
        if any(o in needed for o in node.output if o):
            live.append(node)
            needed.update(i for i in node.input if i)
    live.reverse()
    constants = constant_names(model)
    initializers = [init for init in graph.initializer if init.name in needed or init.name not in constants]
    dropped = {init.name for init in graph.initializer} - {init.name for init in initializers}
    if len(live) == len(graph.node) and not dropped:
        return model
    new_model = onnx.ModelProto()
    new_model.CopyFrom(model)
    del new_model.graph.node[:]
    new_model.graph.node.extend(live)
    del new_model.graph.initializer[:]
    new_model.graph.initializer.extend(initializers)
    if dropped:
        inputs = [value for value in new_model.graph.input if value.name not in dropped]
        del new_model.graph.input[:]
        new_model.graph.input.extend(inputs)
    return new_model
