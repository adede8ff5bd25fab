"""One bisection probe: measure a few variants of one case in the same job, with the same
three-way, adaptive comparison that ``perfguard check`` uses, and keep the evidence.

A variant is a version of the compiler (a checkout at a commit, or a hybrid of two) or another
pipeline of the case. Everything a probe measured is returned as a ``ProbeRecord``, which the
bisection state saves after every probe so that a killed run resumes without measuring again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace

from perfguard.bisect.document import VerdictSummary
from perfguard.bisect.state import ProbeEntry, ProbeRecord
from perfguard.compare.check import Pair, adaptive_check, same_execution, unmeasured_variants
from perfguard.compile.case import Side, Variant
from perfguard.compile.checkout import CompilerCheckout, checkout_at, run_build
from perfguard.errors import BuildError, UserError
from perfguard.measure.job import compile_variants
from perfguard.progress import Progress
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.gates import CheckSettings

__all__ = ["Variant", "checkouts", "require_case", "run_probe", "side_of"]


def run_probe(suite: Suite, case: CaseSpec, variants: Sequence[Variant], comparisons: Sequence[tuple[str, str]],
              settings: CheckSettings, progress: Progress, also: Sequence[str] = ()) -> ProbeRecord:
    """Compile and measure ``variants`` interleaved; compare each (baseline, candidate) label pair.

    Returns an ``ok`` record (a summary per ``"A->B"``, what each label's case entry keeps, the
    sampling history) or a ``skip`` one with the reason when a variant does not compile (never
    guessed). The metrics in ``also`` (``compile_time``, say) are kept beside latency as
    ``"A->B:metric"``."""
    job, compiled = compile_variants(suite, case, variants, progress)
    try:
        for variant in variants:
            error = compiled[variant.label].entry.error
            if error is not None:
                return ProbeRecord("skip", f"{variant.label}: {error.stage} failed: {error.message}")

        def pairs() -> list[Pair]:  # the entries as measured so far
            return [Pair(f"{a}->{b}", compiled[a].entry, compiled[b].entry, True, a, b,
                         frozenset({compiled[a].variant_id, compiled[b].variant_id}),
                         not settings.measure_identical and same_execution(compiled[a].entry, compiled[b].entry))
                    for a, b in comparisons]

        # Two versions whose artifacts are identical are the same version: not timed.
        job.measure(only={c.variant_id for c in compiled.values()}, workers=settings.workers,
                    skip=unmeasured_variants(pairs()))

        rows, info = adaptive_check(pairs, lambda only, n: job.measure(only=only, workers=n), suite.thresholds,
                                    settings, adaptive=True)
    finally:
        job.close()
    latency = {r.case: VerdictSummary.of(r) for r in rows if r.metric == "latency"}
    verdicts = {case: replace(v, workers=v.workers or info.last_workers) for case, v in latency.items()}
    verdicts.update({f"{r.case}:{r.metric}": VerdictSummary.of(r) for r in rows if r.metric in also})
    entries = {label: ProbeEntry(c.entry.trace.to_json() if c.entry.trace else None,
                                 c.entry.metrics.latency_s.median if c.entry.metrics.latency_s else None,
                                 c.entry.metrics.node_count) for label, c in compiled.items()}
    return ProbeRecord("ok", None, verdicts, entries, list(info.history))


@contextmanager
def checkouts(suite: Suite, refs: Sequence[str]) -> Iterator[dict[str, CompilerCheckout | BaseException]]:
    """Worktrees of the compiler at ``refs`` (built); a ref that fails to build maps to its error."""
    with ExitStack() as stack:
        out: dict[str, CompilerCheckout | BaseException] = {}
        for ref in refs:
            if ref in out:
                continue
            checkout = stack.enter_context(checkout_at(suite, ref, ref[:10]))
            try:
                run_build(checkout, suite.compiler.build)
            except BuildError as exc:
                out[ref] = exc
                continue
            out[ref] = checkout
        yield out


def side_of(checkout: CompilerCheckout, label: str) -> Side:
    return Side(label, checkout.pass_path, checkout.commit, checkout.subject)


def require_case(suite: Suite, pattern: str) -> CaseSpec:
    cases = suite.select(pattern)
    if len(cases) != 1:
        raise UserError(f"--case {pattern!r} must select exactly one case; it selects {len(cases)}: "
                        f"{', '.join(c.id for c in cases[:6])}")
    return cases[0]
