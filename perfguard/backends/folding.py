"""perfguard's own graph passes: constant folding and dead-node removal.

Constant folding matters for pinned pipelines: onnxoptimizer's ``fuse_bn_into_conv`` writes the
folded weight arithmetic as graph nodes, which then run on every inference unless folding follows
(a ResNet grew 68 -> 248 nodes and got 5-8 % slower). Nodes are evaluated with ONNX's reference
evaluator under the model's own opset, one node at a time, so a node the evaluator cannot run is
simply left in the graph rather than failing the pass.
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
    runtime_inputs = {i.name for i in graph.input}
    values: dict[str, np.ndarray] = {
        init.name: numpy_helper.to_array(init) for init in graph.initializer if init.name not in runtime_inputs
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
            new_graph.initializer.append(numpy_helper.from_array(values[name], name))
    # Value infos of folded values would now describe initializers; drop them.
    keep_infos = [vi for vi in new_graph.value_info if vi.name not in set(produced)]
    del new_graph.value_info[:]
    new_graph.value_info.extend(keep_infos)
    return remove_dead_nodes(new_model)


def remove_dead_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop nodes no graph output depends on, then initializers nothing reads."""
    graph = model.graph
    needed = {o.name for o in graph.output} | _subgraph_names(graph)
    live: list[onnx.NodeProto] = []
    for node in reversed(graph.node):
        if any(o in needed for o in node.output if o):
            live.append(node)
            needed.update(i for i in node.input if i)
    live.reverse()
    inputs = {i.name for i in graph.input}
    initializers = [init for init in graph.initializer if init.name in needed or init.name in inputs]
    if len(live) == len(graph.node) and len(initializers) == len(graph.initializer):
        return model
    new_model = onnx.ModelProto()
    new_model.CopyFrom(model)
    del new_model.graph.node[:]
    new_model.graph.node.extend(live)
    del new_model.graph.initializer[:]
    new_model.graph.initializer.extend(initializers)
    return new_model
