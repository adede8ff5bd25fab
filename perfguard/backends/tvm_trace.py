"""Pass specs and per-pass tracing for the ``tvm`` backend (TVM 0.27 Relax).

A pipeline's ``passes`` are Relax pass names, each optionally with keyword arguments written as a
Python call: ``"FuseOps"`` or ``"FuseOps(fuse_opt_level=2)"``. Arguments are literals only
(numbers, strings, booleans, None, lists), parsed with ``ast.literal_eval``: a suite file never
runs code.

The trace comes from a ``PassInstrument`` (TVM calls it around every pass, nested ones too):
after each *listed* pass (depth 0; FoldConstant alone runs ~40 nested TIR passes) it records the
wall time, ``tvm_ffi.structural_hash`` of the module (stable across processes, so two builds can
be diffed pass by pass) and the number of PrimFuncs, the node-count analogue.
"""

from __future__ import annotations

import ast
import re
import time
from dataclasses import dataclass
from typing import Any

from perfguard.backends.base import DatabaseUse, PassTrace
from perfguard.errors import UserError

_SPEC = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$", re.S)


@dataclass(frozen=True)
class PassSpec:
    """One entry of a pipeline's ``passes``: a Relax pass name and its keyword arguments."""

    name: str
    kwargs: tuple[tuple[str, Any], ...] = ()


def parse_pass(text: str, where: str) -> PassSpec:
    """``"Name"`` or ``"Name(key=literal, ...)"`` as a ``PassSpec``; ``UserError`` otherwise."""
    match = _SPEC.match(text)
    if match is None:
        raise UserError(f"{where}: bad pass {text!r}: expected a Relax pass name, optionally with keyword "
                        "arguments, e.g. \"FuseOps(fuse_opt_level=2)\"")
    name, args = match.group(1), match.group(2)
    if not args or not args.strip():
        return PassSpec(name)
    try:
        call = ast.parse(f"f({args})", mode="eval").body
    except SyntaxError:
        raise UserError(f"{where}: bad arguments in pass {text!r}: not a Python call") from None
    assert isinstance(call, ast.Call)
    if call.args:
        raise UserError(f"{where}: pass {text!r}: give arguments by keyword (name=value)")
    kwargs = []
    for keyword in call.keywords:
        if keyword.arg is None:
            raise UserError(f"{where}: pass {text!r}: **arguments are not allowed")
        try:
            value = ast.literal_eval(keyword.value)
        except ValueError:
            raise UserError(f"{where}: pass {text!r}: argument {keyword.arg!r} must be a literal "
                            "(number, string, boolean, None, list)") from None
        kwargs.append((keyword.arg, value))
    return PassSpec(name, tuple(kwargs))


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
    its ``rows`` holds the depth-0 (listed) passes and ``nested`` counts the others."""
    import tvm.ir.instrument

    @tvm.ir.instrument.pass_instrument
    class PassLog:
        def __init__(self) -> None:
            self.rows: list[tuple[str, float, str, int, dict[str, int]]] = []
            self.scheduled: list[int] = []  # per listed pass: its PrimFuncs with a schedule
            self.stack: list[float] = []
            self.nested = 0

        def run_before_pass(self, mod: Any, info: Any) -> None:
            self.stack.append(time.perf_counter())

        def run_after_pass(self, mod: Any, info: Any) -> None:
            elapsed = time.perf_counter() - self.stack.pop()
            if self.stack:
                self.nested += 1
                return
            histogram = prim_func_histogram(mod)
            self.rows.append((str(info.name), elapsed, structural_hash(mod), sum(histogram.values()), histogram))
            self.scheduled.append(scheduled_count(mod))

    return PassLog()
