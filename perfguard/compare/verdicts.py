"""The verdicts document of ``perfguard check`` and ``perfguard compare``, typed.

One ``Verdict`` per case and metric (a row of the terminal table and of the HTML report), the
``Summary`` counts with the suite-wide geometric-mean latency change, and the ``VerdictsDocument``
that holds them with its header: what was compared (``CheckMode``), how it sampled
(``VerdictsSettings``, which records a check's ``Sampling``) and the result document of each side
(``ComparedResults``). The suite's own ``[check]`` table, the settings a check runs with, is
:class:`perfguard.suite.gates.CheckSettings`; ``VerdictsSettings`` is what a document records of it.

Format history (``VERDICTS_VERSION``):

1. First format: mode, settings, summary, verdicts[] (case, metric, comparison, gate), results.
   Later additions, optional and absent where they would say nothing (older readers ignore
   them): ``verdicts[].gated`` (false: undecidable at this sample size, not gated) and
   ``summary.not_gated``; comparisons with ``method = "identity"`` (identical artifacts);
   ``explanations`` (``check --explain``: the profile explanation of each regressed case, the
   objects of ``perfguard.results.explanation.Explanation``, read typed at load; one that does
   not read is kept as found, an ``UnreadableExplanation``, and written back unchanged).
   ``shard`` (``check --shard K/N``: which part of which whole, ``perfguard.results.shard.ShardInfo``;
   a document written by ``perfguard merge`` has none and says ``mode.merged_shards`` instead).
2. ``results`` is keyed ``baseline`` and ``candidate`` (``ComparedResults``; the baseline absent
   where one document holds both sides, ``check --against-pipeline``) instead of by labels that
   changed with the mode (``base``/``head``, ``baseline``/``candidate``, ``head`` alone), and
   ``mode`` and ``settings`` are read typed (``CheckMode``, ``VerdictsSettings``: the JSON of both is
   unchanged; a mode key no kind writes is dropped). ``migrate_to_2`` renames the labels.

The loader refuses a newer version ("upgrade perfguard") and migrates older ones
(``_MIGRATIONS[n]`` turns version n into n + 1); ``to_json(from_json(d)) == d`` for every valid
version-1 document (``tests/golden/v1``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from perfguard import __version__, jsonfields as f
from perfguard.errors import FieldError
from perfguard.jsonfields import JsonDict, JsonValue
from perfguard.results import ResultDocument, read_json
from perfguard.results.documents import current_format, typed_document
from perfguard.results.explanation import StoredExplanation, read_explanation
from perfguard.results.result import current_result_json
from perfguard.results.shard import ShardInfo
from perfguard.stats.adaptive import Look
from perfguard.stats.verdict import Comparison, is_regression

VERDICTS_VERSION = 2


def migrate_to_2(data: JsonDict) -> JsonDict:
    """Version 1 -> 2: ``results`` keyed ``baseline``/``candidate`` (:func:`v1_results`)."""
    results = data.get("results")
    if not isinstance(results, dict):
        return {**data, "version": 2}
    return {**data, "version": 2, "results": v1_results(results)}


_MIGRATIONS: dict[int, Callable[[JsonDict], JsonDict]] = {1: migrate_to_2}


# --- the header: what was compared (``mode``), how it sampled (``settings``), the results compared.
# Verdicts format 1 held them as dicts whose ``results`` were keyed by labels that changed with the
# mode, so each reader guessed which side was the candidate; the JSON of ``mode`` and ``settings``
# is unchanged, ``results`` is ``{"baseline", "candidate"}`` from format 2.

#: A check's baseline: the compiler at a git ref (``check --base-ref``), another pipeline of the
#: suite (``--against-pipeline``) or a stored result (``--baseline``); ``flows.check_request.Against``.
BaselineKind = Literal["base-ref", "pipeline", "baseline"]
#: What a verdicts document compared: a check's baseline, or two files (``compare``).
ModeKind = Literal[BaselineKind, "compare"]
MODE_KINDS: tuple[ModeKind, ...] = ("base-ref", "pipeline", "baseline", "compare")


def _kind(data: Mapping[str, object]) -> ModeKind:
    word = f.string(data, "kind", "mode")
    for kind in MODE_KINDS:
        if word == kind:
            return kind
    raise f.wrong_type("mode", "kind", " or ".join(MODE_KINDS), word)


@dataclass(frozen=True)
class CheckMode:
    """What was compared: the ``kind``, the ``baseline`` and ``candidate`` labels a reader shows,
    and the kind's own facts (None where the kind has none): the ``ref`` and both commits of a
    check against a ref (``base_pipelines``: the pipelines compiled as the suite at the ref
    defined them), when a stored baseline was measured, the artifact folder of ``check
    --artifacts``, and the number of shards ``perfguard merge`` joined."""

    kind: ModeKind
    baseline: str
    candidate: str
    ref: str | None = None
    base_commit: str | None = None
    base_subject: str | None = None
    head_commit: str | None = None
    base_pipelines: tuple[str, ...] = ()
    baseline_created: str | None = None
    artifacts: str | None = None
    merged_shards: int | None = None

    def to_json(self) -> JsonDict:
        return f.drop_none({"kind": self.kind, "baseline": self.baseline, "candidate": self.candidate, "ref": self.ref,
                           "base_commit": self.base_commit, "base_subject": self.base_subject,
                           "head_commit": self.head_commit,
                           "base_pipelines": list(self.base_pipelines) if self.base_pipelines else None,
                           "baseline_created": self.baseline_created, "artifacts": self.artifacts,
                           "merged_shards": self.merged_shards})

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CheckMode:
        k = "mode"
        return cls(_kind(data), f.string(data, "baseline", k), f.string(data, "candidate", k),
                   f.opt_string(data, "ref", k), f.opt_string(data, "base_commit", k),
                   f.opt_string(data, "base_subject", k), f.opt_string(data, "head_commit", k),
                   f.string_list(data, "base_pipelines", k) if data.get("base_pipelines") is not None else (),
                   f.opt_string(data, "baseline_created", k), f.opt_string(data, "artifacts", k),
                   f.opt_count(data, "merged_shards", k))


@dataclass(frozen=True)
class Sampling:
    """How a check sampled: its plan (false-discovery level, looks, level and confidence by look,
    the families corrected together, workers first / per step / at most) and its history, one
    :class:`perfguard.stats.adaptive.Look` per look. Recorded as a verdicts document's
    ``settings`` (:class:`VerdictsSettings`)."""

    alpha: float
    looks_planned: int
    alpha_by_look: tuple[float, ...]
    confidence_by_look: tuple[float, ...]
    families: tuple[str, ...]
    initial_workers: int
    step_workers: int
    max_workers: int
    history: tuple[Look, ...]

    @property
    def last_workers(self) -> int:
        """The workers planned at the last look (what a decided comparison had)."""
        return self.history[-1].workers

    def to_json(self) -> JsonDict:
        return {"alpha": self.alpha, "looks_planned": self.looks_planned, "alpha_by_look": list(self.alpha_by_look),
                "confidence_by_look": list(self.confidence_by_look), "families": list(self.families),
                "initial_workers": self.initial_workers, "step_workers": self.step_workers,
                "max_workers": self.max_workers, "history": [h.to_json() for h in self.history]}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Sampling:
        kind = "sampling"
        return cls(f.finite(data, "alpha", kind), f.count(data, "looks_planned", kind),
                   f.number_list(data, "alpha_by_look", kind), f.number_list(data, "confidence_by_look", kind),
                   f.string_list(data, "families", kind), f.count(data, "initial_workers", kind),
                   f.count(data, "step_workers", kind), f.count(data, "max_workers", kind),
                   tuple(Look.from_json(h) for h in f.objects(data, "history", kind)))


_PLAN = ("alpha_by_look", "confidence_by_look", "families", "initial_workers", "step_workers", "max_workers")


@dataclass(frozen=True)
class VerdictsSettings:
    """How a check sampled (:class:`Sampling`), as its document records it.
    ``alpha`` and ``looks_planned`` are always there; the rest of the plan and the ``history``
    (one :class:`Look` per look) are None / empty in a hand-written document that leaves them out.
    ``shard_history``: a merged check's (``perfguard merge``) history of each part, None where a
    part recorded none."""

    alpha: float
    looks_planned: int
    alpha_by_look: tuple[float, ...] | None = None
    confidence_by_look: tuple[float, ...] | None = None
    families: tuple[str, ...] | None = None
    initial_workers: int | None = None
    step_workers: int | None = None
    max_workers: int | None = None
    history: tuple[Look, ...] | None = None
    shard_history: tuple[tuple[Look, ...] | None, ...] | None = None

    @classmethod
    def of(cls, sampling: Sampling, alpha: float) -> VerdictsSettings:
        """What a verdicts document records of a check: its plan and history (``sampling``) and the
        suite's false-discovery level ``alpha`` (``CheckSettings.alpha``)."""
        return cls(alpha, sampling.looks_planned, sampling.alpha_by_look, sampling.confidence_by_look,
                   sampling.families, sampling.initial_workers, sampling.step_workers, sampling.max_workers,
                   sampling.history)

    def sampling(self) -> Sampling:
        """The full plan and history; a ``FieldError`` naming the first part the document lacks."""
        missing = next((key for key in (*_PLAN, "history") if getattr(self, key) is None), None)
        if missing is not None:
            raise FieldError(f"settings: field {missing!r} is missing")
        return Sampling.from_json(self.to_json())

    def to_json(self) -> JsonDict:
        def looks(history: tuple[Look, ...] | None) -> list[JsonDict] | None:
            return None if history is None else [h.to_json() for h in history]

        return f.drop_none({"alpha": self.alpha, "looks_planned": self.looks_planned,
                           **{key: None if getattr(self, key) is None else
                              (list(getattr(self, key)) if isinstance(getattr(self, key), tuple) else getattr(self, key))
                              for key in _PLAN},
                           "history": looks(self.history),
                           "shard_history": None if self.shard_history is None
                           else [looks(h) for h in self.shard_history]})

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> VerdictsSettings:
        k = "settings"

        def looks(items: list[dict[str, object]]) -> tuple[Look, ...]:
            return tuple(Look.from_json(h) for h in items)

        def history_list() -> tuple[tuple[Look, ...] | None, ...]:
            parts = f.array(data, "shard_history", k)
            if not all(p is None or isinstance(p, list) for p in parts):
                raise f.wrong_type(k, "shard_history", "a list of histories (lists) or nulls", parts)
            return tuple(None if p is None else looks(f.objects({"h": p}, "h", "shard_history")) for p in parts)

        def has(key: str) -> bool:
            return data.get(key) is not None

        return cls(f.finite(data, "alpha", k), f.count(data, "looks_planned", k),
                   f.number_list(data, "alpha_by_look", k) if has("alpha_by_look") else None,
                   f.number_list(data, "confidence_by_look", k) if has("confidence_by_look") else None,
                   f.string_list(data, "families", k) if has("families") else None,
                   f.opt_count(data, "initial_workers", k), f.opt_count(data, "step_workers", k),
                   f.opt_count(data, "max_workers", k),
                   looks(f.objects(data, "history", k)) if has("history") else None,
                   history_list() if has("shard_history") else None)


#: The side labels of verdicts format 1's ``results``: the candidate's, then the baseline's.
V1_CANDIDATE_LABELS = ("head", "candidate")
V1_BASELINE_LABELS = ("base", "baseline")


@dataclass(frozen=True)
class ComparedResults:
    """The result documents compared: the ``candidate``'s and the ``baseline``'s, or the candidate's
    alone when one document holds both sides (``check --against-pipeline`` measures every pipeline
    of a model in one run, so the reference pipeline's cases sit beside the others)."""

    candidate: ResultDocument
    baseline: ResultDocument | None = None

    def sides(self) -> Iterator[tuple[str, ResultDocument]]:
        """(``baseline``, document) when there is one, then (``candidate``, document)."""
        if self.baseline is not None:
            yield "baseline", self.baseline
        yield "candidate", self.candidate

    def to_json(self) -> JsonDict:
        return {label: document.to_json() for label, document in self.sides()}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ComparedResults:
        others = sorted(set(data) - {"baseline", "candidate"})
        if "candidate" not in data or others:
            raise FieldError(f"no candidate result among {sorted(data)} (expected 'baseline' and 'candidate')")
        baseline = f.opt_obj(data, "baseline", "results")
        return cls(ResultDocument.from_json(f.obj(data, "candidate", "results")),
                   None if baseline is None else ResultDocument.from_json(baseline))


def v1_results(results: Mapping[str, JsonValue]) -> JsonDict:
    """Format 1's label-keyed ``results`` keyed ``baseline``/``candidate``: the candidate is
    ``head`` or ``candidate`` (or the only document), the baseline ``base`` or ``baseline``. Labels
    that say neither are kept as found, for the reader to refuse in one line."""
    labels = list(results)
    candidate = next((label for label in V1_CANDIDATE_LABELS if label in labels),
                     labels[0] if len(labels) == 1 else None)
    baseline = next((label for label in V1_BASELINE_LABELS if label in labels), None)
    if candidate is None or set(labels) - {candidate, baseline}:
        return dict(results)
    return {"candidate": results[candidate], **({"baseline": results[baseline]} if baseline is not None else {})}


#: A row's decision: the comparison's three-way decision, or ``failed`` (a side did not run).
RowDecision = Literal["same", "different", "unknown", "failed"]


@dataclass(frozen=True)
class Verdict:
    """The verdict on one metric of one case: the comparison and the decision that gates.

    ``decision`` is the comparison's, except where false-discovery control demoted a DIFFERENT to
    ``unknown`` (the comparison keeps what the test said; its reason says why) or a side failed.
    ``gated`` is False for an undecided comparison that could not have decided its floor at this
    sample size (compile time from a few unpaired compiles): it is reported once in the summary
    (``not_gated``), not as an undecided row."""

    case: str
    metric: str
    unit: str
    noisy: bool
    gate: str
    baseline: str
    candidate: str
    paired: bool
    comparison: Comparison
    decision: RowDecision
    direction: str
    bh_adjusted_p: float | None = None
    gated: bool = True

    @property
    def is_regression(self) -> bool:
        return is_regression(self.decision, self.direction)

    def to_json(self) -> JsonDict:
        return {"case": self.case, "metric": self.metric, "unit": self.unit, "noisy": self.noisy, "gate": self.gate,
                "baseline": self.baseline, "candidate": self.candidate, "paired": self.paired,
                "comparison": self.comparison.to_json(), "decision": self.decision, "direction": self.direction,
                "bh_adjusted_p": self.bh_adjusted_p, **({} if self.gated else {"gated": False})}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Verdict:
        kind = "verdict"
        decision = f.string(data, "decision", kind)
        if decision not in ("same", "different", "unknown", "failed"):
            raise f.wrong_type(kind, "decision", "same, different, unknown or failed", decision)
        adjusted = f.opt_finite(data, "bh_adjusted_p", kind)
        if adjusted is not None and not 0 <= adjusted <= 1:
            raise f.wrong_type(kind, "bh_adjusted_p", "from 0 to 1", adjusted)
        try:
            comparison = Comparison.from_json(_checked_comparison(f.obj(data, "comparison", kind)))
        except TypeError as exc:
            raise FieldError(f"{kind}: field 'comparison' is not a comparison: {exc}") from None
        return cls(f.string(data, "case", kind), f.string(data, "metric", kind), f.string(data, "unit", kind),
                   f.boolean(data, "noisy", kind), f.string(data, "gate", kind), f.string(data, "baseline", kind),
                   f.string(data, "candidate", kind), f.boolean(data, "paired", kind), comparison,
                   "same" if decision == "same" else "different" if decision == "different"
                   else "unknown" if decision == "unknown" else "failed",
                   f.string(data, "direction", kind), adjusted,
                   f.boolean(data, "gated", kind) if "gated" in data else True)


# The numbers of a comparison (``Comparison.to_json`` writes a non-finite one as null), the
# counts, and the words with their allowed values: what a report formats must be what it
# formats, or a hand-edited "ratio": "x" ends in a traceback instead of a one-line refusal.
_COMPARISON_NUMBERS = ("ratio", "ci_low", "ci_high", "p_value", "mde", "baseline_median", "candidate_median", "floor",
                       "alpha", "confidence")
_COMPARISON_WORDS = {"decision": ("same", "different", "unknown"), "direction": ("regression", "improvement", "none"),
                     "reason": None, "method": None, "statistic": None}


def _checked_comparison(data: Mapping[str, object]) -> Mapping[str, object]:
    """``data`` when every field of the comparison it holds has its type; a ``FieldError`` naming
    the first that has not. Ratios, intervals and medians are 0 or more; p-values, alpha and
    confidence between 0 and 1."""
    kind = "comparison"
    for key in _COMPARISON_NUMBERS:
        value = f.opt_finite(data, key, kind)
        if value is None:
            continue
        bound = 1.0 if key in ("p_value", "alpha", "confidence") else math.inf
        if not 0 <= value <= bound:
            raise f.wrong_type(kind, key, "from 0 to 1" if bound == 1.0 else "0 or more", value)
    if "n_pairs" in data:
        f.count(data, "n_pairs", kind)
    for key, allowed in _COMPARISON_WORDS.items():
        if key in data:
            word = f.string(data, key, kind)
            if allowed is not None and word not in allowed:
                raise f.wrong_type(kind, key, " or ".join(allowed), word)
    return data


@dataclass(frozen=True)
class Geomean:
    """The suite-wide geometric-mean latency ratio with its interval, over ``cases`` cases."""

    ratio: float
    ci_low: float
    ci_high: float
    cases: int

    def to_json(self) -> JsonDict:
        return {"ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high, "cases": self.cases}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Geomean:
        kind = "latency_geomean"
        return cls(f.finite(data, "ratio", kind), f.finite(data, "ci_low", kind), f.finite(data, "ci_high", kind),
                   f.count(data, "cases", kind))


_COUNTS = ("regressions", "improvements", "same", "unknown", "unknown_latency", "failed")


@dataclass(frozen=True)
class Summary:
    """Counts of the rows by decision, and the geometric-mean latency change. ``not_gated``
    counts the undecided rows that could not have decided (``Verdict.gated``); they are not in
    ``unknown``."""

    regressions: int = 0
    improvements: int = 0
    same: int = 0
    unknown: int = 0
    unknown_latency: int = 0
    failed: int = 0
    latency_geomean: Geomean | None = None
    not_gated: int = 0

    @classmethod
    def of(cls, rows: Iterable[Verdict]) -> Summary:
        rows = list(rows)
        counts = dict.fromkeys(_COUNTS, 0)
        not_gated = 0
        for row in rows:
            if not row.gated:
                not_gated += 1
                continue
            if row.decision == "unknown" and row.metric == "latency":
                counts["unknown_latency"] += 1
            if row.decision == "failed":
                counts["failed"] += 1
            elif row.decision == "different":
                counts["regressions" if row.direction == "regression" else "improvements"] += 1
            elif row.decision == "same":
                counts["same"] += 1
            else:
                counts["unknown"] += 1
        logs, lows, highs = [], [], []
        for row in rows:
            c = row.comparison
            if row.metric == "latency" and all(math.isfinite(v) and v for v in (c.ratio, c.ci_low, c.ci_high)):
                logs.append(math.log(c.ratio))
                # Half-widths combine as independent errors of a mean of logs.
                lows.append(math.log(c.ratio) - math.log(c.ci_low))
                highs.append(math.log(c.ci_high) - math.log(c.ratio))
        geomean = None
        if logs:
            mean = sum(logs) / len(logs)
            low = math.sqrt(sum(x * x for x in lows)) / len(logs)
            high = math.sqrt(sum(x * x for x in highs)) / len(logs)
            geomean = Geomean(math.exp(mean), math.exp(mean - low), math.exp(mean + high), len(logs))
        return cls(**counts, latency_geomean=geomean, not_gated=not_gated)

    def to_json(self) -> JsonDict:
        return {**{k: getattr(self, k) for k in _COUNTS},
                "latency_geomean": None if self.latency_geomean is None else self.latency_geomean.to_json(),
                **({"not_gated": self.not_gated} if self.not_gated else {})}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Summary:
        geomean = f.opt_obj(data, "latency_geomean", "summary")
        return cls(**{k: f.count(data, k, "summary") for k in _COUNTS},
                   latency_geomean=None if geomean is None else Geomean.from_json(geomean),
                   not_gated=f.count(data, "not_gated", "summary") if "not_gated" in data else 0)


@dataclass(frozen=True)
class VerdictsDocument:
    """What a check or compare decided: the ``mode`` (what was compared), the statistical
    ``settings`` and sampling history, the verdicts, warnings, and the result document of each
    side (``results``; None in a document built without any, as tests do)."""

    mode: CheckMode
    settings: VerdictsSettings
    verdicts: tuple[Verdict, ...]
    results: ComparedResults | None
    warnings: tuple[str, ...] = ()
    summary: Summary = field(default_factory=Summary)
    created_at: str = ""
    tool_version: str = __version__
    version: int = VERDICTS_VERSION
    explanations: tuple[StoredExplanation, ...] = ()
    shard: ShardInfo | None = None

    @classmethod
    def of(cls, mode: CheckMode, rows: Iterable[Verdict], settings: VerdictsSettings,
           results: ComparedResults | None, warnings: Iterable[str]) -> VerdictsDocument:
        rows = tuple(rows)
        return cls(mode, settings, rows, results, tuple(warnings), Summary.of(rows),
                   datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))

    @property
    def kind(self) -> str:
        return self.mode.kind

    def to_json(self) -> JsonDict:
        return {"version": self.version, "tool": {"name": "perfguard", "version": self.tool_version},
                "created_at": self.created_at, "mode": self.mode.to_json(), "settings": self.settings.to_json(),
                "summary": self.summary.to_json(), "warnings": list(self.warnings),
                "verdicts": [v.to_json() for v in self.verdicts],
                "results": {} if self.results is None else self.results.to_json(),
                **({"explanations": [e.to_json() for e in self.explanations]} if self.explanations else {}),
                **({"shard": self.shard.to_json()} if self.shard is not None else {})}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> VerdictsDocument:
        kind = "verdicts"
        results = f.obj(data, "results", kind)
        return cls(CheckMode.from_json(f.obj(data, "mode", kind)), VerdictsSettings.from_json(f.obj(data, "settings", kind)),
                   tuple(Verdict.from_json(v) for v in f.objects(data, "verdicts", kind)),
                   ComparedResults.from_json(results) if results else None,
                   f.string_list(data, "warnings", kind), Summary.from_json(f.obj(data, "summary", kind)),
                   f.string(data, "created_at", kind), f.string(f.obj(data, "tool", kind), "version", "tool"),
                   f.integer(data, "version", kind),
                   tuple(read_explanation(e) for e in f.objects(data, "explanations", kind)) if "explanations" in data
                   else (),
                   None if f.opt_obj(data, "shard", kind) is None else ShardInfo.from_json(f.obj(data, "shard", kind)))


def parse_verdicts(data: object, path: str | Path) -> VerdictsDocument:
    """A verdicts document from its JSON value (already read from ``path``): refuses a newer
    version, migrates older ones, validates against the schema; one-line ``StorageError``s."""
    data = current_format(data, path, kind="verdicts", title="perfguard verdicts document",
                          version=VERDICTS_VERSION, migrations=_MIGRATIONS)
    found = data.get("results")
    embedded = found if isinstance(found, dict) else {}
    # The result documents inside are migrated like result files (a verdicts file of version 1
    # may hold results of an older result version).
    embedded = {label: current_result_json(r, f"{path} results[{label!r}]") for label, r in embedded.items()}
    data = {**data, "results": embedded} if embedded else data
    schemas = {"verdicts document": ("verdicts", data),
               **{f"result {label!r} inside the verdicts": ("result", r) for label, r in embedded.items()}}
    return typed_document(data, path, VerdictsDocument.from_json, corrupt="verdicts document", schemas=schemas)


def load_verdicts(path: str | Path) -> VerdictsDocument:
    """The one reader of verdicts files (``perfguard check --json``, ``perfguard compare --json``)."""
    data = read_json(Path(path), missing="{path}: verdicts file not found",
                     not_json="{path}: corrupt verdicts file (not JSON: {exc})")
    return parse_verdicts(data, path)
