"""The nightly's bisection of exact changes: a node count or artifact size that changed in a range
where timing confirmed nothing (or whose latency bisection found no culprit) is bisected on that
metric by compiling only (:mod:`perfguard.flows.bisection.exact_probes`), so no alert with an exact change is
left "not bisected".

One bisection per commit range (an alert shares one culprit): its largest exact regression among
the metrics of :data:`perfguard.flows.bisection.exact_probes.EXACT_PROBES` (a counted metric added there is
bisected here too). The bisection is stored and linked to its change like a latency one; the
culprit is explained once when the night explains.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from perfguard.errors import UserError
from perfguard.progress import Progress
from perfguard.suite import Suite

if TYPE_CHECKING:
    from perfguard.bisect.document import BisectResult
    from perfguard.profile.explain import ProfileSettings
    from perfguard.store import Change, Series, Store

Range = tuple[str, str | None, str | None]
#: A confirmed change with its series (what the nightly's findings hold).
Found = tuple["Change", "Series"]


def _range(found: Found) -> Range:
    from perfguard.store.alert_rows import runner_of

    change, series = found
    return runner_of(series.key.runner_class), change.good_commit, change.bad_commit


def exact_to_bisect(found: Sequence[Found], bisections: Mapping[int, BisectResult],
                    edited: Collection[str]) -> list[Found]:
    """Per commit range, the exact regression to bisect: the largest among ``found`` (the new
    confirmed regressions with their series) whose range no latency bisection of ``bisections``
    attributed, whose range has two ends and whose pipeline the suite did not edit between the
    nights."""
    from perfguard.flows.bisection.exact_probes import EXACT_PROBES

    attributed = {_range(f) for f in found if f[0].id in bisections and bisections[f[0].id].found}
    chosen: dict[Range, Found] = {}
    for f in found:
        (change, series), key = f, _range(f)
        if (series.key.metric not in EXACT_PROBES or key in attributed or not change.good_commit
                or not change.bad_commit or change.good_commit == change.bad_commit
                or series.key.pipeline in edited):
            continue
        if key not in chosen or abs(math.log(change.ratio)) > abs(math.log(chosen[key][0].ratio)):
            chosen[key] = f
    return list(chosen.values())


def bisect_exact_findings(suite: Suite, store: Store, found: Sequence[Found], progress: Progress,
                          explain: ProfileSettings | None) -> dict[int, BisectResult]:
    """Bisect each change on its series' exact metric, store and link the bisection; by change id."""
    from perfguard.flows.bisection.exact_probes import bisect_exact_commits
    from perfguard.flows.probe import require_case

    done: dict[int, BisectResult] = {}
    for change, series in found:
        metric = series.key.metric
        assert change.good_commit is not None and change.bad_commit is not None
        try:
            case = require_case(suite, series.key.case)
            result = bisect_exact_commits(suite, case, change.good_commit, change.bad_commit, metric, progress,
                                          explain=explain)
        except UserError as exc:
            store.set_change_status(change.id, change.status, f"{change.note}; bisection on {metric} not run: {exc}")
            continue
        document_id = store.ingest(result, source="nightly bisect").document_id
        culprit = result.culprits[0] if result.culprits else None
        store.link_bisect(change.id, document_id, culprit.commit.sha if culprit and culprit.commit else None,
                          culprit.pass_.name if culprit and culprit.pass_ else None)
        done[change.id] = result
    return done


def exact_waiting(store: Store, suite: str, selected: Collection[str]) -> list[Found]:
    """The confirmed exact regressions of the ``selected`` cases that wait for a bisection
    (``nightly --bisect-only``): no bisection of their own, and no culprit in their range."""
    series = {s.id: s for s in store.series(suite=suite)}
    confirmed = [(c, series[c.series_id]) for c in store.changes(status="confirmed", suite=suite)
                 if c.series_id in series]
    attributed = {_range(f) for f in confirmed if f[0].culprit_commit}
    waiting = [f for f in confirmed if f[0].bisect_document_id is None and f[0].ratio > 1.0
               and f[1].key.case in selected and _range(f) not in attributed]
    return exact_to_bisect(waiting, {}, ())
