"""What the history store takes from a document: its kind, identity, time and the series points.

Pure functions over the project's own typed documents, no database: a document is validated by
its one parser (``parse_result``, ``parse_verdicts``, ``bisect_from_json``), so a corrupt or newer
one is refused with their one-line messages, and then cut into :class:`PointRow` s.

* A **result** gives absolute points for each case that ran (``status`` ok): ``latency`` (the
  median; per-worker medians), ``compile_time`` (median of the compiles; each compile),
  ``memory`` (peak RSS; each probe), ``artifact_size`` and ``node_count``, and where the run
  counted (``--counts``) ``instructions``, ``estimated_cycles`` and ``compile_instructions``; a
  metric that was not measured gives no point. Time: the result's ``finished_at``; commit: ``compiler.commit``.
* A **verdicts** document gives the absolute points of its candidate side only (``head``, else
  ``candidate``, else its only result): in a nightly the baseline side is the previous night,
  already stored. And, for a check of two versions of the compiler (``mode.kind`` ``base-ref``,
  what a nightly runs; a pipeline check's ratios compare pipelines, not versions, and would
  mix into the series), one ratio point per paired latency row: the comparison's ratio and
  interval, per-worker ratios of medians, the row's decision (an ``identity`` row, identical
  artifacts not timed, is exactly 1.0 and ``same``); failed rows and rows without a finite ratio
  give none. Ratio series are keyed by the runner's name, not its fingerprint: a paired ratio is
  measured within one machine, so ratios from the different hosted machines of different nights
  belong to one series. And, where the check compiled its base side with the pipelines the suite
  file defined at the base commit (``mode.base_pipelines``: the suite is part of the compiler's
  repository and a commit edited them), one :class:`PipelineEditRow` per edited pipeline: its
  hash and passes on both sides, so the series of the new hash continue those of the old.
* A **bisect** document is stored and gives no points.

Files of other tools (pytest-benchmark, asv) are cut into the same rows by
:mod:`perfguard.formats`, which hands the store an :class:`Extracted` of its own kind.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from perfguard.errors import StorageError
from perfguard.names import CaseId
from perfguard.results.counts import COUNTED_FIGURES

if TYPE_CHECKING:
    from pathlib import Path

    from perfguard.bisect.document import BisectResult
    from perfguard.compare.verdicts import ComparedResults, VerdictsDocument
    from perfguard.results.result import CaseEntry, ResultDocument

#: The documents of perfguard the store keeps, typed (files of other tools come as
#: :class:`perfguard.formats.common.Imported`).
PerfguardDocument: TypeAlias = "ResultDocument | VerdictsDocument | BisectResult"
#: What :meth:`perfguard.store.ingest.Ingesting.ingest` stores: a result, verdicts or
#: bisect document of perfguard, or a file of another tool read and validated by
#: :mod:`perfguard.formats` (stored as read, under that tool's kind).
StoredDocument: TypeAlias = "PerfguardDocument | Imported"

#: The side of a stored verdicts document (as stored: format 1 or 2) that was measured now, in
#: order of preference: ``head`` (format 1), ``candidate``.
CANDIDATE_LABELS = ("head", "candidate")


@dataclass(frozen=True)
class SeriesKey:
    """What one series measures: suite, case, model and pipeline hashes, backend with versions,
    runner class (``runner:fingerprint`` for absolute series, the runner name for ratios), metric
    and ``kind`` (``absolute`` or ``ratio``).

    It lives here, with the rows that carry it, so that this module imports nothing of the store:
    :mod:`perfguard.store` re-exports it."""

    suite: str
    case: str
    model_hash: str
    pipeline_hash: str
    backend: str
    runner_class: str
    metric: str
    kind: str

    @property
    def case_id(self) -> CaseId | None:
        """The suite case the series measures; None for a benchmark of another tool's document
        (pytest-benchmark, asv: no model hash), whose name is not a case id even when it holds '/'."""
        return CaseId.parse(self.case) if self.model_hash else None

    @property
    def pipeline(self) -> str:
        """The pipeline of the case the series measures ('' for another tool's benchmark)."""
        case_id = self.case_id
        return case_id.pipeline if case_id is not None else ""

    def hash(self) -> str:
        """A stable identity of the key (the series' unique column)."""
        text = json.dumps([self.suite, self.case, self.model_hash, self.pipeline_hash, self.backend,
                           self.runner_class, self.metric, self.kind])
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class PointRow:
    """One point to store: its series, value, interval, per-worker values and, for ratios, the
    base commit and decision."""

    key: SeriesKey
    time: str
    commit: str | None
    value: float
    values: tuple[float, ...] = ()
    ci_low: float | None = None
    ci_high: float | None = None
    base_commit: str | None = None
    decision: str | None = None


@dataclass(frozen=True)
class PipelineEditRow:
    """A pipeline the suite file defined anew between the two commits of a nightly's check
    (``good_commit`` .. ``bad_commit``): its hash and pass list before and after."""

    suite: str
    pipeline: str
    before_hash: str
    after_hash: str
    passes_before: tuple[str, ...]
    passes_after: tuple[str, ...]
    good_commit: str
    bad_commit: str


@dataclass(frozen=True)
class Extracted:
    """A validated document: ``kind``, ``suite``, ``time`` (None: the document has none),
    ``commit``, its points and the pipeline edits it shows."""

    kind: str
    suite: str
    time: str | None
    commit: str | None
    points: tuple[PointRow, ...]
    pipeline_edits: tuple[PipelineEditRow, ...] = ()


@dataclass(frozen=True)
class Imported:
    """One file of another tool, read and validated by :mod:`perfguard.formats`: its JSON as read
    (what the store keeps) and what it gives the store. It lives with :class:`Extracted` because
    the store ingests it, and the store sits below the readers of other tools' files."""

    path: Path
    data: object
    extracted: Extracted


def canonical_json(data: object) -> str:
    """The text a document is hashed and stored as: sorted keys, compact separators."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def document_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def candidate_label(labels: Iterable[str]) -> str | None:
    """The label of the candidate result among a stored verdicts document's raw ``results``
    (``head``, ``candidate``, or the only one): the store reads bodies as they were stored, in
    either format; a typed document says ``results.candidate``."""
    labels = list(labels)
    for label in CANDIDATE_LABELS:
        if label in labels:
            return label
    return labels[0] if len(labels) == 1 else None


def stored_kind(data: object, source: str) -> str:
    """``result``, ``verdicts`` or ``bisect`` (told apart by
    :func:`perfguard.results.documents.document_kind`); a ``StorageError`` naming what ``data`` is
    otherwise."""
    from perfguard.results.documents import document_kind

    kind = document_kind(data)
    if kind in ("result", "verdicts", "bisect"):
        return kind
    if kind == "bisect-state":
        raise StorageError(f"{source}: a bisection state file, not a document the history stores; "
                           "ingest the bisect document (perfguard bisect --json) instead")
    if kind == "manifest":
        raise StorageError(f"{source}: an artifact manifest (perfguard compile), not a document the history "
                           "stores; ingest the result of perfguard run --artifacts instead")
    foreign = foreign_format(data) if isinstance(data, dict) and kind is None else None
    if foreign is not None:
        raise StorageError(f"{source}: looks like a file of {foreign}, not a perfguard document; ingest it "
                           f"with --format {foreign}")
    raise StorageError(f"{source}: not a perfguard result, verdicts or bisect document")


def foreign_format(data: Mapping[str, object]) -> str | None:
    """``pytest-benchmark`` or ``asv`` when ``data`` looks like a file of that tool (by its
    top-level keys; :mod:`perfguard.formats` validates it), else None."""
    if {"machine_info", "benchmarks"} <= data.keys():
        return "pytest-benchmark"
    if {"result_columns", "results", "commit_hash"} <= data.keys():
        return "asv"
    return None


def extract(data: object, source: str) -> Extracted:
    """Validate ``data`` (the parsed JSON read from ``source``) through its document's parser and
    take what the store keeps of it. Every failure is a one-line ``StorageError``."""
    return extract_document(parse_stored(data, source), source)


def parse_stored(data: object, source: str) -> PerfguardDocument:
    """The typed document of ``data`` (the parsed JSON read from ``source``), through its kind's
    one parser, checked for what the store needs of it (a verdicts document's candidate side), so
    that a command can refuse a bad file before it writes any. Every failure is a one-line
    ``StorageError``."""
    kind = stored_kind(data, source)
    if kind == "bisect":
        from perfguard.bisect.document import bisect_from_json

        return bisect_from_json(data, source)
    if kind == "result":
        from perfguard.results.result import parse_result

        return parse_result(data, source)
    from perfguard.compare.verdicts import parse_verdicts

    verdicts = parse_verdicts(data, source)
    _compared(verdicts, source)
    return verdicts


def extract_document(document: PerfguardDocument, source: str) -> Extracted:
    """What the store keeps of a typed ``document`` (``source`` names it in messages): its kind,
    suite, time, commit and points. A verdicts document without a candidate side is a one-line
    ``StorageError``."""
    from perfguard.compare.verdicts import VerdictsDocument
    from perfguard.results.result import ResultDocument

    if isinstance(document, ResultDocument):
        commit = document.compiler.commit if document.compiler else None
        return Extracted("result", document.suite.name, document.finished_at, commit,
                         tuple(absolute_points(document)))
    if not isinstance(document, VerdictsDocument):
        bad = document.bad.sha if document.bad and document.bad.sha else None
        return Extracted("bisect", document.suite, None, bad, ())
    verdicts = document
    compared = _compared(verdicts, source)
    candidate, baseline, mode = compared.candidate, compared.baseline, verdicts.mode
    commit = mode.head_commit or (candidate.compiler.commit if candidate.compiler else None)
    time = verdicts.created_at or candidate.finished_at
    rows: list[PointRow] = list(absolute_points(candidate, commit))
    by_id = {c.id: c for c in candidate.cases}
    for row in verdicts.verdicts:
        if row.metric != "latency" or not row.paired or row.decision == "failed" or mode.kind != "base-ref":
            continue  # a ratio series chains versions of the compiler (check --base-ref), not pipelines
        entry = by_id.get(row.case)
        if entry is None:
            continue
        key = _key(candidate, entry, "latency", "ratio", runner_class=entry.runner)
        c = row.comparison
        if c.method == "identity":
            rows.append(PointRow(key, time, commit, 1.0, (), 1.0, 1.0, mode.base_commit, "same"))
            continue
        if not math.isfinite(c.ratio):
            continue
        base_entry = _baseline_entry(baseline, candidate, entry, row.baseline)
        rows.append(PointRow(key, time, commit, c.ratio, worker_ratios(base_entry, entry), _finite(c.ci_low),
                             _finite(c.ci_high), mode.base_commit, row.decision))
    return Extracted("verdicts", candidate.suite.name, time, commit, tuple(rows), pipeline_edits(verdicts, commit))


def pipeline_edits(verdicts: VerdictsDocument, commit: str | None) -> tuple[PipelineEditRow, ...]:
    """The pipelines a check against a ref compiled on its base side as the suite file at the base
    commit defined them (``mode.base_pipelines``), each once: the hash and passes of its cases on
    both sides. None without both commits or a base side."""
    mode, compared = verdicts.mode, verdicts.results
    if mode.kind != "base-ref" or not mode.base_pipelines or compared is None or compared.baseline is None \
            or not mode.base_commit or not commit:
        return ()
    base = {c.id: c for c in compared.baseline.cases}
    found: dict[str, PipelineEditRow] = {}
    for entry in compared.candidate.cases:
        old = base.get(entry.id)
        if entry.pipeline not in mode.base_pipelines or old is None or entry.pipeline in found:
            continue
        before, after = old.key.pipeline, entry.key.pipeline
        if before.get("sha256") == after.get("sha256"):
            continue
        found[entry.pipeline] = PipelineEditRow(compared.candidate.suite.name, entry.pipeline,
                                                str(before.get("sha256", "")), str(after.get("sha256", "")),
                                                _passes(before), _passes(after), mode.base_commit, commit)
    return tuple(found.values())


def _passes(pipeline: Mapping[str, object]) -> tuple[str, ...]:
    passes = pipeline.get("passes")
    return tuple(str(p) for p in passes) if isinstance(passes, list) else ()


def _compared(verdicts: VerdictsDocument, source: str) -> ComparedResults:
    if verdicts.results is None:
        raise StorageError(f"{source}: corrupt verdicts document: no candidate result")
    return verdicts.results


def absolute_points(result: ResultDocument, commit: str | None = None) -> Iterable[PointRow]:
    """The absolute points of every case of ``result`` that ran; ``commit`` defaults to the result's."""
    commit = commit or (result.compiler.commit if result.compiler else None)
    time = result.finished_at
    for entry in result.cases:
        if not entry.ok:
            continue
        m = entry.metrics
        measured: list[tuple[str, float | None, Sequence[float]]] = []
        if m.latency_s is not None:
            measured.append(("latency", m.latency_s.median,
                             [statistics.median(w) for w in m.latency_s.per_worker if w]))
        if m.compile_times_s:
            measured.append(("compile_time", statistics.median(m.compile_times_s), m.compile_times_s))
        elif m.compile_time_s is not None:
            measured.append(("compile_time", m.compile_time_s, (m.compile_time_s,)))
        measured.append(("memory", _float(m.peak_rss_bytes), m.peak_rss_bytes_probes or ()))
        measured.append(("artifact_size", _float(m.artifact_size_bytes), ()))
        measured.append(("node_count", _float(m.node_count), ()))
        measured.append(("compile_instructions", _float(m.compile_instructions), ()))
        for counted in COUNTED_FIGURES:  # --counts: exact, one value a run
            measured.append((counted, m.value(counted), ()))
        for metric, value, values in measured:
            if value is not None and math.isfinite(value):
                runner_class = _counted_runner(result, entry) if metric in COUNTED_FIGURES else None
                yield PointRow(_key(result, entry, metric, "absolute", runner_class=runner_class), time, commit,
                               float(value),
                               tuple(float(v) for v in values if math.isfinite(v)))


def _counted_runner(result: ResultDocument, entry: CaseEntry) -> str | None:
    """The runner class of ``entry``'s counted series: its runner's, and how the count was taken
    (``Counts.taken``), so that counts of another protocol or Valgrind start a series of their own
    instead of a step in this one."""
    counts = entry.metrics.counts
    if counts is None:
        return None
    from perfguard.runners.fingerprint import fingerprint_hash

    return f"{entry.runner}:{fingerprint_hash(result.environment.get(entry.runner) or {})} ({counts.taken})"


def worker_ratios(baseline: CaseEntry | None, candidate: CaseEntry) -> tuple[float, ...]:
    """median(candidate) / median(baseline) of each worker id measured on both sides, in the
    candidate's worker order."""
    if baseline is None:
        return ()
    base = baseline.latency_by_worker()
    out = []
    for worker, values in candidate.latency_by_worker().items():
        other = base.get(worker)
        if values and other:
            low = statistics.median(other)
            ratio = statistics.median(values) / low if low > 0 else math.nan
            if math.isfinite(ratio):
                out.append(ratio)
    return tuple(out)


def backend_label(backend: Mapping[str, object]) -> str:
    """``name`` and its versions, sorted: ``ort onnx=1.23.2,onnxoptimizer=0.4.2,onnxruntime=1.32.0``."""
    versions = backend.get("versions")
    listed = ",".join(f"{k}={v}" for k, v in sorted(versions.items())) if isinstance(versions, dict) else ""
    return f"{backend.get('name', '?')} {listed}".strip()


def _key(result: ResultDocument, entry: CaseEntry, metric: str, kind: str, *,
         runner_class: str | None = None) -> SeriesKey:
    if runner_class is None:
        from perfguard.runners.fingerprint import fingerprint_hash

        runner_class = f"{entry.runner}:{fingerprint_hash(result.environment.get(entry.runner) or {})}"
    return SeriesKey(result.suite.name, entry.id, str(entry.key.model.get("sha256", "")),
                    str(entry.key.pipeline.get("sha256", "")), backend_label(entry.key.backend), runner_class,
                    metric, kind)


def _baseline_entry(baseline: ResultDocument | None, candidate: ResultDocument, entry: CaseEntry,
                    baseline_label: str) -> CaseEntry | None:
    """The baseline side of a row: the same case in the other result, or (one result: a check
    against a pipeline) the case of the same model and runner under the baseline's pipeline."""
    if baseline is not None:
        return next((c for c in baseline.cases if c.id == entry.id), None)
    return next((c for c in candidate.cases if (c.model, c.runner, c.pipeline) ==
                 (entry.model, entry.runner, baseline_label)), None)


def _float(value: int | float | None) -> float | None:
    return None if value is None else float(value)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
