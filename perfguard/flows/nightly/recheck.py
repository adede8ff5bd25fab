"""The nightly's same-job re-check: a latency verdict of tonight's paired check is confirmed (or
closed) by checking the case again at once in a fresh job (new worker processes).

Two kinds of verdict are re-checked: every latency *regression* (a new alarm must hold), and every
latency *improvement* of a case that an open regression alert holds (untriaged, acknowledged or
investigating): the reverting night's speed-up is then recorded as a confirmed change the same
night, and the alert it takes back is marked ``fixed`` (:func:`perfguard.store.alert_rows.fixes`).
Other improvements are reported and wait for the next night, as before.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from perfguard.progress import Progress
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings

if TYPE_CHECKING:
    from perfguard.compare.verdicts import VerdictsDocument
    from perfguard.store import Store


def open_regression_cases(store: Store, suite: str) -> set[str]:
    """The cases with a latency regression in an open alert of ``suite`` (what a fix takes back)."""
    from perfguard.store.alert_rows import OPEN_STATUSES

    return {c.case for a in store.alerts(suite=suite) if a.kind == "regression" and a.status in OPEN_STATUSES
            for c in a.changes if c.metric == "latency" and c.is_regression}


def to_recheck(verdicts: VerdictsDocument, fixing: Collection[str]) -> tuple[list[str], list[str]]:
    """(regressed, improved): the cases whose latency the check called a regression, and those it
    called an improvement among ``fixing`` (the cases of open regression alerts)."""
    rows = [v for v in verdicts.verdicts if v.metric == "latency"]
    regressed = sorted({v.case for v in rows if v.is_regression})
    improved = sorted({v.case for v in rows if v.decision == "different" and v.direction == "improvement"
                       and v.case in fixing} - set(regressed))
    return regressed, improved


def recheck(suite: Suite, cases: list[CaseSpec], base: str, settings: CheckSettings, progress: Progress,
            verdicts: VerdictsDocument, store: Store) -> dict[str, str]:
    """Re-check, in a fresh job, the cases :func:`to_recheck` names; what the re-check said per
    case (:func:`recheck_said`)."""
    from perfguard.flows.check import check_against_ref

    regressed, improved = to_recheck(verdicts, open_regression_cases(store, suite.name))
    if not regressed and not improved:
        return {}
    what = ", ".join(regressed + [f"{c} (improved: a fix?)" for c in improved])
    progress.log(f"re-checking {len(regressed) + len(improved)} case(s) in a fresh job: {what}")
    again = check_against_ref(suite, [c for c in cases if c.id in {*regressed, *improved}], base, settings, progress,
                              head_built=True)  # run_nightly built the working tree before anything else
    return recheck_said(again, regressed, improved)


def recheck_said(again: VerdictsDocument, regressed: Collection[str], improved: Collection[str] = ()
                 ) -> dict[str, str]:
    """What a re-check said per case: "regression +5.1 % [...]" (a regressed case that held),
    "improvement -4.7 % [...]" (an improved case that held) or "did not hold: ..."."""
    said = {}
    for row in again.verdicts:
        if row.metric != "latency" or (row.case not in regressed and row.case not in improved):
            continue
        c = row.comparison
        text = f"{c.ratio - 1:+.1%} [{c.ci_low - 1:+.1%}, {c.ci_high - 1:+.1%}]"
        if row.case in regressed and row.is_regression:
            said[row.case] = f"regression {text}"
        elif row.case in improved and row.decision == "different" and row.direction == "improvement":
            said[row.case] = f"improvement {text}"
        else:
            said[row.case] = f"did not hold: {row.decision} {text}"
    return said


def held(said: str | None) -> bool:
    """Whether a re-check's answer confirms the night's verdict (regression or improvement)."""
    return said is not None and said.startswith(("regression", "improvement"))
