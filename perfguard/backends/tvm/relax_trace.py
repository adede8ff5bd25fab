"""Pass specs and per-pass tracing for the ``tvm`` backend (TVM 0.27 Relax).

A pipeline's ``passes`` are Relax pass names, each optionally with keyword arguments written as a
Python call: ``"FuseOps"`` or ``"FuseOps(fuse_opt_level=2)"``. Arguments are literals only
(numbers, strings, booleans, None, lists), parsed with ``ast.literal_eval``: a suite file never
runs code. A pass string longer than :data:`MAX_PASS_LENGTH` or an argument nested deeper than
:data:`MAX_ARGUMENT_DEPTH` is refused before the parser or ``literal_eval`` recurses into it; every
refusal is a one-line ``UserError`` (exit 2).

The trace comes from a ``PassInstrument`` (TVM calls it around every pass, nested ones too):
after each *listed* pass (depth 0; FoldConstant alone runs ~40 nested TIR passes) it records the
wall time, ``tvm_ffi.structural_hash`` of the module (stable across processes, so two builds can
be diffed pass by pass) and the number of PrimFuncs, the node-count analogue.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar

from perfguard import jsonfields as f
from perfguard.backends.base import DatabaseUse, PassTrace
from perfguard.backends.counting_hooks import counted
from perfguard.errors import UserError
from perfguard.jsonfields import JsonDict

#: A counted compile's own steps beside the passes (windows ``step|NAME``): the ONNX frontend.
#: The build (``tvm.compile``: TIR pipeline + LLVM codegen, then ``export_library``'s linker
#: subprocess) is not counted: instrumented, it had not finished after 8 minutes for a 1-block
#: ResNet on a loaded 2-core machine, longer than every Relax pass together.
COUNTED_STEPS = ("import",)

_SPEC = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$", re.S)


@dataclass(frozen=True)
class PassSpec:
    """One entry of a pipeline's ``passes``: a Relax pass name and its keyword arguments."""

    name: str
    kwargs: tuple[tuple[str, Any], ...] = ()


#: The longest pass string read: a real one (``"MetaScheduleApplyDatabase(enable_warning=True)"``)
#: is under 100 characters, and Python's parser needs stack and memory in proportion to what it
#: is given (100,000 unary minus signs are a ``MemoryError``).
MAX_PASS_LENGTH = 1000

#: The deepest nesting of an argument's value (``[[1]]`` is 2; ``--1`` is 2): ``ast.literal_eval``
#: recurses once per level, so the depth is checked, without recursion, before it runs.
MAX_ARGUMENT_DEPTH = 16


def _shown(text: str) -> str:
    """``text`` quoted for a one-line message, cut to 80 characters."""
    return repr(text) if len(text) <= 80 else f"{text[:77]!r}... ({len(text)} characters)"


def parse_pass(text: str, where: str) -> PassSpec:
    """``"Name"`` or ``"Name(key=literal, ...)"`` as a ``PassSpec``; ``UserError`` otherwise.
    Only parsed, never evaluated: each argument is a literal read by ``ast.literal_eval``."""
    if len(text) > MAX_PASS_LENGTH:
        raise UserError(f"{where}: pass {_shown(text)} is longer than {MAX_PASS_LENGTH} characters")
    match = _SPEC.match(text)
    if match is None:
        raise UserError(f"{where}: bad pass {_shown(text)}: expected a Relax pass name, optionally with keyword "
                        "arguments, e.g. \"FuseOps(fuse_opt_level=2)\"")
    name, args = match.group(1), match.group(2)
    if not args or not args.strip():
        return PassSpec(name)
    call = _call(f"f({args})")
    if call is None:  # not one call of f: "F(a=1), __import__('os')" is a tuple of two expressions
        raise UserError(f"{where}: bad arguments in pass {_shown(text)}: not a Python call")
    if call.args:
        raise UserError(f"{where}: pass {_shown(text)}: give arguments by keyword (name=value)")
    kwargs = []
    for keyword in call.keywords:
        if keyword.arg is None:
            raise UserError(f"{where}: pass {_shown(text)}: **arguments are not allowed")
        kwargs.append((keyword.arg, _literal(keyword.value, keyword.arg, text, where)))
    return PassSpec(name, tuple(kwargs))


def _call(source: str) -> ast.Call | None:
    """``source`` parsed as one call of the name ``f``, or None."""
    try:
        tree = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: a NUL byte
        return None
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name) or tree.func.id != "f":
        return None
    return tree


def _literal(node: ast.expr, key: str, text: str, where: str) -> Any:
    """The literal value of one keyword argument; ``UserError`` for anything else."""
    if _depth(node) > MAX_ARGUMENT_DEPTH:
        raise UserError(f"{where}: pass {_shown(text)}: argument {key!r} is nested deeper than "
                        f"{MAX_ARGUMENT_DEPTH} levels")
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):  # TypeError: {[1]: 2}
        raise UserError(f"{where}: pass {_shown(text)}: argument {key!r} must be a literal "
                        "(number, string, boolean, None, list)") from None


def _depth(node: ast.AST) -> int:
    """How deeply ``node``'s expression nests, counted without recursion."""
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(node, 1)]
    while stack:
        current, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(current)
                     if not isinstance(child, (ast.expr_context, ast.unaryop, ast.operator)))
    return deepest


def prim_func_histogram(mod: Any) -> dict[str, int]:
    """PrimFuncs of ``mod`` by name with trailing digits dropped (``conv2d1`` counts as ``conv2d``)."""
    import tvm.tirx

    counts: dict[str, int] = {}
    for global_var, func in mod.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc):
            stem = re.sub(r"\d+$", "", global_var.name_hint) or global_var.name_hint
            counts[stem] = counts.get(stem, 0) + 1
    return dict(sorted(counts.items()))


def scheduled_count(mod: Any) -> int:
    """PrimFuncs of ``mod`` that carry a schedule (``tirx.is_scheduled``: MetaScheduleApplyDatabase
    found a record for them)."""
    import tvm.tirx

    return sum(1 for func in mod.functions.values()
               if isinstance(func, tvm.tirx.PrimFunc) and func.attrs is not None
               and bool(func.attrs.get("tirx.is_scheduled", False)))


def structural_hash(mod: Any) -> str:
    import tvm_ffi

    return f"{tvm_ffi.structural_hash(mod) & (2**64 - 1):016x}"


@dataclass(frozen=True)
class TvmStages:
    """The fields a ``tvm`` compile adds to its trace (:class:`TvmTrace`), typed and validated
    when a document is read (its ``perfguard.backends.TraceExtension``, ``Trace.extension``): the
    ONNX import and the build (TIR pipeline + LLVM codegen + export), both inside
    ``total_time_s``; the PrimFuncs of the lowered module (the artifact's ``node_count``); the
    passes TVM ran nested inside the listed ones.
    They sit beside the trace's common keys, as :class:`TvmTrace` writes them."""

    import_time_s: float
    build_time_s: float
    prim_funcs: int
    nested_passes: int

    KEYS: ClassVar[tuple[str, ...]] = ("import_time_s", "build_time_s", "prim_funcs", "nested_passes")

    def to_json(self) -> JsonDict:
        return {"import_time_s": self.import_time_s, "build_time_s": self.build_time_s,
                "prim_funcs": self.prim_funcs, "nested_passes": self.nested_passes}

    @classmethod
    def from_trace(cls, data: Mapping[str, object]) -> TvmStages | None:
        """The TVM fields of a trace's JSON; None for another backend's trace (none of
        :attr:`KEYS`). A trace with some of them must have all four (``FieldError`` naming
        the first missing or malformed one)."""
        if not any(key in data for key in cls.KEYS):
            return None
        kind = "tvm trace"
        return cls(f.seconds(data, "import_time_s", kind), f.seconds(data, "build_time_s", kind),
                   f.count(data, "prim_funcs", kind), f.count(data, "nested_passes", kind))


@dataclass
class TvmTrace(PassTrace):
    """A ``PassTrace`` (one record per listed Relax pass) plus the stages around the passes:
    ``import_time_s`` (the ONNX frontend) and ``build_time_s`` (TIR pipeline + LLVM codegen +
    export of the library), which ``total_time_s`` includes."""

    import_time_s: float = 0.0
    build_time_s: float = 0.0
    prim_funcs: int = 0
    nested_passes: int = 0
    database_use: DatabaseUse | None = None  # of a pipeline that applies a database


def make_instrument() -> Any:
    """A fresh ``PassInstrument`` recording (depth, name, seconds, hash, PrimFunc count) after each pass;
    its ``rows`` holds the depth-0 (listed) passes and ``nested`` counts the others.

    In a counted compile it also opens the window ``work|INDEX`` (``backends.counting_hooks.counted``) around
    each listed pass: opened last before the pass and closed first after it, so the hashing and
    counting done here for the trace stay outside."""
    import tvm.ir.instrument

    @tvm.ir.instrument.pass_instrument
    class PassLog:
        def __init__(self) -> None:
            self.rows: list[tuple[str, float, str, int, dict[str, int]]] = []
            self.scheduled: list[int] = []  # per listed pass: its PrimFuncs with a schedule
            self.stack: list[float] = []
            self.nested = 0
            self.window: AbstractContextManager[object] | None = None

        def run_before_pass(self, mod: Any, info: Any) -> None:
            if not self.stack:
                self.window = counted(f"work|{len(self.rows)}")
                self.window.__enter__()
            self.stack.append(time.perf_counter())

        def run_after_pass(self, mod: Any, info: Any) -> None:
            elapsed = time.perf_counter() - self.stack.pop()
            if self.stack:
                self.nested += 1
                return
            if self.window is not None:
                self.window.__exit__(None, None, None)
                self.window = None
            histogram = prim_func_histogram(mod)
            self.rows.append((str(info.name), elapsed, structural_hash(mod), sum(histogram.values()), histogram))
            self.scheduled.append(scheduled_count(mod))

    return PassLog()
