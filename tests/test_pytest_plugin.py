"""The pytest plugin: a perfguard check written as a test fails on a real regression and passes
on an A/A. The compiler under test is a real git repository (``factories``); the tests run a real
pytest in a subprocess, which loads the plugin from perfguard's ``pytest11`` entry point."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .factories import compiler_suite, git, make_compiler_repo, pass_source

pytestmark = pytest.mark.slow

TEST_FILE = '''
def test_toy_compiler_is_not_slower(perfguard):
    document = perfguard.check({suite!r}, case="r/*")
    assert document.mode.kind == "base-ref"
'''


def _run_pytest(folder, suite, *options):
    (folder / "test_perf.py").write_text(textwrap.dedent(TEST_FILE.format(suite=str(suite))))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_perf.py",
                           "--perfguard-report", str(folder / "reports"), *options],
                          cwd=folder, capture_output=True, text=True, timeout=900, check=False)


def test_the_fixture_fails_a_test_on_a_regression_and_passes_an_aa(tmp_path):
    repo, shas = make_compiler_repo(tmp_path / "cc", [("fast pass", {"mycc/__init__.py": "",
                                                                     "mycc/passes.py": pass_source(0)})])
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo))
    tests = tmp_path / "tests"
    tests.mkdir()
    # A/A: the working tree is the commit (identical artifacts): the test passes.
    same = _run_pytest(tests, suite)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "1 passed" in same.stdout
    # An uncommitted change makes the pass insert 24 no-op pairs: the test fails with the table.
    (repo / "mycc" / "passes.py").write_text(pass_source(24))
    slower = _run_pytest(tests, suite)
    assert slower.returncode == 1, slower.stdout + slower.stderr
    out = slower.stdout
    assert "perfguard: a performance regression" in out and "REGRESSION" in out and "r/mycc/cpu" in out
    report = next(line for line in out.splitlines() if line.strip().startswith("report: "))
    html = report.strip().removeprefix("report: ")
    assert html.endswith("index.html") and html.startswith(str(tests / "reports")), html
    assert "r/mycc/cpu" in Path(html).read_text(encoding="utf-8").replace("&#x2F;", "/")
    # Against an explicit ref that has the slow pass too: the same again, passes.
    git(repo, "commit", "-qam", "slow pass")
    assert _run_pytest(tests, suite, "--perfguard-base-ref", "HEAD").returncode == 0


def test_bad_input_fails_the_test_in_one_line(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    proc = _run_pytest(tests, tmp_path / "missing.toml")
    assert proc.returncode == 1
    assert "perfguard: " in proc.stdout and "missing.toml" in proc.stdout and "Traceback" not in proc.stdout
