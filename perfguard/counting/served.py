"""Counts kept in the artifact cache (``--artifact-cache DIR``): a variant counted once is not
counted again by a later job that counts the same thing.

A count is exact: the same artifact, run the same way under the same Valgrind by the same
perfguard on the same kind of machine, gives the same instructions within a few parts in 10^5
(A/A over 20 counted processes, docs/measured.md), far below the counted floors. So, unlike a time, a count can be reused, and a check whose
baseline side (or most of whose pipelines) did not change counts only what did. This is where a
counted check's cost goes: each count is a child process under Valgrind.

The key (:class:`CountsKey`) is everything that decides a count:

* a run: the artifact's execution identity (its bytes, pinned settings and runtime, and the
  runner: name, options and the comparable part of its machine fingerprint, CPU model included,
  which decides the kernels ONNX Runtime picks under Valgrind), the inputs and their seed, the
  protocol (warm-up, window, ``COUNT_PROTOCOL``), the Valgrind version and perfguard's identity
  (its version and a hash of its source: the counted worker is perfguard's code);
* a compile: the artifact cache's key of the compile (model, pipeline, backend versions, the
  compiler's pass folder as a git tree, perfguard's identity; a compile that key cannot name, such
  as user passes with uncommitted changes, is never served), with the protocol, the Valgrind
  version and the execution identity.

The value is a :class:`CountsDocument`, one JSON file per key (``counts/<sha256>.json`` in the
cache folder, written atomically; see :meth:`perfguard.compile.cache.CompileCache.put_counts`).
A document that does not parse, names another key, or holds what the reader of result and
verdicts files would refuse (:func:`_refused`: ``inferences: 0``, more than 20 ``functions``, a
negative count) is dropped and the variant counted again, never served; a document is at most
``cache_files.MAX_COUNTS_BYTES`` and nested no deeper than any document perfguard reads.
Of two documents for one key (two copies of one artifact counted in one job differ by a few
instructions) the first stored stays and serves both.
A target is served only when everything it asks for is stored (its run, and its compile when
asked); otherwise it is counted whole and stored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from perfguard.counting.plan import DEFAULT_METHOD, Counted, CountOutcome, Target, target_plan
from perfguard.errors import FieldError, StorageError
from perfguard.jsonfields import JsonDict, boolean, count, integer, obj, string
from perfguard.results.counts import COUNT_PROTOCOL, CompileCounts, Counts
from perfguard.results.documents import parse_json

if TYPE_CHECKING:
    from perfguard.compile.cache import CompileCache

#: The layout of a counts document. Bump it when :class:`CountsDocument` changes in a way an
#: older document would not match: older ones then never serve.
COUNTS_FORMAT = 1


@dataclass(frozen=True)
class CountsKey:
    """Everything that decides a count (see the module docstring); ``kind`` is ``run`` or
    ``compile``, ``compile`` the artifact cache's key digest of the compile ("" for a run)."""

    kind: str
    execution: str
    compile: str
    inputs: str
    seed: int
    warmup: int
    inferences: int
    protocol: int
    tool: str
    perfguard: str
    cache: bool = False

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def to_json(self) -> JsonDict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CountsKey:
        kind = "counts key"
        return cls(string(data, "kind", kind), string(data, "execution", kind), string(data, "compile", kind),
                   string(data, "inputs", kind), integer(data, "seed", kind), integer(data, "warmup", kind),
                   integer(data, "inferences", kind), integer(data, "protocol", kind), string(data, "tool", kind),
                   string(data, "perfguard", kind), boolean(data, "cache", kind))


@dataclass(frozen=True)
class CountsDocument:
    """A stored count: a run's per-inference ``counts`` or a compile's figures, under ``key``."""

    key: CountsKey
    counts: Counts | None = None
    compile: CompileCounts | None = None
    version: int = COUNTS_FORMAT

    def to_json(self) -> JsonDict:
        out: JsonDict = {"version": self.version, "key": self.key.to_json()}
        if self.counts is not None:
            out["counts"] = self.counts.to_json()
        if self.compile is not None:
            out["compile"] = self.compile.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CountsDocument:
        kind = "counts document"
        version = integer(data, "version", kind)
        if version != COUNTS_FORMAT:
            raise ValueError(f"{kind}: format {version}, this perfguard reads {COUNTS_FORMAT}")
        return cls(CountsKey.from_json(obj(data, "key", kind)),
                   Counts.from_json(obj(data, "counts", kind)) if "counts" in data else None,
                   CompileCounts.from_json(obj(data, "compile", kind)) if "compile" in data else None, version)


def _key(target: Target, kind: str, cache: bool, tool: str) -> CountsKey | None:
    """The key of ``target``'s run or compile; None when it cannot be named (no execution
    identity; a compile the artifact cache could not key)."""
    from perfguard.compile.cache import perfguard_identity

    compiled = target.compiled
    execution = compiled.entry.execution_identity
    if execution is None:
        return None
    compile_key = ""
    if kind == "compile":
        if compiled.cache_key is None:
            return None
        compile_key = compiled.cache_key.digest
    inputs = json.dumps([spec.to_json() for spec in compiled.model.inputs], sort_keys=True, separators=(",", ":"))
    plan = target_plan(target, cache)
    return CountsKey(kind, execution, compile_key, inputs, compiled.case.measure.seed, plan.warmup, plan.inferences,
                     COUNT_PROTOCOL, tool, perfguard_identity(), cache)


def _read(cache: CompileCache, key: CountsKey) -> CountsDocument | None:
    raw = cache.get_counts(key.digest)
    if raw is None:
        return None
    try:
        data = parse_json(raw.decode("utf-8"), f"counts/{key.digest[:16]}")
        if not isinstance(data, dict):
            raise ValueError("it is not a JSON object")
        document = CountsDocument.from_json(data)
        if document.key != key:
            raise ValueError("it names another key")
        if (document.counts if key.kind == "run" else document.compile) is None:
            raise ValueError(f"it holds no {key.kind} counts")
        if document.counts is not None and document.counts.tool != key.tool:  # a key's tool is bounded
            raise ValueError("its counts name another tool than its key")
        refused = _refused(document)
        if refused:
            raise ValueError(refused)
    except (ValueError, KeyError, TypeError, StorageError) as exc:  # JSONDecodeError, UnicodeDecodeError: ValueErrors
        cache.drop_counts(key.digest, str(exc))
        return None
    return document


def _refused(document: CountsDocument) -> str | None:
    """Why a result holding ``document``'s figures would be refused by the reader of result and
    verdicts files (the result schema's ``metrics.counts``; ``compile_instructions`` and a pass
    record's ``instructions`` as ``jsonfields.count`` reads them), or None. A stored document is
    anyone's who can write the cache: what perfguard would not read back is never served."""
    import jsonschema

    from perfguard.results.documents import load_schema

    if document.counts is not None:
        rules = load_schema("result")["$defs"]["case"]["properties"]["metrics"]["properties"]["counts"]
        for error in jsonschema.Draft202012Validator(rules).iter_errors(document.counts.to_json()):
            message = error.message if len(error.message) <= 160 else f"{error.message[:160]}..."  # it quotes the value
            return f"counts: {'/'.join(str(p) for p in error.absolute_path) or '(top)'}: {message}"
    if document.compile is not None:
        figures = {"total": document.compile.total, **{f"per_pass.{i}": v for i, v in document.compile.per_pass.items()},
                   **{f"steps.{name}": v for name, v in document.compile.steps.items()}}
        for where, value in figures.items():
            try:
                count({"instructions": value}, "instructions", "compile counts")
            except FieldError:
                return f"compile counts: {where} must be a count from 0 to 2**63 - 1, found {value!r}"
    return None


def served(cache: CompileCache, targets: Sequence[Target], simulate: bool, tool: str) -> list[Counted | None]:
    """Per target, what the cache holds for everything it asks for (its run; its compile when
    ``Target.compile``), or None: it must be counted."""
    out: list[Counted | None] = []
    for target in targets:
        run = _stored(cache, target, "run", simulate, tool)
        compiled = _stored(cache, target, "compile", simulate, tool) if run is not None and target.compile else None
        if run is None or run.counts is None or (target.compile and compiled is None):
            out.append(None)
            continue
        cache.counted_from_cache()
        out.append(Counted(CountOutcome({DEFAULT_METHOD: run.counts}), compiled.compile if compiled else None))
    return out


def _stored(cache: CompileCache, target: Target, kind: str, simulate: bool, tool: str) -> CountsDocument | None:
    key = _key(target, kind, simulate, tool)
    return _read(cache, key) if key is not None else None


def store(cache: CompileCache, targets: Sequence[Target], counted: Sequence[Counted], simulate: bool,
          tool: str) -> None:
    """Store what counting ``targets`` gave (a failed count is not stored)."""
    for target, result in zip(targets, counted, strict=True):
        counts = result.run.counts.get(DEFAULT_METHOD)
        run_key = _key(target, "run", simulate, tool)
        if counts is not None and run_key is not None:
            cache.put_counts(run_key.digest, _encoded(CountsDocument(run_key, counts=counts)))
        compile_key = _key(target, "compile", simulate, tool) if target.compile else None
        if result.compile is not None and compile_key is not None:
            cache.put_counts(compile_key.digest, _encoded(CountsDocument(compile_key, compile=result.compile)))


def _encoded(document: CountsDocument) -> bytes:
    return json.dumps(document.to_json(), sort_keys=True).encode()
