"""One culprit, one alert, paid for once (issue 42 item 1, the nightly part).

The slow test replays a counted nightly (real Valgrind, real git, a real SQLite store) over a toy
compiler history of 8 commits (``tests/factories.py``): nights at commits 2, 4 and 8; commit 5
makes the compiler's pass insert 24 no-op Mul/Add pairs. Night 2's artifact is identical to
night 1's, so that night counts nothing and carries night 1's counts forward; night 3 sees the
step. The node count is bisected by compiling (4 commits), its culprit is tested first on the
counted metrics (its parent and it: two counted versions), and everything lands in one alert.

The rest are pure or store-only: the grouping rule, the store's one alert per culprit across two
calls, and the rule that says whether a culprit explains a change.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import time
from pathlib import Path

import pytest

from perfguard.store import Change, SeriesKey, Store
from perfguard.store.alert_rows import group_changes

from .factories import compiler_suite, culprit_history, git

GOOD, MIDDLE, CULPRIT, BAD = "a" * 40, "b" * 40, "c" * 40, "d" * 40
PASS = "mycc.passes:extra_work"
GOLDEN_RUN = Path(__file__).parent / "golden" / "v1" / "result-run.json"


def _key(metric: str, runner: str = "cpu:3f2a") -> SeriesKey:
    return SeriesKey("toy", "r/mycc/cpu", "m" * 16, "p" * 16, "ort", runner, metric, "absolute")


def _change(change_id: int, metric: str, good: str, culprit: str | None, pass_name: str | None = None,
            runner: str = "cpu:3f2a", ratio: float = 1.2) -> Change:
    return Change(change_id, change_id, _key(metric, runner), good, BAD, "2026-12-01T03:00:00.000000Z", ratio, None,
                  None, "confirmed", 10 + change_id if culprit else None, culprit, pass_name, "")


# --- grouping (pure) --------------------------------------------------------------------------------

def test_changes_bisected_to_one_culprit_are_one_group_over_the_narrowest_range() -> None:
    nodes = _change(1, "node_count", MIDDLE, CULPRIT, PASS)
    size = _change(2, "artifact_size", MIDDLE, None)  # shares its range's culprit, as before
    instructions = _change(3, "instructions", GOOD, CULPRIT, runner="cpu:3f2a (protocol 3)")
    compile_instructions = _change(4, "compile_instructions", GOOD, CULPRIT)
    elsewhere = _change(5, "instructions", GOOD, "e" * 40)  # another culprit: another alert
    order = {GOOD: 0, MIDDLE: 1, BAD: 2}
    groups = group_changes([instructions, compile_instructions, nodes, size, elsewhere], order)
    assert [(g.first_commit, g.last_commit, g.culprit_commit, sorted(c.id for c in g.changes)) for g in groups] == [
        (MIDDLE, BAD, CULPRIT, [1, 2, 3, 4]), (GOOD, BAD, "e" * 40, [5])]
    # the culprit's pass comes from the change whose pass search found it, not from an attribution
    assert (groups[0].culprit_pass, groups[0].bisect_document_id) == (PASS, 11)
    # without the nights' order the first range seen stands
    (first, _) = group_changes([instructions, compile_instructions, nodes, size, elsewhere])
    assert (first.first_commit, first.culprit_commit) == (GOOD, CULPRIT)
    # a range without a culprit stays a range of its own
    alone = group_changes([_change(6, "node_count", GOOD, None), _change(7, "instructions", MIDDLE, None)], order)
    assert [(g.first_commit, len(g.changes)) for g in alone] == [(GOOD, 1), (MIDDLE, 1)]


def test_a_culprit_explains_a_step_of_its_direction_past_the_floor_whose_ends_agree() -> None:
    from perfguard.flows.bisection.exact_probes import ExactChange, explains

    change = ExactChange("instructions", GOOD, BAD, 1_000_000.0, 1_200_000.0)
    assert explains(1_000_100.0, 1_199_500.0, change, 0.0025)  # within the floor of each end
    assert not explains(1_000_000.0, 1_001_000.0, change, 0.0025)  # under the floor
    assert not explains(1_100_000.0, 1_200_000.0, change, 0.0025)  # the parent moved already: another commit
    assert not explains(1_000_000.0, 1_100_000.0, change, 0.0025)  # the culprit is half the change
    assert not explains(1_200_000.0, 1_000_000.0, change, 0.0025)  # the other direction
    assert explains(1_000_000.0, 1_150_000.0, ExactChange("instructions", GOOD, BAD, None, None), 0.0025)
    smaller = ExactChange("node_count", GOOD, BAD, 60.0, 50.0)
    assert explains(60.0, 50.0, smaller, 0.001) and not explains(50.0, 60.0, smaller, 0.001)


def test_the_store_keeps_one_alert_per_culprit_across_nights_and_narrows_its_range(tmp_path: Path) -> None:
    """A counted change bisected later (``nightly --bisect-only``) to the culprit of an open alert
    joins that alert; the alert's range becomes the narrower one."""
    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        run = json.loads(GOLDEN_RUN.read_text())
        for day, commit in enumerate((GOOD, MIDDLE, BAD), start=1):  # three nights, in this order
            stored = store.ingest_json({**run, "finished_at": f"2026-12-0{day}T03:00:00Z"}).document_id
            store.record_night(run["suite"]["name"], commit, stored, time=f"2026-12-0{day}T03:00:00Z")
        series = [s for s in store.series() if s.key.kind == "absolute"][:2]
        suite = series[0].key.suite
        wide = store.upsert_change(series[0].id, good_commit=GOOD, bad_commit=BAD, time="2026-12-01T03:00:00Z",
                                   ratio=1.2, ci_low=None, ci_high=None, status="confirmed")
        store.link_bisect(wide.id, 1, CULPRIT, None)
        (alert,) = store.raise_alerts(suite)
        assert (alert.first_commit, alert.culprit_commit) == (GOOD, CULPRIT)
        narrow = store.upsert_change(series[1].id, good_commit=MIDDLE, bad_commit=BAD, time="2026-12-01T03:00:00Z",
                                     ratio=1.1, ci_low=None, ci_high=None, status="confirmed")
        store.link_bisect(narrow.id, 1, CULPRIT, PASS)
        store.raise_alerts(suite)
        (one,) = store.alerts(suite=suite)
        assert one.id == alert.id and (one.first_commit, one.last_commit) == (MIDDLE, BAD)
        assert sorted(c.change_id for c in one.changes) == [wide.id, narrow.id]




def test_the_nights_exact_changes_go_compile_only_first_then_each_culprit_is_tested_before_a_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The order of :func:`attribute_and_bisect` (probes faked): the node count is bisected
    first (compile only, though the instructions step is larger); its culprit is tested on the
    rest; the counted change it does not explain is bisected on its own, and its culprit tested
    on what is left. An improvement is attributed, never bisected on its own."""
    import perfguard.flows.nightly.known_culprit as nightly_culprit
    from perfguard.bisect.document import BisectResult, CommitInfo, Culprit
    from perfguard.progress import Progress
    from perfguard.store import Series

    def found(change_id: int, metric: str, ratio: float, good: str = MIDDLE):  # type: ignore[no-untyped-def]
        change = _change(change_id, metric, good, None, ratio=ratio)
        return change, Series(change_id, change.key, 3, "", "", 1.0)

    nodes, size, instructions = found(1, "node_count", 1.1), found(2, "artifact_size", 1.05), \
        found(3, "instructions", 1.5, GOOD)
    cycles, smaller = found(4, "estimated_cycles", 1.2, GOOD), found(5, "compile_instructions", 0.9, GOOD)
    explained = {CULPRIT: {2, 3, 5}, "e" * 40: {4}}  # what each culprit explains
    bisected_to = {1: CULPRIT, 4: "e" * 40}
    calls: list[tuple[str, object]] = []

    def result(culprit: str) -> BisectResult:
        return BisectResult("commits", "found", culprits=[Culprit(CommitInfo(culprit), None, None, True)])

    def attribute_to(suite, store, pending, known, progress):  # type: ignore[no-untyped-def]
        culprit = known.culprits[0].commit.sha
        calls.append(("test", (culprit[:1], sorted(c.id for c, _ in pending))))
        return {c.id: result(culprit) for c, _ in pending if c.id in explained[culprit]}

    def bisect(suite, store, chosen, progress, explain):  # type: ignore[no-untyped-def]
        (change, _), = chosen
        calls.append(("bisect", change.id))
        return {change.id: result(bisected_to[change.id])}

    monkeypatch.setattr(nightly_culprit, "attribute_to", attribute_to)
    monkeypatch.setattr(nightly_culprit, "bisect_exact_findings", bisect)
    done = nightly_culprit.attribute_and_bisect(None, None, [instructions, cycles, smaller, nodes, size], {}, (),  # type: ignore[arg-type]
                                                Progress(), None)
    assert calls == [("bisect", 1), ("test", ("c", [2, 3, 4, 5])), ("bisect", 4)]
    assert {i: r.culprits[0].commit.sha[:1] for i, r in done.items() if r.culprits[0].commit} == {
        1: "c", 2: "c", 3: "c", 5: "c", 4: "e"}

def _night(cpu_model: str, *entries: tuple[str, float | None]):  # type: ignore[no-untyped-def]
    """The golden run's document with its first cases as (execution identity, instructions or
    None: not counted, an identical artifact), on a cpu runner of ``cpu_model``."""
    from perfguard.results import load_result
    from perfguard.results.counts import Counts
    from perfguard.results.result import ArtifactInfo

    run = load_result(GOLDEN_RUN)
    cases = []
    for entry, (identity, instructions) in zip(run.cases, entries, strict=False):
        counts = None if instructions is None else Counts(instructions, 0, 0, 0, 0, instructions, 3, "window", "v")
        cases.append(dataclasses.replace(entry.with_metrics(counts=counts), runner="cpu",
                                         artifact=ArtifactInfo("0" * 64, 100, 10, {}, identity),
                                         not_measured=None if instructions else "identical artifact to its pair"))
    return dataclasses.replace(run, cases=tuple(cases), environment={"cpu": {**run.environment["cpu"],
                                                                             "cpu_model": cpu_model}})


def test_an_identical_night_carries_the_previous_nights_counts_and_nothing_else(tmp_path: Path) -> None:
    """Counts go forward only to an entry of the same execution identity, on a runner of the
    same fingerprint, on a counted night; an entry counted tonight keeps its own."""
    from types import SimpleNamespace

    from perfguard.compare.verdicts import CheckMode, ComparedResults, VerdictsDocument, VerdictsSettings
    from perfguard.flows.nightly.night import carry_counts
    from perfguard.progress import Progress

    def check(cpu_model: str) -> VerdictsDocument:  # tonight: a identical, b rebuilt, c counted
        tonight = _night(cpu_model, ("id-a", None), ("id-b2", None), ("id-c", 3100.0))
        return VerdictsDocument.of(CheckMode("base-ref", "base", "head", "HEAD~1", GOOD, None, BAD), [],
                                   VerdictsSettings(0.05, 1), ComparedResults(tonight), [])

    before = _night("AMD EPYC", ("id-a", 1000.0), ("id-b", 2000.0), ("id-c", 3000.0))
    a, b, c = (e.id for e in before.cases[:3])
    counted, uncounted = SimpleNamespace(counts="instructions"), SimpleNamespace(counts=None)
    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        night = store.record_night("toy", GOOD, store.ingest(before).document_id)
        carried = carry_counts(counted, check("AMD EPYC"), store, night, Progress())  # type: ignore[arg-type]
        other_machine = carry_counts(counted, check("Intel Xeon"), store, night, Progress())  # type: ignore[arg-type]
        verdicts = check("AMD EPYC")
        not_counted = carry_counts(uncounted, verdicts, store, night, Progress())  # type: ignore[arg-type]
    assert carried.results is not None and other_machine.results is not None
    got = {e.id: (e.metrics.value("instructions"), e.not_measured) for e in carried.results.candidate.cases}
    assert got[a][0] == 1000.0 and f"counts carried from the night at {GOOD[:10]}" in (got[a][1] or "")
    assert got[b] == (None, "identical artifact to its pair")  # another artifact: nothing carried
    assert got[c][0] == 3100.0  # counted tonight
    assert all(e.metrics.counts is None for e in other_machine.results.candidate.cases if e.id != c)
    assert not_counted is verdicts


# --- a replayed counted nightly (slow) ---------------------------------------------------------------

COMMITS, NIGHTS, CULPRIT_AT = 8, (2, 4, 8), 5


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_counted_nightly_with_one_culprit_opens_one_alert_and_counts_it_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (.ci/run installs it in CI)")
    import perfguard.flows.nightly.night as nightly
    import perfguard.measure.job as job
    from perfguard.progress import Progress
    from perfguard.suite import load_suite

    repo, shas = culprit_history(tmp_path / "cc", COMMITS, CULPRIT_AT)
    path = tmp_path / "suite.toml"
    path.write_text(compiler_suite(repo, workers=2, max_workers=2))
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"

    counted: list[tuple[str, int]] = []  # (phase, variants) per counted process
    phase = ["check"]
    count_targets, finish_night = job.count_targets, nightly.finish_night

    def spy_count(suite, targets, *args, **kwargs):  # type: ignore[no-untyped-def]
        counted.append((phase[0], len(targets)))
        return count_targets(suite, targets, *args, **kwargs)

    def spy_finish(*args, **kwargs):  # type: ignore[no-untyped-def]
        phase[0] = "bisect"
        try:
            return finish_night(*args, **kwargs)
        finally:
            phase[0] = "check"

    monkeypatch.setattr(job, "count_targets", spy_count)
    monkeypatch.setattr(nightly, "finish_night", spy_finish)
    started = time.perf_counter()
    reports = []
    with Store.open(url) as store:
        for night in NIGHTS:
            git(repo, "checkout", "-q", shas[night])
            suite = load_suite(path).counted("instructions")  # as --counts does
            reports.append(nightly.run_nightly(suite, suite.select(None), store, suite.check, Progress(),
                                               recheck=False, explain=None))
        alerts = store.alerts(suite="toy")
        changes = store.changes(status="confirmed", suite="toy")
        series = {s.id: s for s in store.series(suite="toy")}
        instructions = next(s for s in series.values() if s.key.metric == "instructions")
        points = store.points(instructions.id)
    wall = time.perf_counter() - started
    summary = (f"{wall:.0f} s; counted {counted}; alerts "
               f"{[(a.first_commit[:7] if a.first_commit else None, [c.metric for c in a.changes]) for a in alerts]}")
    print(summary)

    # night 2 counted nothing and carried night 1's counts: the counted series has a point a night
    assert [p.commit for p in points] == [shas[n] for n in NIGHTS], summary
    assert points[1].value == points[0].value and points[2].value > points[1].value
    # one alert for the culprit, holding every changed metric, over the night-to-night range
    metrics = {series[c.series_id].key.metric for c in changes}
    assert {"node_count", "instructions", "compile_instructions"} <= metrics, summary
    (alert,) = alerts
    assert (alert.first_commit, alert.last_commit) == (shas[4], shas[8]), summary
    assert (alert.culprit_commit, alert.culprit_pass) == (shas[CULPRIT_AT], PASS), summary
    assert {c.metric for c in alert.changes} == metrics and all(c.alert_id == alert.id for c in changes), summary
    assert reports[-1].exit_regression
    from perfguard.report.nightly import markdown_summary

    text = markdown_summary(reports[-1])
    print(text)
    assert text.count(f"| {alert.id} | untriaged |") == 1 and "bisected on node\\_count" in text, text
    # the culprit counted once with its parent: at most ceil(log2 N) + 2 counted versions
    probes = sum(n for where, n in counted if where == "bisect")
    assert 0 < probes <= math.ceil(math.log2(NIGHTS[2] - NIGHTS[1])) + 2, summary
    assert [n for where, n in counted if where == "check"] == [1, 2], summary  # night 2 counted nothing
