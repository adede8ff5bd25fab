"""One night per suite, runner class and commit, and no worktree left behind by a killed night.

A nightly scheduled on a repository where nothing landed since the last night would measure the
same commit again and record a second night of it: two points of one commit in every series, and
a change point between a commit and itself. So a night whose suite already has a night at
tonight's commit on one of tonight's runner classes (``cuda``, ``cpu``, ``npu``: a runner's name
before ``:``) measures nothing: :func:`recorded_night` finds that night and the command says so in
one line and exits 0 (an idle night is no failure). A broken night counts for every class (it
stored no document to tell). The parts of one sharded night (``nightly --shard K/N``) are nights
of one commit by design: another part (same N, another K) is no repeat, the same part is.
"""

from __future__ import annotations

from collections.abc import Sequence

from perfguard.compile.checkout import compiler_repo_root, prune_stale_worktrees
from perfguard.errors import UserError
from perfguard.flows.shards import stored_shard
from perfguard.progress import Progress
from perfguard.results.shard import ShardInfo
from perfguard.runners import runner_kind
from perfguard.store import Store
from perfguard.store.rows import Night
from perfguard.suite import CaseSpec, Suite


def runner_class(runner: str) -> str:
    """``npu:QNNExecutionProvider`` -> ``npu``: what decides a machine, not its provider option."""
    return runner_kind(runner)


def _stored_classes(document: object) -> set[str]:
    """The runner classes of the cases a stored result or verdicts document holds (a case id is
    ``model/pipeline/runner``)."""
    if not isinstance(document, dict):
        return set()
    parts = [document, *(document.get("results") or {}).values()] if isinstance(document.get("results"), dict) \
        else [document]
    ids = [case.get("id") for part in parts if isinstance(part, dict) for case in part.get("cases") or []
           if isinstance(case, dict)]
    ids += [row.get("case") for row in document.get("verdicts") or [] if isinstance(row, dict)]
    return {runner_class(i.rsplit("/", 1)[-1]) for i in ids if isinstance(i, str) and "/" in i}


def recorded_night(store: Store, suite: Suite, cases: Sequence[CaseSpec], commit: str,
                   shard: ShardInfo | None) -> Night | None:
    """The night of ``suite`` already recorded at ``commit`` on one of the runner classes of
    ``cases`` (see the module docstring), or None when tonight is the first."""
    tonight = {runner_class(c.runner) for c in cases}
    for night in reversed(store.nights(suite.name)):
        if night.commit != commit:
            continue
        if night.broken or night.document_id is None:
            return night
        other = stored_shard(store, night)
        if shard is not None and other is not None and other.n == shard.n and other.k != shard.k:
            continue  # a sibling part of tonight's sharded night
        if tonight & _stored_classes(store.document(night.document_id)):
            return night
    return None


def prune_killed_checkouts(suite: Suite, progress: Progress) -> None:
    """Remove the worktrees an earlier perfguard process left registered in the compiler's
    repository when it was killed outright (see ``perfguard.compile.checkout``)."""
    try:
        root = compiler_repo_root(suite)
    except UserError:  # cleaning up never stops a night; the night itself says what is wrong
        return
    removed = prune_stale_worktrees(root)
    if removed:
        progress.log(f"removed {removed} worktree(s) that a killed perfguard run left in {root}")
