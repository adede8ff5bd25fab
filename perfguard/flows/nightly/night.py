"""``perfguard nightly``: one command for the whole night, over a history store.

1. Find the last nightly of the suite in the store. The first night has none: it measures the
   working tree (``perfguard run``) and stores the result; the chain of nights starts there.
2. Otherwise check the working tree against that night's commit (``check --base-ref``: both in the
   same job, paired, so drift-free on any machine; identical artifacts are SAME without timing)
   and store the verdicts. A latency regression the check decides is re-checked at once in a fresh
   job (new worker processes); one that holds there is confirmed the same night.
3. Change-point detection (``perfguard.history.changepoints``) over every series of the suite:
   the chained paired ratios (valid on hosted runners, whose machine changes every night) and the
   absolute values (meaningful within one runner fingerprint). A latency ratio change of tonight
   is *confirmed* (or closed) by the same-job re-check; without one (``--no-recheck``) it is
   *pending* until the next night. An absolute change is reported once it has held for three
   nights, and confirmed then; node count and artifact size have no noise and are confirmed as
   seen. A pending change that no longer shows is closed.
4. A newly confirmed latency regression triggers ``bisect commits`` over its commit range (the
   night before .. the night it appeared), unless ``bisect=False``; the bisection document is
   stored and linked to the change, with its culprit commit and pass. The exact changes (node
   count, size, the counted metrics) go culprit first (:mod:`perfguard.flows.nightly.known_culprit`):
   a known culprit is tested on them (it and its parent, probed once) before any is bisected on
   its own. A found culprit is explained once (``explain``, as ``perfguard bisect`` does: its
   parent against it, profiled); the alert carries that explanation (``nightly --no-explain``: not).
   A change of a pipeline the suite file defined anew since the previous night is that edit's: the
   series continue across it (:mod:`perfguard.store.edits`) and the commit that made it is
   the culprit (:mod:`perfguard.flows.nightly.pipeline_edits`), found in the suite file's history, not bisected.
   On a counted night an identical artifact, neither timed nor counted, carries the previous
   night's counts forward (:func:`carry_counts`), so counted ranges stay night to night.
5. The confirmed changes are grouped into alerts (:mod:`perfguard.store.alert_rows`): one per
   culprit, whatever metrics found it, else one per (suite, runner class, commit range), every
   case and metric of the range inside, the bisected culprit and its explanation shared by all.
   A change whose alert was triaged closed
   (``wont-fix``, ``expected``, ``invalid``...) is not raised again: its level is accepted.
6. An alert that a later night's reverse step marked ``fixed`` has its fixing range bisected in
   the reverse direction (:mod:`perfguard.flows.bisection.fix_search`, same ``bisect`` switch): the commit
   and pass that made it fast again are recorded on the alert.

A compiler commit that does not build (``[compiler] build``) or whose user passes do not import is
a finding, not bad input: the night is recorded ``broken`` (no document; every case counted
failed, so exit 4), a ``broken`` alert is raised for the last good night's commit .. this one (or
the open one extended), and the chain stays on the last good night: the next night is checked
against it, and closes the broken alert as ``fixed`` when it builds again. (Other commands still
refuse such a suite as bad input, exit 2: there the working tree is the user's own.)

The outcome (``NightReport``) gives the exit code (0 nothing new, 1 a new confirmed regression or
an exact regression of the night's own check that no series holds, 4 failed cases or a broken
compiler); :mod:`perfguard.report.nightly` renders it as a Markdown summary of what changed since
the previous night.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from perfguard.errors import UserError
from perfguard.history.series_changes import EXACT_METRICS, series_changes
from perfguard.progress import Progress
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings

if TYPE_CHECKING:
    from perfguard.bisect.document import BisectResult
    from perfguard.compare.verdicts import Verdict, VerdictsDocument
    from perfguard.flows.bisection.fix_search import FixFound
    from perfguard.history.changepoints import ChangePoint
    from perfguard.profile.explain import ProfileSettings
    from perfguard.results.result import ResultDocument
    from perfguard.results.shard import ShardInfo
    from perfguard.store import Change, Night, Point, Series, Store
    from perfguard.store.alert_rows import Alert
    from perfguard.store.edits import PipelineEdit
    from perfguard.suite.gates import ThresholdSet

#: Metrics whose confirmed regressions trigger a bisection (the others are recorded only).
BISECTED_METRICS = ("latency",)
#: Metrics a new confirmed regression of which makes the nightly exit 1. Compile time is reported,
#: not gated (as in ``check``, where a few unpaired compiles rarely decide its floor).
GATED_METRICS = ("latency", "memory", "node_count", "artifact_size", "instructions", "estimated_cycles",
                 "compile_instructions")


@dataclass(frozen=True)
class Finding:
    """A change point of one series as this night sees it, with what the store knew before."""

    change: Change
    series: Series
    previous_status: str | None  # None: first seen tonight
    # Another metric of the same case already had a confirmed change at this commit: the same
    # change seen again (a node-count step after its latency step), not a new alarm.
    known_change: bool = False

    @property
    def newly_confirmed(self) -> bool:
        return self.change.status == "confirmed" and self.previous_status != "confirmed"

    @property
    def is_regression(self) -> bool:
        return self.change.ratio > 1.0


@dataclass
class NightReport:
    """What one nightly did: the night stored, the previous night, the check (None on the first
    night), the changes found, the bisections run, the cases re-checked and the alerts raised or
    changed tonight."""

    suite: str
    night: Night
    previous: Night | None
    verdicts: VerdictsDocument | None
    findings: list[Finding] = field(default_factory=list)
    closed: list[Change] = field(default_factory=list)
    bisections: dict[int, BisectResult] = field(default_factory=dict)
    rechecked: dict[str, str] = field(default_factory=dict)  # case -> what the re-check said
    measured_cases: int = 0
    failed_cases: int = 0
    edited_pipelines: tuple[str, ...] = ()  # pipelines the suite changed since the previous night
    pipeline_edits: list[PipelineEdit] = field(default_factory=list)  # ... each with the commit that did it
    detected: bool = False  # tonight's changes were detected here (not in a shard's part: its follow-up does)
    alerts: list[Alert] = field(default_factory=list)
    broken: str | None = None  # why tonight's compiler commit is broken (did not build / import)
    fixes: list[FixFound] = field(default_factory=list)  # the fixing ranges bisected tonight

    @property
    def new_regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.newly_confirmed and f.is_regression and not f.known_change
                and f.series.key.metric in GATED_METRICS]

    @property
    def unraised_regressions(self) -> list[Verdict]:
        """The exact regressions of tonight's own check (node count, size, the counted metrics:
        no noise, so decided as seen) that no change of tonight holds: a series that broke where
        the check's two sides did not (another runner fingerprint on a hosted runner, a pipeline
        edited where the suite file is not part of the compiler's repository). Never lost: the
        summary lists them and they make the night exit 1 as a new confirmed regression does."""
        if self.verdicts is None or not self.detected:  # a shard's part: its follow-up detects and decides
            return []
        held = {(f.series.key.case, f.series.key.metric) for f in self.findings
                if f.change.bad_commit == self.night.commit}
        return [v for v in self.verdicts.verdicts if v.metric in EXACT_METRICS and v.decision == "different"
                and v.is_regression and (v.case, v.metric) not in held]

    @property
    def exit_regression(self) -> bool:
        return bool(self.new_regressions) or any(v.metric in GATED_METRICS and v.gated
                                                 for v in self.unraised_regressions)


def _head_commit(suite: Suite) -> tuple[str, str]:
    """The commit (sha, subject) the compiler's repository is at: what tonight measures. A suite
    outside git is refused (``UserError``: set ``[compiler] repo``)."""
    from perfguard.compile.checkout import compiler_repo_root, resolve_commit

    return resolve_commit(compiler_repo_root(suite), "HEAD")


def run_nightly(suite: Suite, cases: list[CaseSpec], store: Store, settings: CheckSettings, progress: Progress,
                *, bisect: bool = True, recheck: bool = True, shard: ShardInfo | None = None,
                explain: ProfileSettings | None = None) -> NightReport:
    """One night: measure or check, store, detect, confirm, bisect (see the module docstring).
    ``explain``: how each new culprit is profiled against its parent (None: not explained,
    ``nightly --no-explain``). ``shard`` (``nightly --shard K/N``): measure and store this part only, recorded as a night of
    its own; the follow-up job detects, confirms and bisects over the store (``follow_up`` in
    ``perfguard.flows.nightly.shard_followup``)."""
    from perfguard.flows.nightly.one_per_commit import prune_killed_checkouts

    head_sha, head_subject = _head_commit(suite)
    prune_killed_checkouts(suite, progress)
    previous = store.last_night(suite.name, good=True)  # a broken night is no base
    if shard is not None:  # tonight's other shards may have recorded their nights already
        from perfguard.flows.shards import shard_base

        previous = shard_base(store, suite.name, shard)
    last = store.last_night(suite.name)
    reason = _broken_reason(suite, cases, progress)
    if reason is not None:
        progress.log(f"compiler at {head_sha[:10]} is broken: {reason}")
        night = store.record_broken_night(suite.name, head_sha, reason)
        alert = store.raise_broken(suite.name, previous.commit if previous else None, head_sha, reason)
        return NightReport(suite.name, night, previous, None, failed_cases=len(cases), alerts=[alert],
                           broken=reason)
    verdicts = None
    rechecked: dict[str, str] = {}
    if previous is None:
        progress.log(f"first night of {suite.name} in {store.url}: measuring {head_sha[:10]} {head_subject}")
        from perfguard.compile.case import Side
        from perfguard.measure.job import run_suite

        document = run_suite(suite, cases, progress=progress,
                             side=Side("head", suite.compiler.path, head_sha, head_subject))
        document = dataclasses.replace(document, shard=shard)
        ingested = store.ingest(document, source="nightly")
        measured = sum(1 for c in document.cases if c.metrics.latency_s is not None)
        failed = sum(1 for c in document.cases if not c.ok)
    else:
        from perfguard.flows.check import check_against_ref

        progress.log(f"previous night: {previous.commit[:10]} ({previous.time}); checking {head_sha[:10]} against it")
        verdicts = check_against_ref(suite, cases, previous.commit, settings, progress, head_built=True,
                                     head_subject=head_subject)
        if recheck:
            from perfguard.flows.nightly.recheck import recheck as recheck_tonight

            rechecked = recheck_tonight(suite, cases, previous.commit, settings, progress, verdicts, store)
        verdicts = carry_counts(suite, verdicts, store, previous, progress)
        if shard is not None:
            verdicts = dataclasses.replace(verdicts, shard=dataclasses.replace(shard, base_commit=previous.commit))
        ingested = store.ingest(verdicts, source="nightly")
        measured = sum(1 for v in verdicts.verdicts if v.metric == "latency" and v.comparison.method != "identity"
                       and v.decision != "failed")
        failed = len({v.case for v in verdicts.verdicts if v.decision == "failed"})
    night = store.record_night(suite.name, head_sha, ingested.document_id)
    report = NightReport(suite.name, night, previous, verdicts, rechecked=rechecked, measured_cases=measured,
                         failed_cases=failed)
    if shard is not None:
        return report
    return finish_night(suite, cases, store, settings, progress, report, bisect=bisect, last=last, explain=explain)


def finish_night(suite: Suite, cases: list[CaseSpec], store: Store, settings: CheckSettings, progress: Progress,
                 report: NightReport, *, bisect: bool, last: Night | None,
                 explain: ProfileSettings | None = None) -> NightReport:
    """After the night's documents are stored: detect and confirm changes, bisect the new
    regressions, raise the alerts (the whole night, or the follow-up job of a sharded one).
    ``last``: the night before this one (a broken one is closed when this one builds)."""
    verdicts, head_sha = report.verdicts, report.night.commit
    _detect(store, suite.name, report, suite.thresholds)
    report.detected = True
    # A pipeline the suite itself changed between the nights is the cause: the commit that edited it
    # is its changes' culprit (perfguard.flows.nightly.pipeline_edits); bisecting the compiler's commits
    # (which compiles every commit with tonight's pipelines) could not find it.
    from perfguard.flows.nightly.pipeline_edits import attribute_edits

    edited = set(verdicts.mode.base_pipelines) if verdicts is not None else set()
    report.edited_pipelines = tuple(sorted(edited))
    report.pipeline_edits = attribute_edits(suite, store, head_sha, [(f.change, f.series) for f in report.findings],
                                            progress)
    if bisect:
        for finding in report.new_regressions:
            if finding.series.key.pipeline in edited:
                continue
            if finding.series.key.metric in BISECTED_METRICS and finding.change.good_commit and \
                    finding.change.bad_commit and finding.change.good_commit != finding.change.bad_commit:
                result = _bisect(suite, store, finding, settings, progress, explain)
                if result is not None:
                    report.bisections[finding.change.id] = result
        # the exact changes: a known culprit tested first, then bisected by compiling (or counting)
        from perfguard.flows.nightly.known_culprit import attribute_and_bisect

        found = [(f.change, f.series) for f in report.findings if f.newly_confirmed and not f.known_change]
        report.bisections.update(attribute_and_bisect(suite, store, found, report.bisections, edited, progress,
                                                      explain))
    report.alerts = store.raise_alerts(suite.name, alarm_metrics=GATED_METRICS, exact_metrics=EXACT_METRICS)
    if bisect:  # an alert fixed tonight (or on a night that did not bisect): which commit fixed it
        from perfguard.flows.bisection.fix_search import bisect_fixes

        report.fixes = bisect_fixes(suite, cases, store, settings, progress)
        after = {f.alert.id: f.alert for f in report.fixes}
        report.alerts = [after.get(a.id, a) for a in report.alerts] + \
            [f.alert for f in report.fixes if f.alert.id not in {a.id for a in report.alerts}]
    if last is not None and last.broken:
        report.alerts += store.fix_broken(suite.name, last.commit, head_sha)
    return report


def _broken_reason(suite: Suite, cases: list[CaseSpec], progress: Progress) -> str | None:
    """Why the working tree's compiler is broken: its build command fails, or a user pass of the
    selected cases' pipelines does not import (None: it builds and imports)."""
    from perfguard.backends import get_backend
    from perfguard.compile.checkout import BuildError, run_build, working_tree
    from perfguard.compile.user_passes import UserPassCheck

    if suite.compiler.build:
        try:
            run_build(working_tree(suite), suite.compiler.build)
        except BuildError as exc:
            return f"does not build: {exc}"
    names = sorted({name for c in cases if get_backend(c.pipeline.backend).capabilities.user_passes
                    for name in c.pipeline.passes if ":" in name})
    if not names:
        return None
    check = UserPassCheck({"user passes": names}, suite.compiler.path)
    try:
        check.wait()
    except UserError as exc:
        return f"passes do not import: {exc}"
    finally:
        check.close()
    return None


def carry_counts(suite: Suite, verdicts: VerdictsDocument, store: Store, previous: Night,
                 progress: Progress) -> VerdictsDocument:
    """Tonight's check with the previous night's counts carried forward: on a counted night, a
    case whose artifact is identical to its previous night's (the same execution identity, on a
    runner of the same fingerprint) was not measured, so not counted; its inference counts are
    that night's (exact metrics of one artifact are the same), so its counted series keep a point
    every night and a change's range stays night to night. Compile instructions are not carried:
    they are the compiler's work, and an identical artifact can come from a slower compile."""
    from perfguard.compare.check import same_execution
    from perfguard.runners.fingerprint import fingerprint_hash

    tonight = verdicts.results.candidate if verdicts.results is not None else None
    if tonight is None or previous.document_id is None or suite.counts is None or \
            all(e.metrics.counts is not None or not e.ok for e in tonight.cases):
        return verdicts
    before = _stored_candidate(store, previous.document_id)
    if before is None:
        return verdicts
    old = {e.id: e for e in before.cases}
    cases = []
    for entry in tonight.cases:
        last = old.get(entry.id)
        if (entry.metrics.counts is None and last is not None and last.metrics.counts is not None
                and same_execution(last, entry) and fingerprint_hash(before.environment.get(entry.runner) or {})
                == fingerprint_hash(tonight.environment.get(entry.runner) or {})):
            note = f"counts carried from the night at {previous.commit[:10]} (same execution identity)"
            progress.log(f"{entry.id}: identical artifact, {note}")
            entry = dataclasses.replace(entry.with_metrics(counts=last.metrics.counts),
                                        not_measured="; ".join(filter(None, (entry.not_measured, note))))
        cases.append(entry)
    assert verdicts.results is not None
    return dataclasses.replace(verdicts, results=dataclasses.replace(
        verdicts.results, candidate=dataclasses.replace(tonight, cases=tuple(cases))))


def _stored_candidate(store: Store, document_id: int) -> ResultDocument | None:
    """The measured side of a stored night: its result, or its check's candidate (None: neither)."""
    from perfguard.compare.verdicts import VerdictsDocument
    from perfguard.errors import DecodeError
    from perfguard.results.result import ResultDocument
    from perfguard.store.extract import parse_stored

    try:
        document = parse_stored(store.document(document_id), f"stored document {document_id}")
    except (DecodeError, UserError):
        return None
    if isinstance(document, ResultDocument):
        return document
    if isinstance(document, VerdictsDocument) and document.results is not None:
        return document.results.candidate
    return None


def _range_of(points: Sequence[Point], index: int, kind: str) -> tuple[str | None, str | None]:
    """(good, bad) commits of a change first seen at ``points[index]``."""
    bad = points[index].commit
    good = points[index].base_commit if kind == "ratio" else None
    if good is None and index > 0:
        good = points[index - 1].commit
    return good, bad


def _detect(store: Store, suite: str, report: NightReport, thresholds: ThresholdSet) -> None:
    """Tonight's changes of every series of ``suite``; exact ones past the suite's own floors
    (``thresholds``: the gates its check used tonight, so history and check agree)."""
    before = {(c.series_id, c.bad_commit): c for c in store.changes(suite=suite)}
    # Closed by triage of their alert (wont-fix, expected, invalid...): the level is accepted. So
    # is the step that fixed an alert (closed as its fix, in no alert).
    from perfguard.store.alert_rows import FIX_CHANGE_NOTE

    accepted = {(c.series_id, c.bad_commit) for c in store.changes(status="closed", suite=suite)
                if c.alert_id is not None or c.note.startswith(FIX_CHANGE_NOTE)}
    known = {(c.key.case, c.bad_commit) for c in before.values() if c.status == "confirmed"}
    seen = set()
    # A pipeline the suite edited at a commit continues its series (perfguard.store.edits):
    # its step at the edit is a change like any other, recorded on the series of the new definition.
    for lineage in store.lineages(suite):
        points = list(lineage.points)
        found = series_changes(lineage.newest, points, thresholds)
        found += _decided_tonight(lineage.newest, points, found, report)
        for point in found:
            series = lineage.series_at(point.index)
            good, bad = _range_of(points, point.index, series.key.kind)
            if good == bad or (series.id, bad) in accepted:
                # the same commit on both sides: the environment changed, not the compiler
                continue
            old = before.get((series.id, bad))
            if old is not None and old.status == "closed":
                continue
            seen.add((series.id, bad))
            status, note = _status(series, points, point.index, old, report)
            change = store.upsert_change(series.id, good_commit=good, bad_commit=bad, time=points[point.index].time,
                                         ratio=point.ratio, ci_low=point.ci_low, ci_high=point.ci_high,
                                         status=status, note=note)
            if old is None or old.status != change.status:
                report.findings.append(Finding(change, series, None if old is None else old.status,
                                               (series.key.case, bad) in known))
    for key, change in before.items():
        if change.status == "pending" and key not in seen:
            store.set_change_status(change.id, "closed", "did not hold on the next night")
            report.closed.append(dataclasses.replace(change, status="closed"))


def _decided_tonight(series: Series, points: Sequence[Point], found: Sequence[ChangePoint],
                     report: NightReport) -> list[ChangePoint]:
    """Tonight's latency ratio as a change where the paired check and its same-job re-check both
    called it a regression (or, for a case of an open regression alert, an improvement: the fix)
    but the series is too short for change-point detection (its first nights): the check's own
    test is the evidence."""
    from perfguard.history.changepoints import ChangePoint

    if series.key.kind != "ratio" or series.key.metric != "latency" or not points:
        return []
    last = points[-1]
    said = report.rechecked.get(series.key.case, "")
    direction = "regression" if last.value > 1.0 else "improvement"
    if (last.commit != report.night.commit or last.decision != "different" or last.value == 1.0
            or any(c.index == len(points) - 1 for c in found) or not said.startswith(direction)):
        return []
    level = 1.0
    for p in points[:-1]:
        level *= p.value
    low = last.ci_low if last.ci_low is not None else last.value
    high = last.ci_high if last.ci_high is not None else last.value
    return [ChangePoint(len(points) - 1, level, level * last.value, last.value, low, high, direction)]


def _status(series: Series, points: Sequence[Point], index: int, old: Change | None,
            report: NightReport) -> tuple[str, str]:
    """A change point's status and note. A ratio series' chained index keeps every night's
    ratio, so "it holds on the next night" says nothing there: a latency ratio change is
    confirmed (or closed) by the same-job re-check of its night. An absolute series' change is
    confirmed when the nights after it stay at the new level."""
    newest = index == len(points) - 1
    tonight = points[index].commit == report.night.commit
    if series.key.metric in EXACT_METRICS:
        return "confirmed", "exact metric (no noise): confirmed as seen"
    if series.key.kind == "ratio" and series.key.metric == "latency" and newest and tonight:
        said = report.rechecked.get(series.key.case)
        if said is not None:
            from perfguard.flows.nightly.recheck import held

            return ("confirmed" if held(said) else "closed"), f"same-job re-check: {said}"
        return "pending", "seen once; confirmed if it holds on the next night"
    if newest:
        return "pending", "seen once; confirmed if it holds on the next night"
    if old is not None and old.status == "confirmed":
        return "confirmed", old.note
    return "confirmed", "held on the next night"


def _bisect(suite: Suite, store: Store, finding: Finding, settings: CheckSettings,
            progress: Progress, explain: ProfileSettings | None) -> BisectResult | None:
    """Bisect one change's commit range, store the bisection and link it (None: not run). A
    found culprit is explained once (``explain``): its parent against it, profiled; the alert
    takes that explanation from the stored bisection."""
    from perfguard.flows.bisection.commit_search import bisect_commits
    from perfguard.flows.probe import require_case

    change = finding.change
    case = require_case(suite, finding.series.key.case)
    assert change.good_commit is not None and change.bad_commit is not None
    progress.log(f"bisecting {case.id} over {change.good_commit[:10]}..{change.bad_commit[:10]}")
    try:
        result = bisect_commits(suite, case, change.good_commit, change.bad_commit, settings, progress, None,
                                explain=explain)
    except UserError as exc:
        store.set_change_status(change.id, change.status, f"{change.note}; bisection not run: {exc}")
        return None
    ingested = store.ingest(result, source="nightly bisect")
    culprit = next((c for c in result.culprits if c.confirmed), result.culprits[0] if result.culprits else None)
    commit = culprit.commit.sha if culprit and culprit.commit else None
    pass_name = culprit.pass_.name if culprit and culprit.pass_ else None
    store.link_bisect(change.id, ingested.document_id, commit, pass_name)
    return result


def bisect_open_changes(suite: Suite, cases: list[CaseSpec], store: Store, settings: CheckSettings,
                        progress: Progress, explain: ProfileSettings | None = None
                        ) -> list[tuple[Change, BisectResult | None]]:
    """Bisect every confirmed latency regression of the suite's selected cases that has no
    bisection yet (``perfguard nightly --bisect-only``: the workflow's follow-up job on the runner
    class where the change was seen), then, by compiling only, each exact regression of a range
    that none attributed. Returns each change with its bisection (None: not run)."""
    selected = {c.id for c in cases}
    series = {s.id: s for s in store.series(suite=suite.name)}
    done: list[tuple[Change, BisectResult | None]] = []
    for change in store.changes(status="confirmed", suite=suite.name):
        s = series.get(change.series_id)
        if (s is None or change.bisect_document_id is not None or change.ratio <= 1.0
                or s.key.metric not in BISECTED_METRICS or s.key.case not in selected
                or not change.good_commit or not change.bad_commit or change.good_commit == change.bad_commit):
            continue
        done.append((change, _bisect(suite, store, Finding(change, s, "confirmed"), settings, progress, explain)))
    from perfguard.flows.nightly.exact_bisections import exact_waiting
    from perfguard.flows.nightly.known_culprit import attribute_and_bisect

    waiting = exact_waiting(store, suite.name, selected)  # what timing did not attribute: by compiling
    known = {change.id: result for change, result in done if result is not None}
    exact = attribute_and_bisect(suite, store, waiting, known, (), progress, explain)
    done += [(change, exact.get(change.id)) for change, _ in waiting]
    # the bisected changes share their culprits
    store.raise_alerts(suite.name, alarm_metrics=GATED_METRICS, exact_metrics=EXACT_METRICS)
    return done
