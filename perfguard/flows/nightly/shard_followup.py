"""A sharded night: N jobs measure a runner class's cases, one follow-up job decides.

``perfguard nightly SUITE --shard K/N`` checks its part of the cases against the last night (as
``run_nightly`` does) and stores it as a night of its own, with its ``ShardInfo``; it detects
nothing and bisects nothing. Every shard writes to the one store (PostgreSQL for a fleet, which
takes concurrent writers). ``perfguard nightly SUITE --follow-up`` then runs once per runner class
over the store: the same-job re-check of tonight's latency regressions (in a fresh job, as an
unsharded night re-checks them), change-point detection over every series, confirmation,
alerts, and one bisection per new regression (:func:`perfguard.flows.nightly.night.finish_night`, the
code an unsharded night runs).

Which night a shard is checked against: :func:`perfguard.flows.shards.shard_base`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfguard.errors import UserError
from perfguard.progress import Progress
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings

if TYPE_CHECKING:
    from perfguard.flows.nightly.night import NightReport
    from perfguard.profile.explain import ProfileSettings
    from perfguard.store import Night, Store


def _tonight(store: Store, suite: str) -> tuple[Night, Night | None, Night | None]:
    """Tonight's newest night, the night before tonight's commit (any status) and the good night
    before it; ``UserError`` before any night."""
    nights = store.nights(suite)
    if not nights:
        raise UserError(f"nightly --follow-up: the history store {store.url} holds no night of suite {suite!r}; "
                        "run the shards first (perfguard nightly SUITE --shard K/N)")
    tonight = nights[-1]
    before = [n for n in nights if n.commit != tonight.commit]
    last = before[-1] if before else None
    previous = next((n for n in reversed(before) if not n.broken), None)
    return tonight, last, previous


def _recheck_tonight(suite: Suite, cases: list[CaseSpec], store: Store, commit: str, settings: CheckSettings,
                     progress: Progress) -> dict[str, str]:
    """Re-check, in a fresh job, every selected case whose latency a shard called a regression
    tonight (a paired ratio point at tonight's commit), or an improvement of a case of an open
    regression alert (a fix); what the re-check said per case."""
    from perfguard.flows.check import check_against_ref
    from perfguard.flows.nightly.recheck import open_regression_cases, recheck_said

    selected = {c.id: c for c in cases}
    fixing = open_regression_cases(store, suite.name)
    by_base: dict[str, list[str]] = {}
    improved: set[str] = set()
    for series in store.series(suite=suite.name, metric="latency", kind="ratio"):
        if series.key.case not in selected:
            continue
        tonight = [p for p in store.points(series.id) if p.commit == commit]
        if not tonight or tonight[-1].decision != "different" or not tonight[-1].base_commit:
            continue
        if tonight[-1].value < 1.0 and series.key.case in fixing:
            improved.add(series.key.case)
        elif tonight[-1].value <= 1.0:
            continue
        by_base.setdefault(tonight[-1].base_commit, []).append(series.key.case)
    said: dict[str, str] = {}
    for base, found in sorted(by_base.items()):
        progress.log(f"re-checking {len(found)} case(s) in a fresh job: {', '.join(sorted(found))}")
        again = check_against_ref(suite, [selected[c] for c in sorted(set(found))], base, settings, progress)
        said.update(recheck_said(again, set(found) - improved, improved))
    return said


def follow_up(suite: Suite, cases: list[CaseSpec], store: Store, settings: CheckSettings, progress: Progress,
              *, bisect: bool = True, recheck: bool = True, explain: ProfileSettings | None = None) -> NightReport:
    """The follow-up of a sharded night (see the module docstring): re-check, detect, confirm,
    alert and bisect once over everything tonight's shards stored."""
    from perfguard.flows.nightly.night import NightReport, finish_night

    night, last, previous = _tonight(store, suite.name)
    rechecked = _recheck_tonight(suite, cases, store, night.commit, settings, progress) if recheck else {}
    report = NightReport(suite.name, night, previous, None, rechecked=rechecked)
    return finish_night(suite, cases, store, settings, progress, report, bisect=bisect, last=last, explain=explain)
