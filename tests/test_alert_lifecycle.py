"""The alert a team acts on (issue 33, items 1-3): the nightly explains each new culprit once, a
revert closes an open (even acknowledged) alert as ``fixed`` with no improvement alert of its own,
and an exact change (node count, artifact size) is bisected by compiling only.

The store-level rules first, on the golden run's series; then one replay of a small real compiler
history (a slowdown, its triage, the revert, an exact-only change) through ``perfguard nightly``."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfguard.history.series_changes import EXACT_METRICS
from perfguard.history.store import Store

GOLDEN = Path(__file__).parent / "golden" / "v1"
GOOD, BAD, LATER, OTHER = "a" * 40, "b" * 40, "c" * 40, "e" * 40
CASES = ("resnet_s/none/cpu", "resnet_s/ort_all/cpu")


def _store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}")


def _step(store: Store, case: str, metric: str, ratio: float, good: str, bad: str) -> None:
    ids = {(s.key.case, s.key.metric): s.id for s in store.series() if s.key.kind == "absolute"}
    store.upsert_change(ids[(case, metric)], good_commit=good, bad_commit=bad, time="2026-12-02T03:00:00Z",
                        ratio=ratio, ci_low=None, ci_high=None, status="confirmed")


def _slowed(store: Store) -> int:
    """One case slowed (+7 % latency, +50 % nodes) in GOOD..BAD, raised and acknowledged."""
    store.ingest_file(GOLDEN / "result-run.json")
    _step(store, CASES[0], "latency", 1.07, GOOD, BAD)
    _step(store, CASES[0], "node_count", 1.5, GOOD, BAD)
    (alert,) = store.raise_alerts("smoke")
    store.triage(alert.id, status="acknowledged", who="ada")
    return alert.id


def test_a_revert_closes_an_acknowledged_alert_as_fixed_and_opens_no_improvement_alert(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        alert_id = _slowed(store)
        _step(store, CASES[0], "latency", 0.95, BAD, LATER)  # the revert: latency and nodes back
        _step(store, CASES[0], "node_count", 1 / 1.5, BAD, LATER)
        raised = store.raise_alerts("smoke")
        assert [(a.id, a.status) for a in raised] == [(alert_id, "fixed")]  # no improvement alert
        alert = store.alert(alert_id)
        assert (alert.fix_first_commit, alert.fix_last_commit) == (BAD, LATER)
        assert [(e.from_status, e.to_status) for e in alert.events][-1] == ("acknowledged", "fixed")
        fix = [c for c in store.changes(status="closed") if c.bad_commit == LATER]
        assert len(fix) == 2 and all(c.alert_id is None and c.note.startswith(f"the fix of alert {alert_id}")
                                     for c in fix)
        assert store.raise_alerts("smoke") == [] and [a.id for a in store.alerts()] == [alert_id]


def test_node_count_back_to_its_level_fixes_the_alert_when_latency_stayed_undecided(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        alert_id = _slowed(store)
        _step(store, CASES[0], "node_count", 1 / 1.5, BAD, LATER)  # exact: no noise; latency not decided
        assert store.alert(alert_id).status == "acknowledged" and [a.kind for a in store.raise_alerts("smoke")] == [
            "improvement"]  # without knowing node count is exact: an improvement of its own
        _step(store, CASES[0], "node_count", 1 / 1.5, LATER, OTHER)
        (fixed,) = store.raise_alerts("smoke", exact_metrics=EXACT_METRICS)
        assert (fixed.id, fixed.status) == (alert_id, "fixed")


def test_a_half_taken_back_is_no_fix_and_an_unrelated_improvement_still_raises_its_alert(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        alert_id = _slowed(store)
        _step(store, CASES[0], "node_count", 1 / 1.1, BAD, LATER)  # +50 % nodes, 10 % back: not a revert
        _step(store, CASES[1], "latency", 0.9, BAD, LATER)  # another case got faster
        (improvement,) = store.raise_alerts("smoke")
        assert improvement.kind == "improvement" and len(improvement.changes) == 2
        assert store.alert(alert_id).status == "acknowledged"
        _step(store, CASES[0], "latency", 0.95, LATER, OTHER)  # the revert, beside an unrelated speed-up
        _step(store, CASES[1], "latency", 0.9, LATER, OTHER)
        raised = {a.id: a for a in store.raise_alerts("smoke", exact_metrics=EXACT_METRICS)}
        assert raised[alert_id].status == "fixed"
        (other,) = [a for a in raised.values() if a.id != alert_id]
        assert other.kind == "improvement" and [c.case for c in other.changes] == [CASES[1]]


def test_nightly_explains_new_culprits_unless_told_not_to() -> None:
    from perfguard.cli import build_parser
    from perfguard.cli.nightly import _explain
    from perfguard.profile.explain import ProfileSettings

    parse = build_parser().parse_args
    assert _explain(parse(["nightly", "s.toml"])) == ProfileSettings()
    assert _explain(parse(["nightly", "s.toml", "--profile-runs", "5"])) == ProfileSettings(runs=5)
    assert _explain(parse(["nightly", "s.toml", "--no-explain"])) is None
