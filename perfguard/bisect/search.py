"""Noise-aware search over an ordered sequence of versions (commits, or hybrid pass prefixes).

Positions 0..N are versions; 0 is known good, N known bad. Each probe measures three versions in
the same worker processes (lo, mid, hi) and compares lo->mid and mid->hi with the adaptive
three-way test of ``perfguard check``. Naive bisection compounds errors (0.95 per step is about
60 % over 10 steps), so a step never rests on one noisy comparison:

* ``mid->hi`` is a regression and ``lo->mid`` is not: mid is good, search (mid, hi];
* ``lo->mid`` is a regression and ``mid->hi`` is not: mid is bad, search (lo, mid];
* both are regressions: there are culprits on both sides, search both (several culprits);
* neither: the comparisons sampled up to the budget without deciding; mid goes with the side
  whose median it is closer to, and the step is marked uncertain in the narrative.

A version that fails to build or compile is skipped, never guessed; when only skipped versions are
left between lo and hi the answer is that range. Every culprit is confirmed at the end by measuring
it against its predecessor directly.

The same search finds the commit that *fixed* a regression (``direction="improvement"``): 0 is
slow, N fast, and "bad" reads "faster than the version before" (a ``different`` verdict in the
improvement direction) wherever the rules above say "a regression".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from perfguard.bisect.document import Json, VerdictSummary, as_object, get_bool, get_int, get_list
from perfguard.bisect.state import ProbeEntry, ProbeRecord
from perfguard.errors import UserError

#: ``probe(positions, comparisons)``: the record of one probe (measured, or resumed from the state).
ProbeFn = Callable[[list[int], list[tuple[int, int]]], ProbeRecord]


#: What the search looks for: the first version that is slower (``regression``, a culprit) or
#: faster (``improvement``, the fix of a regression) than the one before.
SearchDirection = Literal["regression", "improvement"]


def _changed(verdict: VerdictSummary | None, direction: SearchDirection = "regression") -> bool:
    """Whether ``verdict`` decided a change in ``direction`` (``different``; for a regression the
    one rule of :func:`perfguard.stats.verdict.is_regression`)."""
    if verdict is None:
        return False
    if direction == "regression":
        return verdict.is_regression
    return verdict.decision == "different" and verdict.direction == direction


def undecided(verdict: VerdictSummary | None) -> bool:
    """Whether a measured comparison stayed undecided (``unknown``): too noisy to say a change or
    none, which is neither "regression" nor "no regression"."""
    return verdict is not None and verdict.decision == "unknown"


def exact_changes(good: ProbeEntry | None, bad: ProbeEntry | None) -> dict[str, tuple[float, float]]:
    """The exact metrics a probe kept whose values differ between ``good`` and ``bad`` (node
    count: one compile decides it, where time at this noise could not)."""
    if good is None or bad is None:
        return {}
    pairs = {"node_count": (good.node_count, bad.node_count)}
    return {metric: (float(before), float(after)) for metric, (before, after) in pairs.items()
            if before is not None and after is not None and before != after}


@dataclass(frozen=True)
class SearchProbe:
    """One probe of the search: ``pair`` or ``triple``, the positions measured together, its
    record, and whether the step it decided was uncertain (undecided at the budget)."""

    kind: str
    positions: tuple[int, ...]
    record: ProbeRecord
    uncertain: bool = False

    def to_json(self) -> Json:
        return {"kind": self.kind, "positions": list(self.positions), "record": self.record.to_json(),
                "uncertain": self.uncertain}

    @classmethod
    def from_json(cls, value: object) -> SearchProbe:
        d = as_object(value, "probe")
        return cls(str(d.get("kind", "")), tuple(get_list(d, "positions", int)), ProbeRecord.from_json(d.get("record")),
                   bool(get_bool(d, "uncertain", False)))


@dataclass(frozen=True)
class SearchCulprit:
    """A culprit position; ``span`` (first, last) when only skipped versions were left before it
    (the culprit is one of them), then its confirmation against its predecessor."""

    position: int
    span: tuple[int, int] | None = None
    uncertain: bool = False
    confirmation: VerdictSummary | None = None
    confirmed: bool = False
    entries: dict[str, ProbeEntry] = field(default_factory=dict)

    def to_json(self) -> Json:
        return {"position": self.position, "range": list(self.span) if self.span else None,
                "uncertain": self.uncertain,
                "confirmation": None if self.confirmation is None else self.confirmation.to_json(),
                "confirmed": self.confirmed, "entries": {k: v.to_json() for k, v in self.entries.items()}}

    @classmethod
    def from_json(cls, value: object) -> SearchCulprit:
        d = as_object(value, "culprit")
        span = get_list(d, "range", int)
        confirmation = d.get("confirmation")
        return cls(get_int(d, "position") or 0, (span[0], span[1]) if len(span) == 2 else None,
                   bool(get_bool(d, "uncertain", False)),
                   None if confirmation is None else VerdictSummary.from_json(confirmation),
                   bool(get_bool(d, "confirmed", False)),
                   {str(k): ProbeEntry.from_json(v) for k, v in as_object(d.get("entries") or {}, "entries").items()})


@dataclass(frozen=True)
class SearchResult:
    """What a search found: its culprits, every probe in order, and the positions skipped (a
    version that did not build or compile). The bisector fills the lists as it goes."""

    culprits: list[SearchCulprit] = field(default_factory=list)
    probes: list[SearchProbe] = field(default_factory=list)
    skipped: set[int] = field(default_factory=set)

    def to_json(self) -> Json:
        return {"culprits": [c.to_json() for c in self.culprits], "probes": [p.to_json() for p in self.probes],
                "skipped": sorted(self.skipped)}

    @classmethod
    def from_json(cls, value: object) -> SearchResult:
        d = as_object(value, "search")
        return cls(get_list(d, "culprits", SearchCulprit.from_json), get_list(d, "probes", SearchProbe.from_json),
                   set(get_list(d, "skipped", int)))


class SequenceBisector:
    """Bisect positions ``0..n`` with ``probe(positions, comparisons)``; ``name(i)`` labels them."""

    def __init__(self, n: int, probe: ProbeFn, name: Callable[[int], str],
                 narrate: Callable[[str], None] = lambda text: None,
                 direction: SearchDirection = "regression") -> None:
        self.direction: SearchDirection = direction
        self.n = n
        self.probe = probe
        self.name = name
        self.narrate = narrate
        self.result = SearchResult()
        # Every comparison measured so far: (a, b) -> (verdict, entries of that probe).
        self.evidence: dict[tuple[int, int], tuple[VerdictSummary, dict[str, ProbeEntry]]] = {}

    def _verdict(self, record: ProbeRecord, a: int, b: int) -> VerdictSummary | None:
        return record.verdicts.get(f"{self.name(a)}->{self.name(b)}")

    def _remember(self, positions: list[int], record: ProbeRecord) -> None:
        for a in positions:
            for b in positions:
                verdict = self._verdict(record, a, b)
                if verdict is not None:
                    self.evidence[(a, b)] = (verdict, record.entries)

    def _regressed(self, verdict: VerdictSummary | None) -> bool:
        """``verdict`` is a change in the searched direction: its later side is "bad"."""
        return _changed(verdict, self.direction)

    def _pair(self, a: int, b: int) -> ProbeRecord:
        record = self.probe([a, b], [(a, b)])
        self.result.probes.append(SearchProbe("pair", (a, b), record, record.uncertain))
        self._remember([a, b], record)
        return record

    def confirm_endpoints(self) -> VerdictSummary | None:
        """good -> bad must be a change in the searched direction, else there is nothing to bisect
        (:meth:`endpoints` then tells an undecided comparison from a decided "no change")."""
        record = self._pair(0, self.n)
        if not record.ok:
            raise UserError(f"cannot bisect: {record.reason or 'an endpoint failed'}")
        verdict = self._verdict(record, 0, self.n)
        self.narrate(f"endpoints {self.name(0)} -> {self.name(self.n)}: {_text(verdict)}")
        return verdict if self._regressed(verdict) else None

    def endpoints(self) -> tuple[VerdictSummary | None, dict[str, tuple[float, float]]]:
        """What the endpoint probe measured (after :meth:`confirm_endpoints`): the good -> bad
        verdict, and the exact metrics whose values differ between the two ends
        (:func:`exact_changes`)."""
        verdict, entries = self.evidence.get((0, self.n), (None, {}))
        return verdict, exact_changes(entries.get(self.name(0)), entries.get(self.name(self.n)))

    def run(self) -> SearchResult:
        self._search(0, self.n)
        for index, culprit in enumerate(self.result.culprits):
            if culprit.span:
                continue
            position = culprit.position
            known = self.evidence.get((position - 1, position))
            verdict: VerdictSummary | None
            if known is not None and self._regressed(known[0]):
                # The probe that closed the interval already measured exactly predecessor -> culprit.
                verdict, entries, ok = known[0], known[1], True
            else:
                record = self._pair(position - 1, position)
                verdict, entries, ok = self._verdict(record, position - 1, position), record.entries, record.ok
            confirmed = ok and self._regressed(verdict)
            self.result.culprits[index] = replace(culprit, confirmation=verdict, confirmed=confirmed, entries=entries)
            self.narrate(f"confirm {self.name(position)} against {self.name(position - 1)}: {_text(verdict)}"
                         + ("" if confirmed else " (NOT confirmed)"))
        return self.result

    def _mid(self, lo: int, hi: int) -> int | None:
        candidates = [k for k in range(lo + 1, hi) if k not in self.result.skipped]
        if not candidates:
            return None
        centre = (lo + hi) / 2
        return min(candidates, key=lambda k: (abs(k - centre), k))

    def _search(self, lo: int, hi: int) -> None:
        while True:
            if hi - lo == 1:
                self.result.culprits.append(SearchCulprit(hi))
                return
            mid = self._mid(lo, hi)
            if mid is None:
                skipped = sorted(k for k in range(lo + 1, hi) if k in self.result.skipped)
                self.narrate(f"only skipped versions between {self.name(lo)} and {self.name(hi)}: the culprit is "
                             f"one of {', '.join(self.name(k) for k in [*skipped, hi])}")
                self.result.culprits.append(SearchCulprit(hi, (lo + 1, hi), uncertain=True))
                return
            record = self.probe([lo, mid, hi], [(lo, mid), (mid, hi)])
            self.result.probes.append(SearchProbe("triple", (lo, mid, hi), record, record.uncertain))
            self._remember([lo, mid, hi], record)
            if not record.ok:
                self.result.skipped.add(mid)
                self.narrate(f"skip {self.name(mid)}: {record.reason or 'failed'}")
                continue
            low, high = self._verdict(record, lo, mid), self._verdict(record, mid, hi)
            low_reg, high_reg = self._regressed(low), self._regressed(high)
            if low_reg and high_reg:
                worse, better = ("slower", "faster") if self.direction == "regression" else ("faster", "slower")
                self.narrate(f"{self.name(mid)}: {worse} than {self.name(lo)} ({_text(low)}) and {better} than "
                             f"{self.name(hi)} ({_text(high)}): culprits on both sides")
                self._search(lo, mid)
                self._search(mid, hi)
                return
            # a fix search's "good" side is the one before the fix: still slow
            words = ("good", "bad") if self.direction == "regression" else ("still slow", "fast again")
            if high_reg or low_reg:
                good = high_reg
            else:
                good = _closer_to_low(low, high)
                self.narrate(f"{self.name(mid)}: undecided at the budget ({_text(low)}; {_text(high)}); "
                             f"taking it as {words[0] if good else words[1]} by distance (uncertain step)")
                # The probe row says so; the record stays as the state file has it.
                self.result.probes[-1] = replace(self.result.probes[-1], uncertain=True)
            self.narrate(f"{self.name(mid)}: {words[0] if good else words[1]} "
                         f"(vs {self.name(lo)}: {_text(low)}; vs {self.name(hi)}: {_text(high)})")
            lo, hi = (mid, hi) if good else (lo, mid)


def _closer_to_low(low: VerdictSummary | None, high: VerdictSummary | None) -> bool:
    a = abs(math.log(low.ratio)) if low and low.ratio else math.inf
    b = abs(math.log(high.ratio)) if high and high.ratio else math.inf
    return a <= b


def _text(verdict: VerdictSummary | None) -> str:
    if not verdict or verdict.ratio is None:
        return "no verdict"
    ci = ""
    if verdict.ci_low is not None and verdict.ci_high is not None:
        ci = f" [{(verdict.ci_low - 1) * 100:+.1f}%, {(verdict.ci_high - 1) * 100:+.1f}%]"
    label = verdict.direction if verdict.decision == "different" else verdict.decision
    return f"{(verdict.ratio - 1) * 100:+.1f}%{ci} {label}"
