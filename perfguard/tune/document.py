"""The tune document (``perfguard tune --json``): the search, its trajectory and the proof.

``to_json(from_json(d)) == d`` for every document perfguard writes; the proof's verdicts document
is embedded whole (``proof.verdicts``) so that ``perfguard report`` shows its rows.

Format history (``TUNE_VERSION``): 1. first format.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, TypeVar

from perfguard import __version__
from perfguard.bisect.document import VerdictSummary
from perfguard.compare.verdicts import VerdictsDocument, parse_verdicts
from perfguard.errors import StorageError
from perfguard.jsonfields import JsonDict, json_object
from perfguard.tune.space import Candidate

TUNE_VERSION = 1


@dataclass(frozen=True)
class Point:
    """One candidate tried, in order: the trajectory's unit."""

    index: int
    phase: str
    move: str
    candidate: Candidate
    status: str  # infeasible | identical | screened | failed
    reason: str | None = None
    latency: VerdictSummary | None = None
    compile_time: VerdictSummary | None = None
    node_count: int | None = None
    best: float = 1.0  # the best-so-far effect vs the start (confirmed ratios multiplied), after this point

    def score(self, objective: str) -> float:
        """The screened objective against the incumbent (a ratio: below 1 is better)."""
        return objective_score(objective, self.latency, self.compile_time)

    def to_json(self) -> JsonDict:
        return {"index": self.index, "phase": self.phase, "move": self.move, "candidate": self.candidate.to_json(),
                "status": self.status, "reason": self.reason, "node_count": self.node_count, "best": self.best,
                "latency": self.latency.to_json() if self.latency else None,
                "compile_time": self.compile_time.to_json() if self.compile_time else None}

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> Point:
        return cls(_int(d["index"]), str(d["phase"]), str(d["move"]), Candidate.from_json(_mapping(d["candidate"])),
                   str(d["status"]), _optional(d.get("reason"), str), _summary(d.get("latency")),
                   _summary(d.get("compile_time")), _optional(d.get("node_count"), int), _float(d.get("best", 1.0)))


@dataclass(frozen=True)
class Step:
    """An accepted move: the confirming probe's verdicts and the effect vs the start after it."""

    index: int
    move: str
    candidate: Candidate
    latency: VerdictSummary
    compile_time: VerdictSummary | None
    effect: float

    def to_json(self) -> JsonDict:
        return {"index": self.index, "move": self.move, "candidate": self.candidate.to_json(), "effect": self.effect,
                "latency": self.latency.to_json(),
                "compile_time": self.compile_time.to_json() if self.compile_time else None}

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> Step:
        latency = _summary(d.get("latency")) or VerdictSummary()
        return cls(_int(d["index"]), str(d["move"]), Candidate.from_json(_mapping(d["candidate"])), latency,
                   _summary(d.get("compile_time")), _float(d["effect"]))


def _summary(value: object) -> VerdictSummary | None:
    return None if value is None else VerdictSummary.from_json(value)


T = TypeVar("T")

# The readers of a point's and a step's fields: ``int()``/``float()`` as before, and a TypeError
# (a malformed tune document: ``tune_from_json`` makes it a StorageError) for any other kind.

def _int(value: object) -> int:
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"expected an integer, found {value!r}")


def _float(value: object) -> float:
    if isinstance(value, (int, float, str)):
        return float(value)
    raise TypeError(f"expected a number, found {value!r}")


def _optional(value: object, kind: type[T]) -> T | None:
    if value is None or isinstance(value, kind):
        return value
    raise TypeError(f"expected {kind.__name__} or null, found {value!r}")


def _mapping(value: object) -> Mapping[str, object]:
    if isinstance(value, Mapping):
        return value
    raise TypeError(f"expected an object, found {value!r}")


def objective_score(objective: str, latency: VerdictSummary | None, compile_time: VerdictSummary | None) -> float:
    def ratio(summary: VerdictSummary | None) -> float:
        value = summary.ratio if summary is not None else None
        return value if value is not None and math.isfinite(value) and value > 0 else math.nan

    if objective == "latency":
        return ratio(latency)
    if objective == "compile_time":
        return ratio(compile_time)
    return ratio(latency) * ratio(compile_time)


class ProofEffect(TypedDict):
    """The proof's verdict on one model as the tune document holds it (``proof.effects``): the
    objective's row (None for a ratio or bound that is not finite) and why it rejects, if it does."""

    case: str
    metric: str
    decision: str
    direction: str
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    mde: float | None
    rejects: str | None


@dataclass
class SearchOutcome:
    """What the search found: the best candidate, the accepted steps and every point tried."""

    start: Candidate
    best: Candidate
    steps: list[Step] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    confirmations: int = 0
    stopped: str = "budget"  # budget | time | exhausted
    wall_time_s: float = 0.0
    screen_mde: float | None = None  # median MDE of the screens (a few workers each)
    confirm_mde: float | None = None  # median MDE of the confirming probes
    floor: float = 0.0  # the objective's relative floor: a smaller gain is never accepted


@dataclass(frozen=True)
class TuneResult:
    """One ``perfguard tune`` run: what was searched, what was found, and whether it was proved."""

    suite: str
    case: str
    pipeline: str
    objective: str
    start: Candidate
    best: Candidate
    universe: tuple[str, ...]
    budget: int
    time_limit_s: float | None
    stopped: str
    wall_time_s: float
    steps: tuple[Step, ...] = ()
    points: tuple[Point, ...] = ()
    confirmations: int = 0
    screen_mde: float | None = None
    confirm_mde: float | None = None
    floor: float = 0.0
    status: str = "no-gain"  # proved | no-gain | rejected | nothing-better
    proof_pipeline: str | None = None
    proof_effects: tuple[ProofEffect, ...] = ()
    proof: VerdictsDocument | None = None
    patch: str | None = None
    tool_version: str = __version__
    version: int = TUNE_VERSION

    @property
    def kind(self) -> str:
        return "tune"

    @property
    def infeasible(self) -> list[Point]:
        return [p for p in self.points if p.status == "infeasible"]

    @property
    def distinct_artifacts(self) -> int:
        return len({p.candidate.key for p in self.points if p.status == "screened"})

    def top(self, objective: str | None = None, n: int = 5) -> list[Point]:
        """The best screened candidates by their screen against the incumbent of their time."""
        scored = [p for p in self.points if p.status == "screened" and math.isfinite(p.score(objective or
                                                                                             self.objective))]
        return sorted(scored, key=lambda p: p.score(objective or self.objective))[:n]

    @classmethod
    def of(cls, suite: str, case: str, pipeline: str, objective: str, universe: Sequence[str], budget: int,
           time_limit_s: float | None, outcome: SearchOutcome, status: str, proof_pipeline: str | None = None,
           proof_effects: Sequence[ProofEffect] = (), proof: VerdictsDocument | None = None,
           patch: str | None = None) -> TuneResult:
        return cls(suite, case, pipeline, objective, outcome.start, outcome.best, tuple(universe), budget,
                   time_limit_s, outcome.stopped, outcome.wall_time_s, tuple(outcome.steps), tuple(outcome.points),
                   outcome.confirmations, outcome.screen_mde, outcome.confirm_mde, outcome.floor, status, proof_pipeline, tuple(proof_effects), proof,
                   patch)

    def to_json(self) -> JsonDict:
        return {"version": self.version, "kind": "tune", "tool": {"name": "perfguard", "version": self.tool_version},
                "suite": self.suite, "case": self.case, "pipeline": self.pipeline, "objective": self.objective,
                "start": self.start.to_json(), "best": self.best.to_json(), "universe": list(self.universe),
                "budget": self.budget, "time_limit_s": self.time_limit_s, "stopped": self.stopped,
                "wall_time_s": self.wall_time_s, "steps": [s.to_json() for s in self.steps],
                "points": [p.to_json() for p in self.points], "confirmations": self.confirmations,
                "screen_mde": self.screen_mde, "confirm_mde": self.confirm_mde, "floor": self.floor,
                "status": self.status,
                "proof": {"pipeline": self.proof_pipeline,
                          "effects": [json_object(e, "proof effect") for e in self.proof_effects],
                          "verdicts": self.proof.to_json() if self.proof else None},
                "patch": self.patch}


def tune_from_json(data: Any, path: str | Path = "<tune>") -> TuneResult:
    """A tune document; refuses a newer version with "upgrade perfguard", anything malformed with
    a one-line ``StorageError``."""
    from perfguard.results.documents import current_format

    if not isinstance(data, dict) or data.get("kind") != "tune":
        raise StorageError(f"{path}: not a perfguard tune document")
    data = current_format(data, path, kind="tune", title="perfguard tune document", version=TUNE_VERSION,
                          migrations={})
    version = TUNE_VERSION
    try:
        proof = data.get("proof") or {}
        verdicts = proof.get("verdicts")
        return TuneResult(
            str(data["suite"]), str(data["case"]), str(data["pipeline"]), str(data["objective"]),
            Candidate.from_json(data["start"]), Candidate.from_json(data["best"]),
            tuple(str(p) for p in data.get("universe") or ()), int(data["budget"]), data.get("time_limit_s"),
            str(data["stopped"]), float(data["wall_time_s"]), tuple(Step.from_json(s) for s in data.get("steps") or ()),
            tuple(Point.from_json(p) for p in data.get("points") or ()), int(data.get("confirmations") or 0),
            data.get("screen_mde"), data.get("confirm_mde"), float(data.get("floor") or 0.0), str(data.get("status") or "no-gain"), proof.get("pipeline"),
            tuple(proof.get("effects") or ()), parse_verdicts(verdicts, path) if verdicts is not None else None,
            data.get("patch"), str((data.get("tool") or {}).get("version") or ""), version)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise StorageError(f"{path}: malformed tune document ({type(exc).__name__}: {exc})") from None


def suite_patch(suite_path: str, pipeline: str, tuned: Candidate, name: str, effects: Sequence[ProofEffect]
                ) -> str:
    """The tuned order as TOML: a ``[pipelines.NAME]`` table to add to the suite (or whose passes
    replace the pinned ones), with the proof's effect per model as comments."""
    import json

    lines = [f"# perfguard tune: a proved order for pipeline {pipeline!r} of {suite_path}.",
             f"# Add this table to the suite, or copy its passes into [pipelines.{pipeline}] to pin the new order.",
             "# Proof (fresh paired check against the pinned order, every model the pipeline runs on):"]
    for effect in effects:
        ratio, low, high = effect.get("ratio"), effect.get("ci_low"), effect.get("ci_high")
        shown = "n/a" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"
        interval = "" if low is None or high is None else f" [{(low - 1) * 100:+.1f}%, {(high - 1) * 100:+.1f}%]"
        lines.append(f"#   {effect['case']}: {effect['metric']} {shown}{interval} ({effect['decision']})")
    lines += [f"[pipelines.{name}]", "passes = [" + ", ".join(json.dumps(p) for p in tuned.passes) + "]"]
    if tuned.options:
        lines.append("options = " + _inline_table(tuned.options))
    return "\n".join(lines) + "\n"


def _inline_table(value: object) -> str:
    import json

    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_inline_table(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_inline_table(v) for v in value) + "]"
    return json.dumps(value)

