"""The nightly's exact changes, a known culprit first.

A night often sees one culprit through several metrics: a node count, an artifact size, and on a
counted night (``--counts``) instructions, estimated cycles and compile instructions. Bisecting
each on its own pays for the same culprit again (a counted probe per commit, minutes each on a
real model) and names it twice. So, once any bisection of the night (a latency one, or an exact
one) has named a culprit commit, every other exact change whose range holds that commit is
tested there first (:func:`perfguard.flows.bisection.exact_probes.attribute_exact`): the culprit and its
parent probed once per case, counted (two counted versions) when a counted metric is among the
changes. A change the culprit explains (it moved between parent and culprit beyond its floor, and
the ends agree) is attributed there, stored and linked like a bisection; only a change no known
culprit explains is bisected on its own (compile-only metrics first: they are the cheap ones),
and what that bisection finds is tested first on the rest.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from perfguard.errors import UserError
from perfguard.flows.nightly.exact_bisections import Found, bisect_exact_findings
from perfguard.progress import Progress
from perfguard.suite import Suite

if TYPE_CHECKING:
    from perfguard.bisect.document import BisectResult
    from perfguard.flows.bisection.exact_probes import ExactChange
    from perfguard.profile.explain import ProfileSettings
    from perfguard.store import Store


def _culprit(result: BisectResult) -> str | None:
    """The commit a bisection named (found, confirmed, and no range of skipped commits around it),
    else None."""
    first = next((c for c in result.culprits if c.confirmed), None) if result.found else None
    return first.commit.sha if first is not None and first.commit is not None and first.range is None else None


def _end_value(store: Store, series_id: int, commit: str | None) -> float | None:
    """The series' value at ``commit`` (its newest point there), None when it has none."""
    return next((p.value for p in reversed(store.points(series_id)) if p.commit == commit), None)


def _exact_change(store: Store, found: Found) -> ExactChange:
    from perfguard.flows.bisection.exact_probes import ExactChange

    change, series = found
    assert change.good_commit is not None and change.bad_commit is not None
    return ExactChange(series.key.metric, change.good_commit, change.bad_commit,
                       _end_value(store, series.id, change.good_commit), _end_value(store, series.id, change.bad_commit))


def attribute_to(suite: Suite, store: Store, pending: Sequence[Found], known: BisectResult,
                 progress: Progress) -> dict[int, BisectResult]:
    """Test the culprit of ``known`` on every change of ``pending`` (per case, one probe of the
    culprit and its parent); store and link the attribution of each change it explains. By change id."""
    from perfguard.flows.bisection.exact_probes import attribute_exact
    from perfguard.flows.probe import require_case

    culprit = _culprit(known)
    assert culprit is not None
    done: dict[int, BisectResult] = {}
    by_case: dict[str, list[Found]] = {}
    for f in pending:
        by_case.setdefault(f[1].key.case, []).append(f)
    for case_id, members in by_case.items():
        try:
            case = require_case(suite, case_id)
            results = attribute_exact(suite, case, culprit, [_exact_change(store, f) for f in members], progress,
                                      explanations=known.explanations)
        except UserError as exc:
            progress.log(f"known culprit {culprit[:10]} not tested on {case_id}: {exc}")
            continue
        for (change, _), result in zip(members, results, strict=True):
            if result is None:
                continue
            document_id = store.ingest(result, source="nightly bisect").document_id
            store.link_bisect(change.id, document_id, culprit, None)
            done[change.id] = result
    return done


def _next_to_bisect(pending: Sequence[Found]) -> Found:
    """The change to bisect on its own next: a compile-only metric before a counted one (a
    counted probe costs a counted process), then the largest step."""
    from perfguard.flows.bisection.exact_probes import EXACT_PROBES

    return min(pending, key=lambda f: (EXACT_PROBES[f[1].key.metric].counted, -abs(math.log(f[0].ratio)),
                                       f[0].id))


def attribute_and_bisect(suite: Suite, store: Store, found: Sequence[Found], bisections: Mapping[int, BisectResult],
                         edited: Collection[str], progress: Progress,
                         explain: ProfileSettings | None) -> dict[int, BisectResult]:
    """Attribute or bisect the exact changes of ``found`` (new confirmed changes with their
    series; only regressions are bisected on their own), the culprits of ``bisections`` (the
    night's latency bisections, by change id) tested first; see the module docstring. A change
    whose pipeline the suite edited between the nights (``edited``), or whose range has no two
    ends, is left alone. Returns the attributions and bisections run, by change id."""
    from perfguard.flows.bisection.exact_probes import EXACT_PROBES

    pending = [f for f in found if f[0].id not in bisections and f[1].key.metric in EXACT_PROBES
               and f[0].good_commit and f[0].bad_commit and f[0].good_commit != f[0].bad_commit
               and f[1].key.pipeline not in edited]
    known = [r for r in bisections.values() if _culprit(r) is not None]
    done: dict[int, BisectResult] = {}
    tried: set[str] = set()
    while pending:
        for result in known:
            culprit = _culprit(result)
            if culprit is None or culprit in tried:
                continue
            tried.add(culprit)
            done.update(attribute_to(suite, store, pending, result, progress))
            pending = [f for f in pending if f[0].id not in done]
        regressions = [f for f in pending if f[0].ratio > 1.0]
        if not regressions:
            break
        chosen = _next_to_bisect(regressions)
        pending = [f for f in pending if f[0].id != chosen[0].id]
        bisected = bisect_exact_findings(suite, store, [chosen], progress, explain)
        done.update(bisected)
        known = [r for r in bisected.values() if _culprit(r) is not None]
    return done
