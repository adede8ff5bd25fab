"""The team's figures on the history site's alerts page: how old the open alerts are, how fast
alerts are triaged, how they end, and how many were false alarms.

Pure functions of the store's alerts (:class:`~perfguard.store.alert_rows.Alert`, with their
events) and the moment the site is built: no I/O, so a test gives the alerts and ``now`` and gets
the figures exactly.

* **Age** of an alert: days from its creation to ``now``.
* **Time to triage** of an alert: from its creation to the first event that moves it out of
  ``untriaged`` (whoever moved it: a person, or the nightly marking it ``fixed``). An alert never
  ``untriaged`` (an improvement) or still ``untriaged`` has none. The site shows the median over
  the alerts created in the last :data:`TRIAGE_WINDOW_DAYS` days that have one.
* **Final status**: the alerts counted by their current status.
* **False-alarm rate**: ``invalid`` alerts over closed alerts (any of
  :data:`~perfguard.store.alert_rows.CLOSED_STATUSES`); none when no alert is closed.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from perfguard.store.alert_rows import CLOSED_STATUSES, STATUSES, Alert

#: The window of the median time to triage, in days before the build.
TRIAGE_WINDOW_DAYS = 30


def stamp_time(text: str) -> datetime | None:
    """A store stamp (``2026-12-01T12:20:45.161989Z``; any ISO 8601 time, naive as UTC) as an
    aware datetime; None when ``text`` is empty or not a time."""
    value = text.strip()
    if not value:
        return None
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def age_days(alert: Alert, now: datetime) -> float | None:
    """Days from the alert's creation to ``now`` (None: no creation time)."""
    created = stamp_time(alert.created_at)
    return None if created is None else (now - created) / timedelta(days=1)


def time_to_triage(alert: Alert) -> float | None:
    """Seconds from the alert's creation to the first event that moves it out of ``untriaged``;
    None when it never left ``untriaged`` (or never was)."""
    created = stamp_time(alert.created_at)
    moved = next((e for e in alert.events if e.from_status == "untriaged" and e.to_status != "untriaged"), None)
    when = None if moved is None else stamp_time(moved.when)
    if created is None or when is None:
        return None
    return max((when - created).total_seconds(), 0.0)


@dataclass(frozen=True)
class TeamFigures:
    """The alerts page's figures at ``now`` (the build's UTC stamp).

    ``triage_times``: the time to triage (seconds) of each alert created within ``window_days``
    before ``now`` that left ``untriaged``, in alert order; ``by_status``: (status, count) for
    every status some alert has, in :data:`~perfguard.store.alert_rows.STATUSES` order;
    ``closed`` and ``invalid``: how many alerts are closed, and how many of them ``invalid``."""

    now: str
    window_days: int
    triage_times: tuple[float, ...]
    by_status: tuple[tuple[str, int], ...]
    closed: int
    invalid: int

    @property
    def median_time_to_triage(self) -> float | None:
        """The median of :attr:`triage_times` in seconds (None: no alert in the window was triaged)."""
        return statistics.median(self.triage_times) if self.triage_times else None

    @property
    def false_alarm_rate(self) -> float | None:
        """``invalid / closed`` (None: no alert is closed yet)."""
        return self.invalid / self.closed if self.closed else None

    @property
    def total(self) -> int:
        return sum(count for _, count in self.by_status)

    @property
    def final_by_status(self) -> tuple[tuple[str, int], ...]:
        """:attr:`by_status` of the closed (final) statuses only: an ``investigating`` alert is
        still open and is counted under the open alerts."""
        return tuple((status, n) for status, n in self.by_status if status in CLOSED_STATUSES)


def team_figures(alerts: Sequence[Alert], now: datetime, window_days: int = TRIAGE_WINDOW_DAYS) -> TeamFigures:
    """The figures of ``alerts`` at ``now`` (an aware datetime)."""
    since = now - timedelta(days=window_days)
    times = []
    for alert in alerts:
        created = stamp_time(alert.created_at)
        took = time_to_triage(alert)
        if created is not None and created >= since and took is not None:
            times.append(took)
    counts = {status: sum(1 for a in alerts if a.status == status) for status in STATUSES}
    closed = sum(counts[s] for s in CLOSED_STATUSES)
    stamp = now.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    return TeamFigures(stamp, window_days, tuple(times), tuple((s, n) for s, n in counts.items() if n), closed,
                       counts["invalid"])


def span(seconds: float | None) -> str:
    """A duration as the alerts page prints it: ``45 min``, ``15.0 h``, ``3.2 days``; ``no data``."""
    if seconds is None:
        return "no data"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
