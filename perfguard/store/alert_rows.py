"""Alerts: the changes one night confirms in one commit range, as one thing a team triages.

An *alert* (Perfherder's "alert summary") groups every confirmed change of one (suite, runner
class, commit range): the latency of each case, and the node counts, artifact sizes and compile
times that moved in the same range. A culprit the nightly bisected for one of them is the
culprit of all (a node-count step in a bisected range inherits it; it is not a separate alarm),
with the bisection's own explanation (dimension, top op types, node changes). One culprit is one
alert, whatever metrics found it: ranges whose changes were bisected (or attributed) to the same
commit are one alert, over the narrowest range that holds it (a counted series whose point of
an identical night was missing saw the step over two nights; its node count over one).

Kinds: ``regression`` (some change of the range got worse), ``improvement`` (all got better;
its status is ``improvement``), ``broken`` (the compiler did not build or its passes did not
import; reserved for the broken-night finding).

Lifecycle (:data:`STATUSES`): a regression starts ``untriaged``; people move it to
``acknowledged`` or ``investigating`` (still open: :data:`OPEN_STATUSES`, red), and close it as
``fixed``, ``backed-out``, ``wont-fix``, ``expected`` or ``invalid`` (a false alarm). Closing an
alert closes its changes: ``wont-fix`` and ``expected`` accept the new level (later nights are
compared with it and the alert stops being red), ``invalid`` is counted as a false alarm.
Reopening it (back to an open status) confirms its changes again. Every status change is an
:class:`AlertEvent` (who, when, from, to, note). A later night that takes the step back marks a
regression ``fixed`` with the fixing range (:func:`fixes`); the improvements that took it back are
the fix, closed with a note that names the alert, not an improvement alert of their own (the
store's ``raise_alerts``); the nightly then bisects that range in
the reverse direction for the commit (and pass) that made it fast again: ``fix_commit``,
``fix_pass`` (a range of one commit is its fixing commit without a bisection).

The documents here are typed, frozen and round-trip through ``to_json``/``from_json``; the store
(:mod:`perfguard.store`) keeps them in its ``alerts`` and ``alert_events`` tables
(revision ``0002``; the fixing commit, revision ``0004``; the culprit's subject, author and date,
revision ``0006_alert_culprit_facts``). :func:`group_changes` is the grouping rule, a pure function.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfguard import jsonfields as f
from perfguard.errors import FieldError
from perfguard.jsonfields import JsonDict
from perfguard.results.counted_functions import CountedPair

if TYPE_CHECKING:
    from perfguard.store.rows import Change

#: Format of :meth:`Alert.to_json` (``history alerts --json``, the notify helper's input).
#: History: 1 (2026-12) first version; 2 (2026-12) ``fix_commit``, ``fix_pass`` and
#: ``fix_bisect_document`` (the nightly's bisection of the fixing range; a version-1 alert reads
#: them as null). The explanation's optional ``counted`` (why, counted: the culprit's instruction
#: change by function) came without a version change: an older reader ignores it. So did
#: ``culprit_facts`` (the culprit commit's subject, author and date, recorded when the culprit is
#: attached; an alert written without it reads it as null).
ALERT_VERSION = 2

KINDS = ("regression", "improvement", "broken")
#: How the note of a change that fixed an alert starts (closed, in no alert): the nightly's
#: detection does not raise it again.
FIX_CHANGE_NOTE = "the fix of alert "
#: A regression or broken alert nobody has closed: red.
OPEN_STATUSES = ("untriaged", "acknowledged", "investigating")
#: Closed by a person (or, ``fixed``, by a later night); closing an alert closes its changes.
CLOSED_STATUSES = ("fixed", "backed-out", "wont-fix", "expected", "invalid")
#: The new level is accepted: later nights are compared with it.
ACCEPTED_STATUSES = ("wont-fix", "expected")
#: Every status an alert can have; ``improvement`` is an improvement range's (never red).
STATUSES = (*OPEN_STATUSES, *CLOSED_STATUSES, "improvement")


@dataclass(frozen=True)
class NodeChange:
    """One op type's node count before and after the culprit."""

    op_type: str
    before: int
    after: int

    def to_json(self) -> JsonDict:
        return {"op_type": self.op_type, "before": self.before, "after": self.after}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> NodeChange:
        kind = "alert node change"
        return cls(f.string(data, "op_type", kind), f.integer(data, "before", kind), f.integer(data, "after", kind))


@dataclass(frozen=True)
class AlertExplanation:
    """The culprit's "why", from its bisection: the dimension (``memory``, ``compute``...) with
    its one-line headline, the op types that changed most, their node counts, and where the
    culprit was counted against its parent (a counted night: ``--counts``, ``[measure] counts``)
    the instruction change attributed to functions (``counted``)."""

    dimension: str
    headline: str
    top_op_types: tuple[str, ...] = ()
    node_changes: tuple[NodeChange, ...] = ()
    counted: CountedPair | None = None

    def to_json(self) -> JsonDict:
        data: JsonDict = {"dimension": self.dimension, "headline": self.headline,
                          "top_op_types": list(self.top_op_types),
                          "node_changes": [n.to_json() for n in self.node_changes]}
        if self.counted is not None:
            data["counted"] = self.counted.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> AlertExplanation:
        kind = "alert explanation"
        counted = f.opt_obj(data, "counted", kind)
        return cls(f.string(data, "dimension", kind), f.string(data, "headline", kind),
                   f.string_list(data, "top_op_types", kind),
                   tuple(NodeChange.from_json(n) for n in f.objects(data, "node_changes", kind)),
                   None if counted is None else CountedPair.from_json(counted))


@dataclass(frozen=True)
class AlertChange:
    """One change inside an alert: its case and metric, the series kind, its size (a ratio, after
    / before) with interval, and the id of the change row (``history changes``)."""

    change_id: int
    case: str
    metric: str
    kind: str
    ratio: float
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def is_regression(self) -> bool:
        return self.ratio > 1.0

    def to_json(self) -> JsonDict:
        return {"change_id": self.change_id, "case": self.case, "metric": self.metric, "kind": self.kind,
                "ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> AlertChange:
        kind = "alert change"
        return cls(f.integer(data, "change_id", kind), f.string(data, "case", kind), f.string(data, "metric", kind),
                   f.string(data, "kind", kind), f.number(data, "ratio", kind), f.opt_number(data, "ci_low", kind),
                   f.opt_number(data, "ci_high", kind))


@dataclass(frozen=True)
class AlertEvent:
    """One step of an alert's history: who changed it, when (the store's UTC stamp), from which
    status (None: it was raised) to which, and the note given."""

    who: str
    when: str
    from_status: str | None
    to_status: str
    note: str = ""

    def to_json(self) -> JsonDict:
        return {"who": self.who, "when": self.when, "from_status": self.from_status, "to_status": self.to_status,
                "note": self.note}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> AlertEvent:
        kind = "alert event"
        return cls(f.string(data, "who", kind), f.string(data, "when", kind), f.opt_string(data, "from_status", kind),
                   f.string(data, "to_status", kind), f.string(data, "note", kind))


@dataclass(frozen=True)
class CommitFacts:
    """What the culprit's bisection says of its commit: subject, author and date as git gave them
    (None: the bisection did not say). The store records them once, when it attaches the culprit to
    the alert, so the issue writer and the history site read the alert, not the stored bisection."""

    subject: str | None = None
    author: str | None = None
    date: str | None = None

    def to_json(self) -> JsonDict:
        return {"subject": self.subject, "author": self.author, "date": self.date}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CommitFacts:
        kind = "culprit facts"
        return cls(f.opt_string(data, "subject", kind), f.opt_string(data, "author", kind),
                   f.opt_string(data, "date", kind))


@dataclass(frozen=True)
class Alert:
    """An alert summary: one (suite, runner class, commit range) with every change confirmed in
    it, the shared culprit and its explanation, and its lifecycle (status, assignee, notes, linked
    issue, events oldest first)."""

    id: int
    suite: str
    runner_class: str
    kind: str
    status: str
    first_commit: str | None  # the good side of the range (the night before)
    last_commit: str | None  # the bad side (the night it appeared)
    culprit_commit: str | None = None
    culprit_pass: str | None = None
    explanation: AlertExplanation | None = None
    changes: tuple[AlertChange, ...] = ()
    assignee: str | None = None
    issue_url: str | None = None
    notes: str = ""
    created_at: str = ""
    updated_at: str = ""
    events: tuple[AlertEvent, ...] = ()
    fix_first_commit: str | None = None  # the range a later night saw the reverse step in
    fix_last_commit: str | None = None
    fix_commit: str | None = None  # the commit of that range that made it fast again (bisected)
    fix_pass: str | None = None  # the pass inside it, where the pass bisection found one
    fix_bisect_document_id: int | None = None  # the stored bisection of the fixing range
    culprit_facts: CommitFacts | None = None  # the culprit commit's subject, author, date

    @property
    def fixed_by(self) -> str | None:
        """``<commit> (<pass>)`` of the fixing commit (short sha; the pass when known), else None."""
        if self.fix_commit is None:
            return None
        return self.fix_commit[:10] + (f" ({self.fix_pass})" if self.fix_pass else "")

    @property
    def is_open(self) -> bool:
        """Still red: a regression or broken alert nobody closed."""
        return self.status in OPEN_STATUSES

    @property
    def cases(self) -> tuple[str, ...]:
        return tuple(sorted({c.case for c in self.changes}))

    @property
    def worst(self) -> AlertChange | None:
        """The largest latency change (else the largest of any metric) in the alert's direction."""
        pool = [c for c in self.changes if c.metric == "latency"] or list(self.changes)
        if not pool:
            return None
        return max(pool, key=lambda c: c.ratio if self.kind != "improvement" else 1.0 / c.ratio)

    def to_json(self) -> JsonDict:
        return {"version": ALERT_VERSION, "id": self.id, "suite": self.suite, "runner_class": self.runner_class,
                "kind": self.kind, "status": self.status, "first_commit": self.first_commit,
                "last_commit": self.last_commit, "culprit_commit": self.culprit_commit,
                "culprit_pass": self.culprit_pass,
                "explanation": None if self.explanation is None else self.explanation.to_json(),
                "changes": [c.to_json() for c in self.changes], "assignee": self.assignee,
                "issue_url": self.issue_url, "notes": self.notes, "created_at": self.created_at,
                "updated_at": self.updated_at, "events": [e.to_json() for e in self.events],
                "fix_first_commit": self.fix_first_commit, "fix_last_commit": self.fix_last_commit,
                "fix_commit": self.fix_commit, "fix_pass": self.fix_pass,
                "fix_bisect_document": self.fix_bisect_document_id,
                "culprit_facts": None if self.culprit_facts is None else self.culprit_facts.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Alert:
        kind = "alert"
        version = f.integer(data, "version", kind)
        if version > ALERT_VERSION:
            raise FieldError(f"alert: format version {version} is newer than this perfguard reads "
                               f"({ALERT_VERSION}): upgrade perfguard")
        explanation = f.opt_obj(data, "explanation", kind)
        facts = f.opt_obj(data, "culprit_facts", kind)
        return cls(f.integer(data, "id", kind), f.string(data, "suite", kind), f.string(data, "runner_class", kind),
                   _one_of(f.string(data, "kind", kind), KINDS, "kind"),
                   _one_of(f.string(data, "status", kind), STATUSES, "status"),
                   f.opt_string(data, "first_commit", kind), f.opt_string(data, "last_commit", kind),
                   f.opt_string(data, "culprit_commit", kind), f.opt_string(data, "culprit_pass", kind),
                   None if explanation is None else AlertExplanation.from_json(explanation),
                   tuple(AlertChange.from_json(c) for c in f.objects(data, "changes", kind)),
                   f.opt_string(data, "assignee", kind), f.opt_string(data, "issue_url", kind),
                   f.string(data, "notes", kind), f.string(data, "created_at", kind),
                   f.string(data, "updated_at", kind),
                   tuple(AlertEvent.from_json(e) for e in f.objects(data, "events", kind)),
                   f.opt_string(data, "fix_first_commit", kind), f.opt_string(data, "fix_last_commit", kind),
                   f.opt_string(data, "fix_commit", kind), f.opt_string(data, "fix_pass", kind),
                   f.opt_integer(data, "fix_bisect_document", kind),
                   None if facts is None else CommitFacts.from_json(facts))


def _one_of(value: str, valid: Sequence[str], key: str) -> str:
    if value not in valid:
        raise FieldError(f"alert: field {key!r} must be one of {', '.join(valid)}, found {value!r}")
    return value


# --- grouping -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AlertGroup:
    """What :func:`group_changes` makes of confirmed changes: one future (or existing) alert's key,
    its kind and its changes, with the culprit one of them was bisected to."""

    suite: str
    runner_class: str
    first_commit: str | None
    last_commit: str | None
    kind: str
    changes: tuple[Change, ...]
    culprit_commit: str | None = None
    culprit_pass: str | None = None
    bisect_document_id: int | None = None


def runner_of(runner_class: str) -> str:
    """The runner an alert is raised for: a series' runner class without its fingerprint hash
    (``cpu:3f2a...`` of an absolute series and ``cpu`` of a ratio series are one runner, ``cpu``),
    so a night's paired latency ratios and its absolute node counts share an alert."""
    return runner_class.partition(":")[0]


def group_changes(changes: Sequence[Change], order: Mapping[str, int] | None = None) -> list[AlertGroup]:
    """One group per culprit, else per commit range, of ``changes`` (the confirmed ones; any
    status is taken as given), per suite and runner, in the order each first appears.

    A change bisected (or attributed) to a culprit commit is in that culprit's group, whatever
    metric found it and whatever its series' range (a node count bisected by compiling and the
    instructions its culprit explains). A change without a culprit of its own shares its range's
    (the first bisected change's of the same range: one whose pass was found first, latency
    first), else is in its range's group. A culprit's group spans the narrowest range that holds
    it: the latest good end and the earliest bad end of its changes by ``order`` (commit ->
    position, the nights in order; without it, or for a commit it lacks, the first range seen). A
    group is a regression when any change got worse (ratio > 1: every metric perfguard stores is
    better lower), else an improvement. Its culprit (pass, bisection) is its first bisected
    change's."""
    ranges: dict[tuple[str, str, str | None, str | None], list[Change]] = {}
    for change in changes:
        ranges.setdefault(_range_key(change), []).append(change)
    shared = {key: found.culprit_commit for key, members in ranges.items()
              if (found := _bisected(members)) is not None and found.culprit_commit}
    # (suite, runner, culprit or None, the range when no culprit) -> its changes
    groups: dict[tuple[str, str, str | None, tuple[str | None, str | None]], list[Change]] = {}
    for change in changes:
        suite, runner_class, good, bad = range_key = _range_key(change)
        culprit = change.culprit_commit or shared.get(range_key)
        groups.setdefault((suite, runner_class, culprit, (None, None) if culprit else (good, bad)), []).append(change)
    out = []
    for (suite, runner_class, _, _), members in groups.items():
        good, bad = narrowest_range(list(dict.fromkeys((c.good_commit, c.bad_commit) for c in members)), order or {})
        members.sort(key=lambda c: (c.key.metric != "latency", c.key.case, c.key.metric, c.key.kind, c.id))
        bisected = _bisected(members)
        out.append(AlertGroup(suite, runner_class, good, bad,
                              "regression" if any(c.ratio > 1.0 for c in members) else "improvement",
                              tuple(members), bisected.culprit_commit if bisected else None,
                              bisected.culprit_pass if bisected else None,
                              bisected.bisect_document_id if bisected else None))
    return out


def _range_key(change: Change) -> tuple[str, str, str | None, str | None]:
    return change.key.suite, runner_of(change.key.runner_class), change.good_commit, change.bad_commit


def _bisected(members: Sequence[Change]) -> Change | None:
    """The change whose culprit a group shares: the first with a culprit pass (a pass search
    found it), else the first bisected one (latency first, as the members are sorted)."""
    ordered = sorted(members, key=lambda c: (c.key.metric != "latency", c.key.case, c.key.metric, c.key.kind, c.id))
    return next((c for c in ordered if c.culprit_commit and c.culprit_pass), None) or \
        next((c for c in ordered if c.culprit_commit or c.bisect_document_id is not None), None)


def narrowest_range(ranges: Sequence[tuple[str | None, str | None]],
                    order: Mapping[str, int]) -> tuple[str | None, str | None]:
    """The narrowest of ranges that all hold one culprit: the latest good end and the earliest
    bad end by ``order``; the first range when ``order`` lacks one of their commits."""
    if len(ranges) == 1 or any(c is None or c not in order for r in ranges for c in r):
        return ranges[0]
    return (max((g for g, _ in ranges), key=lambda c: order[c or ""]),
            min((b for _, b in ranges), key=lambda c: order[c or ""]))


def fixes(alert: Alert, group: AlertGroup, exact: Collection[str] = ()) -> bool:
    """Whether the improvement ``group`` (a later range) undoes the regression ``alert``: every
    latency regression of the alert, or else every exact one (node count, artifact size: a revert
    puts them back exactly, where a latency step may stay undecided), or, when it has neither,
    every regression of it has, in the group, a change of the same case, metric and series kind
    that takes back at least half of it (a regression of +8 % is fixed by a step of at most
    1/1.04). The same runner class and suite; any open status (an acknowledged alert too).
    ``exact``: the metrics without noise (``perfguard.history.series_changes.EXACT_METRICS``)."""
    if (group.kind != "improvement" or alert.kind != "regression" or (alert.suite, alert.runner_class) !=
            (group.suite, group.runner_class) or group.last_commit == alert.last_commit):
        return False
    steps = {(c.key.case, c.key.metric, c.key.kind): c.ratio for c in group.changes}
    regressed = [c for c in alert.changes if c.is_regression]
    latency = [c for c in regressed if c.metric == "latency"]
    counted = [c for c in regressed if c.metric in exact]
    return any(evidence and all(steps.get((c.case, c.metric, c.kind), 1.0) <= 1.0 / (1.0 + (c.ratio - 1.0) / 2)
                                for c in evidence)
               for evidence in ((latency, counted) if latency or counted else (regressed,)))


def alert_change(change: Change) -> AlertChange:
    """The :class:`AlertChange` of a change row."""
    return AlertChange(change.id, change.key.case, change.key.metric, change.key.kind, change.ratio, change.ci_low,
                       change.ci_high)


def explanation_of(bisect_document: object) -> AlertExplanation | None:
    """The first explanation of a stored bisect document (its JSON), summarised: the dimension,
    the headline, the op types with the largest change in nodes (up to five) and their counts,
    and its counted attribution where it has one.
    None when the bisection explained nothing or the document is not one perfguard can read."""
    from perfguard.errors import DecodeError
    from perfguard.results.explanation import Explanation

    if not isinstance(bisect_document, Mapping):
        return None
    found = bisect_document.get("explanations")
    if not isinstance(found, list) or not found or not isinstance(found[0], Mapping):
        return None
    try:
        explanation = Explanation.from_json(found[0])
    except DecodeError:
        return None
    nodes: dict[str, list[int]] = {}
    for op in explanation.diff.ops if explanation.diff is not None else ():
        counts = nodes.setdefault(op.op_type, [0, 0])
        counts[0] += op.nodes_before
        counts[1] += op.nodes_after
    moved = sorted(((op, b, a) for op, (b, a) in nodes.items() if a != b), key=lambda t: (-abs(t[2] - t[1]), t[0]))[:5]
    return AlertExplanation(explanation.dimension.label, explanation.dimension.headline,
                            tuple(op for op, _, _ in moved), tuple(NodeChange(op, b, a) for op, b, a in moved),
                            explanation.counted_pair)


def culprit_facts_of(bisect_document: object, commit: str) -> CommitFacts | None:
    """The subject, author and date a stored bisect document (its JSON) gives its culprit
    ``commit`` (matched on 7 characters: a document may hold a short sha); None when it names no
    such culprit, says none of the three, or is not a document perfguard can read."""
    from perfguard.bisect.document import bisect_from_json
    from perfguard.errors import PerfguardError

    try:
        result = bisect_from_json(bisect_document, "bisect document")
    except PerfguardError:
        return None
    for culprit in result.culprits:
        named = culprit.commit
        if named is not None and named.sha and commit.startswith(named.sha[:7]):
            facts = CommitFacts(named.subject, named.author, named.date)
            return facts if facts != CommitFacts() else None
    return None
