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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perfguard.errors import UserError

ProbeFn = Callable[[list[int], list[tuple[int, int]]], dict[str, Any]]


def is_regression(verdict: dict[str, Any] | None) -> bool:
    return verdict is not None and verdict["decision"] == "different" and verdict["direction"] == "regression"


@dataclass
class SearchResult:
    culprits: list[dict[str, Any]] = field(default_factory=list)
    probes: list[dict[str, Any]] = field(default_factory=list)
    skipped: set[int] = field(default_factory=set)


class SequenceBisector:
    """Bisect positions ``0..n`` with ``probe(positions, comparisons)``; ``name(i)`` labels them."""

    def __init__(self, n: int, probe: ProbeFn, name: Callable[[int], str],
                 narrate: Callable[[str], None] = lambda text: None) -> None:
        self.n = n
        self.probe = probe
        self.name = name
        self.narrate = narrate
        self.result = SearchResult()
        # Every comparison measured so far: (a, b) -> (verdict, entries of that probe).
        self.evidence: dict[tuple[int, int], tuple[dict[str, Any], dict[str, Any]]] = {}

    def _remember(self, positions: list[int], outcome: dict[str, Any]) -> None:
        for a in positions:
            for b in positions:
                verdict = (outcome.get("verdicts") or {}).get(f"{self.name(a)}->{self.name(b)}")
                if verdict is not None:
                    self.evidence[(a, b)] = (verdict, outcome.get("entries", {}))

    def _pair(self, a: int, b: int) -> dict[str, Any]:
        outcome = self.probe([a, b], [(a, b)])
        self.result.probes.append({"kind": "pair", "positions": [a, b], **outcome})
        self._remember([a, b], outcome)
        return outcome

    def confirm_endpoints(self) -> dict[str, Any] | None:
        """good -> bad must be a regression, else there is nothing to bisect."""
        outcome = self._pair(0, self.n)
        if outcome["status"] != "ok":
            raise UserError(f"cannot bisect: {outcome.get('reason', 'an endpoint failed')}")
        verdict = (outcome.get("verdicts") or {}).get(f"{self.name(0)}->{self.name(self.n)}")
        self.narrate(f"endpoints {self.name(0)} -> {self.name(self.n)}: {_text(verdict)}")
        return verdict if outcome["status"] == "ok" and is_regression(verdict) else None

    def run(self) -> SearchResult:
        self._search(0, self.n)
        for culprit in self.result.culprits:
            if culprit["range"]:
                continue
            position = culprit["position"]
            known = self.evidence.get((position - 1, position))
            verdict: dict[str, Any] | None
            if known is not None and is_regression(known[0]):
                # The probe that closed the interval already measured exactly predecessor -> culprit.
                verdict, entries, ok = known[0], known[1], True
            else:
                outcome = self._pair(position - 1, position)
                verdict = (outcome.get("verdicts") or {}).get(f"{self.name(position - 1)}->{self.name(position)}")
                entries, ok = outcome.get("entries", {}), outcome["status"] == "ok"
            culprit["confirmation"] = verdict
            culprit["confirmed"] = ok and is_regression(verdict)
            culprit["entries"] = entries
            self.narrate(f"confirm {self.name(position)} against {self.name(position - 1)}: {_text(verdict)}"
                         + ("" if culprit["confirmed"] else " (NOT confirmed)"))
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
                self.result.culprits.append({"position": hi, "range": None, "uncertain": False})
                return
            mid = self._mid(lo, hi)
            if mid is None:
                skipped = sorted(k for k in range(lo + 1, hi) if k in self.result.skipped)
                self.narrate(f"only skipped versions between {self.name(lo)} and {self.name(hi)}: the culprit is "
                             f"one of {', '.join(self.name(k) for k in [*skipped, hi])}")
                self.result.culprits.append({"position": hi, "range": [lo + 1, hi], "uncertain": True})
                return
            outcome = self.probe([lo, mid, hi], [(lo, mid), (mid, hi)])
            row = {"kind": "triple", "positions": [lo, mid, hi], **outcome}
            self.result.probes.append(row)
            self._remember([lo, mid, hi], outcome)
            if outcome["status"] != "ok":
                self.result.skipped.add(mid)
                self.narrate(f"skip {self.name(mid)}: {outcome.get('reason', 'failed')}")
                continue
            verdicts = outcome["verdicts"]
            low = verdicts.get(f"{self.name(lo)}->{self.name(mid)}")
            high = verdicts.get(f"{self.name(mid)}->{self.name(hi)}")
            low_reg, high_reg = is_regression(low), is_regression(high)
            if low_reg and high_reg:
                self.narrate(f"{self.name(mid)}: slower than {self.name(lo)} ({_text(low)}) and faster than "
                             f"{self.name(hi)} ({_text(high)}): culprits on both sides")
                self._search(lo, mid)
                self._search(mid, hi)
                return
            if high_reg or low_reg:
                good = high_reg
            else:
                good = _closer_to_low(low, high)
                self.narrate(f"{self.name(mid)}: undecided at the budget ({_text(low)}; {_text(high)}); "
                             f"taking it as {'good' if good else 'bad'} by distance (uncertain step)")
                row["uncertain"] = True  # the probe row says so (the probe's outcome is the state's)
            self.narrate(f"{self.name(mid)}: {'good' if good else 'bad'} "
                         f"(vs {self.name(lo)}: {_text(low)}; vs {self.name(hi)}: {_text(high)})")
            lo, hi = (mid, hi) if good else (lo, mid)


def _closer_to_low(low: dict[str, Any] | None, high: dict[str, Any] | None) -> bool:
    a = abs(math.log(low["ratio"])) if low and low.get("ratio") else math.inf
    b = abs(math.log(high["ratio"])) if high and high.get("ratio") else math.inf
    return a <= b


def _text(verdict: dict[str, Any] | None) -> str:
    if not verdict or verdict.get("ratio") is None:
        return "no verdict"
    ci = ""
    if verdict.get("ci_low") is not None and verdict.get("ci_high") is not None:
        ci = f" [{(verdict['ci_low'] - 1) * 100:+.1f}%, {(verdict['ci_high'] - 1) * 100:+.1f}%]"
    label = verdict["direction"] if verdict["decision"] == "different" else verdict["decision"]
    return f"{(verdict['ratio'] - 1) * 100:+.1f}%{ci} {label}"
