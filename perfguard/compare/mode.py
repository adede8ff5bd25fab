"""The typed parts of a verdicts document around its rows: what was compared (``CheckMode``), how
it sampled (``VerdictsSettings``) and the result document of each side (``ComparedResults``).

They replace the dicts of verdicts format 1, whose ``results`` were keyed by labels that changed
with the mode (``base``/``head``, ``baseline``/``candidate``, ``head`` alone), so each reader guessed
which side was the candidate. The JSON of ``mode`` and ``settings`` is unchanged; ``results`` is
``{"baseline", "candidate"}`` from format 2 (:data:`perfguard.compare.verdicts.VERDICTS_VERSION`).

The suite's own ``[check]`` table, the settings a check runs with, is
:class:`perfguard.suite.gates.CheckSettings`; ``VerdictsSettings`` is what a document records of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from perfguard import jsonfields as f
from perfguard.errors import FieldError
from perfguard.jsonfields import JsonDict, JsonValue
from perfguard.results import ResultDocument
from perfguard.stats.adaptive import Look

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
