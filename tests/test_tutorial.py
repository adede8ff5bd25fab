"""The tutorial (``docs/guides/tutorial.md``) stays true: its files are written and its commands run,
in the page's order, in an empty folder, and every command must exit as the page says (``# exits N``,
else 0) and print the page's output lines.

Timings, sizes and hashes differ from run to run, so lines are compared with every number and
hash replaced; the rows of the timing tables and the line on compile time's gate are left out (what
noise lets a comparison decide differs by machine), the node-count row (exact) is kept.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

PAGE = REPO / "docs" / "guides" / "tutorial.md"
_FENCE = re.compile(r"(?:<!-- file: (?P<file>[^ ]+) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)\n```", re.S)
_TABLE = tuple("┏┃┡│└")


def _steps(page: str) -> list[tuple[str, str, str]]:
    """(kind, target, body): ("file", path, text) and ("console", "", block) in page order."""
    steps = []
    for match in _FENCE.finditer(page):
        if match.group("file"):
            steps.append(("file", match.group("file"), match.group("body") + "\n"))
        elif match.group("lang") == "console":
            steps.append(("console", "", match.group("body")))
    return steps


def _commands(block: str) -> list[tuple[str, int, list[str]]]:
    """Each ``$ command`` of a console block with its exit code and the output lines under it."""
    found: list[tuple[str, int, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            code = re.search(r"#\s*exits (\d+)", line)
            found.append((line[2:], int(code.group(1)) if code else 0, []))
        elif found:
            found[-1][2].append(line)
    return found


def _normal(line: str, home: str) -> str:
    line = line.replace(home, "/home/you")
    line = re.sub(r"[0-9a-f]{10,}", "H", line)
    line = re.sub(r"[+\-−]?\d+(\.\d+)?", "N", line)  # a measured change may print either sign
    line = re.sub(r"\b(N [a-z]+?)s\b", r"\1", line)  # "1 regression", "2 regressions": as many as measured
    line = re.sub(r"([━─ ])\1+", r"\1", line)  # column widths follow the numbers
    return line.strip()


#: Lines that depend on the machine's noise, not compared: whether compile time could be gated, and
#: latency's reason (wrapped where its numbers put the break) and whether this runner resolves its floor.
_NOISY = ("compile time not gated", "latency undecided", "resnet/mycc/cpu latency:", "resnet/plain/cpu latency:")
_CONTINUED = re.compile(r"^    \S")  # the rest of a wrapped line (CI logs wrap at 120 columns)


def _compared(lines: list[str]) -> list[str]:
    return [line for line in lines if line.strip() and (not line.startswith(_TABLE) or "node_count" in line)
            and not line.startswith(_NOISY) and not _CONTINUED.match(line)]


@pytest.mark.slow
def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    steps = _steps(PAGE.read_text(encoding="utf-8"))
    assert [kind for kind, _, _ in steps].count("file") == 3 and any(kind == "console" for kind, _, _ in steps)
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = str(Path(sys.executable).parent)
    env = {**{k: v for k, v in os.environ.items() if k != "COLUMNS"}, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "GIT_AUTHOR_NAME": "You", "GIT_AUTHOR_EMAIL": "you@example.com", "GIT_COMMITTER_NAME": "You",
           "GIT_COMMITTER_EMAIL": "you@example.com"}
    cwd = home
    ran = 0
    for kind, target, body in steps:
        if kind == "file":
            (cwd / target).write_text(body, encoding="utf-8")
            continue
        for command, code, expected in _commands(body):
            if command.startswith("cd "):
                cwd = cwd / command[3:].strip()
                continue
            done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=600, check=False)
            said = (done.stdout + done.stderr).splitlines()
            assert done.returncode == code, f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
            real = {_normal(line, str(home)) for line in said}
            missing = [line for line in _compared(expected) if _normal(line, "/home/you") not in real]
            assert not missing, f"{command}: the page says lines it did not print: {missing}\nit printed:\n" + \
                "\n".join(said)
            ran += 1
    assert ran >= 8  # git and perfguard: validate, run, check, nightly
