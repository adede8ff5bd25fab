"""Passes built to cause one kind of regression each (all exact: the answer does not change)."""
import time

import numpy as np
import onnx
from onnx import helper, numpy_helper


def _copy(model):
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def identity(model):
    return _copy(model)


def transpose_round_trip(model):
    """memory: NCHW -> NHWC -> NCHW round trips on every Conv's data input and output (the
    layout transposes a layout pass inserts and fails to cancel)."""
    out = _copy(model)
    graph = out.graph
    nodes = []
    for index, node in enumerate(graph.node):
        if node.op_type == "Conv":
            source = node.input[0]
            nodes.append(helper.make_node("Transpose", [source], [f"rt{index}_in_nhwc"], perm=[0, 2, 3, 1]))
            nodes.append(helper.make_node("Transpose", [f"rt{index}_in_nhwc"], [f"rt{index}_in"], perm=[0, 3, 1, 2]))
            node.input[0] = f"rt{index}_in"
        nodes.append(node)
        if node.op_type != "Conv":
            continue
        old = node.output[0]
        node.output[0] = old + "_pre_t"
        nodes.append(helper.make_node("Transpose", [old + "_pre_t"], [old + "_nhwc"], perm=[0, 2, 3, 1]))
        nodes.append(helper.make_node("Transpose", [old + "_nhwc"], [old], perm=[0, 3, 1, 2]))
    del graph.node[:]
    graph.node.extend(nodes)
    return out


def tiny_ops(model, pairs=60):
    """scheduling: many tiny no-op Mul(1)/Add(0) nodes on the (small) graph output."""
    out = _copy(model)
    graph = out.graph
    target = graph.output[0].name
    graph.initializer.extend([numpy_helper.from_array(np.array(1.0, np.float32), "tiny_one"),
                              numpy_helper.from_array(np.array(0.0, np.float32), "tiny_zero")])
    for node in graph.node:
        for k, name in enumerate(node.output):
            if name == target:
                node.output[k] = "tiny_in"
    current = "tiny_in"
    for i in range(pairs):
        last = i == pairs - 1
        graph.node.append(helper.make_node("Mul", [current, "tiny_one"], [f"tiny_m{i}"]))
        current = target if last else f"tiny_a{i}"
        graph.node.append(helper.make_node("Add", [f"tiny_m{i}", "tiny_zero"], [current]))
    return out


def wider_convs(model):
    """compute: every 3x3 Conv becomes a 7x7 Conv with zero weights around the 3x3 (pads + 2)."""
    out = _copy(model)
    graph = out.graph
    weights = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type != "Conv" or node.input[1] not in weights:
            continue
        w = numpy_helper.to_array(weights[node.input[1]])
        if w.shape[2:] != (3, 3):
            continue
        wide = np.zeros(w.shape[:2] + (7, 7), np.float32)
        wide[:, :, 2:5, 2:5] = w
        weights[node.input[1]].CopyFrom(numpy_helper.from_array(wide, node.input[1]))
        for attr in node.attribute:
            if attr.name == "pads":
                attr.ints[:] = [p + 2 for p in attr.ints]
            if attr.name == "kernel_shape":
                attr.ints[:] = [7, 7]
    return out


def slow_compile(model):
    """compile overhead: burns compile time, leaves the graph as it was."""
    time.sleep(0.4)
    return _copy(model)
