"""User passes are imported before any work: a missing module or function is refused with close
names, from the working tree's ``[compiler] path``, without touching this process's modules; and
the hybrid-prefix compile keeps the suite's ``compile_timeout``."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from perfguard.compile import case as compile_stage
from perfguard.compile.case import Side
from perfguard.compile.preflight import check_suite
from perfguard.errors import UserError
from perfguard.measure.job import Job
from perfguard.suite import load_suite
from perfguard.workers.launch import WorkerOutcome

from .conftest import TINY_MODELS, run_cli

PASSES = '''
def cancel_pairs(model):
    return model


def fold_more(model):
    return model


THRESHOLD = 3
'''


def _suite(tmp_path: Path, passes: list[str], *, extra: str = "") -> Path:
    package = tmp_path / "compiler" / "mycompiler"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "passes.py").write_text(PASSES)
    (package / "broken.py").write_text("raise RuntimeError('half-written module')\n")
    path = tmp_path / "suite.toml"
    listed = ", ".join(f'"{p}"' for p in passes)
    path.write_text(textwrap.dedent(TINY_MODELS) + textwrap.dedent(f"""
        [compiler]
        path = "compiler"
        [pipelines.mine]
        passes = ["constant_folding", {listed}]
        """) + textwrap.dedent(extra))
    return path


def _one_line_error(proc) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("perfguard: error: "), proc.stderr
    return line


def test_validate_refuses_a_misspelled_function_with_close_names(tmp_path):
    line = _one_line_error(run_cli("validate", str(_suite(tmp_path, ["mycompiler.passes:cancel_pair"]))))
    assert "[pipelines.mine] passes" in line and "'mycompiler.passes:cancel_pair'" in line
    assert "has no function 'cancel_pair' (did you mean 'cancel_pairs'?)" in line, line
    proc = run_cli("validate", str(_suite(tmp_path, ["mycompiler.passes:cancel_pairs"])))
    assert proc.returncode == 0 and "ok:" in proc.stdout, proc.stderr


@pytest.mark.parametrize(("name", "fragment"), [
    ("mycompiler.pases:cancel_pairs", "unknown module 'mycompiler.pases' (did you mean 'mycompiler.passes'"),
    ("mycompilr.passes:cancel_pairs", "unknown module 'mycompilr' (did you mean 'mycompiler'?)"),
    ("mycompiler.broken:anything", "cannot import mycompiler.broken: RuntimeError: half-written module"),
    ("mycompiler.passes:THRESHOLD", "mycompiler.passes.THRESHOLD is not a function (its type is int)"),
])
def test_check_suite_refuses_missing_modules_and_functions(tmp_path, name, fragment):
    suite = load_suite(_suite(tmp_path, [name]))
    with pytest.raises(UserError) as info:
        check_suite(suite, list(suite.cases))
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_checking_user_passes_leaves_sys_modules_alone(tmp_path):
    suite = load_suite(_suite(tmp_path, ["mycompiler.passes:cancel_pairs", "mycompiler.passes:fold_more"]))
    check_suite(suite, list(suite.cases))
    assert "mycompiler" not in sys.modules and "mycompiler.passes" not in sys.modules
    assert str(suite.compiler.path) not in sys.path


def test_run_refuses_a_missing_user_pass_before_any_work(tmp_path):
    out = tmp_path / "never.json"
    proc = run_cli("run", str(_suite(tmp_path, ["mycompiler.passes:cancel_pair"])), "--out", str(out), "--quiet")
    assert "did you mean 'cancel_pairs'" in _one_line_error(proc)
    assert not out.exists() and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_hybrid_prefix_compile_uses_the_case_compile_timeout(tmp_path, monkeypatch):
    suite = load_suite(_suite(tmp_path, ["mycompiler.passes:cancel_pairs", "mycompiler.passes:fold_more"],
                              extra='[measure]\ncompile_timeout = "7s"\nmemory_probes = 0\n'))
    timeouts: list[float] = []

    def fake_worker(request, timeout, workdir):
        timeouts.append(timeout)
        return WorkerOutcome(None, failure=f"worker timed out after {timeout:g} s and was killed")

    monkeypatch.setattr(compile_stage, "run_worker", fake_worker)
    side = Side("hybrid", suite.compiler.path, prefix_path=suite.compiler.path, prefix_len=1)
    job = Job(suite, list(suite.cases), sides=[side], workdir=tmp_path / "work", check=False)
    job.compile()
    entry = job.compiled[0].entry
    assert timeouts == [7.0], timeouts  # the prefix stage; the suite's compile_timeout, not 600 s
    assert entry.status == "failed" and entry.error is not None and "hybrid prefix" in entry.error.message
    assert "timed out after 7 s" in entry.error.message
