"""Shared fixtures: small suites written to temporary folders, and a runner for the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Small models: each runs in well under a millisecond, so real runs stay fast.
TINY_MODELS = """
[models.resnet_t]
arch = "resnet"
params = { depth = 2, width = 8, image_size = 32, num_classes = 10 }
"""

FAST_MEASURE = """
[measure]
workers = 2
rounds = 3
warmup = 1
min_time = "2ms"
timeout = "60s"
compile_timeout = "60s"
"""


def smallest_measure(workers: int = 2) -> str:
    """The smallest sampling a suite allows, for tests where measurement is not what they check."""
    return f"""
[measure]
workers = {workers}
rounds = 2
warmup = 1
min_time = "1ms"
compile_repeats = 1
memory_probes = 0
timeout = "60s"
compile_timeout = "60s"
"""


@pytest.fixture
def write_suite(tmp_path: Path) -> Callable[[str], Path]:
    """Write a suite file (dedented TOML) into the test's folder and return its path."""

    def write(text: str, name: str = "suite.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``python -m perfguard ARGS`` as a user would, capturing output."""
    env = dict(os.environ)
    env["COLUMNS"] = "200"
    return subprocess.run([sys.executable, "-m", "perfguard", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout, env=env, check=False)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of a throwaway PostgreSQL server's ``postgres`` database, for the whole session
    (``tests/pg.py``; ``tests.pg.create_database`` makes a fresh database on it). Skipped with the
    reason when no server can be started here, but under CI=true that fails: CI installs it."""
    from .pg import PostgresUnavailable, start_server

    try:
        server = start_server()
    except PostgresUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but no PostgreSQL server could be started ({exc}): .ci/run must install it "
                        "(apt-get install postgresql)")
        pytest.skip(f"no PostgreSQL server for the history-store tests: {exc}")
    try:
        yield server.url()
    finally:
        server.stop()
