"""The timing-quality note of a result's timed cases: one line for each whose values are not one
mode at its backend's usual spread (``perfguard.stats.modality``), for ``run`` and ``check``.

It says what was seen and the likely cause, where the interval alone would only have widened (an
``unknown`` verdict with no reason given: issue 45)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfguard.compare.verdicts import VerdictsDocument
    from perfguard.results import ResultDocument

__all__ = ["check_timing_notes", "timing_notes"]


def timing_notes(document: ResultDocument) -> list[str]:
    """``timing quality: CASE: what was seen: likely cause`` for each flagged case, in order."""
    from perfguard.backends import usual_cv
    from perfguard.stats.modality import timing_quality

    notes = []
    for case in document.cases:
        latency = case.metrics.latency_s
        if not case.ok or latency is None:
            continue
        quality = timing_quality(latency.per_worker, usual_cv(str(case.key.backend.get("name", ""))))
        if quality.flagged:
            notes.append(f"timing quality: {case.id}: {quality.note()}")
    return notes


def check_timing_notes(document: VerdictsDocument) -> list[str]:
    """``timing_notes`` of every result document a check's verdicts embed (``baseline: `` or
    ``candidate: `` before each when there are two)."""
    from perfguard.report.pairs import side_documents

    sides = side_documents(document)
    return [note if len(sides) == 1 else f"{label}: {note}" for label, result in sides for note in timing_notes(result)]
