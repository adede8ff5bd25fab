"""What a check is asked to do, typed, and the one entry that does it: the front ends (the command
line's ``check``, ``nightly``, ``bisect step`` and ``tune``, and the pytest plugin) build these
from their own options and call the flows; no flow takes an ``argparse.Namespace``.

* :class:`SamplingOptions`: what a caller changes of the suite's ``[check]`` settings (``--workers``,
  ``--max-workers``, ``--measure-identical``, ``bisect step --alpha``; the fixture's ``workers=``)
  and of its counts (``--counts``, ``--counts-cache``).
* :class:`Against`: the baseline, one of a git ref, a reference pipeline or a stored baseline.
* :func:`run_check`: the three-way dispatch to :mod:`perfguard.flows.check` and a shard's
  bookkeeping (the rows it wrote, the base commit it compared with).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfguard.errors import UserError

if TYPE_CHECKING:
    from perfguard.compare.verdicts import BaselineKind, VerdictsDocument
    from perfguard.profile.explain import ProfileSettings
    from perfguard.progress import Progress
    from perfguard.results.shard import ShardInfo
    from perfguard.suite import CaseSpec, Suite
    from perfguard.suite.gates import CheckSettings
    from perfguard.suite.model import CountMode


@dataclass(frozen=True)
class SamplingOptions:
    """Changes to the suite's ``[check]`` settings; None (False) leaves a setting as the suite has
    it. More first-look ``workers`` raise ``max_workers`` with them; ``max_workers`` below the
    first-look workers is a ``UserError``. ``counts``: count every case under Valgrind in this mode
    (``--counts``, ``--counts-cache``), on top of the suite's own ``[measure] counts``
    (:meth:`counted`)."""

    workers: int | None = None
    max_workers: int | None = None
    measure_identical: bool = False
    alpha: float | None = None
    counts: CountMode | None = None

    def counted(self, suite: Suite) -> Suite:
        """``suite`` with :attr:`counts` applied (``Suite.counted``): every job built from it counts."""
        return suite.counted(self.counts)

    def applied(self, settings: CheckSettings) -> CheckSettings:
        if self.workers is not None:
            settings = dataclasses.replace(settings, workers=self.workers,
                                           max_workers=max(settings.max_workers, self.workers))
        if self.max_workers is not None:
            if self.max_workers < settings.workers:
                raise UserError(f"max workers ({self.max_workers}) must be >= the first-look workers "
                                f"({settings.workers})")
            settings = dataclasses.replace(settings, max_workers=self.max_workers)
        if self.measure_identical:
            settings = dataclasses.replace(settings, measure_identical=True)
        if self.alpha is not None:
            settings = dataclasses.replace(settings, alpha=self.alpha)
        return settings


@dataclass(frozen=True)
class Against:
    """What the working tree is compared with: ``target`` is the git ref (``base-ref``), the
    reference pipeline's name (``pipeline``) or the stored baseline (``baseline``: a result file or
    ``store:[URL]``)."""

    kind: BaselineKind
    target: str

    @classmethod
    def one_of(cls, *, base_ref: str | None, against_pipeline: str | None, baseline: str | None,
               default_ref: str | None = None) -> Against:
        """The one baseline given (``default_ref`` when none is); a ``UserError`` for two or none."""
        options: tuple[tuple[BaselineKind, str | None], ...] = (("base-ref", base_ref), ("pipeline", against_pipeline),
                                                              ("baseline", baseline))
        given = [cls(kind, target) for kind, target in options if target is not None]
        if len(given) > 1:
            raise UserError("give at most one baseline: a base ref, a pipeline to compare against, or a stored "
                            "baseline")
        if given:
            return given[0]
        if default_ref is None:
            raise UserError("give a baseline: a base ref, a pipeline to compare against, or a stored baseline")
        return cls("base-ref", default_ref)


@dataclass(frozen=True)
class CheckRequest:
    """A check of a suite's selected cases: the baseline, the settings (the suite's ``[check]``
    with the caller's :class:`SamplingOptions` applied), ``explain`` (profile regressed cases; a
    stored baseline's artifacts are not here, so not with ``baseline``) and ``strict_env`` (refuse
    a stored baseline of another environment)."""

    against: Against
    settings: CheckSettings
    explain: ProfileSettings | None = None
    strict_env: bool = False

    def __post_init__(self) -> None:
        if self.explain is not None and self.against.kind == "baseline":
            raise UserError("--explain profiles both sides of the job: use --base-ref or --against-pipeline "
                            "(a stored baseline's artifacts are not here)")


def run_check(suite: Suite, cases: list[CaseSpec], request: CheckRequest, progress: Progress,
              shard: ShardInfo | None = None) -> VerdictsDocument:
    """The verdicts of ``request`` over ``cases``; with ``shard`` (this part of a sharded check) the
    document records it, with the rows this part wrote and the base commit it compared with."""
    from perfguard.flows.check import check_against_baseline, check_against_pipeline, check_against_ref

    against, settings = request.against, request.settings
    if against.kind == "base-ref":
        document = check_against_ref(suite, cases, against.target, settings, progress, request.explain)
    elif against.kind == "pipeline":
        document = check_against_pipeline(suite, cases, against.target, settings, progress, request.explain)
    else:
        document = check_against_baseline(suite, cases, against.target, settings, progress, request.strict_env)
    return document if shard is None else with_shard(document, shard)


def with_shard(document: VerdictsDocument, shard: ShardInfo) -> VerdictsDocument:
    """``document`` recording that it is ``shard``: the (case, metric) of every row it wrote, which
    ``perfguard merge`` checks the part against, and the base commit of a check against a ref."""
    rows = tuple((r.case, r.metric) for r in document.verdicts)
    return dataclasses.replace(document, shard=dataclasses.replace(shard, base_commit=document.mode.base_commit,
                                                                   rows=rows))
