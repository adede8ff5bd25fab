"""The CLI starts light.

``perfguard --help`` (and building the parser, and every subcommand's ``--help``) must not import
the measurement stack: onnx, onnxruntime, numpy and scipy cost about a second before an argument
is parsed (``benchmarks/cli_startup.py`` measures the time). The check here is deterministic:
which modules a fresh interpreter has loaded, not how long it took.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from .conftest import REPO

HEAVY = ("onnx", "onnxruntime", "numpy", "scipy", "jinja2", "git", "sqlalchemy", "alembic", "psycopg")


def _loaded_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; the heavy top-level packages it left in sys.modules."""
    probe = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        print(json.dumps(sorted({{m.partition(".")[0] for m in sys.modules}} & set({list(HEAVY)!r}))))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_building_the_parser_imports_nothing_heavy():
    assert _loaded_after("import perfguard.cli\nperfguard.cli.build_parser()\n") == []


def test_help_imports_nothing_heavy():
    # Exactly what `python -m perfguard --help` runs, with the help text swallowed.
    code = """
        import contextlib, io, runpy, sys
        sys.argv = ["perfguard", "--help"]
        with contextlib.redirect_stdout(io.StringIO()) as out:
            try:
                runpy.run_module("perfguard", run_name="__main__", alter_sys=True)
            except SystemExit as exc:
                assert exc.code in (0, None), exc.code
        assert "usage: perfguard" in out.getvalue(), out.getvalue()
    """
    assert _loaded_after(code) == []


def test_every_subcommand_help_imports_nothing_heavy():
    code = """
        import contextlib, io
        from perfguard.cli import COMMANDS, main
        for name in COMMANDS:
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    main([name, "--help"])
                except SystemExit as exc:
                    assert exc.code in (0, None), (name, exc.code)
    """
    assert _loaded_after(code) == []


def test_a_worker_process_starts_without_scipy_or_a_compiler():
    """A measurement worker (12-20 of them per check) imports only what it needs to serve a request:
    numpy, but not SciPy (the statistics stay in the parent), onnx or onnxruntime (a backend loads
    them on its first request), jinja2 or git."""
    assert _loaded_after("import perfguard.workers.worker\n") == ["numpy"]
