"""Screening: compile a batch of candidates, sort out the illegal and the identical, and measure
the rest cheaply, interleaved with the incumbent in the same worker processes.

Legality comes from the compile stage every check uses: a candidate whose compile fails (a pass
raises, or its output fails ``onnx.checker``) or whose outputs fail the correctness guard is
*infeasible*, recorded with the reason and never measured. A candidate whose artifact has the
incumbent's execution identity runs the same code: it is *identical* (ratio 1, not timed), and two
candidates with one identity are measured once (memo by identity, kept across batches and runs).

A screen is a few workers (``screen_workers``, default 4) with the incumbent and up to ``batch``
candidates interleaved in each: enough to rank candidates, not to decide (the paired test needs 6
workers at alpha 0.05). Ranking many noisy estimates and taking the best is biased (the winner's
curse), so a screen never accepts anything: the search confirms its best candidates in a fresh
probe (:func:`perfguard.flows.probe.run_probe`), and the tuned pipeline is proved in a fresh check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from perfguard.bisect.document import VerdictSummary
from perfguard.bisect.state import BisectState, ProbeEntry, ProbeRecord
from perfguard.compare.check import Pair, check_plan, evaluate
from perfguard.compile.case import CompiledCase
from perfguard.errors import UserError
from perfguard.measure.job import Job
from perfguard.progress import Progress
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings
from perfguard.tune.space import Candidate, Move


@dataclass(frozen=True)
class Compiled:
    """A candidate's compile outcome: its execution identity, or why it is infeasible."""

    identity: str | None
    node_count: int | None = None
    reason: str | None = None

    @property
    def feasible(self) -> bool:
        return self.identity is not None


@dataclass(frozen=True)
class Screen:
    """One candidate against the incumbent: the latency (and compile-time) screening summaries."""

    latency: VerdictSummary
    compile_time: VerdictSummary | None = None


class Screener:
    """Compiles and screens candidates of one case; remembers every outcome in ``state``."""

    def __init__(self, suite: Suite, case: CaseSpec, settings: CheckSettings, state: BisectState,
                 progress: Progress, *, screen_workers: int = 4, batch: int = 8, compile_objective: bool = False
                 ) -> None:
        self.suite = suite
        self.case = case
        self.settings = settings
        self.state = state
        self.progress = progress
        self.screen_workers = screen_workers
        self.batch = batch
        self.compile_objective = compile_objective
        # Compile time is screened from repeated compiles only when it is the objective (at least 3
        # a side); a latency search compiles each candidate once.
        self.compile_repeats = max(3, case.measure.compile_repeats) if compile_objective else 1

    # -- what the state knows ------------------------------------------------------------------

    def compiled(self, candidate: Candidate) -> Compiled | None:
        record = self.state.probes.get(f"compile:{candidate.key}")
        if record is None:
            return None
        if not record.ok:
            return Compiled(None, reason=record.reason)
        entry = record.entries.get("candidate") or ProbeEntry()
        return Compiled(entry.identity, entry.node_count)

    def screened(self, incumbent: str, identity: str) -> Screen | None:
        record = self.state.probes.get(f"screen:{incumbent}:{identity}")
        if record is None:
            return None
        return Screen(record.verdicts["latency"], record.verdicts.get("compile_time"))

    def compile_screen(self, incumbent: Candidate, candidate: Candidate) -> VerdictSummary | None:
        """The compile-time screen of ``candidate`` against ``incumbent`` (compile objective only)."""
        record = self.state.probes.get(f"ctime:{incumbent.key}:{candidate.key}")
        return record.verdicts.get("compile_time") if record is not None else None

    # -- compiling and measuring ---------------------------------------------------------------

    def _case(self, candidate: Candidate, name: str) -> CaseSpec:
        measure = dataclasses.replace(self.case.measure, compile_repeats=self.compile_repeats, memory_probes=0)
        return dataclasses.replace(self.case, pipeline=candidate.pipeline(name, self.case.pipeline.backend),
                                   measure=measure)

    def run(self, incumbent: Candidate, moves: Sequence[Move]) -> tuple[Compiled, dict[str, Compiled],
                                                                       dict[str, Screen]]:
        """Compile what the state does not know of ``moves`` (and the incumbent), screen every
        feasible candidate whose identity was not yet screened against the incumbent's.

        Returns the incumbent's compile outcome, every move's (by candidate key) and the screens
        by candidate identity."""
        known = self.compiled(incumbent)
        todo = [m.candidate for m in moves if self.compiled(m.candidate) is None]
        needs_values: list[Candidate] = []
        if known is not None and known.feasible:
            for move in moves:
                got = self.compiled(move.candidate)
                if got is None or not got.feasible:
                    continue
                if ((got.identity != known.identity and self.screened(known.identity or "", got.identity or "") is None)
                        or (self.compile_objective and self.compile_screen(incumbent, move.candidate) is None)):
                    needs_values.append(move.candidate)
        if known is None or todo or needs_values:
            self._compile_and_screen(incumbent, list({c.key: c for c in todo + needs_values}.values()))
        incumbent_out = self.compiled(incumbent)
        assert incumbent_out is not None
        outcomes = {m.candidate.key: self.compiled(m.candidate) or Compiled(None, reason="not compiled")
                    for m in moves}
        screens = {}
        for out in outcomes.values():
            if out.feasible and out.identity != incumbent_out.identity:
                screen = self.screened(incumbent_out.identity or "", out.identity or "")
                if screen is not None:
                    screens[out.identity or ""] = screen
        return incumbent_out, outcomes, screens

    def _compile_and_screen(self, incumbent: Candidate, candidates: list[Candidate]) -> None:
        names = {incumbent.key: "tune-incumbent"}  # pipeline names: a case id per candidate
        names.update({c.key: f"tune-{c.key}" for c in candidates if c.key != incumbent.key})
        by_key = {incumbent.key: incumbent, **{c.key: c for c in candidates}}
        cases = [self._case(by_key[key], name) for key, name in names.items()]
        # Silent: the tune's bar counts candidates, and a failed compile is an infeasible candidate
        # there, not a red FAILED line of a run.
        job = Job(self.suite, cases, progress=Progress())
        try:
            job.compile(memory=False)
            members = {c.case.pipeline.name: c for c in job.compiled}
            base = members["tune-incumbent"]
            if base.entry.error is not None:
                error = base.entry.error
                raise UserError(f"tune: the incumbent {incumbent.describe()} fails on {self.case.model.name}: "
                                f"{error.stage}: {error.message}")
            for key, name in names.items():
                self._record_compile(by_key[key], members[name])
            if self.compile_objective:
                for candidate in candidates:
                    self._record_compile_time(incumbent, base, candidate, members[names[candidate.key]])
            self._screen(job, base, [members[names[c.key]] for c in candidates if c.key != incumbent.key])
        finally:
            job.close()

    def _record_compile(self, candidate: Candidate, compiled: CompiledCase) -> None:
        key = f"compile:{candidate.key}"
        if self.state.probes.get(key) is not None:
            return
        entry = compiled.entry
        if entry.error is not None:
            record = ProbeRecord("skip", f"{entry.error.stage}: {entry.error.message}")
        else:
            record = ProbeRecord("ok", entries={"candidate": ProbeEntry(node_count=entry.metrics.node_count,
                                                                        identity=entry.execution_identity)})
        self.state.record(key, record)

    def _record_compile_time(self, incumbent: Candidate, base: CompiledCase, candidate: Candidate,
                             member: CompiledCase) -> None:
        """Compile times from separate compiles are unpaired: the compile-time row of ``check``."""
        if member.entry.error is not None or candidate.key == incumbent.key:
            return
        pair = Pair(member.case.id, base.entry, member.entry, False, "incumbent", "candidate")
        rows = {r.metric: r for r in evaluate([pair], self.suite.thresholds, check_plan(self.settings, False))}
        summary = VerdictSummary.of(rows["compile_time"])
        self.state.record(f"ctime:{incumbent.key}:{candidate.key}", ProbeRecord("ok", verdicts={"compile_time": summary}))

    def _screen(self, job: Job, base: CompiledCase, members: list[CompiledCase]) -> None:
        """Measure one member per new identity with the incumbent, ``batch`` at a time."""
        incumbent_id = base.entry.execution_identity or ""
        reps: dict[str, CompiledCase] = {}
        for member in members:
            identity = member.entry.execution_identity
            if (member.entry.error is None and identity and identity != incumbent_id and identity not in reps
                    and self.screened(incumbent_id, identity) is None):
                reps[identity] = member
        chosen = list(reps.values())
        plan = check_plan(self.settings, adaptive=False)
        for start in range(0, len(chosen), self.batch):
            chunk = chosen[start:start + self.batch]
            self.progress.log(f"  screening {len(chunk)} candidate(s) against the incumbent "
                              f"({self.screen_workers} workers)")
            job.measure(only={base.variant_id, *(m.variant_id for m in chunk)}, workers=self.screen_workers)
            for member in chunk:
                identity = member.entry.execution_identity or ""
                if member.entry.error is not None:  # every worker failed on it: infeasible after all
                    error = member.entry.error
                    self.state.record(f"screen:{incumbent_id}:{identity}",
                                      ProbeRecord("ok", verdicts={"latency": VerdictSummary(
                                          decision="failed", reason=f"{error.stage}: {error.message}")}))
                    continue
                pair = Pair(member.case.id, base.entry, member.entry, True, "incumbent", "candidate",
                            frozenset({base.variant_id, member.variant_id}))
                rows = {r.metric: r for r in evaluate([pair], self.suite.thresholds, plan)}
                verdicts = {"latency": VerdictSummary.of(rows["latency"])}
                if "compile_time" in rows:
                    verdicts["compile_time"] = VerdictSummary.of(rows["compile_time"])
                self.state.record(f"screen:{incumbent_id}:{identity}", ProbeRecord("ok", verdicts=verdicts))
