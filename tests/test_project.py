"""The project's own hygiene: a hung test fails fast, every file a document points to exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pytest_ini() -> dict:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]


def test_a_hanging_test_fails_fast_under_the_projects_pytest_config(tmp_path):
    """pytest-timeout is configured (so a hang cannot eat CI's 90 minutes) and really fires."""
    configured = _pytest_ini().get("timeout")
    assert configured is not None and 0 < int(configured) <= 900, configured
    (tmp_path / "test_hang.py").write_text("import time\n\ndef test_hang():\n    time.sleep(60)\n")
    # The project's ini with a 2 s limit instead of its own, so this test stays short.
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\ntimeout = 2\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-c", str(ini), str(tmp_path / "test_hang.py")],
                          capture_output=True, text=True, timeout=50, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "Timeout" in proc.stdout, proc.stdout[-2000:]


# A path in a document or docstring that names a file of this repository: docs/... or benchmarks/...
# (suites/ and baselines/ paths in the README are examples of the user's own files).
_REFERENCE = re.compile(r"\b((?:docs|benchmarks)/[\w./-]+\.(?:md|py|sh|toml|json|png))")
_SCANNED = ("*.py", "*.md", "*.yml", "*.toml", "*.sh")


def _project_files() -> list[Path]:
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=REPO, check=True).stdout.split()
    return [REPO / name for name in tracked if any(Path(name).match(p) for p in _SCANNED)
            and name != "tests/test_project.py"]


def test_every_referenced_repository_file_exists():
    missing = []
    for path in _project_files():
        for match in _REFERENCE.finditer(path.read_text(errors="replace")):
            target = match.group(1).rstrip(".")
            if not (REPO / target).exists():
                missing.append(f"{path.relative_to(REPO)} -> {target}")
    assert missing == [], missing


def test_no_reference_to_notes_outside_the_repository():
    """The team's notes (COMPILER_NOTES and the like) are not shipped; code and docs cite what is."""
    offenders = [str(p.relative_to(REPO)) for p in _project_files() if "COMPILER_NOTES" in p.read_text(errors="replace")]
    assert offenders == [], offenders
