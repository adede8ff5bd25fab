"""The two sides of a verdict row, found in the results a verdict document embeds: shared by the
report model, the rows' reasons and the pass-trace explanation, which import nothing else of the
report."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfguard.compare.verdicts import Verdict, VerdictsDocument
    from perfguard.results import CaseEntry, ResultDocument

__all__ = ["entries_by_id", "pair_entries", "side_documents"]


def entries_by_id(document: ResultDocument) -> dict[str, CaseEntry]:
    return {entry.id: entry for entry in document.cases}


def side_documents(document: VerdictsDocument) -> list[tuple[str, ResultDocument]]:
    """The result documents a verdict document embeds, with their labels (none when it embeds none)."""
    return [] if document.results is None else list(document.results.sides())


def pair_entries(document: VerdictsDocument, row: Verdict) -> tuple[CaseEntry | None, CaseEntry | None, int, int]:
    """The baseline and candidate entries of a verdict row and the indices of their documents:
    two side documents (``base``/``head``, ``baseline``/``candidate``), or one ``head`` document
    whose entry of the row's baseline pipeline is the baseline (``--against-pipeline``)."""
    sides = side_documents(document)
    case = row.case
    if len(sides) >= 2:
        return entries_by_id(sides[0][1]).get(case), entries_by_id(sides[1][1]).get(case), 0, 1
    if not sides:
        return None, None, 0, 0
    entries = entries_by_id(sides[0][1])
    candidate = entries.get(case)
    baseline = None
    if candidate is not None:
        for entry in entries.values():
            if (entry.model, entry.runner, entry.pipeline) == (candidate.model, candidate.runner, row.baseline):
                baseline = entry
                break
    return baseline, candidate, 0, 0
