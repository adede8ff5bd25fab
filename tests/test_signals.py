"""SIGTERM and SIGHUP stop perfguard as Ctrl-C does; build commands run in a process group.

Each signal test runs ``python -m perfguard`` as a real process in a session of its own, with
``TMPDIR`` set to an empty folder of the test and a unique ``PERFGUARD_TEST_MARK`` in its
environment, which every process it starts inherits. It waits (polling psutil) until the run has
reached a point (a compile worker running a user pass, a spare measurement worker, a build
command), sends the signal to perfguard alone, and asserts what perfguard guarantees: exit 143
(129 for SIGHUP, 130 for SIGINT), one line on stderr that says so and no traceback, no process
with the mark left, nothing left in ``TMPDIR``. Every wait ends as soon as the process it waits
on has ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from perfguard import cli
from perfguard.compile.checkout import CompilerCheckout, run_build
from perfguard.errors import BuildError, HungUp, Terminated
from perfguard.exit_codes import ExitCode

from .conftest import REPO, TINY_MODELS
from .factories import compiler_suite, git, make_compiler_repo, pass_source

MARK = "PERFGUARD_TEST_MARK"
# Generous: each is a bound on a busy 2-core machine, never the expected time; every wait polls
# and stops as soon as what it waits for happened or its process ended.
POINT_DEADLINE_S = 240.0
EXIT_DEADLINE_S = 120.0
GONE_DEADLINE_S = 60.0

# A measurement long enough to be caught in the middle (many workers, each timing for a while).
LONG_MEASURE = """
[measure]
workers = 40
rounds = 20
warmup = 1
min_time = "20ms"
compile_repeats = 1
memory_probes = 0
timeout = "120s"
compile_timeout = "600s"
"""

# A user pass that sleeps in the compile worker: the run stays in its compile stage until killed.
SLOW_PASS = """
import time


def slow(model):
    time.sleep(600)
    return model
"""


def marked(mark: str) -> list[psutil.Process]:
    """Live processes (zombies aside) whose environment carries ``mark``."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARK) == mark and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def kill_marked(mark: str) -> None:
    for proc in marked(mark):
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


@dataclass
class Perfguard:
    """One ``python -m perfguard`` process of a test, its output in files (no pipe a leftover
    child could hold open)."""

    proc: subprocess.Popen[bytes]
    mark: str
    tmpdir: Path
    out: Path
    err: Path

    def ours(self) -> list[psutil.Process]:
        """Processes with this run's mark, perfguard itself aside (the scan of every process
        finds those that left perfguard's tree too)."""
        return [p for p in marked(self.mark) if p.pid != self.proc.pid]

    def output(self) -> str:
        return f"stdout:\n{self.out.read_text(errors='replace')}\nstderr:\n{self.err.read_text(errors='replace')}"

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def wait_for(self, what: str, point: Callable[[list[psutil.Process]], bool]) -> None:
        """Poll until ``point`` holds for perfguard's descendants; fail if the run ends first."""
        deadline = time.monotonic() + POINT_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"perfguard exited ({self.proc.returncode}) before {what}\n{self.output()}")
            if point(self.descendants()):
                return
            time.sleep(0.05)
        pytest.fail(f"no {what} within {POINT_DEADLINE_S:g} s\n{self.output()}")

    def stop(self, signum: int) -> int:
        """Send ``signum`` to perfguard alone and wait for it to exit."""
        self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout=EXIT_DEADLINE_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"perfguard did not exit within {EXIT_DEADLINE_S:g} s of {signum}\n{self.output()}")

    def assert_clean_exit(self, code: int, name: str) -> None:
        stderr = self.err.read_text(errors="replace")
        assert self.proc.returncode == code, self.output()
        lines = stderr.splitlines()  # progress notes may come first (``base: HEAD = ...``)
        said = "perfguard: interrupted" if name == "SIGINT" else f"perfguard: stopped by {name}"
        assert lines[-1:] == [said], self.output()
        assert [line for line in lines if line.startswith("perfguard")] == lines[-1:], self.output()
        assert "Traceback" not in stderr
        left = self.ours()
        deadline = time.monotonic() + GONE_DEADLINE_S  # a SIGKILLed group is reaped by init
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = self.ours()
        assert not left, [(p.pid, p.cmdline()) for p in left]
        # ONNX Runtime (1.32) keeps a 51-byte id file, ``.ses``, in the temporary folder of every
        # process that imports it, whatever happens to the run: not perfguard's to remove.
        assert sorted(p.name for p in self.tmpdir.iterdir() if p.name != ".ses") == []


@pytest.fixture
def perfguard(tmp_path: Path) -> Iterator[Callable[..., Perfguard]]:
    """Start ``python -m perfguard ARGS`` marked, in a session of its own, with its own TMPDIR;
    whatever carries the mark at the end of the test is killed."""
    started: list[Perfguard] = []

    def start(*args: str, cwd: Path | None = None) -> Perfguard:
        mark = uuid.uuid4().hex
        tmpdir = tmp_path / f"tmp-{len(started)}"
        tmpdir.mkdir()
        out, err = tmp_path / f"stdout-{len(started)}.txt", tmp_path / f"stderr-{len(started)}.txt"
        env = dict(os.environ, TMPDIR=str(tmpdir), COLUMNS="200", **{MARK: mark})
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            proc = subprocess.Popen([sys.executable, "-m", "perfguard", *args], cwd=cwd or tmp_path, env=env,
                                    stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True)
        run = Perfguard(proc, mark, tmpdir, out, err)
        started.append(run)
        return run

    yield start
    for run in started:
        if run.proc.poll() is None:
            run.proc.kill()
        run.proc.wait()
        kill_marked(run.mark)


def workers(processes: list[psutil.Process], *, spare: bool | None = None) -> list[psutil.Process]:
    """Measurement/compile worker processes among ``processes`` (``spare``: only spares, or none)."""
    found = []
    for proc in processes:
        try:
            cmdline = proc.cmdline()
        except psutil.Error:
            continue
        if "perfguard.workers.worker" in cmdline and (spare is None or ("--spare" in cmdline) == spare):
            found.append(proc)
    return found


def named(processes: list[psutil.Process], name: str) -> list[psutil.Process]:
    found = []
    for proc in processes:
        try:
            if proc.name() == name:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def slow_pass_suite(tmp_path: Path) -> Path:
    """A suite whose one case compiles with a user pass that sleeps (``slowpass:slow``)."""
    passes = tmp_path / "passes"
    passes.mkdir()
    (passes / "slowpass.py").write_text(SLOW_PASS)
    suite = tmp_path / "slow.toml"
    suite.write_text(TINY_MODELS + LONG_MEASURE + textwrap.dedent(f"""
        [compiler]
        path = "{passes}"

        [pipelines.slow]
        passes = ["slowpass:slow"]
    """))
    return suite


def long_suite(tmp_path: Path) -> Path:
    suite = tmp_path / "long.toml"
    suite.write_text(TINY_MODELS + LONG_MEASURE + '[pipelines.none]\npasses = []\n')
    return suite


def toy_compiler(tmp_path: Path, build: str | None = None) -> Path:
    """A git repository of the toy compiler and a check suite for it (long measurement)."""
    repo, _ = make_compiler_repo(tmp_path / "cc", [("initial", {"mycc/__init__.py": "",
                                                                "mycc/passes.py": pass_source(0)})])
    text = compiler_suite(repo, workers=40, max_workers=40)
    if build is not None:
        text = text.replace("[compiler]\n", f"[compiler]\nbuild = {json.dumps(build)}\n")
    suite = tmp_path / "toy.toml"
    suite.write_text(text)
    return suite


# --------------------------------------------------------------------------------------------
# perfguard run


@pytest.mark.slow
def test_sigterm_while_a_run_compiles_stops_the_compile_worker_and_removes_its_folder(tmp_path, perfguard):
    run = perfguard("run", str(slow_pass_suite(tmp_path)), "--out", str(tmp_path / "r.json"), "--quiet")
    run.wait_for("a compile worker", lambda ps: bool(workers(ps, spare=False)))
    run.stop(signal.SIGTERM)
    run.assert_clean_exit(ExitCode.TERMINATED, "SIGTERM")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, ExitCode.TERMINATED), (signal.SIGHUP, ExitCode.HUNG_UP),
                                               (signal.SIGINT, ExitCode.INTERRUPTED)], ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_while_a_run_measures_stops_workers_and_spares(tmp_path, perfguard, signum, code):
    # SIGINT as a terminal's Ctrl-C sends it, but to perfguard alone: its workers run in sessions of
    # their own, so perfguard must stop them itself.
    run = perfguard("run", str(long_suite(tmp_path)), "--out", str(tmp_path / "r.json"), "--quiet")
    run.wait_for("a spare measurement worker", lambda ps: bool(workers(ps, spare=True)))
    run.stop(signum)
    run.assert_clean_exit(code, signal.Signals(signum).name)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow
def test_a_worker_does_not_outlive_a_sigkilled_perfguard(tmp_path, perfguard):
    # SIGKILL runs no handler: the worker ends by itself (PR_SET_PDEATHSIG), not after its pass.
    run = perfguard("run", str(slow_pass_suite(tmp_path)), "--out", str(tmp_path / "r.json"), "--quiet")
    run.wait_for("a compile worker", lambda ps: bool(workers(ps, spare=False)))
    run.stop(signal.SIGKILL)
    left = run.ours()
    deadline = time.monotonic() + GONE_DEADLINE_S  # the pass sleeps 600 s: gone sooner means killed
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = run.ours()
    assert not left, [(p.pid, p.cmdline()) for p in left]


# --------------------------------------------------------------------------------------------
# perfguard check


@pytest.mark.slow
def test_sigterm_during_the_build_of_a_check_kills_the_build_and_removes_the_worktree(tmp_path, perfguard):
    suite = toy_compiler(tmp_path, build="echo building; sleep 600 & sleep 601")
    run = perfguard("check", str(suite), "--base-ref", "HEAD", "--quiet")
    run.wait_for("the build command", lambda ps: len(named(ps, "sleep")) >= 2)
    run.stop(signal.SIGTERM)
    run.assert_clean_exit(ExitCode.TERMINATED, "SIGTERM")
    assert git(tmp_path / "cc", "worktree", "list").count("\n") == 0  # the base's worktree is pruned


@pytest.mark.slow
def test_sigterm_while_a_check_measures(tmp_path, perfguard):
    run = perfguard("check", str(toy_compiler(tmp_path)), "--base-ref", "HEAD", "--quiet", "--measure-identical",
                    "--json", str(tmp_path / "verdicts.json"))
    run.wait_for("a spare measurement worker", lambda ps: bool(workers(ps, spare=True)))
    run.stop(signal.SIGTERM)
    run.assert_clean_exit(ExitCode.TERMINATED, "SIGTERM")
    assert not (tmp_path / "verdicts.json").exists()


# --------------------------------------------------------------------------------------------
# perfguard nightly


@pytest.mark.slow
def test_sigterm_during_a_nightly_leaves_the_store_usable(tmp_path, perfguard):
    store = f"sqlite:///{tmp_path / 'history.sqlite'}"
    run = perfguard("nightly", str(toy_compiler(tmp_path)), "--store", store, "--quiet")
    run.wait_for("a spare measurement worker", lambda ps: bool(workers(ps, spare=True)))
    run.stop(signal.SIGTERM)
    run.assert_clean_exit(ExitCode.TERMINATED, "SIGTERM")
    listing = subprocess.run([sys.executable, "-m", "perfguard", "history", "list", "--store", store],
                             capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert listing.returncode == 0, listing.stdout + listing.stderr


# --------------------------------------------------------------------------------------------
# build commands


@pytest.fixture
def build_mark(monkeypatch) -> Iterator[str]:
    """A mark in this process's environment, which the build commands inherit; processes that
    carry it are killed at the end of the test."""
    mark = uuid.uuid4().hex
    monkeypatch.setenv(MARK, mark)
    yield mark
    kill_marked(mark)


def test_a_build_that_leaves_a_daemon_is_done_when_its_shell_exits(tmp_path, build_mark):
    checkout = CompilerCheckout("base", tmp_path, None, None)
    done = threading.Event()

    def build() -> None:
        run_build(checkout, "(sleep 42 &); echo built", timeout=600)
        done.set()

    thread = threading.Thread(target=build, daemon=True)
    thread.start()
    thread.join(timeout=30)  # 42 s is what waiting for the daemon's end would take
    assert done.is_set()
    assert len(marked(build_mark)) == 1  # the daemon, left running as the build meant (the fixture ends it)


def test_a_build_past_its_timeout_is_killed_with_its_whole_group(tmp_path, build_mark):
    checkout = CompilerCheckout("base", tmp_path, None, None)
    with pytest.raises(BuildError) as caught:
        run_build(checkout, "echo compiling mycc; sleep 30 & sleep 31", timeout=1)
    assert str(caught.value) == "build of base timed out after 1 s: echo compiling mycc; sleep 30 & sleep 31: compiling mycc"
    left = marked(build_mark)
    deadline = time.monotonic() + GONE_DEADLINE_S
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = marked(build_mark)
    assert not left, [p.cmdline() for p in left]


def test_a_failed_build_names_its_last_line(tmp_path):
    checkout = CompilerCheckout("base", tmp_path, None, None)
    with pytest.raises(BuildError, match=r"failed \(exit 3\): .*: error: no rule to make target$"):
        run_build(checkout, "echo progress; echo 'error: no rule to make target' >&2; exit 3")


# --------------------------------------------------------------------------------------------
# exit codes


def test_signals_map_to_their_exit_codes_also_under_bisect_step():
    assert cli.exit_code_of(Terminated()) == ExitCode.TERMINATED == 128 + signal.SIGTERM
    assert cli.exit_code_of(HungUp()) == ExitCode.HUNG_UP == 128 + signal.SIGHUP
    # Above 127: git bisect run aborts instead of marking the commit bad.
    assert cli.exit_code_of(Terminated(), step=True) == ExitCode.TERMINATED
    assert isinstance(Terminated(), KeyboardInterrupt)  # the cleanups that Ctrl-C runs run too
