"""The compiler under test at a git ref: worktrees (GitPython), build commands, pass paths.

``perfguard check --base-ref REF`` and ``perfguard bisect`` measure the compiler at another commit
in the same job as the working tree. The suite's ``[compiler]`` table says where the compiler's
repository is (``repo``), which folder inside it goes on ``sys.path`` for user passes (``path``)
and how to build it (``build``, a shell command run in the checkout's root). A checkout at a ref is
a detached git worktree in a temporary folder, removed afterwards.

A process killed outright (``kill -9``, the OOM killer) runs no ``finally``: its worktree stays
registered in the compiler's repository. Each temporary folder therefore carries a marker
(:data:`WORKTREE_MARKER`: the process that made it and that process's start time), and
:func:`prune_stale_worktrees` removes the worktrees whose folder has the marker of a process that
is gone, then runs ``git worktree prune``. A worktree without the marker (a user's) is never
touched.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from perfguard import children
from perfguard.errors import BuildError, UserError
from perfguard.scratch import gone, owner
from perfguard.suite import Suite

if TYPE_CHECKING:  # GitPython loads lazily: bisect and check import this module
    import git

    from perfguard.progress import Progress
    from perfguard.suite import PipelineSpec

__all__ = ["BuildError", "CompilerCheckout", "checkout_at", "compiler_repo_root", "resolve_commit", "run_build",
           "working_tree"]

BUILD_TIMEOUT = 1800.0
#: The file in a checkout's temporary folder that says perfguard made it, and which process.
WORKTREE_MARKER = "perfguard-worktree.json"


@dataclass(frozen=True)
class CompilerCheckout:
    """One version of the compiler: its root, the sys.path folder for passes, the commit."""

    label: str
    root: Path
    pass_path: Path | None
    commit: str | None
    subject: str = ""


def _repo(path: Path) -> git.Repo:
    import git

    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UserError(f"{path} is not inside a git repository; set [compiler] repo in the suite") from None


def compiler_repo_root(suite: Suite) -> Path:
    """The root of the compiler's git repository (``[compiler] repo``, else the suite's own repo)."""
    start = suite.compiler.repo or suite.compiler.path or suite.path.resolve().parent
    return Path(_repo(start).working_tree_dir or start).resolve()


def resolve_commit(root: Path, ref: str) -> tuple[str, str]:
    """Full sha and subject of ``ref`` in the repository at ``root``; UserError if unknown.

    ``git rev-parse --verify REF^{commit}``: a missing object (a full sha that is not in the
    repository), a name that is no ref, or a ref to a tree or blob is refused here, before any
    checkout, build or measurement."""
    repo = _repo(root)
    top = repo.working_tree_dir or str(root)
    unknown = f"unknown git ref {ref!r} in {top} (no such commit there; a shallow clone may lack it)"
    if not ref or ref.startswith("-") or any(c in ref for c in "\0\n"):
        raise UserError(unknown)
    proc = subprocess.run(["git", "-C", str(top), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                          capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    sha = proc.stdout.strip()
    if proc.returncode != 0 or not sha:
        said = proc.stderr.strip().splitlines()  # --quiet: git says something only when it is not the ref
        raise UserError(unknown + (f": git: {said[-1][:200]}" if said else ""))
    subject = subprocess.run(["git", "-C", str(top), "log", "-1", "--format=%s", sha], capture_output=True,
                             text=True, check=False, stdin=subprocess.DEVNULL).stdout.strip()
    return sha, subject


def working_tree(suite: Suite) -> CompilerCheckout:
    """The compiler as it is in the working tree (uncommitted changes included), in the repository
    a base ref is checked out from (``[compiler] repo``, else the suite's own), with the commit
    its HEAD is at (None before the first commit)."""
    root = compiler_repo_root(suite)
    try:
        commit: str | None = _repo(root).head.commit.hexsha
    except ValueError:
        commit = None
    return CompilerCheckout("head", root, suite.compiler.path, commit)


def run_build(checkout: CompilerCheckout, command: str | None, timeout: float = BUILD_TIMEOUT) -> None:
    """Run the suite's build command in ``checkout.root``; ``BuildError`` with its last output line.

    The build is done when its shell exits. Its output goes to temporary files, not pipes: a
    process it leaves in the background (a compiler server, a daemon) holds a pipe open for as long
    as it lives, and reading to the end would wait for it (for the whole timeout). Such a process
    is left running, as the build meant. The command runs in a process group of its own: a timeout,
    or a signal that stops perfguard (``perfguard.children.stop_all``), kills the whole group."""
    if not command:
        return
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = children.popen(command, shell=True, cwd=checkout.root, stdin=subprocess.DEVNULL, stdout=out,
                              stderr=err)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            children.kill_group(proc)
            proc.wait()
            raise BuildError(f"build of {checkout.label} timed out after {timeout:g} s: {command}: "
                             f"{_last_line(err, out)}", checkout.label) from None
        except BaseException:  # a signal: the handler killed the group already; make sure, and reap
            children.kill_group(proc)
            proc.wait()
            raise
        finally:
            children.forget(proc)
        if returncode != 0:
            raise BuildError(f"build of {checkout.label} failed (exit {returncode}): {command}: "
                             f"{_last_line(err, out)}", checkout.label)


def _last_line(*outputs: IO[bytes], tail: int = 64 * 1024) -> str:
    """The last non-blank line of the first output that has one (cut at 200 characters)."""
    for output in outputs:
        output.seek(0, os.SEEK_END)
        output.seek(max(0, output.tell() - tail))
        lines = output.read().decode(errors="replace").strip().splitlines()
        if lines:
            return lines[-1].strip()[:200]
    return "(no output)"


@contextmanager
def checkout_at(suite: Suite, ref: str, label: str | None = None) -> Iterator[CompilerCheckout]:
    """A detached worktree of the compiler's repository at ``ref``, removed on exit."""
    root = compiler_repo_root(suite)
    sha, subject = resolve_commit(root, ref)
    repo = _repo(root)
    folder = Path(tempfile.mkdtemp(prefix=f"perfguard-{sha[:8]}-"))
    target = folder / "tree"
    try:
        (folder / WORKTREE_MARKER).write_text(json.dumps(owner(os.getpid())))
        repo.git.worktree("add", "--detach", str(target), sha)
    except Exception as exc:
        shutil.rmtree(folder, ignore_errors=True)
        last = next((line.strip() for line in reversed(str(exc).splitlines()) if line.strip()), type(exc).__name__)
        raise UserError(f"cannot check out {ref} ({sha[:10]}) as a worktree: {last}") from None
    pass_path = None
    if suite.compiler.path is not None:
        try:
            relative = suite.compiler.path.resolve().relative_to(root)
        except ValueError:
            raise UserError(f"[compiler] path {suite.compiler.path} is not inside the compiler repository {root}; "
                            "a base ref cannot be checked out for it") from None
        pass_path = target / relative
    try:
        yield CompilerCheckout(label or ref, target, pass_path, sha, subject)
    finally:
        try:
            repo.git.worktree("remove", "--force", str(target))
        except Exception:  # already gone; prune below cleans the record
            pass
        shutil.rmtree(folder, ignore_errors=True)
        try:
            repo.git.worktree("prune")
        except Exception:
            pass


def prune_stale_worktrees(root: Path) -> int:
    """Remove the worktrees of the repository at ``root`` that perfguard made for a process that
    has ended (the marker in their folder), then ``git worktree prune``; how many were removed.
    Failures leave things as they were: cleaning up must never stop a night."""
    removed = 0
    for line in _git_quiet(root, "worktree", "list", "--porcelain").splitlines():
        if not line.startswith("worktree "):
            continue
        tree = Path(line[len("worktree "):])
        folder, marker = tree.parent, tree.parent / WORKTREE_MARKER
        try:
            own = (folder.name.startswith("perfguard-") and tree.name == "tree"
                   and stat.S_ISREG(os.lstat(marker).st_mode) and not os.path.islink(folder))
        except OSError:
            continue
        if own and gone(marker):
            _git_quiet(root, "worktree", "remove", "--force", str(tree))
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    _git_quiet(root, "worktree", "prune")
    return removed


def _git_quiet(root: Path, *args: str) -> str:
    """git's stdout, or "" when it fails or hangs."""
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def pipelines_at(suite: Suite, base: CompilerCheckout, progress: Progress) -> dict[str, PipelineSpec]:
    """The suite's pipelines that the suite file at the base ref defines differently (by name),
    when the suite file is part of the compiler's repository; empty otherwise. A pipeline the
    base does not have, or a base suite that does not load, leaves the working tree's."""
    from perfguard.suite import load_suite

    try:
        relative = suite.path.resolve().relative_to(compiler_repo_root(suite))
    except ValueError:
        return {}
    at_base = base.root / relative
    if not at_base.is_file():
        return {}
    try:
        old = load_suite(at_base)
    except UserError as exc:
        progress.log(f"base: the suite at {base.label} does not load ({exc}); both sides use the working tree's "
                     "pipelines")
        return {}
    changed = {name: p for name, p in old.pipelines.items()
               if name in suite.pipelines and p.key() != suite.pipelines[name].key()}
    if changed:
        progress.log(f"base: pipeline(s) {', '.join(sorted(changed))} as the suite at {base.label} defines them")
    return changed
