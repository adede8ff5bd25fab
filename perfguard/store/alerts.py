"""The store's alerts: confirmed changes grouped into alerts (:func:`perfguard.store.alert_rows.group_changes`),
read back typed (:class:`~perfguard.store.alert_rows.Alert`), and triaged.

Each method is one transaction. Closing an alert (a status of
:data:`~perfguard.store.alert_rows.CLOSED_STATUSES`) closes its changes in the same transaction, so
``history changes`` and the site stop showing them red and the nightly does not raise them again
(``wont-fix``/``expected``: the new level is accepted); reopening it confirms them again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa

from perfguard.errors import UserError
from perfguard.store import schema
from perfguard.store.alert_rows import (
    CLOSED_STATUSES,
    FIX_CHANGE_NOTE,
    OPEN_STATUSES,
    STATUSES,
    Alert,
    AlertEvent,
    AlertExplanation,
    CommitFacts,
    alert_change,
    culprit_facts_of,
    explanation_of,
    fixes,
    group_changes,
    narrowest_range,
)
from perfguard.store.ingest import Ingesting
from perfguard.store.queries import Querying
from perfguard.store.schema import alert_events, alerts, changes

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from perfguard.store.alert_rows import AlertGroup

#: Who raises alerts in their first event.
NIGHTLY = "perfguard nightly"


class Alerting(Ingesting, Querying):
    """The store's alerts: :meth:`raise_alerts`, :meth:`alerts`, :meth:`alert`, :meth:`triage`."""

    def raise_alerts(self, suite: str, *, alarm_metrics: Sequence[str] | None = None,
                     exact_metrics: Sequence[str] = ()) -> list[Alert]:
        """Group the suite's confirmed changes that belong to no alert yet into alerts (one per
        suite, runner and commit range; a range that has an alert already gets the new changes),
        and give each alert of the suite that has no culprit the culprit (and the explanation) of
        a change bisected since. With ``alarm_metrics``, a range whose changes are all of other
        metrics (compile time: noisy, reported, not gated) raises no alert of its own: its changes
        join the range's alert if one is raised later. ``exact_metrics`` (the metrics without noise)
        may show a fix on their own (:func:`perfguard.store.alert_rows.fixes`). Returns the alerts
        raised or changed, oldest first."""
        touched: set[int] = set()
        order = {night.commit: i for i, night in enumerate(self.nights(suite))}
        for group in group_changes([c for c in self.changes(status="confirmed", suite=suite) if c.alert_id is None],
                                   order):
            group, fixed = self._take_fixes(group, exact_metrics)
            touched |= fixed
            if not group.changes:
                continue
            create = alarm_metrics is None or any(c.key.metric in alarm_metrics for c in group.changes)
            alert_id = self._attach(group, order, create=create)
            if alert_id is not None:
                touched.add(alert_id)
        touched |= self._share_culprits(suite)
        return [a for a in self.alerts(suite=suite) if a.id in touched]

    def _attach(self, group: AlertGroup, order: Mapping[str, int], *, create: bool = True) -> int | None:
        """Put the group's changes in the alert of its range, else in the alert of its culprit (one
        alert per culprit: its range narrowed to the group's when that is narrower and free),
        else in a new alert (``create``). Returns the alert's id (None: none was raised)."""
        now = schema.utc_now()
        good, bad = group.first_commit or "", group.last_commit or ""
        status = "untriaged" if group.kind == "regression" else "improvement"
        key = (alerts.c.suite == group.suite, alerts.c.runner_class == group.runner_class,
               alerts.c.good_commit == good, alerts.c.bad_commit == bad)
        columns = (alerts.c.id, alerts.c.kind, alerts.c.status, alerts.c.good_commit, alerts.c.bad_commit)
        with self._connect(write=True) as conn:
            row = conn.execute(sa.select(*columns).where(*key)).first()
            if row is None and group.culprit_commit:
                row = conn.execute(sa.select(*columns).where(
                    alerts.c.suite == group.suite, alerts.c.runner_class == group.runner_class,
                    alerts.c.culprit_commit == group.culprit_commit, alerts.c.kind != "broken")
                    .order_by(alerts.c.id)).first()
                if row is not None and narrowest_range([(row.good_commit, row.bad_commit), (good, bad)], order) == \
                        (good, bad):
                    conn.execute(alerts.update().where(alerts.c.id == row.id).values(good_commit=good, bad_commit=bad))
            if row is None and not create:
                return None
            if row is None:
                alert_id = int(conn.execute(alerts.insert().values(
                    suite=group.suite, runner_class=group.runner_class, good_commit=good, bad_commit=bad,
                    kind=group.kind, status=status, notes="", created_at=now, updated_at=now)
                    .returning(alerts.c.id)).scalar_one())
                _event(conn, alert_id, NIGHTLY, now, None, status, f"{len(group.changes)} change(s) confirmed")
                closed = False
            else:
                alert_id, closed = int(row.id), row.status in CLOSED_STATUSES
                if row.kind == "improvement" and group.kind == "regression":
                    conn.execute(alerts.update().where(alerts.c.id == alert_id).values(
                        kind="regression", status="untriaged", updated_at=now))
                    _event(conn, alert_id, NIGHTLY, now, row.status, "untriaged", "a regression joined the range")
                else:
                    conn.execute(alerts.update().where(alerts.c.id == alert_id).values(updated_at=now))
            values: dict[str, object] = {"alert_id": alert_id}
            if closed:  # the range was triaged closed: what joins it shares that decision
                values["status"] = "closed"
            conn.execute(changes.update().where(changes.c.id.in_([c.id for c in group.changes])).values(**values))
        return alert_id

    def _take_fixes(self, group: AlertGroup, exact: Sequence[str]) -> tuple[AlertGroup, set[int]]:
        """Mark ``fixed`` every open regression alert of the group's suite (untriaged, acknowledged
        or investigating) that the group's improvements undo (:func:`perfguard.store.alert_rows.fixes`),
        with the fixing range. The improvements of the fixed alerts' cases and metrics are the fix:
        they are closed with a note naming the alert and raise no improvement alert. Returns the
        group left (its other changes) and the ids of the alerts fixed."""
        import dataclasses

        improving = dataclasses.replace(group, kind="improvement",
                                        changes=tuple(c for c in group.changes if c.ratio < 1.0))
        if not improving.changes:
            return group, set()
        done: set[int] = set()
        used: set[int] = set()
        fixing = f"{(group.first_commit or '?')[:10]}..{(group.last_commit or '?')[:10]}"
        for alert in self.alerts(suite=group.suite):
            if alert.status not in OPEN_STATUSES or not fixes(alert, improving, exact):
                continue
            self.triage(alert.id, status="fixed", note=f"the reverse step seen in {fixing}", who=NIGHTLY)
            keys = {(c.case, c.metric, c.kind) for c in alert.changes}
            taken = [c.id for c in improving.changes if (c.key.case, c.key.metric, c.key.kind) in keys]
            with self._connect(write=True) as conn:
                conn.execute(alerts.update().where(alerts.c.id == alert.id).values(
                    fix_first_commit=group.first_commit, fix_last_commit=group.last_commit))
                conn.execute(changes.update().where(changes.c.id.in_(taken)).values(
                    status="closed", note=f"{FIX_CHANGE_NOTE}{alert.id} (seen in {fixing})"))
            used.update(taken)
            done.add(alert.id)
        rest = tuple(c for c in group.changes if c.id not in used)
        kind = "regression" if any(c.ratio > 1.0 for c in rest) else "improvement"
        return dataclasses.replace(group, changes=rest, kind=kind), done

    def set_fix(self, alert_id: int, commit: str | None, pass_name: str | None, document_id: int | None,
                note: str, *, who: str = NIGHTLY) -> Alert:
        """Record the commit (and pass) that fixed alert ``alert_id``, found in its fixing range
        (``commit`` None: not found; ``document_id``: the stored bisection, if one ran), with an
        event that says so (``note``; the status does not change)."""
        current = self.alert(alert_id)
        now = schema.utc_now()
        with self._connect(write=True) as conn:
            conn.execute(alerts.update().where(alerts.c.id == alert_id).values(
                fix_commit=commit, fix_pass=pass_name, fix_bisect_document_id=document_id, updated_at=now))
            _event(conn, alert_id, who, now, current.status, current.status, note)
        return self.alert(alert_id)

    def raise_broken(self, suite: str, good: str | None, bad: str, note: str) -> Alert:
        """The ``broken`` alert of ``suite`` (the compiler did not build or its passes did not
        import at ``bad``; ``good``: the last good night's commit): the open one extended (an
        event says it is still broken at ``bad``), else a new one for ``good`` .. ``bad``."""
        now = schema.utc_now()
        found = None
        with self._connect(write=True) as conn:
            row = conn.execute(sa.select(alerts.c.id, alerts.c.status).where(
                alerts.c.suite == suite, alerts.c.kind == "broken", alerts.c.status.in_(OPEN_STATUSES))
                .order_by(alerts.c.id.desc())).first()
            if row is not None:
                alert_id = int(row.id)
                conn.execute(alerts.update().where(alerts.c.id == alert_id).values(updated_at=now))
                _event(conn, alert_id, NIGHTLY, now, row.status, row.status, f"still broken at {bad[:10]}: {note}")
            else:
                found = conn.execute(sa.select(alerts.c.id).where(
                    alerts.c.suite == suite, alerts.c.runner_class == "", alerts.c.good_commit == (good or ""),
                    alerts.c.bad_commit == bad)).first()
                if found is not None:  # broken again at the same range after a fix: reopened below
                    alert_id = int(found.id)
                else:
                    alert_id = int(conn.execute(alerts.insert().values(
                        suite=suite, runner_class="", good_commit=good or "", bad_commit=bad, kind="broken",
                        status="untriaged", notes=note, created_at=now, updated_at=now)
                        .returning(alerts.c.id)).scalar_one())
                    _event(conn, alert_id, NIGHTLY, now, None, "untriaged", f"broken at {bad[:10]}: {note}")
        if row is None and found is not None:
            self.triage(alert_id, status="untriaged", note=f"broken again: {note}", who=NIGHTLY)
        return self.alert(alert_id)

    def fix_broken(self, suite: str, broken_commit: str | None, commit: str) -> list[Alert]:
        """Mark ``fixed`` the open ``broken`` alerts of ``suite``: the night at ``commit`` built
        again (fixing range: the last broken night's commit .. ``commit``)."""
        done = []
        for alert in self.alerts(suite=suite):
            if alert.kind == "broken" and alert.status in OPEN_STATUSES:
                self.triage(alert.id, status="fixed", note=f"builds again at {commit[:10]}", who=NIGHTLY)
                with self._connect(write=True) as conn:
                    conn.execute(alerts.update().where(alerts.c.id == alert.id).values(
                        fix_first_commit=broken_commit, fix_last_commit=commit))
                done.append(self.alert(alert.id))
        return done

    def _share_culprits(self, suite: str) -> set[int]:
        """Give every alert of ``suite`` without a culprit the first bisected change's (one whose
        pass search found the pass first: an attribution to a known culprit has none), and an
        alert whose culprit has no pass the pass a change with that culprit found since; the ids
        changed. The culprit's explanation and its commit's subject, author and date come from
        that change's bisect document, read here once (notify and the site read the alert)."""
        with self._connect(write=False) as conn:
            rows = conn.execute(
                sa.select(alerts.c.id, alerts.c.explanation, changes.c.culprit_commit, changes.c.culprit_pass,
                          changes.c.bisect_document_id)
                .join(changes, changes.c.alert_id == alerts.c.id)
                .where(alerts.c.suite == suite, changes.c.culprit_commit.is_not(None),
                       sa.or_(alerts.c.culprit_commit.is_(None),
                              sa.and_(alerts.c.culprit_pass.is_(None), changes.c.culprit_pass.is_not(None),
                                      changes.c.culprit_commit == alerts.c.culprit_commit)))
                .order_by(alerts.c.id, changes.c.culprit_pass.is_(None), changes.c.id)).all()
        first: dict[int, Any] = {}
        for row in rows:
            first.setdefault(int(row.id), row)
        for alert_id, row in first.items():
            explanation = None
            facts: dict[str, str | None] = {}  # none found: the alert keeps what it has
            if row.bisect_document_id is not None:
                document = self.document(int(row.bisect_document_id))
                found = explanation_of(document)
                explanation = None if found is None else found.to_json()
                named = culprit_facts_of(document, row.culprit_commit)
                if named is not None:
                    facts = {"culprit_subject": named.subject, "culprit_author": named.author,
                             "culprit_date": named.date}
            with self._connect(write=True) as conn:
                conn.execute(alerts.update().where(alerts.c.id == alert_id).values(
                    culprit_commit=row.culprit_commit, culprit_pass=row.culprit_pass,
                    explanation=explanation if explanation is not None else row.explanation,
                    updated_at=schema.utc_now(), **facts))
        return set(first)

    def alerts(self, suite: str | None = None, status: str | None = None) -> list[Alert]:
        """Every alert (of ``suite``, with ``status``, when given), oldest first, with its changes
        and events. An unknown status is a ``UserError`` that lists the valid ones."""
        if status is not None:
            check_alert_status(status)
        query = sa.select(alerts).order_by(alerts.c.created_at, alerts.c.id)
        if suite is not None:
            query = query.where(alerts.c.suite == suite)
        if status is not None:
            query = query.where(alerts.c.status == status)
        return self._alerts(query)

    def alert(self, alert_id: int) -> Alert:
        """One alert; an unknown id is a ``UserError`` naming the ids there are."""
        found = self._alerts(sa.select(alerts).where(alerts.c.id == alert_id))
        if not found:
            with self._connect(write=False) as conn:
                ids = [str(i) for i in conn.execute(sa.select(alerts.c.id).order_by(alerts.c.id)).scalars()]
            known = f"alerts: {', '.join(ids[-20:])}" if ids else "it has no alerts"
            raise UserError(f"history store {self.url}: no alert {alert_id} ({known}; "
                            "`perfguard history alerts` lists them)")
        return found[0]

    def _alerts(self, query: Any) -> list[Alert]:
        with self._connect(write=False) as conn:
            rows = conn.execute(query).all()
            ids = [int(r.id) for r in rows]
            events = conn.execute(sa.select(alert_events).where(alert_events.c.alert_id.in_(ids))
                                  .order_by(alert_events.c.time, alert_events.c.id)).all() if ids else []
        members = self._changes_of(ids)
        by_alert: dict[int, list[AlertEvent]] = {}
        for e in events:
            by_alert.setdefault(int(e.alert_id), []).append(AlertEvent(e.who, e.time, e.from_status, e.to_status,
                                                                       e.note))
        return [Alert(int(r.id), r.suite, r.runner_class, r.kind, r.status, r.good_commit or None,
                      r.bad_commit or None, r.culprit_commit, r.culprit_pass,
                      None if r.explanation is None else AlertExplanation.from_json(r.explanation),
                      tuple(alert_change(c) for c in members.get(int(r.id), [])), r.assignee, r.issue_url, r.notes,
                      r.created_at, r.updated_at, tuple(by_alert.get(int(r.id), [])), r.fix_first_commit,
                      r.fix_last_commit, r.fix_commit, r.fix_pass, r.fix_bisect_document_id,
                      _commit_facts(r))
                for r in rows]

    def _changes_of(self, alert_ids: Sequence[int]) -> dict[int, list[Any]]:
        """The changes of each alert (any status), latency first, then by case and metric."""
        if not alert_ids:
            return {}
        out: dict[int, list[Any]] = {}
        for change in self._changes_where(changes.c.alert_id.in_(list(alert_ids))):
            assert change.alert_id is not None
            out.setdefault(change.alert_id, []).append(change)
        for found in out.values():
            found.sort(key=lambda c: (c.key.metric != "latency", c.key.case, c.key.metric, c.key.kind, c.id))
        return out

    def triage(self, alert_id: int, *, status: str | None = None, note: str | None = None,
               assignee: str | None = None, issue_url: str | None = None, who: str) -> Alert:
        """Change an alert: its status (an event records who, when, from, to and the note; a closed
        status closes its changes, an open one after a closed one confirms them again), its
        assignee (``""`` clears it), its linked issue, and a note (appended to its notes). Without
        a new status no event is recorded (no self-transition). An unknown id or status is a
        ``UserError``."""

        if status is not None:
            check_alert_status(status)
        current = self.alert(alert_id)
        now = schema.utc_now()
        values: dict[str, object] = {"updated_at": now}
        if assignee is not None:
            values["assignee"] = assignee or None
        if issue_url is not None:
            values["issue_url"] = issue_url or None
        if note:
            values["notes"] = f"{current.notes}\n{note}" if current.notes else note
        with self._connect(write=True) as conn:
            conn.execute(alerts.update().where(alerts.c.id == alert_id).values(**values))
            if status is not None and status != current.status:
                conn.execute(alerts.update().where(alerts.c.id == alert_id).values(status=status))
                _event(conn, alert_id, who, now, current.status, status, note or "")
                closing, was_closed = status in CLOSED_STATUSES, current.status in CLOSED_STATUSES
                if closing != was_closed:
                    conn.execute(changes.update().where(changes.c.alert_id == alert_id).values(
                        status="closed" if closing else "confirmed",
                        note=f"alert {alert_id}: {status} ({who})"))
            # An event is a status change: a note, an assignee or a linked issue alone is kept on the
            # alert (notes, assignee, issue_url), never as an ``acknowledged -> acknowledged`` event.
        return self.alert(alert_id)


def check_alert_status(status: str) -> None:
    """``UserError`` unless ``status`` is an alert status (the message lists them)."""
    if status not in STATUSES:
        raise UserError(f"unknown alert status {status!r}: valid statuses are {', '.join(STATUSES)}")


class CulpritColumns(Protocol):
    """An alert row's culprit facts, as the ``alerts`` table holds them."""

    culprit_subject: str | None
    culprit_author: str | None
    culprit_date: str | None


def _commit_facts(row: CulpritColumns) -> CommitFacts | None:
    """An alert row's culprit facts (None: it has no culprit, or its bisection said none)."""
    facts = CommitFacts(row.culprit_subject, row.culprit_author, row.culprit_date)
    return None if facts == CommitFacts() else facts


def _event(conn: Connection, alert_id: int, who: str, when: str, from_status: str | None, to_status: str,
           note: str) -> None:
    conn.execute(alert_events.insert().values(alert_id=alert_id, who=who, time=when, from_status=from_status,
                                              to_status=to_status, note=note))

