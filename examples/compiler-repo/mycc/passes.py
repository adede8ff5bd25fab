"""mycc's graph passes: each takes an ONNX model and returns the rewritten model."""

import onnx


def drop_identity(model: onnx.ModelProto) -> onnx.ModelProto:
    """Remove Identity nodes: every consumer of an Identity's output reads its input instead."""
    graph = model.graph
    outputs = {o.name for o in graph.output}
    alias: dict[str, str] = {}
    kept = []
    for node in graph.node:
        if node.op_type == "Identity" and node.output[0] not in outputs:
            alias[node.output[0]] = alias.get(node.input[0], node.input[0])
        else:
            kept.append(node)
    for node in kept:
        for i, name in enumerate(node.input):
            node.input[i] = alias.get(name, name)
    del graph.node[:]
    graph.node.extend(kept)
    return model
