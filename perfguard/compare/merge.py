"""One document from the shards of a run or a check (``perfguard merge``).

Shards are the documents of ``run|check --shard K/N`` (their ``shard`` object, a
:class:`perfguard.results.shard.ShardInfo`). They merge only when they are the N parts of one
run: the same suite hash, commits, settings and case list (``ShardInfo.run_key``), every K from 1
to N exactly once, no case in two shards, and each shard holding exactly what its ``shard`` object
lists (format 2: ``part``, its cases; ``rows``, a check's verdict rows), so a shard whose rows were
removed is refused rather than merged without them. Anything else is a ``UserError`` naming the
shard. A shard of format 1 lists neither: it merges with a warning that its rows are unchecked.

The verdicts of a check are merged as one family, exactly as an unsharded check decides: every
row is taken back to what its test said (:func:`perfguard.compare.check.uncorrected`) and
Benjamini-Hochberg runs again over the union (:func:`perfguard.compare.check.control_false_discoveries`,
the production function, at the level of the check's plan), so a p-value that one shard's small
family let through but the whole family does not is UNKNOWN, and the other way round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TypeVar

from perfguard.compare.check import control_false_discoveries, uncorrected
from perfguard.compare.verdicts import ComparedResults, Summary, Verdict, VerdictsDocument, VerdictsSettings
from perfguard.errors import FieldError, UserError
from perfguard.results import ResultDocument
from perfguard.results.shard import ShardInfo
from perfguard.runners.fingerprint import fingerprint_differences
from perfguard.stats.adaptive import SequentialPlan

Doc = TypeVar("Doc", ResultDocument, VerdictsDocument)

_PARTS = ("n", "case list", "suite hash", "settings", "head commit", "base commit")


def ordered_shards(documents: Sequence[tuple[str, Doc]]) -> list[tuple[str, Doc, ShardInfo]]:
    """The shards by K, once each refusals checked: every document a shard of the same run, every K
    from 1 to N exactly once. ``documents`` are (path, document)."""
    found: list[tuple[str, Doc, ShardInfo]] = []
    for path, document in documents:
        if document.shard is None:
            raise UserError(f"{path}: not a shard (no 'shard' object; written without --shard K/N)")
        found.append((path, document, document.shard))
    first_path, _, first = found[0]
    for path, _, info in found[1:]:
        if info.run_key() != first.run_key():
            differs = [name for name, a, b in zip(_PARTS, info.run_key(), first.run_key(), strict=True) if a != b]
            raise UserError(f"{path}: shard {info.label} is from a different run than {first_path} "
                            f"(its {' and '.join(differs)} differ{'s' if len(differs) == 1 else ''}); "
                            "merge the shards of one run")
    by_k: dict[int, str] = {}
    for path, _, info in found:
        if info.k in by_k:
            raise UserError(f"shard {info.label} is given twice ({by_k[info.k]} and {path})")
        by_k[info.k] = path
    if len(by_k) < first.n:  # n is bounded (ShardInfo.from_json); the message names five at most
        missing = [f"{k}/{first.n}" for k in range(1, first.n + 1) if k not in by_k]
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise UserError(f"shard{'s' if len(missing) > 1 else ''} {shown} "
                        f"{'are' if len(missing) > 1 else 'is'} missing (give all {first.n} shard documents)")
    return sorted(found, key=lambda item: item[2].k)


def _holds_its_part(path: str, info: ShardInfo, cases: Sequence[str] | None,
                    rows: Sequence[tuple[str, str]] | None) -> str:
    """Refuses a shard whose cases (``cases``: the ids a run's results hold) or verdict rows
    (``rows``: a check's, the rows merge decides from) differ from what its ``shard`` object lists;
    a warning (or "") for a format-1 shard, which lists none."""
    if info.part is None:
        return (f"{path}: shard {info.label} was written by an older perfguard (shard format 1) and does not list "
                "its cases: its rows cannot be checked")
    lost = sorted(set(info.part) - set(cases)) if cases is not None else []
    extra = sorted(set(cases) - set(info.part)) if cases is not None else []
    if extra or lost:
        what = f"no result of case {lost[0]}" if lost else f"case {extra[0]}, which is not its part"
        raise UserError(f"{path}: shard {info.label} holds {what} ({len(lost)} missing, {len(extra)} extra); "
                        "merge the documents as `check|run --shard` wrote them")
    if rows is not None:
        if info.rows is None:
            raise UserError(f"{path}: shard {info.label} does not list its verdict rows (shard format 2 written "
                            "without 'rows'); merge the documents as `check --shard` wrote them")
        if sorted(rows) != sorted(info.rows):
            missing = sorted(set(info.rows) - set(rows))
            said = f"its row {missing[0][0]} {missing[0][1]} is missing" if missing else "its rows differ from the list"
            raise UserError(f"{path}: shard {info.label}: {said} ({len(rows)} rows, {len(info.rows)} listed); "
                            "merge the documents as `check --shard` wrote them")
    return ""


def _disjoint(cases_by_shard: Sequence[tuple[str, Sequence[str]]], whole: Sequence[str]) -> None:
    """Refuses a case in two shards or outside the whole (the shards were partitioned differently)."""
    known = set(whole)
    seen: dict[str, str] = {}
    for label, cases in cases_by_shard:
        for case in cases:
            if case not in known:
                raise UserError(f"shard {label}: case {case} is not in the run's case list")
            if case in seen and seen[case] != label:
                raise UserError(f"case {case} is in shards {seen[case]} and {label}: the shards were partitioned "
                                "differently (the same suite, selection and store state give the same parts)")
            seen[case] = label


def merge_results(shards: Sequence[tuple[str, ResultDocument]]) -> tuple[ResultDocument, list[str]]:
    """The result document of the whole run and the warnings (a runner whose environment differs
    between shards: the first shard's is kept): the cases in the order of the whole."""
    ordered = ordered_shards(shards)
    info = ordered[0][2]
    unchecked = [_holds_its_part(p, i, [c.id for c in d.cases], None) for p, d, i in ordered]
    _disjoint([(i.label, [c.id for c in d.cases]) for _, d, i in ordered], info.cases)
    merged = concatenated([d for _, d, _ in ordered], info.cases)
    missing = sorted(set(info.cases) - {c.id for c in merged.cases})
    if missing:
        raise UserError(f"the shards hold no result of {len(missing)} case(s) of the run: {', '.join(missing[:5])}")
    return merged, [w for w in unchecked if w] + _environment_warnings([(i.label, d) for _, d, i in ordered])


def concatenated(documents: Sequence[ResultDocument], order: Sequence[str]) -> ResultDocument:
    """One result document of the cases of ``documents`` (in the order of ``order``; a case held
    by several, the first one's): the first document's suite, compiler and environment per
    runner, every model, the earliest start and the latest finish; no ``shard``."""
    rank = {case: i for i, case in enumerate(order)}
    # A case in several documents is one case: a stored baseline is the whole baseline in every shard.
    unique = {c.id: c for d in reversed(documents) for c in d.cases}
    cases = sorted(unique.values(), key=lambda c: rank.get(c.id, len(rank)))
    first = documents[0]
    environment, models = dict(first.environment), dict(first.models)
    for document in documents[1:]:
        for runner, fingerprint in document.environment.items():
            environment.setdefault(runner, fingerprint)
        models.update(document.models)
    return dataclasses.replace(first, started_at=min(d.started_at for d in documents),
                               finished_at=max(d.finished_at for d in documents), environment=environment,
                               models=models, cases=tuple(cases), shard=None)


def _environment_warnings(documents: Sequence[tuple[str, ResultDocument]]) -> list[str]:
    warnings = []
    first_label, first = documents[0]
    for label, document in documents[1:]:
        for runner, fingerprint in document.environment.items():
            other = first.environment.get(runner)
            diff = fingerprint_differences(other, fingerprint) if other is not None else {}
            if diff:
                text = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in sorted(diff.items()))
                warnings.append(f"runner {runner}: shards {first_label} and {label} ran in different environments "
                                f"({text}); the merged document keeps shard {first_label}'s")
    return warnings


def family_plan(settings: VerdictsSettings) -> SequentialPlan:
    """The plan a check's BH correction ran at, from its verdicts document's ``settings``."""
    sampling = settings.sampling()
    plan = SequentialPlan(sampling.initial_workers, sampling.step_workers, sampling.max_workers, sampling.alpha,
                          adaptive=sampling.looks_planned > 1)
    if plan.looks != sampling.looks_planned:  # a one-look adaptive plan (max_workers = workers) reads the same
        plan = dataclasses.replace(plan, adaptive=not plan.adaptive)
    return plan


def corrected_union(rows: Sequence[Verdict], plan: SequentialPlan) -> list[Verdict]:
    """The rows of several shards corrected as one family: each taken back to its test's own
    decision, then Benjamini-Hochberg over all of them (the production function)."""
    return control_false_discoveries([uncorrected(r) for r in rows], plan)


def _same_check(ordered: Sequence[tuple[str, VerdictsDocument, ShardInfo]]) -> None:
    """Refuses, in one line naming the part, settings merge cannot use: a part whose ``alpha`` is
    not a level (0 < alpha < 1), whose plan is absent or impossible (no ``history``, no workers,
    ``step_workers`` 0: a hand-edited part, which the schema allows), or whose mode or plan
    differs from the first part's (``settings_sha256`` says they agree, but a hand edit keeps it)."""
    first_path, first, _ = ordered[0]
    for path, document, info in ordered:
        where = f"{path}: shard {info.label}"
        settings = document.settings
        if not 0 < settings.alpha < 1:
            raise UserError(f"{where}: settings.alpha must be a level between 0 and 1 (exclusive), found "
                            f"{settings.alpha!r}; merge the documents as `check --shard` wrote them")
        try:
            sampling = settings.sampling()
        except FieldError as exc:  # "settings: field 'history' is missing"
            raise UserError(f"{where}: {exc} (a part written by `check --shard` records its sampling plan and "
                            "history); merge the documents as `check --shard` wrote them") from None
        workers = (sampling.initial_workers, sampling.step_workers, sampling.max_workers)
        if min(workers) < 1 or settings.looks_planned < 1:
            raise UserError(f"{where}: settings.initial_workers, step_workers, max_workers and looks_planned must be "
                            f"at least 1, found {', '.join(map(str, (*workers, settings.looks_planned)))}")
        differs = _first_difference(first.mode.to_json(), document.mode.to_json())
        if differs is None:
            differs = _first_difference(_plan_json(first.settings), _plan_json(settings), "settings.")
        if differs is not None:
            raise UserError(f"{where}: its {differs} differs from {first_path}'s; merge the shards of one check")


def _plan_json(settings: VerdictsSettings) -> dict[str, object]:
    return {k: v for k, v in settings.to_json().items() if k not in ("history", "shard_history")}


def _first_difference(first: Mapping[str, object], other: Mapping[str, object], prefix: str = "mode.") -> str | None:
    return next((f"{prefix}{key}" for key in sorted({*first, *other}) if first.get(key) != other.get(key)), None)


def merge_verdicts(shards: Sequence[tuple[str, VerdictsDocument]]) -> tuple[VerdictsDocument, list[str]]:
    """The verdicts document of the whole check and the warnings (see the module docstring)."""
    ordered = ordered_shards(shards)
    info = ordered[0][2]
    kinds = {d.kind for _, d, _ in ordered}
    if len(kinds) > 1:
        raise UserError(f"the shards are of different kinds of check ({', '.join(sorted(kinds))})")
    _same_check(ordered)
    unchecked = [_holds_its_part(p, i, None, [(r.case, r.metric) for r in d.verdicts]) for p, d, i in ordered]
    _disjoint([(i.label, sorted({r.case for r in d.verdicts})) for _, d, i in ordered], info.cases)
    rank = {case: i for i, case in enumerate(info.cases)}
    rows = sorted(((r, k) for _, d, i in ordered for k, r in enumerate(d.verdicts)),
                  key=lambda item: (rank.get(item[0].case, len(rank)), item[1]))
    first = ordered[0][1]
    plan = family_plan(first.settings)
    merged_rows = corrected_union([r for r, _ in rows], plan)
    sides = [[(i.label, side) for _, d, i in ordered if d.results is not None for side in d.results.sides()
              if side[0] == label] for label in ("baseline", "candidate")]
    warnings = [w for w in unchecked if w]
    for _, d, _ in ordered:
        warnings += [w for w in d.warnings if w not in warnings]
    for parts in sides:
        warnings += _environment_warnings([(shard, document) for shard, (_, document) in parts]) if parts else []
    baseline, candidate = (concatenated([document for _, (_, document) in parts], info.cases) if parts else None
                           for parts in sides)
    results = None if candidate is None else ComparedResults(candidate, baseline)
    mode = dataclasses.replace(first.mode, merged_shards=info.n)
    settings = dataclasses.replace(first.settings, shard_history=tuple(d.settings.history for _, d, _ in ordered))
    document = VerdictsDocument(mode, settings, tuple(merged_rows), results, tuple(warnings), Summary.of(merged_rows),
                                datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                                explanations=tuple(e for _, d, _ in ordered for e in d.explanations))
    return document, warnings
