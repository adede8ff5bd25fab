"""User FX passes for the ``inductor`` suites: functions of a post-grad ``torch.fx.Graph`` (ATen ops),
run in pipeline order at Inductor's ``post_grad_custom_post_pass`` hook.

``relu_as_clamp``
    ``aten.relu(x)`` -> ``aten.clamp_min(x, 0)``: the same values, other generated C++ (the kernels
    call another function), about the same speed. It shows that a pass which changes the code
    changes the artifact's identity and is compiled, not served from a cache.
``upcast_float64``
    Convolutions and matrix products computed in float64 (inputs converted, the result converted
    back): more exact, and slower, since float64 leaves oneDNN's and the float32 GEMM's fast paths.
    Inductor cannot remove the conversions (they change the numbers), unlike a
    permute/clone round trip, which it fuses away (docs/reference/backends.md, "The `inductor`
    backend"). The suite's deliberately slower pipeline.
``convolve_twice``
    Each convolution computed twice and the two averaged: the same values, twice the convolution
    work. Inductor keeps both (each is a library call of the generated code), so the case's
    ``node_count`` (kernels plus library calls) rises with the work: ``bisect --metric node_count``
    finds it by compiling only (``tests/test_inductor.py``).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten
prims = torch.ops.prims
#: Ops whose float tensor arguments ``upcast_float64`` converts (their other arguments are sizes).
UPCAST = (aten.convolution.default, aten.mm.default, aten.bmm.default, aten.addmm.default)


def relu_as_clamp(graph: torch.fx.Graph) -> None:
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target == aten.relu.default:
            with graph.inserting_before(node):
                clamped = graph.call_function(aten.clamp_min.default, (node.args[0], 0.0))
            clamped.meta.update(node.meta)
            node.replace_all_uses_with(clamped)
            graph.erase_node(node)


def _is_tensor(arg: object) -> bool:
    return isinstance(arg, torch.fx.Node) and isinstance(arg.meta.get("val"), torch.Tensor)


def _converted(graph: torch.fx.Graph, arg: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
    new = graph.call_function(prims.convert_element_type.default, (arg, dtype))
    new.meta["val"] = arg.meta["val"].to(dtype)
    return new


def upcast_float64(graph: torch.fx.Graph) -> None:
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in UPCAST or not _is_tensor(node):
            continue
        with graph.inserting_before(node):
            args = tuple(_converted(graph, arg, torch.float64) if _is_tensor(arg) else arg for arg in node.args)
            wide = graph.call_function(node.target, args, dict(node.kwargs))
            wide.meta["val"] = node.meta["val"].to(torch.float64)
            back = _converted(graph, wide, torch.float32)
        node.replace_all_uses_with(back)
        graph.erase_node(node)


def convolve_twice(graph: torch.fx.Graph) -> None:
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target != aten.convolution.default:
            continue
        with graph.inserting_after(node):
            again = graph.call_function(node.target, node.args, dict(node.kwargs))
        with graph.inserting_after(again):
            total = graph.call_function(aten.add.Tensor, (node, again))
        with graph.inserting_after(total):
            half = graph.call_function(aten.mul.Tensor, (total, 0.5))
        for new in (again, total, half):
            new.meta.update(node.meta)
        node.replace_all_uses_with(half, delete_user_cb=lambda user: user is not total)
