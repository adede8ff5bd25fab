"""The typed rows the history store answers with: :class:`Series`, :class:`Point`,
:class:`Night`, :class:`Change`, and what an ingest did (:class:`Ingested`).

A series is named by its :class:`~perfguard.store.extract.SeriesKey`, which lives with the
document rows that carry it (:mod:`perfguard.store.extract`) and is re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfguard.store.extract import SeriesKey as SeriesKey

if TYPE_CHECKING:
    from sqlalchemy import Row


@dataclass(frozen=True)
class Series:
    """A series with its number of points, first and last time and last value."""

    id: int
    key: SeriesKey
    points: int
    first_time: str
    last_time: str
    last_value: float


@dataclass(frozen=True)
class Point:
    """One value of a series from one document (see :mod:`perfguard.store.extract`)."""

    series_id: int
    document_id: int
    time: str
    commit: str | None
    value: float
    ci_low: float | None
    ci_high: float | None
    values: tuple[float, ...]
    base_commit: str | None
    decision: str | None


@dataclass(frozen=True)
class Ingested:
    """What an ingest did: the document's id and kind, whether it was new, the points it added."""

    document_id: int
    kind: str
    new: bool
    points: int


@dataclass(frozen=True)
class Night:
    """A nightly run of a suite: the commit it measured and the document it stored. A ``broken``
    night (the commit did not build or its passes did not import) stored none; ``note`` says why."""

    id: int
    suite: str
    commit: str
    time: str
    document_id: int | None
    status: str = "good"
    note: str = ""

    @property
    def broken(self) -> bool:
        return self.status == "broken"


@dataclass(frozen=True)
class Change:
    """A change found in a series: commit range, size with interval, status, attribution."""

    id: int
    series_id: int
    key: SeriesKey
    good_commit: str | None
    bad_commit: str | None
    time: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    status: str
    bisect_document_id: int | None
    culprit_commit: str | None
    culprit_pass: str | None
    note: str
    alert_id: int | None = None  # the alert it belongs to (perfguard.store.alert_rows), once grouped


def series_key(row: Any, *, series_columns: bool = False) -> SeriesKey:
    """The key of a ``series`` row (``series_columns``: a mapping row of a join, addressed by the
    series table's columns)."""
    if series_columns:
        from perfguard.store.schema import series

        s = series.c
        return SeriesKey(row[s.suite], row[s.case_id], row[s.model_hash], row[s.pipeline_hash], row[s.backend],
                         row[s.runner_class], row[s.metric], row[s.kind])
    return SeriesKey(row.suite, row.case_id, row.model_hash, row.pipeline_hash, row.backend, row.runner_class,
                     row.metric, row.kind)


def night_of(row: Row[Any]) -> Night:
    """The :class:`Night` of a ``nights`` row."""
    return Night(int(row.id), row.suite, row.commit_sha, row.time,
                 None if row.document_id is None else int(row.document_id), row.status or "good", row.note or "")
