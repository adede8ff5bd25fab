"""A nightly killed outright leaves no worktree behind for long, and one commit is one night
(issue 32, item 12).

A real compiler repository (git), real ``perfguard nightly`` processes and a real ``kill -9``: the
second night checks commit B against night 1's commit A in a detached worktree; its build command
sleeps there (only there: the folder perfguard names ``tree``) so that the test can kill the night
while the worktree exists. The next night at B finds the killed night's worktree by the marker
perfguard left in its folder, removes it and prunes git's record; a worktree the user made stays.
A nightly at a commit that already has a night measures nothing and says so (exit 0)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfguard.store import Store

from .conftest import REPO, run_cli
from .factories import compiler_suite, git, make_compiler_repo, pass_source

# The build sleeps in perfguard's worktree (its folder is ``tree``) while $SLOW_NIGHT names a file,
# which gets the shell's pid: the test kills the night there.
BUILD = ('if [ -n \\"${SLOW_NIGHT:-}\\" ] && [ \\"$(basename \\"$PWD\\")\\" = tree ]; '
         'then echo $$ > \\"$SLOW_NIGHT\\"; exec sleep 300; fi')


def _worktrees(repo: Path) -> list[str]:
    listing = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True,
                             text=True, check=True).stdout
    return [line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")]


def _nightly(suite: Path, store: str, cwd: Path):
    return run_cli("nightly", str(suite), "--store", store, "--quiet", "--no-bisect", "--no-recheck", cwd=cwd,
                   timeout=900)


@pytest.fixture
def toy(tmp_path):
    """Commits A and B of a real compiler repository, the suite (its build sleeps on demand) and a
    store where night 1 measured A."""
    repo, (a, b) = make_compiler_repo(tmp_path / "cc", [
        ("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)}),
        ("more work", {"mycc/passes.py": pass_source(4)}),
    ])
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo, workers=2, max_workers=4).replace(
        "[compiler]\n", f'[compiler]\nbuild = "{BUILD}"\n'))
    store = f"sqlite:///{tmp_path / 'history.sqlite'}"
    git(repo, "checkout", "-q", a)
    first = _nightly(suite, store, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    return {"repo": repo, "a": a, "b": b, "suite": suite, "store": store}


@pytest.mark.slow
def test_a_second_night_at_one_commit_measures_nothing(toy, tmp_path):
    again = _nightly(toy["suite"], toy["store"], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"already has a night at commit {toy['a'][:10]}" in again.stdout and "nothing measured" in again.stdout
    with Store.open(toy["store"], create=False) as opened:
        assert [n.commit for n in opened.nights("toy")] == [toy["a"]]


@pytest.mark.slow
def test_a_killed_night_leaves_no_registered_worktree_after_the_next(toy, tmp_path):
    repo, a, b, suite, store = toy["repo"], toy["a"], toy["b"], toy["suite"], toy["store"]
    user_tree = tmp_path / "users-own-tree"
    git(repo, "worktree", "add", "-q", "--detach", str(user_tree), a)  # a user's: never perfguard's to remove
    git(repo, "checkout", "-q", b)
    pidfile = tmp_path / "build.pid"
    night = subprocess.Popen([sys.executable, "-m", "perfguard", "nightly", str(suite), "--store", store, "--quiet",
                              "--no-bisect", "--no-recheck"], cwd=tmp_path, env={**os.environ, "SLOW_NIGHT": str(pidfile),
                                                                                 "PYTHONPATH": str(REPO)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while not (pidfile.exists() and pidfile.read_text().strip()) and night.poll() is None:
            assert time.monotonic() < deadline, "the base side's build never started"
            time.sleep(0.2)
        assert night.poll() is None, "the night ended before its base build"
        os.kill(night.pid, signal.SIGKILL)
        night.wait(60)
    finally:
        if night.poll() is None:
            night.kill()
        if pidfile.exists() and pidfile.read_text().strip():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)  # the build (exec'd into sleep)
            except ProcessLookupError:
                pass
    left = [t for t in _worktrees(repo) if Path(t).name == "tree"]
    assert len(left) == 1 and Path(left[0]).is_dir()  # what kill -9 leaves: the defect's state

    done = _nightly(suite, store, tmp_path)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert [t for t in _worktrees(repo) if Path(t).name == "tree"] == []
    assert not Path(left[0]).parent.exists()
    assert str(user_tree) in _worktrees(repo) and user_tree.is_dir()
    with Store.open(store, create=False) as opened:
        assert [n.commit for n in opened.nights("toy")] == [a, b]
