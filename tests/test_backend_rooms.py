"""Outside ``backends/`` (and the thin ``cli/``), perfguard knows backends only through the contract.

A runner, a document, a worker or a profile diff that names a backend (``ort``, ``onnxruntime``,
``iree``, ``tvm``, ``inductor``) grows a branch with every backend added and breaks the promise that
a third-party backend is the equal of a built-in one (issue 46). The scan reads code only: comments
and docstrings (any string that stands alone as a statement) may name backends, identifiers and
string literals may not, except the few places in ``ALLOW``, each with its reason.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "perfguard"

#: The rooms that may name backends: their own, and the command line that prints their wording.
EXEMPT = ("backends", "cli")

#: The most code lines outside the exempt rooms that may name a backend (issue 46: 40 counted by
#: hand before; 62 by this scan, which also counts import lines and identifiers such as ``ort_before``).
MOST_LINES = 15

#: ``(file relative to perfguard/, a snippet of the line) -> why the line names a backend``.
ALLOW: dict[tuple[str, str], str] = {
    ("suite/parse.py", 'head.get("backend", "ort")'):
        "the suite format's default backend; suite/ sits below backends/ and cannot ask it (a test "
        "below keeps it equal to DEFAULT_BACKEND)",
    ("runners/fingerprint.py", "LIBRARIES = ("):
        "the environment record names the libraries whose versions make numbers comparable",
    ("runners/cuda.py", '("onnxruntime-gpu",)'):
        "the cuda runner's fingerprint records its GPU runtime package's version (document content)",
    ("runners/npu.py", '"onnxruntime-qnn"'): "an NPU's fingerprint records its vendor package's version",
    ("runners/npu.py", '"onnxruntime-openvino"'): "an NPU's fingerprint records its vendor package's version",
    ("runners/npu.py", '"onnxruntime-vitisai"'): "an NPU's fingerprint records its vendor package's version",
    ("flows/tuning/tvm_database.py", "from perfguard.backends.tvm.meta_schedule import"):
        "the flow of `perfguard tvm-tune`, TVM's own command, composes TVM's tuner with the model stages",
    ("flows/tuning/tvm_database.py", 'prefix="perfguard-tvm-tune-"'): "the scratch folder of that command",
    ("profile/gpu_diff.py", 'GpuDiff("ort"'):
        "the explanation document's kernel source: the profiles' Kernel events are ORT's trace format",
    ("profile/gpu_diff.py", '"skipped: ORT kernels:'): "the wording of that source's skip reason (unchanged)",
    ("profile/dimension.py", '"ORT session_initialization'):
        "evidence quoting the profile's session_initialization event by the name ORT's trace format gives it",
    ("profile/explain.py", 'f"ort-{role}.json"'): "the raw profile files kept beside a trace, named as before",
    ("profile/perfetto.py", '"onnxruntime thread'): "the Perfetto track label of a profile thread (unchanged)",
}

#: Names distinctive enough to count wherever they appear, even inside a longer word
#: (``TORCHINDUCTOR_CACHE_DIR``); ``ort`` counts only as a word of its own (not ``report``, ``sort``).
_DISTINCT = re.compile(r"onnxruntime|inductor|iree|tvm", re.IGNORECASE)
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def names_backend(text: str) -> bool:
    """Whether an identifier or a string literal's text names a backend."""
    if _DISTINCT.search(text):
        return True
    return any(word.lower() == "ort" for word in _WORDS.findall(text))


def _docstring_lines(tree: ast.AST) -> set[int]:
    """The lines of every string that stands alone as a statement (docstrings, attribute notes)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def backend_lines(source: str) -> dict[int, str]:
    """The code lines of ``source`` that name a backend, by line number, stripped."""
    skipped = _docstring_lines(ast.parse(source))
    found: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.NAME, tokenize.STRING) or token.start[0] in skipped:
            continue
        if names_backend(token.string):
            found.add(token.start[0])
    text = source.splitlines()
    return {number: text[number - 1].strip() for number in sorted(found)}


def leaks() -> dict[str, dict[int, str]]:
    """Every file outside the exempt rooms with code lines that name a backend."""
    found: dict[str, dict[int, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.split("/")[0] in EXEMPT:
            continue
        lines = backend_lines(path.read_text(encoding="utf-8"))
        if lines:
            found[relative] = lines
    return found


def _allowed(relative: str, line: str) -> tuple[str, str] | None:
    for key in ALLOW:
        if key[0] == relative and key[1] in line:
            return key
    return None


def test_a_suite_without_a_backend_runs_on_the_backends_default(write_suite) -> None:
    """The suite format's default (``suite/``, below ``backends/``, writes it as a literal) is the
    one the backends name (``DEFAULT_BACKEND``: the spare worker's preload)."""
    from perfguard.backends import DEFAULT_BACKEND
    from perfguard.suite import load_suite

    path = write_suite('[suite]\nname = "t"\n\n[models.m]\narch = "resnet"\nparams = { depth = 2 }\n\n'
                       '[pipelines.a]\npasses = []\n')
    assert {case.pipeline.backend for case in load_suite(path).cases} == {DEFAULT_BACKEND}


def test_the_scan_reads_code_not_prose() -> None:
    source = (
        '"""The ort backend."""\n'
        "import sorted_things  # an ort comment\n"
        "def f(report):\n"
        '    """Uses tvm."""\n'
        '    return report, "iree-compile"\n'
        "class OrtBackend: ...\n"
        "TORCHINDUCTOR = check_ort_session\n"
    )
    assert backend_lines(source) == {5: 'return report, "iree-compile"', 6: "class OrtBackend: ...",
                                     7: "TORCHINDUCTOR = check_ort_session"}


def test_only_the_allow_list_names_a_backend_outside_its_room() -> None:
    found = leaks()
    unexplained = [f"{relative}:{number}: {line}" for relative, lines in found.items()
                   for number, line in lines.items() if _allowed(relative, line) is None]
    assert not unexplained, (
        "these code lines name a backend outside backends/ and cli/; ask the backend through its "
        "contract (capabilities, a Backend method, a backend-owned trace extension) instead:\n"
        + "\n".join(unexplained))
    used = {_allowed(relative, line) for relative, lines in found.items() for line in lines.values()}
    assert set(ALLOW) <= used, f"stale ALLOW entries: {sorted(set(ALLOW) - used)}"
    total = sum(len(lines) for lines in found.values())
    assert total <= MOST_LINES, f"{total} code lines name a backend outside its room (at most {MOST_LINES})"
    assert len(ALLOW) <= MOST_LINES
    assert all(reason.strip() for reason in ALLOW.values())
