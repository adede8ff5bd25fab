"""The comparison of two result documents measured apart (``perfguard compare``, a stored
baseline): pairs by case, the environment rule, verdicts. It receives documents; the flows that
load or measure them are :mod:`perfguard.flows.check`.

Paired checks need no environment rule: both sides run in the same worker processes.
"""

from __future__ import annotations

from perfguard.compare.check import Pair, adaptive_check
from perfguard.compare.verdicts import (
    CheckMode,
    ComparedResults,
    ModeKind,
    VerdictsDocument,
    VerdictsSettings,
)
from perfguard.errors import UserError
from perfguard.results import ResultDocument
from perfguard.runners.fingerprint import fingerprint_differences
from perfguard.suite.gates import CheckSettings, ThresholdSet


def unpaired_pairs(baseline: ResultDocument, candidate: ResultDocument, base_label: str,
                    cand_label: str) -> tuple[list[Pair], list[str]]:
    """The candidate's cases paired with the baseline's of the same id and the same model and
    pipeline, and a warning for each case left out."""
    base_cases = {c.id: c for c in baseline.cases}
    pairs, warnings = [], []
    for entry in candidate.cases:
        other = base_cases.get(entry.id)
        if other is None:
            warnings.append(f"{entry.id}: not in the baseline; no comparison")
            continue
        mismatch = [part for part in ("model", "pipeline")
                    if getattr(other.key, part)["sha256"] != getattr(entry.key, part)["sha256"]]
        if mismatch:
            warnings.append(f"{entry.id}: the baseline was measured with a different {' and '.join(mismatch)}; "
                            "update the baseline (perfguard baseline update)")
            continue
        pairs.append(Pair(entry.id, other, entry, False, base_label, cand_label))
    return pairs, warnings


def environment_warnings(baseline: ResultDocument, candidate: ResultDocument, strict: bool) -> list[str]:
    """The environment rule of an unpaired comparison: for each runner both results measured on,
    one warning naming every comparable fingerprint field that differs (load and host name never
    count); with ``strict`` (``--strict-env``) a ``UserError`` instead, so no verdict is given.

    Paired checks need no such rule: both sides run in the same worker processes."""
    warnings = []
    for runner, fingerprint in candidate.environment.items():
        other = baseline.environment.get(runner)
        if other is None:
            continue
        diff = fingerprint_differences(other, fingerprint)
        if diff:
            text = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in sorted(diff.items()))
            message = f"runner {runner}: baseline and candidate environments differ ({text})"
            if strict:
                raise UserError(message + "; refusing to compare with --strict-env")
            warnings.append(message)
    return warnings


def compare_documents(baseline: ResultDocument, candidate: ResultDocument, settings: CheckSettings,
                      labels: tuple[str, str], strict_env: bool, kind: ModeKind = "compare") -> VerdictsDocument:
    """The verdicts of ``candidate`` against ``baseline``, two result documents measured apart
    (unpaired): the environment rule, then one fixed-sample test per pair."""
    warnings = environment_warnings(baseline, candidate, strict_env)
    pairs, more = unpaired_pairs(baseline, candidate, *labels)
    if not pairs:
        raise UserError("no case of the candidate has a matching case in the baseline" +
                        (f" ({more[0]})" if more else ""))
    rows, info = adaptive_check(lambda: pairs, lambda ids, n: None, _thresholds_for(candidate, baseline), settings,
                                adaptive=False)
    return VerdictsDocument.of(CheckMode(kind, labels[0], labels[1]), rows,
                               VerdictsSettings.of(info, settings.alpha), ComparedResults(candidate, baseline),
                               warnings + more)


def _thresholds_for(*documents: ResultDocument) -> ThresholdSet:
    """The thresholds of the suite that produced the candidate, if it can still be read."""
    from perfguard.suite import load_suite

    for document in documents:
        path = document.suite.path
        if path:
            try:
                return load_suite(path).thresholds
            except UserError:
                continue
    return ThresholdSet()
