"""The search of ``perfguard tune``: greedy ablation, then the best single insert or move, then
random local search with restarts, all under a budget of candidates (and, optionally, time).

1. *Ablation*: leave each pass out; screen all; confirm the best; repeat while a drop helps.
2. *Insert / move*: every IREE option changed, then every universe pass at every position and
   every pass moved, in a seeded random order; screen all; confirm the best; after an accepted
   move go back to 1.
3. *Local search*: batches of candidates one to three random moves away from the best pipeline
   (the radius grows after a batch finds nothing: a restart farther out), until the budget or
   the time is spent.

A move is accepted only when a fresh, paired probe (``run_probe``: new compiles, new workers, the
sequential test of ``perfguard check``) decides the objective improved and, for latency, beyond
the suite's latency floor; a screen only picks which candidates (``confirm_top``, default 2, per
neighbourhood) get that probe. The search is deterministic given the state's records (its random
draws are seeded), so a killed run resumes by replaying them and measures only what is missing.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Sequence

from perfguard.bisect.document import VerdictSummary
from perfguard.compile.case import Side, Variant
from perfguard.flows.probe import run_probe
from perfguard.flows.tuning.screen import Compiled, Screen, Screener
from perfguard.progress import Progress
from perfguard.tune.document import Point, SearchOutcome, Step, objective_score
from perfguard.tune.space import Candidate, Move, drops, inserts, moves, option_moves, perturb, unique

OBJECTIVES = ("latency", "compile_time", "both")
#: The budget of a search bounded by time alone (``tune --time`` without ``--budget``).
UNLIMITED = 10**9


def improves(objective: str, latency: VerdictSummary | None, compile_time: VerdictSummary | None) -> bool:
    """Whether a confirming probe decided the objective got better and nothing it weighs got worse."""
    def better(s: VerdictSummary | None) -> bool:
        return s is not None and s.decision == "different" and s.direction == "improvement"

    def worse(s: VerdictSummary | None) -> bool:
        return s is not None and s.is_regression

    if objective == "latency":
        return better(latency)
    if objective == "compile_time":
        return better(compile_time) and not worse(latency)
    return (better(latency) or better(compile_time)) and not worse(latency) and not worse(compile_time)


class Tuner:
    """Greedy ablation, insert/move, then random local search (module docstring)."""

    def __init__(self, screener: Screener, start: Candidate, universe: Sequence[str], *, objective: str = "latency",
                 budget: int = 60, time_limit_s: float | None = None, seed: int = 0, confirm_top: int = 2,
                 progress: Progress | None = None) -> None:
        self.screener = screener
        self.state = screener.state
        self.start = start
        self.universe = tuple(universe)
        self.objective = objective
        self.budget = budget
        self.time_limit_s = time_limit_s
        self.rng = random.Random(seed)
        self.confirm_top = confirm_top
        self.progress = progress or Progress()
        self.backend = screener.case.pipeline.backend
        gate = screener.suite.thresholds.gate(screener.case.id, "latency" if objective != "compile_time"
                                              else "compile_time")
        # A screen must promise at least half the floor before a probe is spent on it.
        self.margin = max(gate.relative / 2, 0.005)
        self.confirm_mdes: list[float] = []
        self.tried: set[str] = set()
        self.outcome = SearchOutcome(start, start)
        self.started = time.monotonic()

    # -- budget --------------------------------------------------------------------------------

    def _left(self) -> int:
        return self.budget - len(self.outcome.points)

    def _out_of_time(self) -> bool:
        return self.time_limit_s is not None and time.monotonic() - self.started >= self.time_limit_s

    def _stop_reason(self) -> str | None:
        if self._left() <= 0:
            return "budget"
        if self._out_of_time():
            return "time"
        return None

    # -- the search ----------------------------------------------------------------------------

    def run(self) -> SearchOutcome:
        self.progress.start(self.budget if self.budget < UNLIMITED else None)
        self.tried.add(self.start.key)
        stopped: str | None
        while (stopped := self._stop_reason()) is None:
            if self._neighbourhood("ablation", drops(self.outcome.best)):
                continue
            if (stopped := self._stop_reason()) is not None:
                break
            # Option moves first (few, and IREE's large effects), then inserts and moves in a seeded
            # random order: under a time limit the search samples the whole neighbourhood instead
            # of spending it on the first pass's inserts (most inserts of a cleanup pass change
            # nothing: identical artifacts, cheap but not free, each a compile).
            edits = unique(inserts(self.outcome.best, self.universe) + moves(self.outcome.best), set())
            self.rng.shuffle(edits)
            options = option_moves(self.outcome.best, self.backend)
            if not self._neighbourhood("insert/move", options + edits):
                break
        radius = 1
        while (stopped := self._stop_reason()) is None:
            draws = [perturb(self.outcome.best, self.universe, self.rng, self.rng.randint(1, radius),
                             self.backend) for _ in range(4 * self.screener.batch)]
            fresh = unique(draws, self.tried)
            if not fresh:
                if radius >= 3:  # nothing new within three moves of the best in all those draws
                    stopped = "exhausted"
                    break
                radius += 1
                continue
            found = self._neighbourhood("local", fresh[:self.screener.batch])
            radius = 1 if found else min(radius + 1, 3)
        self.outcome.stopped = stopped
        if not self.outcome.steps:
            self._final_confirmation()
        mdes = sorted(p.latency.mde for p in self.outcome.points if p.status == "screened" and p.latency
                      and p.latency.mde is not None and math.isfinite(p.latency.mde))
        self.outcome.screen_mde = mdes[len(mdes) // 2] if mdes else None
        confirmed = sorted(self.confirm_mdes)
        self.outcome.confirm_mde = confirmed[len(confirmed) // 2] if confirmed else None
        self.outcome.floor = self.margin * 2
        self.outcome.wall_time_s = time.monotonic() - self.started
        return self.outcome

    def _final_confirmation(self) -> None:
        """A search that accepted nothing confirms its best screen anyway (one probe past the
        budget): what a confirmation could detect is the MDE the report states, and a gain just
        under the screens' margin gets its chance."""
        screened = [p for p in self.outcome.points if p.status == "screened" and math.isfinite(p.score(self.objective))]
        if not screened:
            return
        best = min(screened, key=lambda p: (p.score(self.objective), p.index))
        self.progress.log(f"nothing accepted: confirming the best screen, {best.move}, to state what a "
                          "confirmation detects")
        self._confirm(best, Move(best.phase, best.move, best.candidate))

    def _neighbourhood(self, phase: str, candidates: Sequence[Move]) -> bool:
        """Screen the new candidates of one neighbourhood (in compile batches), confirm the best;
        True when a move was accepted."""
        fresh = unique(candidates, self.tried)
        chunk = max(2 * self.screener.batch, 8)
        ranked: list[tuple[float, Point, Move]] = []
        incumbent = self.outcome.best
        for start in range(0, len(fresh), chunk):
            if self._stop_reason():
                break
            part = fresh[start:start + min(chunk, self._left())]
            self.progress.log(f"{phase}: {len(part)} candidate(s) from {incumbent.describe()}")
            inc, outcomes, screens = self.screener.run(incumbent, part)
            for move in part:
                point = self._point(phase, move, inc, outcomes[move.candidate.key], screens)
                self.tried.add(move.candidate.key)
                score = point.score(self.objective)
                if point.status in ("screened", "identical") and math.isfinite(score) and score < 1 - self.margin:
                    ranked.append((score, point, move))
        ranked.sort(key=lambda item: (item[0], item[1].index))
        for _, point, move in ranked[:self.confirm_top]:
            if self._confirm(point, move):
                return True
        return False

    def _point(self, phase: str, move: Move, inc: Compiled, out: Compiled, screens: dict[str, Screen]) -> Point:
        """Record one tried candidate; ``inc`` is the incumbent's compile outcome."""
        index = len(self.outcome.points) + 1
        best = self.outcome.steps[-1].effect if self.outcome.steps else 1.0
        if not out.feasible:
            point = Point(index, phase, move.describe, move.candidate, "infeasible", out.reason, best=best)
        else:
            screen = screens.get(out.identity or "")
            compile_time = self.screener.compile_screen(self.outcome.best, move.candidate)
            if out.identity == inc.identity:
                same = VerdictSummary("incumbent", "candidate", "same", "none", 1.0, 1.0, 1.0, None, None, 0,
                                      "identical artifact: not timed")
                point = Point(index, phase, move.describe, move.candidate, "identical", None, same, compile_time,
                              out.node_count, best)
            elif screen is None or screen.latency.decision == "failed":
                reason = screen.latency.reason if screen else "not screened"
                point = Point(index, phase, move.describe, move.candidate, "infeasible", reason, best=best)
            else:
                point = Point(index, phase, move.describe, move.candidate, "screened", None, screen.latency,
                              compile_time or screen.compile_time, out.node_count, best)
        self.outcome.points.append(point)
        ratio = point.latency.ratio if point.latency else None
        shown = f" {(ratio - 1) * 100:+.1f}%" if ratio is not None and math.isfinite(ratio) else ""
        if point.status == "infeasible":
            shown = f": {(point.reason or '').splitlines()[0][:120]}"
        self.progress.advance(f"{phase} #{index}: {move.describe} ({point.status}{shown})")
        return point

    def _confirm(self, point: Point, move: Move) -> bool:
        incumbent, candidate = self.outcome.best, move.candidate
        key = f"confirm:{incumbent.key}:{candidate.key}"
        record = self.state.probes.get(key)
        if record is None:
            self.progress.log(f"  confirming {move.describe} in a fresh paired probe")
            screener = self.screener
            case = dataclasses.replace(screener.case, measure=dataclasses.replace(
                screener.case.measure, compile_repeats=screener.compile_repeats, memory_probes=0))
            side = Side("head", screener.suite.compiler.path)
            variants = [Variant("incumbent", side, incumbent.passes, incumbent.options),
                        Variant("candidate", side, candidate.passes, candidate.options)]
            record = run_probe(screener.suite, case, variants, [("incumbent", "candidate")],
                                                     screener.settings, Progress(),
                                                     also=("compile_time",))
            self.state.record(key, record)
        self.outcome.confirmations += 1
        latency = record.verdicts.get("incumbent->candidate")
        compile_time = record.verdicts.get("incumbent->candidate:compile_time")
        if latency is not None and latency.mde is not None and math.isfinite(latency.mde):
            self.confirm_mdes.append(latency.mde)
        if not record.ok or not improves(self.objective, latency, compile_time):
            why = record.reason if not record.ok else (latency.reason if latency else "no verdict")
            self.progress.log(f"  not confirmed: {why}")
            return False
        previous = self.outcome.steps[-1].effect if self.outcome.steps else 1.0
        effect = previous * objective_score(self.objective, latency, compile_time)
        assert latency is not None
        self.outcome.steps.append(Step(point.index, move.describe, candidate, latency, compile_time, effect))
        self.outcome.best = candidate
        self.progress.log(f"  accepted {move.describe}: latency {_pct(latency.ratio)} [{_pct(latency.ci_low)}, "
                          f"{_pct(latency.ci_high)}]; now {candidate.describe()}")
        return True


def _pct(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{(value - 1) * 100:+.1f}%"
