"""The bisection narrative: a bisect document (:class:`perfguard.bisect.document.BisectResult`)
as plain data for the writers.

Two shapes are shown: ``commits`` and ``passes`` (good and bad commits, culprits with their effect
and pass, probe rows) and ``pipelines`` (the edits between two pass lists, the smallest set that
reproduces the regression, probe rows). The typed document reads absent fields as defaults, so a
partial or hand-written bisection still renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from perfguard.bisect.document import (
    BisectResult,
    CommitInfo,
    Culprit,
    PipelineProbe,
    Probe,
    ProbeRow,
    SummaryProbe,
    VerdictSummary,
)
from perfguard.report import format as fmt
from perfguard.report.why import WhyView, why_views

_WORDS = {"fail": "regression", "bad": "regression", "regression": "regression", "pass": "same",
          "good": "same", "same": "same", "improvement": "improvement", "skip": "unknown",
          "unresolved": "unknown", "unknown": "unknown", "undecided": "unknown", "failed": "failed"}


@dataclass
class CommitView:
    sha: str
    subject: str = ""
    author: str = ""
    date: str = ""
    ref: str = ""

    @property
    def short(self) -> str:
        return self.sha[:10] if self.sha else self.ref


@dataclass
class Effect:
    ratio: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def change(self) -> str:
        return fmt.change(self.ratio)

    @property
    def interval(self) -> str:
        return fmt.interval(self.ci_low, self.ci_high)


@dataclass
class CulpritView:
    commit: CommitView | None
    effect: Effect | None
    pass_name: str | None
    pass_position: int | None
    confirmed: bool
    range: list[CommitView] = field(default_factory=list)


@dataclass
class ProbeView:
    label: str
    state: str
    effect: Effect | None
    workers: str
    reason: str


@dataclass
class BisectView:
    mode: str
    suite: str
    case: str
    status: str
    good: CommitView | None
    bad: CommitView | None
    commits: int | None
    culprits: list[CulpritView]
    probes: list[ProbeView]
    total_probes: int | None
    wall_time: str
    skipped: list[CommitView]
    good_pipeline: str = ""
    bad_pipeline: str = ""
    edits: list[str] = field(default_factory=list)
    minimal: list[str] = field(default_factory=list)
    effect: Effect | None = None
    # The found culprit profiled on both sides (``perfguard.report.why``), one per culprit.
    explanations: list[WhyView] = field(default_factory=list)
    # ``undecided``: "node_count 17 -> 77" per exact metric that changed between the ends
    exact_changes: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.status == "found"


class _Estimate(Protocol):
    """Anything that carries an estimate: a verdict summary, a culprit's effect, a flat probe row."""

    @property
    def ratio(self) -> float | None: ...
    @property
    def ci_low(self) -> float | None: ...
    @property
    def ci_high(self) -> float | None: ...


def _commit(commit: CommitInfo | None) -> CommitView | None:
    if commit is None:
        return None
    return CommitView(commit.sha, commit.subject or "", commit.author or "", commit.date or "", commit.ref or "")


def _effect(value: _Estimate | None) -> Effect | None:
    if value is None or fmt.finite(value.ratio) is None:
        return None
    return Effect(fmt.finite(value.ratio), fmt.finite(value.ci_low), fmt.finite(value.ci_high))


def _state(verdict: VerdictSummary | None) -> str:
    if verdict is None:
        return "unknown"
    if verdict.decision == "different":
        return "regression" if verdict.direction == "regression" else "improvement"
    return _word(verdict.decision)


def _word(word: str | None) -> str:
    return _WORDS.get((word or "").lower(), "unknown")


def _workers(value: int | None) -> str:
    return "" if value is None else str(value)


def _probe_views(probe: Probe) -> list[ProbeView]:
    if isinstance(probe, ProbeRow):
        if probe.verdicts:
            return [ProbeView(pair.replace("->", " → "), _state(verdict), _effect(verdict), _workers(verdict.workers),
                              verdict.reason or "") for pair, verdict in probe.verdicts.items()]
        if probe.status not in ("", "ok"):
            return [ProbeView(", ".join(probe.commits), "unknown", None, "", probe.reason or probe.status)]
        return [ProbeView("", "unknown", None, "", probe.reason or "")]
    if isinstance(probe, PipelineProbe):  # one edit set per probe
        return [ProbeView(" → ".join(probe.passes) or "(no passes)", _word(probe.outcome), _effect(probe.verdict),
                          _workers(probe.verdict.workers if probe.verdict else None), probe.reason or "")]
    return [_summary_view(probe)]


def _summary_view(probe: SummaryProbe) -> ProbeView:
    commit = _commit(probe.commit)
    label = probe.label or (commit.short if commit else "")
    if commit and commit.short and label != commit.short:
        label = f"{commit.short} {label}"
    return ProbeView(label, _word(probe.verdict), _effect(probe), _workers(probe.workers), probe.reason or "")


def _culprit(culprit: Culprit) -> CulpritView:
    found = culprit.pass_
    return CulpritView(_commit(culprit.commit), _effect(culprit.effect), found.name or None if found else None,
                       found.position if found else None, culprit.confirmed,
                       [view for view in (_commit(c) for c in culprit.range or []) if view])


def bisect_view(result: BisectResult, anchor: str = "bisect-why", warnings: list[str] | None = None) -> BisectView:
    """A bisect document as the report shows it; ``anchor`` prefixes the ids of its explanations,
    and an explanation that does not read becomes one of ``warnings``."""
    return BisectView(
        mode=result.mode, suite=result.suite, case=result.case, status=result.status, good=_commit(result.good),
        bad=_commit(result.bad), commits=result.commits, culprits=[_culprit(c) for c in result.culprits],
        probes=[view for probe in result.probes for view in _probe_views(probe)], total_probes=result.total_probes,
        wall_time=fmt.duration_long(result.wall_time_s),
        skipped=[view for view in (_commit(c) for c in result.skipped or []) if view],
        exact_changes=[f"{metric} {before:g} -> {after:g}" for metric, (before, after)
                       in sorted(result.exact_changes.items())],
        good_pipeline=result.good_pipeline, bad_pipeline=result.bad_pipeline, edits=list(result.edits),
        minimal=[m.describe for m in result.minimal], effect=_effect(result.effect),
        explanations=why_views(result.explanations, anchor, [] if warnings is None else warnings))
