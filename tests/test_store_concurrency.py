"""The history store's first open under concurrency, on a loaded machine.

Many processes opening the same *fresh* store at once (file creation, the switch to WAL, the
schema migration) and then writing must all succeed and lose nothing. On SQLite the switch of a
new file to WAL answered "database is locked" at once, whatever the busy timeout, while another
process held the file's write lock (its own switch): the store now retries the switch until the
busy timeout. That state is made to order by a holder process, so the test fails every time
without the retry; the race itself is run too, made likely on purpose (every writer has imported
what ``Store.open`` needs, all wake on one closed pipe, a burner keeps one core busy, six fresh
stores in a row), on SQLite and on PostgreSQL (whose first migration an advisory lock serializes).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from perfguard.errors import StoreError
from perfguard.store import Store, database as store_engine

from .conftest import REPO
from .pg import create_database
from .test_history_store import SMALL_POINTS, _count, assert_consistent, small_result

WRITER = textwrap.dedent("""
    import os, sys
    # Everything Store.open imports lazily, imported before the start: the writers then reach the
    # first open within a few milliseconds of each other.
    import alembic.command, alembic.config, alembic.runtime.migration, alembic.script, sqlalchemy
    from perfguard.store import extract as ingest, schema
    from perfguard.store import Store
    from tests.test_history_store import small_result

    first, each, rounds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    print("ready", flush=True)
    for start, url in zip(rounds[::2], rounds[1::2]):
        os.read(int(start), 1)  # returns when the parent closes the pipe: every writer wakes at once
        with Store.open(url) as store:
            for i in range(first, first + each):
                store.ingest_json(small_result(i), source=f"writer {first}")
        print("done", flush=True)
""")

BURNER = "while True: pass"

# Another program writing the store before it is in WAL (sqlite3's shell, an older perfguard): it
# holds SQLite's write lock on a fresh file until its stdin closes.
HOLDER = textwrap.dedent("""
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("held", flush=True)
    sys.stdin.read()
    conn.execute("COMMIT")
""")


@pytest.fixture
def burner() -> Iterator[None]:
    """One core kept busy for the test's length, as on a shared CI machine."""
    proc = subprocess.Popen([sys.executable, "-c", BURNER])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], str]:
    """Makes a fresh, empty store location per call: a SQLite file or a new PostgreSQL database."""
    if request.param == "sqlite":
        return lambda: f"sqlite:///{tmp_path / uuid.uuid4().hex / 'history.sqlite'}"
    admin = request.getfixturevalue("postgres_url")
    return lambda: create_database(admin, f"t_{uuid.uuid4().hex[:16]}")


def _answers(writers: list[subprocess.Popen[str]]) -> list[str]:
    """Each writer's next line ('' when it exited instead: readline returns at its end, so nothing
    waits on a dead writer)."""
    lines = []
    for proc in writers:
        assert proc.stdout is not None
        lines.append(proc.stdout.readline().strip())
    return lines


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A fresh SQLite file another process holds the write lock of (closing its stdin releases it)."""
    path = tmp_path / "history.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], text=True, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        yield path, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def test_the_first_open_waits_for_a_writer_that_holds_a_fresh_store(
        held: tuple[Path, subprocess.Popen[str]]) -> None:
    # SQLite refuses the switch to WAL at once, whatever the busy timeout, while another
    # connection holds the write lock of a file not yet in WAL: the race of concurrent first opens.
    path, holder = held
    outcome: list[BaseException | int] = []

    def open_and_write() -> None:
        try:
            with Store.open(f"sqlite:///{path}") as store:
                outcome.append(store.ingest_json(small_result(0)).points)
        except BaseException as exc:  # reported by the assertion below
            outcome.append(exc)

    opener = threading.Thread(target=open_and_write)
    opener.start()
    opener.join(timeout=1.0)  # a store that does not wait has failed by now; one that waits still waits
    assert holder.stdin is not None
    holder.stdin.close()
    opener.join(timeout=120)
    assert outcome == [SMALL_POINTS]


def test_a_store_held_past_the_busy_timeout_is_one_line_naming_it(
        held: tuple[Path, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = held
    monkeypatch.setattr(store_engine, "_SQLITE_BUSY_TIMEOUT_S", 0.3)
    with pytest.raises(StoreError) as caught:
        Store.open(f"sqlite:///{path}")
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "database is locked" in message


@pytest.mark.slow
@pytest.mark.usefixtures("burner")
def test_a_dozen_processes_opening_fresh_stores_at_once_lose_nothing(
        fresh_url: Callable[[], str]) -> None:
    count, each, rounds = 12, 3, 6
    urls = [fresh_url() for _ in range(rounds)]
    # One pipe per round, its read end in every writer: closing the write end wakes them all at
    # once (a line written to each writer's stdin in turn leaves them milliseconds apart).
    pipes = [os.pipe() for _ in range(rounds)]
    args = [str(x) for (read, _), url in zip(pipes, urls, strict=True) for x in (read, url)]
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(i * each), str(each), *args], cwd=REPO,
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=[read for read, _ in pipes])
               for i in range(count)]
    try:
        for read, _ in pipes:
            os.close(read)
        assert _answers(writers) == ["ready"] * count
        for (_, start), url in zip(pipes, urls, strict=True):
            os.close(start)
            answers = _answers(writers)
            if answers != ["done"] * count:
                failed = [p.communicate(timeout=60)[1] for p, a in zip(writers, answers, strict=True) if a != "done"]
                pytest.fail(f"{answers.count('done')} of {count} writers stored their documents; the first "
                            f"that did not: {failed[0].strip().splitlines()[-1]}")
            assert _count(url, "documents") == count * each
            assert _count(url, "points") == count * each * SMALL_POINTS
            assert _count(url, "series") == SMALL_POINTS
            assert_consistent(url)
    finally:
        for _, start in pipes:
            with contextlib.suppress(OSError):  # already closed when its round ran
                os.close(start)
        for proc in writers:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
