"""The bisection narrative: a ``perfguard bisect --json`` document as plain data for the writers.

Two modes are read (every field optional, so a partial or interrupted bisection still renders):

* ``commits``: ``good``/``bad`` (a ref string or ``{ref, sha, subject, author, date}``),
  ``culprits[]`` of ``{commit, effect {ratio, ci_low, ci_high}, pass {name, position} | null,
  confirmed, range}``, ``probes[]`` either flat (``{commit, label, verdict, ratio, ci_low,
  ci_high, workers}``) or grouped (``{commits, status, reason, verdicts {"a->b": summary}}``);
* ``pipelines``: ``good_pipeline``, ``bad_pipeline``, ``edits``, ``minimal[] {describe}``,
  ``effect`` and ``probes[] {passes, outcome, verdict}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfguard.report import format as fmt

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

    @property
    def found(self) -> bool:
        return self.status == "found"


def _commit(value: Any) -> CommitView | None:
    if isinstance(value, str):
        return CommitView(sha=value if len(value) >= 7 and all(c in "0123456789abcdef" for c in value) else "",
                          ref=value)
    if not isinstance(value, dict):
        return None
    return CommitView(sha=str(value.get("sha") or ""), subject=str(value.get("subject") or ""),
                      author=str(value.get("author") or ""), date=str(value.get("date") or ""),
                      ref=str(value.get("ref") or ""))


def _effect(value: Any) -> Effect | None:
    if not isinstance(value, dict) or fmt.finite(value.get("ratio")) is None:
        return None
    return Effect(fmt.finite(value.get("ratio")), fmt.finite(value.get("ci_low")), fmt.finite(value.get("ci_high")))


def _state(value: Any) -> str:
    if isinstance(value, dict):
        if value.get("decision") == "different":
            return "regression" if value.get("direction") == "regression" else "improvement"
        return _WORDS.get(str(value.get("decision", "")), "unknown")
    return _WORDS.get(str(value or "").lower(), "unknown")


def _workers(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else ""


def _probes(document: dict[str, Any]) -> list[ProbeView]:
    views = []
    for probe in document.get("probes") or []:
        if not isinstance(probe, dict):
            continue
        if isinstance(probe.get("verdicts"), dict) and probe["verdicts"]:
            for pair, verdict in probe["verdicts"].items():
                views.append(ProbeView(str(pair).replace("->", " → "), _state(verdict), _effect(verdict),
                                       _workers(verdict.get("workers")), str(verdict.get("reason") or "")))
        elif "commits" in probe and probe.get("status") not in (None, "ok"):
            views.append(ProbeView(", ".join(str(c) for c in probe.get("commits") or []), "unknown", None, "",
                                   str(probe.get("reason") or probe.get("status"))))
        elif "passes" in probe:  # pipelines mode: one edit set per probe
            summary: dict[str, Any] = probe["verdict"] if isinstance(probe.get("verdict"), dict) else {}
            views.append(ProbeView(" → ".join(str(p) for p in probe["passes"]) or "(no passes)",
                                   _state(probe.get("outcome")), _effect(summary),
                                   _workers(summary.get("workers")), str(probe.get("reason") or "")))
        else:
            commit = _commit(probe.get("commit"))
            label = str(probe.get("label") or (commit.short if commit else ""))
            if commit and commit.short and label != commit.short:
                label = f"{commit.short} {label}"
            views.append(ProbeView(label, _state(probe.get("verdict")), _effect(probe),
                                   _workers(probe.get("workers")), str(probe.get("reason") or "")))
    return views


def _culprit(value: dict[str, Any]) -> CulpritView:
    passed = value.get("pass") if isinstance(value.get("pass"), dict) else None
    position = passed.get("position") if passed else None
    return CulpritView(_commit(value.get("commit")), _effect(value.get("effect")),
                       str(passed.get("name")) if passed and passed.get("name") is not None else None,
                       position if isinstance(position, int) and not isinstance(position, bool) else None,
                       bool(value.get("confirmed", True)),
                       [c for c in (_commit(r) for r in value.get("range") or []) if c])


def bisect_view(document: dict[str, Any]) -> BisectView:
    """A bisect document as the report shows it."""
    mode = str(document.get("mode") or ("pipelines" if "good_pipeline" in document else "commits"))
    total = document.get("total_probes")
    return BisectView(
        mode=mode, suite=str(document.get("suite") or ""), case=str(document.get("case") or ""),
        status=str(document.get("status") or "unknown"), good=_commit(document.get("good")),
        bad=_commit(document.get("bad")),
        commits=document.get("commits") if isinstance(document.get("commits"), int) else None,
        culprits=[_culprit(c) for c in document.get("culprits") or [] if isinstance(c, dict)],
        probes=_probes(document), total_probes=total if isinstance(total, int) else None,
        wall_time=fmt.duration_long(document.get("wall_time_s")),
        skipped=[c for c in (_commit(s) for s in document.get("skipped") or []) if c],
        good_pipeline=str(document.get("good_pipeline") or ""), bad_pipeline=str(document.get("bad_pipeline") or ""),
        edits=[str(e) for e in document.get("edits") or []],
        minimal=[str(m.get("describe") if isinstance(m, dict) else m) for m in document.get("minimal") or []],
        effect=_effect(document.get("effect")))
