"""The bisect document: what ``perfguard bisect --json`` writes (the state file is
:mod:`perfguard.bisect.state`'s, built from the same pieces).

Format history of the bisect result (``BISECT_VERSION``), written in every mode (``commits``,
``passes`` between commits, ``pipelines``):

1. First format. Later additions, optional and absent where they would say nothing (older readers
   ignore them): ``explanations`` (a found culprit profiled on both of its sides: the objects of
   ``perfguard.results.explanation.Explanation``, read typed at load as in the verdicts document,
   one that does not read kept as found; one per culprit, absent under ``--no-explain`` or when
   nothing was found). ``metric`` (a bisection on an exact metric, ``bisect --metric node_count``:
   every probe compiles once and its row keeps each version's value in ``values``; absent: latency,
   timed). Status ``undecided`` (commits and passes modes: good -> bad stayed undecided, nothing
   bisected; its ``endpoints`` is that undecided comparison) with ``exact_changes`` (each exact
   metric whose value differs between the ends, ``{"node_count": [17, 77]}``: the ``--metric``
   that decides it; absent when none did).

Each class owns its JSON: ``from_json`` reads it, ``to_json`` writes exactly the keys today's
writers write (``to_json(from_json(d)) == d`` for every document perfguard writes; the golden files
under ``tests/golden/v1/`` prove it). Which optional keys a result carries follows its mode and
status, not whether a value is None: a commits-mode result always has ``endpoints`` (null when
there is no regression; the undecided comparison when ``undecided``), a pipelines-mode one never has.

``from_json`` also reads what the report has always accepted from hand-written documents: absent
keys read as their defaults, ``good``/``bad`` may be a bare ref, and probe rows may be flat
summaries (:class:`SummaryProbe`). A value of the wrong type is a one-line ``StorageError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from perfguard import jsonfields as f
from perfguard.errors import FieldError, StorageError
from perfguard.jsonfields import JsonDict
from perfguard.results.explanation import StoredExplanation, read_explanation
from perfguard.stats.adaptive import Look
from perfguard.stats.verdict import is_regression

if TYPE_CHECKING:
    from perfguard.compare.verdicts import Verdict

BISECT_VERSION = 1

Json = JsonDict
"""A JSON object as read from or written to a file."""
Trace = JsonDict
"""A case entry's pass trace (``perfguard.compile``), kept as the result document wrote it: its
reader (``perfguard.results.result.Trace``) checks it there; the pass search reads it raw."""

# _MIGRATIONS[n] turns a version-n result document into version n + 1.
_MIGRATIONS: dict[int, Callable[[Json], Json]] = {}

T = TypeVar("T")


# --- reading helpers (the state file's too): the readers of perfguard.jsonfields, whose one-line
# FieldError (kind, key, what was found) becomes the StorageError every bisect reader raises.

#: The kind the field errors of these documents name.
KIND = "bisect"


def _read(read: Callable[[], T]) -> T:
    try:
        return read()
    except FieldError as exc:
        raise StorageError(str(exc)) from None


def as_object(value: object, key: str) -> Json:
    return _read(lambda: f.json_object(f.obj({key: value}, key, KIND), key))


def get_str(d: Json, key: str, default: str | None = None) -> str | None:
    return default if key not in d else _read(lambda: f.opt_string(d, key, KIND))


# Every integer of these documents is a count, a position or a version, and every number a
# ratio, an interval bound, a p-value or a duration: a negative or non-finite one is corrupt.
def get_int(d: Json, key: str) -> int | None:
    return _read(lambda: f.opt_count(d, key, KIND))


def get_number(d: Json, key: str) -> float | None:
    return _read(lambda: f.opt_nonnegative(d, key, KIND))


def get_bool(d: Json, key: str, default: bool | None) -> bool | None:
    return default if key not in d else _read(lambda: f.opt_boolean(d, key, KIND))


def get_list(d: Json, key: str, item: Callable[[Any], T]) -> list[T]:  # int, or a reader of objects
    if d.get(key) is None:
        return []
    return [item(v) for v in _read(lambda: f.array(d, key, KIND))]


def read_look(value: object) -> Look:
    """One look of a probe's sampling history (:class:`perfguard.stats.adaptive.Look`)."""
    return _read(lambda: Look.from_json(as_object(value, "looks")))


def optional(value: object, read: Callable[[object], T]) -> T | None:
    return None if value is None else read(value)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None  # JSON has no inf/NaN: null, as Comparison writes it


class _Written(Protocol):
    def to_json(self) -> JsonDict: ...


def _json(value: _Written | None) -> JsonDict | None:
    return None if value is None else value.to_json()


# --- pieces ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class VerdictSummary:
    """One comparison of a probe: a ``perfguard.compare.verdicts.Verdict`` cut to what the bisect,
    state and tune documents persist (:meth:`of`, the one projection), flat and all optional.

    It stays its own persisted type rather than a ``Verdict``: a verdict row holds its case, metric,
    unit, gate and the whole ``Comparison`` (medians, floor, alpha, method, statistic), which no
    version-1 bisect, state or tune document recorded, so an old document could not be migrated to
    rows (the data is gone), and hand-written effects cut to their estimate must still read. It
    shares every rule with the row: ``is_regression`` is ``perfguard.stats.verdict.is_regression``
    and a non-finite number is null, as ``Comparison.to_json`` writes it."""

    baseline: str | None = None
    candidate: str | None = None
    decision: str | None = None
    direction: str | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    mde: float | None = None
    workers: int | None = None
    reason: str | None = None

    @property
    def is_regression(self) -> bool:
        return is_regression(self.decision, self.direction)

    @classmethod
    def of(cls, row: Verdict) -> VerdictSummary:
        """The summary of a verdict row (``workers``: the comparison's pairs)."""
        c = row.comparison
        return cls(row.baseline, row.candidate, row.decision, row.direction, _finite(c.ratio), _finite(c.ci_low),
                   _finite(c.ci_high), _finite(c.p_value), _finite(c.mde), c.n_pairs, c.reason)

    @classmethod
    def from_json(cls, value: object) -> VerdictSummary:
        d = as_object(value, "verdict")
        return cls(get_str(d, "baseline"), get_str(d, "candidate"), get_str(d, "decision"), get_str(d, "direction"),
                   get_number(d, "ratio"), get_number(d, "ci_low"), get_number(d, "ci_high"), get_number(d, "p_value"),
                   get_number(d, "mde"),
                   get_int(d, "workers"), get_str(d, "reason"))

    def to_json(self) -> Json:
        return dict(self.__dict__)


def summaries(value: object) -> dict[str, VerdictSummary]:
    """A probe's verdict summaries by comparison (``"A->B"``); absent reads as none."""
    return {str(k): VerdictSummary.from_json(v) for k, v in as_object(value or {}, "verdicts").items()}


@dataclass(frozen=True)
class Effect:
    """A commit culprit's effect: the confirming comparison, cut to its estimate."""

    ratio: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    workers: int | None = None

    @classmethod
    def of(cls, verdict: VerdictSummary | None) -> Effect | None:
        if verdict is None:
            return None
        return cls(verdict.ratio, verdict.ci_low, verdict.ci_high, verdict.p_value, verdict.workers)

    @classmethod
    def from_json(cls, value: object) -> Effect | VerdictSummary:
        """An effect as written: cut (commits mode) or a whole verdict summary (passes mode)."""
        d = as_object(value, "effect")
        if "decision" in d:
            return VerdictSummary.from_json(d)
        return cls(get_number(d, "ratio"), get_number(d, "ci_low"), get_number(d, "ci_high"), get_number(d, "p_value"),
                   get_int(d, "workers"))

    def to_json(self) -> Json:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CommitInfo:
    """A commit of the compiler under test; fields a writer did not know are None (and not written)."""

    sha: str
    subject: str | None = None
    author: str | None = None
    date: str | None = None
    ref: str | None = None

    @property
    def short(self) -> str:
        return self.sha[:10] if self.sha else self.ref or ""

    @classmethod
    def from_json(cls, value: object) -> CommitInfo:
        if isinstance(value, str):  # a bare ref in a hand-written document
            is_sha = len(value) >= 7 and all(c in "0123456789abcdef" for c in value)
            return cls(value if is_sha else "", ref=value)
        d = as_object(value, "commit")
        return cls(get_str(d, "sha", "") or "", get_str(d, "subject"), get_str(d, "author"), get_str(d, "date"),
                   get_str(d, "ref"))

    def to_json(self) -> Json:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class PassCulprit:
    """The pass a pass search names: its 1-based position in the pipeline."""

    name: str
    position: int | None
    confirmed: bool | None
    effect: VerdictSummary | None

    @classmethod
    def from_json(cls, value: object) -> PassCulprit:
        d = as_object(value, "pass")
        return cls(get_str(d, "name", "") or "", get_int(d, "position"), get_bool(d, "confirmed", None),
                   optional(d.get("effect"), VerdictSummary.from_json))

    def to_json(self) -> Json:
        return {"name": self.name, "position": self.position, "confirmed": self.confirmed,
                "effect": _json(self.effect)}


@dataclass(frozen=True)
class FirstDivergence:
    """The first pass whose output IR differs between good and bad (0-based index)."""

    index: int
    name: str

    def to_json(self) -> Json:
        return {"index": self.index, "name": self.name}


@dataclass(frozen=True)
class PassSearch:
    """The pass search inside one commit (``status`` ``no-divergence``: no pass changed the IR)."""

    status: str
    first_divergence: FirstDivergence | None = None
    culprit: PassCulprit | None = None
    culprits: list[PassCulprit] = field(default_factory=list)
    probes: int = 0
    measured_probes: int = 0

    @classmethod
    def from_json(cls, value: object) -> PassSearch:
        d = as_object(value, "pass_search")
        divergence = optional(d.get("first_divergence"), lambda v: as_object(v, "first_divergence"))
        probes = d.get("probes")
        return cls(get_str(d, "status", "unknown") or "unknown",
                   FirstDivergence(get_int(divergence, "index") or 0, get_str(divergence, "name", "") or "")
                   if divergence is not None else None,
                   optional(d.get("culprit"), PassCulprit.from_json), get_list(d, "culprits", PassCulprit.from_json),
                   len(probes) if isinstance(probes, list) else get_int(d, "probes") or 0,
                   get_int(d, "measured_probes") or 0)

    def to_json(self) -> Json:
        if self.status == "no-divergence":  # written before any probe: the probes are an empty list
            return {"status": self.status, "first_divergence": None, "culprit": None, "probes": []}
        return {"status": self.status, "first_divergence": _json(self.first_divergence),
                "culprit": _json(self.culprit), "culprits": [c.to_json() for c in self.culprits],
                "probes": self.probes, "measured_probes": self.measured_probes}


@dataclass(frozen=True)
class Culprit:
    """A culprit commit. Commits mode also gives its ``position`` in the range (and ``range``, the
    commits it could not be told apart from, or None) and, once confirmed, its ``pass_search``."""

    commit: CommitInfo | None
    effect: Effect | VerdictSummary | None
    pass_: PassCulprit | None
    confirmed: bool
    position: int | None = None
    range: list[CommitInfo] | None = None
    pass_search: PassSearch | None = None

    @classmethod
    def from_json(cls, value: object) -> Culprit:
        d = as_object(value, "culprit")
        return cls(optional(d.get("commit"), CommitInfo.from_json), optional(d.get("effect"), Effect.from_json),
                   optional(d.get("pass"), PassCulprit.from_json), bool(get_bool(d, "confirmed", True)),
                   get_int(d, "position"),
                   get_list(d, "range", CommitInfo.from_json) if d.get("range") is not None else None,
                   optional(d.get("pass_search"), PassSearch.from_json))

    def to_json(self) -> Json:
        out: Json = {"commit": _json(self.commit), "effect": _json(self.effect), "pass": _json(self.pass_),
                     "confirmed": self.confirmed}
        if self.position is not None:
            out.update(position=self.position, range=None if self.range is None else [c.to_json() for c in self.range])
        if self.pass_search is not None:
            out["pass_search"] = self.pass_search.to_json()
        return out


@dataclass(frozen=True)
class MinimalEdit:
    """One edit of a pipelines-mode minimal set (``kind`` insert | delete | replace | move)."""

    kind: str
    describe: str

    @classmethod
    def from_json(cls, value: object) -> MinimalEdit:
        if isinstance(value, str):
            return cls("", value)
        d = as_object(value, "minimal")
        return cls(get_str(d, "kind", "") or "", get_str(d, "describe", "") or "")

    def to_json(self) -> Json:
        return {"kind": self.kind, "describe": self.describe}


# --- probe rows -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProbeRow:
    """A commits-mode probe: the versions measured together and each comparison's summary."""

    kind: str
    commits: list[str]
    status: str
    reason: str | None = None
    uncertain: bool = False
    verdicts: dict[str, VerdictSummary] = field(default_factory=dict)
    looks: list[Look] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)  # an exact metric's value per version

    @classmethod
    def from_json(cls, d: Json) -> ProbeRow:
        values = as_object(d.get("values") or {}, "values")
        return cls(get_str(d, "kind", "") or "", get_list(d, "commits", str), get_str(d, "status", "") or "",
                   get_str(d, "reason"), bool(get_bool(d, "uncertain", False)),
                   summaries(d.get("verdicts")),
                   get_list(d, "looks", read_look), {str(k): get_number(values, k) or 0.0 for k in values})

    def to_json(self) -> Json:
        out: Json = {"kind": self.kind, "commits": self.commits, "status": self.status, "reason": self.reason,
                     "uncertain": self.uncertain, "verdicts": {k: v.to_json() for k, v in self.verdicts.items()},
                     "looks": [look.to_json() for look in self.looks]}
        if self.values:
            out["values"] = dict(self.values)
        return out


@dataclass(frozen=True)
class PipelineProbe:
    """A pipelines-mode probe: one set of edits, the pipeline it gives, and the outcome."""

    edits: list[int]
    passes: list[str]
    outcome: str
    verdict: VerdictSummary | None = None
    reason: str | None = None

    @classmethod
    def from_json(cls, d: Json) -> PipelineProbe:
        return cls(get_list(d, "edits", int), get_list(d, "passes", str), get_str(d, "outcome", "") or "",
                   optional(d.get("verdict"), VerdictSummary.from_json), get_str(d, "reason"))

    def to_json(self) -> Json:
        return {"edits": self.edits, "passes": self.passes, "outcome": self.outcome,
                "verdict": _json(self.verdict), "reason": self.reason}


@dataclass(frozen=True)
class SummaryProbe:
    """A flat probe row of a hand-written document (one version, a verdict word and its estimate);
    no perfguard writes it, the report reads it (``tests/golden/bisect-example.json``)."""

    commit: CommitInfo | None
    label: str | None
    verdict: str | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    workers: int | None
    reason: str | None

    @classmethod
    def from_json(cls, d: Json) -> SummaryProbe:
        return cls(optional(d.get("commit"), CommitInfo.from_json), get_str(d, "label"), get_str(d, "verdict"),
                   get_number(d, "ratio"), get_number(d, "ci_low"), get_number(d, "ci_high"), get_int(d, "workers"),
                   get_str(d, "reason"))

    def to_json(self) -> Json:
        out = {k: v for k, v in self.__dict__.items() if v is not None}
        if self.commit is not None:
            out["commit"] = self.commit.to_json()
        return out


Probe = ProbeRow | PipelineProbe | SummaryProbe


def _probe(value: object) -> Probe:
    d = as_object(value, "probes")
    if "passes" in d:
        return PipelineProbe.from_json(d)
    if "commits" in d or "verdicts" in d:
        return ProbeRow.from_json(d)
    return SummaryProbe.from_json(d)


# --- the result -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class BisectResult:
    """The document ``perfguard bisect --json`` writes. Fields of another mode stay at their defaults.

    * every mode: ``mode``, ``status`` (``found``, ``inconclusive``, ``no-regression``; passes mode
      also ``no-divergence``; a commits bisection of a fix, which the nightly runs, ``no-improvement``
      instead of ``no-regression``; commits and passes modes ``undecided`` when good -> bad stayed
      undecided, with ``exact_changes``), ``suite``, ``case``, ``total_probes``, ``wall_time_s``;
    * ``commits``: ``good``/``bad`` (with ``ref``), ``commits`` (range length), ``state_file``,
      ``endpoints`` (good -> bad), ``culprits``, ``probes``, ``measured_probes``, ``skipped`` (None
      when there was no regression to search);
    * ``passes``: ``good``/``bad`` (sha only), ``endpoints``, ``culprits`` (one, at the bad commit)
      and ``pass_search`` (None when there was no regression);
    * ``pipelines``: ``good_pipeline``, ``bad_pipeline``, ``edits``, ``minimal``, ``probes`` and,
      when found, ``effect``;
    * every mode, when found and explained: ``explanations``, one per culprit (commits: its
      parent against it; pipelines: the good pipeline against the smallest reproducing edit).
    """

    mode: str
    status: str
    suite: str = ""
    case: str = ""
    total_probes: int | None = None
    wall_time_s: float | None = None
    good: CommitInfo | None = None
    bad: CommitInfo | None = None
    endpoints: VerdictSummary | None = None
    culprits: list[Culprit] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    commits: int | None = None
    state_file: str | None = None
    measured_probes: int | None = None
    skipped: list[CommitInfo] | None = None
    pass_search: PassSearch | None = None
    good_pipeline: str = ""
    bad_pipeline: str = ""
    edits: list[str] = field(default_factory=list)
    minimal: list[MinimalEdit] = field(default_factory=list)
    effect: VerdictSummary | None = None
    explanations: list[StoredExplanation] = field(default_factory=list)
    version: int = BISECT_VERSION
    metric: str = "latency"  # what the probes compared: latency (timed) or an exact metric (compiled)
    # ``undecided``: exact metrics whose values differ between the ends, metric -> (good, bad)
    exact_changes: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        return self.status == "found"

    @classmethod
    def from_json(cls, value: object) -> BisectResult:
        d = as_object(value, "document")
        mode = get_str(d, "mode") or ("pipelines" if "good_pipeline" in d else "commits")
        effect = d.get("effect")
        return cls(
            mode=mode, status=get_str(d, "status", "unknown") or "unknown", suite=get_str(d, "suite", "") or "",
            case=get_str(d, "case", "") or "", total_probes=get_int(d, "total_probes"),
            wall_time_s=get_number(d, "wall_time_s"),
            good=optional(d.get("good"), CommitInfo.from_json), bad=optional(d.get("bad"), CommitInfo.from_json),
            endpoints=optional(d.get("endpoints"), VerdictSummary.from_json),
            culprits=get_list(d, "culprits", Culprit.from_json), probes=get_list(d, "probes", _probe),
            commits=get_int(d, "commits"), state_file=get_str(d, "state_file"),
            measured_probes=get_int(d, "measured_probes"),
            skipped=get_list(d, "skipped", CommitInfo.from_json) if d.get("skipped") is not None else None,
            pass_search=optional(d.get("pass_search"), PassSearch.from_json),
            good_pipeline=get_str(d, "good_pipeline", "") or "", bad_pipeline=get_str(d, "bad_pipeline", "") or "",
            edits=get_list(d, "edits", str), minimal=get_list(d, "minimal", MinimalEdit.from_json),
            # a hand-written effect may be cut to its estimate; it reads as a summary without a decision
            effect=optional(effect, VerdictSummary.from_json),
            explanations=get_list(d, "explanations", lambda v: read_explanation(as_object(v, "explanations"))),
            version=get_int(d, "version") or BISECT_VERSION, metric=get_str(d, "metric", "latency") or "latency",
            exact_changes=_exact_changes(d.get("exact_changes")))

    def to_json(self) -> Json:
        out: Json = {"version": self.version, "kind": "bisect", "mode": self.mode, "status": self.status,
                     "suite": self.suite, "case": self.case, "total_probes": self.total_probes,
                     "wall_time_s": self.wall_time_s}
        if self.mode == "pipelines":
            out.update(good_pipeline=self.good_pipeline, bad_pipeline=self.bad_pipeline, edits=self.edits,
                       minimal=[e.to_json() for e in self.minimal], probes=[p.to_json() for p in self.probes])
            if self.status == "found":
                out["effect"] = _json(self.effect)
            return self._explained(out)
        out.update(good=_json(self.good), bad=_json(self.bad), endpoints=_json(self.endpoints),
                   culprits=[c.to_json() for c in self.culprits])
        if self.mode == "commits":
            out.update(commits=self.commits, state_file=self.state_file, measured_probes=self.measured_probes,
                       probes=[p.to_json() for p in self.probes])
            if self.skipped is not None:
                out["skipped"] = [c.to_json() for c in self.skipped]
        elif self.pass_search is not None:
            out["pass_search"] = self.pass_search.to_json()
        return self._explained(out)

    def _explained(self, out: Json) -> Json:
        if self.metric != "latency":
            out["metric"] = self.metric
        if self.exact_changes:
            out["exact_changes"] = {k: [int(x) if x.is_integer() else x for x in v]
                                    for k, v in sorted(self.exact_changes.items())}
        if self.explanations:
            out["explanations"] = [e.to_json() for e in self.explanations]
        return out


def _exact_changes(value: object) -> dict[str, tuple[float, float]]:
    """``exact_changes``: metric -> [good, bad], each a number (absent: none)."""
    out = {}
    for metric, pair in as_object(value or {}, "exact_changes").items():
        if not (isinstance(pair, list) and len(pair) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in pair)):
            raise StorageError(f"exact_changes: {metric!r} must be [good, bad], two numbers, found {pair!r}")
        out[str(metric)] = (float(pair[0]), float(pair[1]))
    return out


def bisect_from_json(document: object, source: str | Path) -> BisectResult:
    """A bisect document read from ``source``: refuse a newer version, migrate an older one."""
    from perfguard.results.documents import current_format

    if not isinstance(document, dict) or document.get("kind") != "bisect":
        raise StorageError(f"{source}: not a perfguard bisect document (no kind 'bisect' and integer 'version')")
    document = current_format(document, source, kind="bisect", title="perfguard bisect document",
                              version=BISECT_VERSION, migrations=_MIGRATIONS)
    try:
        return BisectResult.from_json(document)
    except StorageError as exc:
        raise StorageError(f"{source}: corrupt bisect document: {exc}") from None


def load_bisect(path: str | Path) -> BisectResult:
    """Read a ``perfguard bisect --json`` file; every failure is a one-line ``StorageError``."""
    from perfguard.results.documents import read_json

    path = Path(path)
    document = read_json(path, missing="{path}: bisect file not found", not_json="{path}: not JSON ({exc})")
    return bisect_from_json(document, path)
