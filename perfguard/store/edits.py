"""The suite's pipeline edits, and the series they join (table ``pipeline_edits``, revision
``0005_pipeline_edits``).

A pipeline is hashed into every series key, so a new definition starts new series. Where the suite
file is part of the compiler's repository, its new definition came with a commit: a code change
like any other, not a new environment. A nightly's check against the previous night compiles the
base side with the definition at the base commit (``mode.base_pipelines``), so its document shows
the edit (:func:`perfguard.store.extract.pipeline_edits`); the store keeps it, and
:func:`lineages` joins the series of the old hash and of the new one, of the same case, model,
backend, runner class, metric and kind, into one :class:`Lineage`: the night's change detection,
the site and the alerts read across the edit (a node count of 17 before and 77 after is one step,
at the commit that made it). The nightly finds that commit in the nights' range
(:meth:`Editing.set_pipeline_edit_commit`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa

from perfguard.store.extract import PipelineEditRow
from perfguard.store.queries import Querying
from perfguard.store.rows import Point, Series
from perfguard.store.schema import changes, pipeline_edits, points, series


@dataclass(frozen=True)
class PipelineEdit(PipelineEditRow):
    """A recorded edit (row ``id``): a pipeline the suite file defined anew between two nights
    (``good_commit`` .. ``bad_commit``), its hash and passes before and after, and the commit that
    made the edit (None until found, or when it could not be: ``note`` says why)."""

    id: int = 0
    commit: str | None = None
    note: str = ""

    @property
    def passes(self) -> str:
        """``a, b, c -> a, c, b``: the pass lists before and after."""
        return f"{', '.join(self.passes_before) or '(no passes)'} -> {', '.join(self.passes_after) or '(no passes)'}"

    def describe(self) -> str:
        """One line: the pipeline, where it was edited (the commit, else the nights' range) and how."""
        where = (f"at {self.commit[:10]}" if self.commit
                 else f"within {self.good_commit[:10]}..{self.bad_commit[:10]}")
        return f"pipeline {self.pipeline} edited {where}: {self.passes}"


@dataclass(frozen=True)
class Lineage:
    """The series of one case, model, backend, runner class, metric and kind joined across the
    suite's pipeline edits: their points in time order and, by index of ``points``, the edit that
    began there (an index where the pipeline hash changed without a recorded edit is no lineage:
    those series stay apart)."""

    series: tuple[Series, ...]  # oldest first
    points: tuple[Point, ...]
    edits: Mapping[int, PipelineEdit] = field(default_factory=dict)

    @property
    def newest(self) -> Series:
        """The series of the newest point: the pipeline as the suite defines it now."""
        return self.series_at(len(self.points) - 1) if self.points else self.series[-1]

    def series_at(self, index: int) -> Series:
        """The series that holds ``points[index]``."""
        by_id = {s.id: s for s in self.series}
        return by_id[self.points[index].series_id]


def lineages(found: Sequence[Series], points_of: Mapping[int, Sequence[Point]],
             edits: Sequence[PipelineEdit]) -> list[Lineage]:
    """Every series of ``found`` in one :class:`Lineage` (alone when no edit joins it to another):
    series whose keys differ only in the pipeline hash are joined where an edit of the suite's
    pipeline of that name took the one hash to the other. Pure: ``points_of`` gives each series'
    points (time order), ``edits`` the suite's recorded edits."""
    groups: dict[tuple[str, ...], list[Series]] = {}
    for s in found:
        k = s.key
        groups.setdefault((k.suite, k.case, k.model_hash, k.backend, k.runner_class, k.metric, k.kind), []).append(s)
    out = []
    for members in groups.values():
        joined = _joined(members, edits)
        for component in joined:
            out.append(_lineage(component, points_of, edits))
    return out


def _joined(members: Sequence[Series], edits: Sequence[PipelineEdit]) -> list[list[Series]]:
    """``members`` (one case, metric...) split into the sets an edit joins (union-find on hashes)."""
    parent = {s.key.pipeline_hash: s.key.pipeline_hash for s in members}

    def root(h: str) -> str:
        while parent[h] != h:
            parent[h] = parent[parent[h]]
            h = parent[h]
        return h

    if len(members) > 1:
        pipeline, suite = members[0].key.pipeline, members[0].key.suite
        for e in edits:
            if (e.suite, e.pipeline) == (suite, pipeline) and e.before_hash in parent and e.after_hash in parent:
                parent[root(e.after_hash)] = root(e.before_hash)
    sets: dict[str, list[Series]] = {}
    for s in members:
        sets.setdefault(root(s.key.pipeline_hash), []).append(s)
    return list(sets.values())


def _lineage(component: Sequence[Series], points_of: Mapping[int, Sequence[Point]],
             edits: Sequence[PipelineEdit]) -> Lineage:
    ordered = sorted(component, key=lambda s: (s.first_time, s.id))
    if len(ordered) == 1:
        return Lineage(tuple(ordered), tuple(points_of.get(ordered[0].id, ())))
    merged = sorted((p for s in ordered for p in points_of.get(s.id, ())), key=lambda p: (p.time, p.document_id))
    edits = [e for e in edits if e.suite == ordered[0].key.suite]
    hashes = {s.id: s.key.pipeline_hash for s in ordered}
    at: dict[int, PipelineEdit] = {}
    for i in range(1, len(merged)):
        before, after = hashes[merged[i - 1].series_id], hashes[merged[i].series_id]
        if before == after:
            continue
        edit = next((e for e in edits if (e.before_hash, e.after_hash) == (before, after)
                     and e.bad_commit == merged[i].commit), None) or \
            next((e for e in edits if (e.before_hash, e.after_hash) == (before, after)), None)
        if edit is not None:
            at[i] = edit
    return Lineage(tuple(ordered), tuple(merged), at)


class Editing(Querying):
    """The store's pipeline edits: :meth:`pipeline_edits`, :meth:`set_pipeline_edit_commit`,
    :meth:`attribute_change`, :meth:`lineages`."""

    def pipeline_edits(self, suite: str | None = None) -> list[PipelineEdit]:
        """The recorded edits (of ``suite``, if given), oldest night first."""
        query = sa.select(pipeline_edits).order_by(pipeline_edits.c.id)
        if suite is not None:
            query = query.where(pipeline_edits.c.suite == suite)
        with self._connect(write=False) as conn:
            rows = conn.execute(query).all()
        return [PipelineEdit(r.suite, r.pipeline, r.before_hash, r.after_hash,
                             tuple(str(p) for p in r.passes_before or ()), tuple(str(p) for p in r.passes_after or ()),
                             r.good_commit, r.bad_commit, int(r.id), r.commit_sha, r.note or "") for r in rows]

    def set_pipeline_edit_commit(self, edit: PipelineEdit, commit: str | None, note: str) -> PipelineEdit:
        """Record the commit that made ``edit`` (None: not found) and how it was found (``note``)."""
        with self._connect(write=True) as conn:
            conn.execute(pipeline_edits.update().where(pipeline_edits.c.id == edit.id)
                         .values(commit_sha=commit, note=note))
        return dataclasses.replace(edit, commit=commit, note=note)

    def attribute_change(self, change_id: int, commit: str | None, note: str) -> None:
        """Give change ``change_id`` the commit of a pipeline edit as its culprit (None: none found;
        no bisect document: the suite file's history named it) and the note that says so."""
        self._update_change(change_id, changes.update().where(changes.c.id == change_id)
                            .values(culprit_commit=commit, note=note))

    def lineages(self, suite: str) -> list[Lineage]:
        """The series of ``suite`` joined across its pipeline edits (:func:`lineages`)."""
        found = self.series(suite=suite)
        ids = sa.select(series.c.id).where(series.c.suite == suite)
        return lineages(found, self._points(points.c.series_id.in_(ids)), self.pipeline_edits(suite))
