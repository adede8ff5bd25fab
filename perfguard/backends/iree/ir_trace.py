"""Pass traces from the IREE compiler itself: ``--mlir-timing`` and per-pass IR dumps.

Two views, because MLIR offers two and they do not line up one to one:

*Times* (always). ``--mlir-timing --mlir-output-format=json --mlir-disable-threading`` reports
wall time per pass; threading is off so that times of passes on different functions do not
overlap. MLIR times a pass once for all the operations it runs on, and a pass that runs a pipeline
of its own includes that pipeline's time (as ``--mlir-timing`` itself shows it). perfguard sums the
timers of each pass name: one ``PassTimes`` entry per name, in the order the passes first ran.

*IR* (``trace = "ir"``). ``--mlir-print-ir-after-all --mlir-print-ir-after-change
--mlir-print-ir-tree-dir=DIR`` writes one file per pass run that changed the IR, named
``N_name.mlir`` at module level and ``N_M_name.mlir`` in a folder per nested operation
(``util_func_main$async/10_2_iree-global-opt-generalize-linalg-named-ops.mlir``); large constants
are elided. Every file is hashed (the header line aside), and the records are ordered by their
numeric pass index, then folder, so the first record where two builds differ names the first pass
whose output diverged (``first_divergence``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfguard.backends.base import PassRecord, PassTrace
from perfguard.jsonfields import JsonDict

_CONTAINER = re.compile(r"^('.*' Pipeline|Pipeline Collection.*|root|Rest|Total)$")
_DUMP_NAME = re.compile(r"^((?:\d+_)+)(.+)\.mlir$")
_HEADER = re.compile(r"IR Dump After (\S+?):? ?([A-Za-z0-9][\w.\-]*)?(?:\{| //)")
_OP_LINE = re.compile(rb'^\s*(?:%[^=\n]+=\s*)?"?[a-z_][a-z0-9_]*\.[a-z0-9_.]+', re.M)
ROOT_SCOPE = "builtin_module_no-symbol-name"


@dataclass
class IreeTrace(PassTrace):
    """A ``PassTrace`` plus the per-pass-name compile times (``trace = "ir"``) and the cache flag.

    ``passes`` holds one record per pass name with its summed time in ``trace = "timing"`` mode,
    and one record per IR dump file (hash, op count, ``changed``) in ``trace = "ir"`` mode, where
    the times move to ``pass_times``.
    """

    mode: str = "timing"
    pass_times: list[JsonDict] = field(default_factory=list)
    cache_hit: bool = False


def parse_timing(stderr: str) -> tuple[list[tuple[str, float]], float]:
    """Pass names with summed wall times (first-run order) and the total, from the JSON report.

    The report is the last JSON array on stderr; anything else there (warnings) is skipped.
    Analyses ``(A) ...`` and pipeline containers are not passes and are left out.
    """
    start = stderr.rfind("\n[\n")
    start = start + 1 if start >= 0 else (0 if stderr.startswith("[") else -1)
    end = stderr.rfind("]")
    if start < 0 or end < start:
        return [], 0.0
    try:
        tree = json.loads(stderr[start:end + 1])
    except ValueError:
        return [], 0.0
    totals: dict[str, float] = {}
    total = 0.0

    def walk(nodes: Iterable[Any]) -> None:
        nonlocal total
        for node in nodes:
            if not isinstance(node, dict) or "name" not in node:
                continue
            name = str(node["name"]).rsplit("::", 1)[-1]
            seconds = float(node.get("wall", {}).get("duration", 0.0))
            if name == "Total":
                total = seconds
            if name.startswith("(A)"):
                continue
            if not _CONTAINER.match(name):
                totals[name] = totals.get(name, 0.0) + max(seconds, 0.0)
            walk(node.get("passes", []))

    walk(tree)
    return list(totals.items()), total


def timing_records(times: Sequence[tuple[str, float]], first_index: int = 0) -> list[PassRecord]:
    return [PassRecord(first_index + i, name, "iree-compile", seconds, 0, 0, {}, "", False)
            for i, (name, seconds) in enumerate(times)]


def dump_size(folder: Path) -> int:
    """Bytes under ``folder`` (files only); cheap enough to poll while the compiler writes."""
    total = 0
    stack = [str(folder)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total


@dataclass(frozen=True)
class DumpFile:
    order: tuple[tuple[int, ...], str]
    scope: str
    pass_name: str
    class_name: str
    ir_hash: str
    op_count: int


def read_dump(folder: Path) -> list[DumpFile]:
    """Hash every per-pass IR file under ``folder``, ordered by pass index, then folder."""
    files = []
    for path in folder.rglob("*.mlir"):
        match = _DUMP_NAME.match(path.name)
        if not match:
            continue
        indices = tuple(int(part) for part in match.group(1).strip("_").split("_"))
        scope = path.parent.relative_to(folder).as_posix()
        if scope == ROOT_SCOPE:
            scope = ""
        elif scope.startswith(ROOT_SCOPE + "/"):
            scope = scope[len(ROOT_SCOPE) + 1:]
        data = path.read_bytes()
        header, _, body = data.partition(b"\n") if data.startswith(b"//") else (b"", b"", data)
        head = _HEADER.search(header.decode(errors="replace"))
        files.append(DumpFile(order=(indices, scope), scope=scope, pass_name=match.group(2),
                              class_name=head.group(1) if head else "",
                              ir_hash=hashlib.sha256(body.strip()).hexdigest()[:16],
                              op_count=len(_OP_LINE.findall(body))))
    files.sort(key=lambda f: f.order)
    return files


def ir_records(files: Sequence[DumpFile], first_index: int = 0) -> list[PassRecord]:
    """One record per dump file; ``nodes_before`` is the op count of the scope's previous dump
    (-1 for a scope's first one, whose input MLIR does not print)."""
    last_count: dict[str, int] = {}
    records = []
    for offset, dump in enumerate(files):
        source = f"iree-compile:{dump.scope}" if dump.scope else "iree-compile"
        records.append(PassRecord(first_index + offset, dump.pass_name, source, 0.0, last_count.get(dump.scope, -1),
                                  dump.op_count, {}, dump.ir_hash, True))
        last_count[dump.scope] = dump.op_count
    return records


def record_label(record: Mapping[str, object] | PassRecord) -> str:
    """``scope/pass`` for a record, e.g. ``util_func_bert$async/iree-global-opt-...``."""
    data = record if isinstance(record, Mapping) else record.__dict__
    source = str(data["source"])
    scope = source.partition(":")[2] if ":" in source else ""
    return f"{scope}/{data['name']}" if scope else str(data["name"])


@dataclass(frozen=True)
class Divergence:
    """Where two traces part: ``index`` of the first record that differs, and both records."""

    index: int
    pass_a: str
    pass_b: str
    reason: str

    def describe(self) -> str:
        if self.pass_a == self.pass_b:
            return f"first divergence at step {self.index}: pass {self.pass_a!r} {self.reason}"
        return f"first divergence at step {self.index}: {self.pass_a!r} vs {self.pass_b!r} ({self.reason})"


def first_divergence(a: Sequence[Mapping[str, object] | PassRecord],
                     b: Sequence[Mapping[str, object] | PassRecord]) -> Divergence | None:
    """The first position where two ordered per-pass traces differ in pass or IR hash.

    Works on IR-mode records (``trace = "ir"``) of any two builds of one model; ``None`` when every
    record matches. A record present in one trace only (the pipelines differ, or a pass changed
    the IR in one build and not in the other) is a divergence too.
    """
    def fields(record: Mapping[str, object] | PassRecord) -> tuple[str, str]:
        data = record if isinstance(record, Mapping) else record.__dict__
        return record_label(data), str(data["ir_hash"])

    for index in range(max(len(a), len(b))):
        if index >= len(a) or index >= len(b):
            longer = a if index < len(a) else b
            label = fields(longer[index])[0]
            side = "first" if longer is a else "second"
            return Divergence(index, label if longer is a else "(end)", label if longer is b else "(end)",
                              f"only the {side} build runs more passes that change the IR")
        (label_a, hash_a), (label_b, hash_b) = fields(a[index]), fields(b[index])
        if label_a != label_b:
            return Divergence(index, label_a, label_b, "a different pass changed the IR at this step")
        if hash_a != hash_b:
            return Divergence(index, label_a, label_b, f"produced different IR ({hash_a} vs {hash_b})")
    return None
