"""The nightly's pipeline edits: a pipeline the suite file defined anew between two nights is a
code change of the repository that holds the suite, with a commit to name.

Tonight's check compiled the previous night's side with the pipelines as the suite file defined them
at that night's commit (``check --base-ref``: ``mode.base_pipelines``); the store recorded each
edit and joins the series across it (:mod:`perfguard.store.edits`), so every metric that
moved at the edit is a change of tonight, exact ones included. Here the commit that made the edit
is found, without compiling anything:

* a range of one commit: that commit;
* else the suite file's history in the range (``git log -- SUITE``): the commit whose version of
  the file defines the pipeline anew (its ``[pipelines.NAME]`` table differs from the version
  before it), when exactly one does;
* else none: the change's note lists the commits that touched the suite file in the range.

The commit found is the culprit of each change of the edited pipeline's cases in that range (the
compiler's commits are not bisected for them: a bisection compiles every commit with tonight's
pipelines, so it could not see an edit of the pipeline).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import tomllib

from perfguard.errors import UserError
from perfguard.progress import Progress
from perfguard.suite import Suite

if TYPE_CHECKING:
    from perfguard.store import Change, Series, Store
    from perfguard.store.edits import PipelineEdit


def attribute_edits(suite: Suite, store: Store, head: str, found: Sequence[tuple[Change, Series]],
                    progress: Progress) -> list[PipelineEdit]:
    """Find the commit of each edit the night at ``head`` showed (see the module docstring), and
    give it, as culprit, to each change of ``found`` (tonight's, with their series) that is
    confirmed, of an edited pipeline's case and in that range. Returns tonight's edits."""
    tonight = []
    for edit in store.pipeline_edits(suite.name):
        if edit.bad_commit != head:
            continue
        if edit.commit is None and not edit.note:
            commit, note = edit_commit(suite, edit)
            edit = store.set_pipeline_edit_commit(edit, commit, note)
        progress.log(f"{edit.describe()}" + (f" ({edit.note})" if edit.note else ""))
        tonight.append(edit)
    for change, series in found:
        made = next((e for e in tonight if e.pipeline == series.key.pipeline
                     and change.bad_commit == e.bad_commit), None)
        if made is None or change.status != "confirmed" or change.culprit_commit:
            continue
        note = f"{change.note}; {made.describe()}" + (f" ({made.note})" if made.note else "")
        store.attribute_change(change.id, made.commit, note)
    return tonight


def edit_commit(suite: Suite, edit: PipelineEdit) -> tuple[str | None, str]:
    """The commit of ``edit.good_commit`` .. ``edit.bad_commit`` that defined the pipeline anew,
    and how it was found (or why none was): see the module docstring."""
    from perfguard.compile.checkout import _git_quiet, compiler_repo_root
    from perfguard.flows.bisection.commit_search import commit_range

    root = compiler_repo_root(suite)
    try:
        commits = commit_range(root, edit.good_commit, edit.bad_commit)[1:]
        relative = suite.path.resolve().relative_to(root).as_posix()
    except (UserError, ValueError, OSError, subprocess.SubprocessError) as exc:
        return None, f"the suite's pipeline changed within the range; its commit is not known ({exc})"
    if len(commits) == 1:
        return commits[0].sha, ""
    span = f"{edit.good_commit[:10]}..{edit.bad_commit[:10]}"
    touched = _git_quiet(root, "log", "--reverse", "--format=%H", f"{edit.good_commit}..{edit.bad_commit}", "--",
                   relative).split()
    changed = []
    before = _pipeline_table(root, edit.good_commit, relative, edit.pipeline)
    for sha in touched:
        after = _pipeline_table(root, sha, relative, edit.pipeline)
        if after != before:
            changed.append(sha)
        before = after
    if len(changed) == 1:
        return changed[0], (f"the suite's pipeline changed within {span}: its definition in {relative} changed "
                            f"at {changed[0][:10]} alone")
    listed = ", ".join(c[:10] for c in touched) or "none"
    return None, (f"the suite's pipeline changed within {span}; the commits that touched {relative} there: "
                  f"{listed}")


def _pipeline_table(root: Path, commit: str, relative: str, pipeline: str) -> object:
    """The ``[pipelines.NAME]`` table of the suite file at ``commit`` (None: no such table, or the
    file is missing or not TOML there)."""
    from perfguard.compile.checkout import _git_quiet

    text = _git_quiet(root, "show", f"{commit}:{relative}")
    try:
        pipelines = tomllib.loads(text).get("pipelines")
    except tomllib.TOMLDecodeError:
        return None
    return pipelines.get(pipeline) if isinstance(pipelines, dict) else None
