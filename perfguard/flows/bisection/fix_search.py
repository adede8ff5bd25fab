"""Which commit fixed an alert: the nightly's bisection of a fixing range.

When a later night takes a regression's step back, the store marks its alert ``fixed`` with the
fixing range (:meth:`~perfguard.store.alerts.Alerting.raise_alerts`): the night before ..
the night the reverse step showed. That range can hold many commits. The nightly then bisects it
as it bisects a regression, with the direction flipped (``bisect_commits(direction="improvement")``:
the first commit that is *faster* than the one before), then the pass inside that commit, and
records both on the alert (``fix_commit``, ``fix_pass``, the stored bisection) with an event.

A range of exactly one commit is its fixing commit, without a bisection (and without a pass). The
bisection measures the alert's largest latency regression among the selected cases; an alert
without one is bisected on its largest exact regression (node count, artifact size) by compiling
only (:mod:`perfguard.flows.bisection.exact_probes`); an alert with neither is left without a fixing commit. Every attempt leaves an event
whose note starts with :data:`FIX_NOTE`, so the follow-up job (``nightly --bisect-only``) does not
run it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfguard.errors import UserError
from perfguard.progress import Progress
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings

if TYPE_CHECKING:
    from perfguard.bisect.document import BisectResult
    from perfguard.store import Store
    from perfguard.store.alert_rows import Alert

#: How the note of every fix-bisection event starts (what marks an alert as tried).
FIX_NOTE = "fix bisection: "


@dataclass(frozen=True)
class FixFound:
    """What the bisection of one alert's fixing range gave: the alert after it (``fix_commit``
    and ``fix_pass`` set when found), the bisection (None: a one-commit range, or not run) and the
    note its event carries."""

    alert: Alert
    result: BisectResult | None
    note: str


def waiting_for_fix_bisection(alerts: Sequence[Alert]) -> list[Alert]:
    """The regression alerts a later night marked ``fixed`` with a fixing range whose fixing
    commit is not known and was never looked for."""
    return [a for a in alerts if a.kind == "regression" and a.status == "fixed" and a.fix_first_commit
            and a.fix_last_commit and a.fix_first_commit != a.fix_last_commit and a.fix_commit is None
            and a.fix_bisect_document_id is None and not any(e.note.startswith(FIX_NOTE) for e in a.events)]


def _fix_case(alert: Alert, cases: Sequence[CaseSpec]) -> tuple[CaseSpec, str] | None:
    """The selected case whose latency regression in ``alert`` is largest and ``latency`` (what
    the bisection measures); for an alert without one among ``cases``, the case of its largest
    exact regression and that metric (bisected by compiling only); None when it has neither."""
    from perfguard.flows.bisection.exact_probes import EXACT_PROBES

    selected = {c.id: c for c in cases}
    for metrics in (("latency",), tuple(EXACT_PROBES)):
        regressed = sorted((c for c in alert.changes if c.metric in metrics and c.is_regression
                            and c.case in selected), key=lambda c: (-c.ratio, c.case))
        if regressed:
            return selected[regressed[0].case], regressed[0].metric
    return None


def bisect_fix(suite: Suite, cases: Sequence[CaseSpec], store: Store, alert: Alert, settings: CheckSettings,
               progress: Progress) -> FixFound:
    """Find the commit of ``alert``'s fixing range that made it fast again, record it on the alert
    with an event, and return what was found (see the module docstring)."""
    from perfguard.compile.checkout import compiler_repo_root
    from perfguard.flows.bisection.commit_search import bisect_commits, commit_range

    first, last = alert.fix_first_commit, alert.fix_last_commit
    assert first is not None and last is not None
    span = f"{first[:10]}..{last[:10]}"
    try:
        commits = commit_range(compiler_repo_root(suite), first, last)
    except UserError as exc:
        return _record(store, alert, None, None, None, f"not run over {span}: {exc}")
    if len(commits) == 2:
        return _record(store, alert, commits[1].sha, None, None,
                       f"fixed by {commits[1].sha[:10]}: the fixing range {span} is that one commit")
    chosen = _fix_case(alert, cases)
    if chosen is None:
        return _record(store, alert, None, None, None,
                       f"not run over {span}: no latency or exact regression of the alert among the selected cases")
    case, metric = chosen
    progress.log(f"alert {alert.id} was fixed in {span} ({len(commits) - 1} commits): bisecting {case.id} for the fix"
                 + ("" if metric == "latency" else f" on {metric}"))
    try:
        if metric == "latency":
            result = bisect_commits(suite, case, first, last, settings, progress, None, direction="improvement")
        else:  # an exact metric: the first commit whose value left the slow level, by compiling only
            from perfguard.flows.bisection.exact_probes import bisect_exact_commits

            result = bisect_exact_commits(suite, case, first, last, metric, progress)
    except UserError as exc:
        return _record(store, alert, None, None, None, f"not run over {span}: {exc}")
    document_id = store.ingest(result, source="nightly fix bisect").document_id
    culprit = next((c for c in result.culprits if c.confirmed), result.culprits[0] if result.culprits else None)
    if culprit is None or culprit.commit is None:
        return _record(store, alert, None, None, document_id, f"no fixing commit found in {span}: {result.status}",
                       result)
    commit = culprit.commit.sha
    pass_name = culprit.pass_.name if culprit.pass_ else None
    found = commit[:10] + (f" ({pass_name})" if pass_name else "")
    return _record(store, alert, commit, pass_name, document_id,
                   f"fixed by {found}, bisected in {span}" + ("" if culprit.confirmed else " (not confirmed)"), result)


def _record(store: Store, alert: Alert, commit: str | None, pass_name: str | None, document_id: int | None,
            said: str, result: BisectResult | None = None) -> FixFound:
    note = FIX_NOTE + said
    return FixFound(store.set_fix(alert.id, commit, pass_name, document_id, note), result, note)


def bisect_fixes(suite: Suite, cases: Sequence[CaseSpec], store: Store, settings: CheckSettings, progress: Progress,
                 alerts: Sequence[Alert] | None = None) -> list[FixFound]:
    """Bisect the fixing range of every alert of ``alerts`` (default: the suite's in the store)
    that waits for it (:func:`waiting_for_fix_bisection`)."""
    pool = store.alerts(suite=suite.name) if alerts is None else alerts
    return [bisect_fix(suite, cases, store, alert, settings, progress) for alert in waiting_for_fix_bisection(pool)]
