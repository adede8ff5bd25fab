"""ONNX-level passes and the pass trace: onnxoptimizer passes, perfguard passes, user passes.

A pipeline is an ordered list of names. A name resolves to, in this order:

* a perfguard pass (``constant_folding``, ``shape_inference``, ``eliminate_unused``);
* an ``onnxoptimizer`` pass (``onnxoptimizer.get_available_passes()``);
* a user pass ``package.module:function`` (ModelProto -> ModelProto) from the compiler under test.

Consecutive onnxoptimizer passes run as ONE ``onnxoptimizer.optimize`` call, because running them one
call at a time is not equivalent (a graph round trip between passes; some sequences even abort).
The per-pass trace of such a group is replayed one pass per call on the same input; when the replay
does not reach the same graph as the real call, the trace says so (``exact=False``).

Passes may edit the ``ModelProto`` they are given in place and return it (the usual style of graph
passes), so a record's before-state (node count, IR hash) is taken before the pass runs, never read
back from its input afterwards.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from perfguard.backends.base import PassInfo, PassRecord, PassTrace
from perfguard.backends.counting_hooks import counted, counting_compile
from perfguard.errors import BackendError, UserError, first_line, unknown_name_message

if TYPE_CHECKING:
    import onnx

USER_PASS = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")


def _no_hash(model: onnx.ModelProto) -> str:
    """No hash (a counted compile's trace, which nobody reads)."""
    return ""


def graph_hash(model: onnx.ModelProto) -> str:
    """A canonical hash of what computes: the graph (deterministic serialization) and opsets."""
    from perfguard.models.onnx_files import fits_one_protobuf

    digest = hashlib.sha256()
    for opset in sorted((o.domain, o.version) for o in model.opset_import):
        digest.update(f"{opset[0]}:{opset[1]};".encode())
    if fits_one_protobuf(model.graph):
        digest.update(model.graph.SerializeToString(deterministic=True))
    else:  # a >2 GB graph cannot be serialized at once: the graph without weights, then each weight
        import onnx

        skeleton = onnx.GraphProto()
        skeleton.CopyFrom(model.graph)
        del skeleton.initializer[:]
        digest.update(b"large;" + skeleton.SerializeToString(deterministic=True))
        for init in model.graph.initializer:
            digest.update(init.SerializeToString(deterministic=True))
    return digest.hexdigest()[:16]


def op_histogram(model: onnx.ModelProto) -> dict[str, int]:
    return dict(sorted(Counter(node.op_type for node in model.graph.node).items()))


def _constant_folding(model: onnx.ModelProto) -> onnx.ModelProto:
    from perfguard.backends.ort.folding import fold_constants

    return fold_constants(model)


def _shape_inference(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnx

    return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=False, data_prop=True)


def _eliminate_unused(model: onnx.ModelProto) -> onnx.ModelProto:
    from perfguard.backends.ort.folding import remove_dead_nodes

    return remove_dead_nodes(model)


PERFGUARD_PASSES: dict[str, tuple[Callable[[onnx.ModelProto], onnx.ModelProto], str]] = {
    "constant_folding": (_constant_folding,
                         "evaluate nodes whose inputs are all constant and store the results as initializers"),
    "shape_inference": (_shape_inference, "annotate value shapes with onnx.shape_inference (data propagation on)"),
    "eliminate_unused": (_eliminate_unused, "drop nodes and initializers no graph output depends on"),
}


@lru_cache(maxsize=1)
def onnxoptimizer_passes() -> tuple[str, ...]:
    import onnxoptimizer

    return tuple(onnxoptimizer.get_available_passes())


@lru_cache(maxsize=1)
def onnxoptimizer_version() -> str:
    """The installed onnxoptimizer's version, from its distribution's metadata: importing it
    takes 0.7 s on the 2-core machine (it imports onnx), which a pipeline of user passes never
    needs."""
    from importlib import metadata

    try:
        return metadata.version("onnxoptimizer")
    except metadata.PackageNotFoundError:  # not installed as a distribution: ask the module
        import onnxoptimizer

        return str(getattr(onnxoptimizer, "__version__", "unknown"))


def list_onnx_passes() -> list[PassInfo]:
    infos = [PassInfo(name, "perfguard", summary) for name, (_, summary) in PERFGUARD_PASSES.items()]
    infos += [PassInfo(name, "onnxoptimizer") for name in onnxoptimizer_passes()]
    return infos


def check_pass_names(names: Iterable[str], where: str) -> None:
    """Raise ``UserError`` for a name that is none of the three kinds (with close names)."""
    for name in names:
        if name in PERFGUARD_PASSES:
            continue
        if ":" in name:  # no onnxoptimizer pass has one: a pipeline of user passes never imports it
            if not USER_PASS.match(name):
                raise UserError(f"{where}: user pass {name!r} must look like package.module:function")
            continue
        known = set(PERFGUARD_PASSES) | set(onnxoptimizer_passes())
        if name not in known:
            raise UserError(f"{where}: " + unknown_name_message("pass", name, known)
                            + "; or a user pass package.module:function")


@dataclass
class _Step:
    source: str
    names: list[str]


def _group(names: list[str]) -> list[_Step]:
    steps: list[_Step] = []
    for name in names:
        if name in PERFGUARD_PASSES:
            steps.append(_Step("perfguard", [name]))
        elif ":" not in name and name in onnxoptimizer_passes():
            if steps and steps[-1].source == "onnxoptimizer":
                steps[-1].names.append(name)
            else:
                steps.append(_Step("onnxoptimizer", [name]))
        else:
            steps.append(_Step("user", [name]))
    return steps


def load_user_pass(name: str) -> Callable[[onnx.ModelProto], onnx.ModelProto]:
    module_name, _, func_name = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the compiler under test may raise anything on import
        raise BackendError(f"user pass {name!r}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise BackendError(f"user pass {name!r}: module {module_name} has no function {func_name!r}")
    user_pass: Callable[[onnx.ModelProto], onnx.ModelProto] = func
    return user_pass


def _check_valid(model: object, index: int, name: str) -> onnx.ModelProto:
    import onnx

    from perfguard.models.onnx_files import check_model

    if not isinstance(model, onnx.ModelProto):
        raise BackendError(f"pass #{index + 1} {name!r} returned {type(model).__name__}, expected onnx.ModelProto")
    try:
        check_model(model)
    except Exception as exc:
        raise BackendError(f"pass #{index + 1} {name!r} produced an invalid model: {first_line(exc)}") from None
    return model


def _record(index: int, name: str, source: str, seconds: float, nodes_before: int,
            after: onnx.ModelProto, before_hash: str) -> tuple[PassRecord, str]:
    """The record of one pass from its before-state (taken before it ran) and its result."""
    after_hash = graph_hash(after)
    return PassRecord(index=index, name=name, source=source, time_s=seconds,
                      nodes_before=nodes_before, nodes_after=len(after.graph.node),
                      op_histogram=op_histogram(after), ir_hash=after_hash,
                      changed=after_hash != before_hash), after_hash


def apply_pipeline(model: onnx.ModelProto, names: list[str]) -> tuple[onnx.ModelProto, PassTrace]:
    """Apply ``names`` in order; return the final model and its per-pass trace.

    ``total_time_s`` counts only the real work (one call per onnxoptimizer group), not the
    per-pass replay done for the trace.

    In a counted compile (``counting_compile()``) only the counted windows matter: the same
    calls run in the same windows, and the trace's hashes, histograms and validity checks, which
    the real compile made, are left out (an empty trace: instrumented, they cost a large model's
    counted compile more than its passes' windows; docs/measured.md, "Counted compiles, rehearsed").
    """
    import onnxoptimizer

    traced = not counting_compile()
    hashed = graph_hash if traced else _no_hash
    trace = PassTrace(input_hash=hashed(model))
    current, current_hash, index = model, trace.input_hash, 0
    for step in _group(names):
        if step.source == "onnxoptimizer":
            start = time.perf_counter()
            try:
                with counted(f"work|{index}"):
                    result = onnxoptimizer.optimize(current, step.names)
            except Exception as exc:
                failing = step.names[0] if len(step.names) == 1 else _first_failing(current, step.names)
                raise BackendError(f"pass {failing!r} (onnxoptimizer) raised: {first_line(exc)}") from None
            trace.total_time_s += time.perf_counter() - start
            replay, replay_hash = current, current_hash
            for offset, name in enumerate(step.names):
                replay_nodes = len(replay.graph.node)
                start = time.perf_counter()
                try:
                    if len(step.names) > 1:
                        with counted(f"replay|{index + offset}"):
                            replay_next = onnxoptimizer.optimize(replay, [name])
                    else:
                        replay_next = result
                except Exception as exc:
                    trace.exact = False
                    trace.note = f"per-pass replay stopped at {name!r}: {first_line(exc)}"
                    break
                seconds = time.perf_counter() - start if len(step.names) > 1 else trace.total_time_s
                replay = replay_next
                if not traced:
                    continue
                record, replay_hash = _record(index + offset, name, "onnxoptimizer", seconds, replay_nodes,
                                              replay_next, replay_hash)
                trace.passes.append(record)
            if not traced:
                index += len(step.names)
                current = result
                continue
            result_hash = graph_hash(result)
            if trace.exact and replay_hash != result_hash:
                trace.exact = False
                trace.note = (f"one-pass-at-a-time replay of {', '.join(step.names)} reached a different graph "
                              "than the single onnxoptimizer call used for the artifact")
            try:
                _check_valid(result, index + len(step.names) - 1, step.names[-1])
            except BackendError:
                if len(step.names) == 1:
                    raise
                failing = _first_failing(current, step.names)
                raise BackendError(f"pass {failing!r} (onnxoptimizer) produced an invalid model") from None
            index += len(step.names)
            current, current_hash = result, result_hash
            continue
        name = step.names[0]
        func = PERFGUARD_PASSES[name][0] if step.source == "perfguard" else load_user_pass(name)
        # The before-state now: the pass may edit ``current`` in place and return it.
        nodes_before = len(current.graph.node)
        start = time.perf_counter()
        try:
            with counted(f"work|{index}"):
                result = func(current)
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(f"pass #{index + 1} {name!r} raised {type(exc).__name__}: {first_line(exc)}") from None
        seconds = time.perf_counter() - start
        trace.total_time_s += seconds
        if not traced:
            current, index = result, index + 1
            continue
        result = _check_valid(result, index, name)
        record, current_hash = _record(index, name, step.source, seconds, nodes_before, result, current_hash)
        trace.passes.append(record)
        current, index = result, index + 1
    trace.final_hash = current_hash
    return current, trace


def run_pipeline(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """The work of :func:`apply_pipeline` alone (one onnxoptimizer call per group, every other
    pass once), without its trace: no hashes, histograms, validity checks or per-pass replay. A
    compile-time repeat runs this; its errors are :func:`apply_pipeline`'s, which ran first."""
    import onnxoptimizer

    current = model
    for step in _group(names):
        if step.source == "onnxoptimizer":
            current = onnxoptimizer.optimize(current, step.names)
            continue
        name = step.names[0]
        func = PERFGUARD_PASSES[name][0] if step.source == "perfguard" else load_user_pass(name)
        current = func(current)
    return current


def _first_failing(model: onnx.ModelProto, names: list[str]) -> str:
    """Name the pass of a failing onnxoptimizer group: the last pass of the shortest prefix
    that raises or yields an invalid model (a rare path, so the quadratic replay is fine)."""
    import onnx
    import onnxoptimizer

    for end in range(1, len(names) + 1):
        try:
            onnx.checker.check_model(onnxoptimizer.optimize(model, names[:end]))
        except Exception:
            return names[end - 1]
    return names[-1]
