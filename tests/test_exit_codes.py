"""Exit codes that never lie: an internal error is not a regression, `bisect step` never makes
`git bisect run` blame a commit for a tool error, outputs are checked before any work and never
left half written, and a bad git ref is a one-line usage error.

Most tests run ``python -m perfguard`` (or ``python -c`` with one planted fault, then the real
``main``) as a user would, and check the exit code and the single stderr line.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perfguard import cli
from perfguard.errors import BackendError, BuildError, StorageError, UserError
from perfguard.exit_codes import ExitCode

from .conftest import FAST_MEASURE, REPO, TINY_MODELS
from .factories import compiler_suite, git, make_compiler_repo, pass_source


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, COLUMNS="200", TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _cli(tmp_path: Path, *args: str, fault: str = "", cwd: Path | None = None,
         timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m perfguard ARGS``; with ``fault``, that Python code runs first in the same process."""
    command = [sys.executable, "-m", "perfguard", *args]
    if fault:
        command = [sys.executable, "-c", f"{textwrap.dedent(fault)}\nimport sys\nfrom perfguard.cli import main\n"
                   "sys.exit(main(sys.argv[1:]))", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd or tmp_path, timeout=timeout,
                          env=_env(tmp_path), check=False)


def _one_line(proc: subprocess.CompletedProcess[str], code: int, prefix: str, *fragments: str) -> str:
    """Exit ``code``, no traceback, and exactly one stderr line, starting with ``prefix``."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code, f"exit {proc.returncode}: {proc.stdout[-1500:]}{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].startswith(prefix), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# A suite whose pipeline `touch` runs a user pass that leaves a marker file: if the marker exists,
# perfguard compiled something.
MARKER_PASS = '''
import pathlib


def touch(model):
    pathlib.Path({marker!r}).write_text("compiled")
    return model
'''


@pytest.fixture
def marked(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "COMPILED"
    (tmp_path / "cc").mkdir()
    (tmp_path / "cc" / "marker.py").write_text(MARKER_PASS.format(marker=str(marker)))
    suite = tmp_path / "suite.toml"
    suite.write_text(textwrap.dedent(f"""
        [suite]
        name = "marks"
        [compiler]
        path = "cc"
        {FAST_MEASURE}
        [check]
        workers = 2
        step_workers = 2
        max_workers = 2
        {TINY_MODELS}
        [pipelines.none]
        passes = []
        [pipelines.touch]
        passes = ["marker:touch"]
    """))
    (tmp_path / "afile").write_text("a regular file: nothing can be created under it\n")
    return suite, marker


# --------------------------------------------------------------------------------------------
# (a) internal errors: exit 70, one line, the traceback in a file, an error document at --json

CRASH = """
import perfguard.suite
def crash(*args, **kwargs):
    raise RuntimeError("boom in the loader\\nsecond line of the message")
perfguard.suite.load_suite = crash
"""


def test_internal_error_is_exit_70_with_one_line_and_the_traceback_in_a_file(tmp_path, marked):
    suite, _ = marked
    out = tmp_path / "verdicts.json"
    proc = _cli(tmp_path, "check", str(suite), "--against-pipeline", "none", "--json", str(out), fault=CRASH)
    line = _one_line(proc, 70, "perfguard: internal error: RuntimeError: boom in the loader; traceback written to ")
    assert "second line" not in line
    path = Path(line.rsplit("traceback written to ", 1)[1])
    assert path.parent == tmp_path / "tmp" and path.is_file()
    text = path.read_text()
    assert "Traceback (most recent call last)" in text and "second line of the message" in text
    assert "perfguard check" in text  # the command that crashed
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    document = json.loads(out.read_text())
    assert document["kind"] == "error" and document["exit_code"] == 70
    assert document["error"]["type"] == "RuntimeError" and document["error"]["traceback_file"] == str(path)
    assert "Traceback" in document["error"]["traceback"]


def test_internal_error_is_never_exit_1_in_any_command(tmp_path, marked):
    suite, _ = marked
    for args in (["run", str(suite)], ["validate", str(suite)], ["baseline", "update", str(suite)],
                 ["compile", str(suite), "--out", str(tmp_path / "art")]):
        proc = _cli(tmp_path, *args, fault=CRASH)
        _one_line(proc, 70, "perfguard: internal error: RuntimeError: boom in the loader")


def test_internal_error_without_a_writable_temp_folder_prints_the_traceback(monkeypatch, capsys):
    import tempfile

    def crash(args):
        raise KeyError("missing")

    monkeypatch.setattr(tempfile, "tempdir", "/proc/no-such-folder")
    monkeypatch.setattr("perfguard.cli.passes.run", crash)
    code = cli.main(["passes"])
    err = capsys.readouterr().err
    assert code == ExitCode.INTERNAL == 70
    assert err.startswith("perfguard: internal error: KeyError: 'missing'; no file could hold the traceback")
    assert "Traceback (most recent call last)" in err


def test_an_oserror_of_a_full_disk_is_exit_2_with_one_line(tmp_path, marked):
    suite, _ = marked
    fault = """
import errno, perfguard.suite
def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", "/var/cache/perfguard/model.onnx")
perfguard.suite.load_suite = full
"""
    proc = _cli(tmp_path, "run", str(suite), fault=fault)
    _one_line(proc, 2, "perfguard: error: ", "/var/cache/perfguard/model.onnx", "No space left on device")


def test_exit_codes_are_distinct_and_documented():
    # The numbers are the interface: CI scripts and git bisect run read them.
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0, "REGRESSION": 1, "USAGE": 2, "UNKNOWN": 3, "CASE_FAILED": 4, "NO_REGRESSION": 5,
        "UNDECIDED": 6, "INTERNAL": 70, "STEP_SKIP": 125, "STEP_ABORT": 128, "HUNG_UP": 129, "INTERRUPTED": 130,
        "BROKEN_PIPE": 141, "TERMINATED": 143}
    assert (ExitCode.FOUND, ExitCode.INCONCLUSIVE, ExitCode.STEP_GOOD, ExitCode.STEP_BAD) == (0, 3, 0, 1)
    assert ExitCode.INTERNAL not in (3, 5, 6, 125) and ExitCode.STEP_ABORT > 127
    # The site's exit-code page: its per-command table is written by hand, the enum's is generated.
    page = (REPO / "docs" / "reference" / "exit-codes.md").read_text()
    assert "| 70 |" in page and "| 128 |" in page and "| 6 |" in page and "<!-- perfguard:exit-codes -->" in page
    assert "70" in (cli.__doc__ or "") and "128" in (cli.__doc__ or "")


def test_one_table_maps_each_error_kind_to_its_code():
    assert cli.exit_code_of(UserError("x")) == cli.exit_code_of(StorageError("x")) == ExitCode.USAGE
    assert cli.exit_code_of(BuildError("x", "base")) == ExitCode.USAGE
    assert cli.exit_code_of(KeyboardInterrupt()) == ExitCode.INTERRUPTED
    assert cli.exit_code_of(BrokenPipeError()) == ExitCode.BROKEN_PIPE
    for bug in (RuntimeError("x"), KeyError("x"), OSError(5, "I/O error"), BackendError("x")):
        assert cli.exit_code_of(bug) == ExitCode.INTERNAL, bug
    # Under bisect step every error of the tool aborts git bisect run; the others keep their code.
    assert cli.exit_code_of(UserError("x"), step=True) == cli.exit_code_of(RuntimeError(), step=True) == 128
    assert cli.exit_code_of(KeyboardInterrupt(), step=True) == ExitCode.INTERRUPTED


# --------------------------------------------------------------------------------------------
# (b) bisect step: a tool error aborts git bisect run (exit 128), it never marks a commit bad


def _toy_history(tmp_path: Path, n: int = 4) -> tuple[Path, list[str]]:
    versions = [("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)})]
    versions += [(f"commit {i}", {f"docs/n{i}.txt": f"note {i}\n"}) for i in range(1, n + 1)]
    return make_compiler_repo(tmp_path / "cc-repo", versions)


def _bisect_run(tmp_path: Path, repo: Path, shas: list[str], *step: str,
                python: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    git(repo, "bisect", "start", shas[-1], shas[0])
    command = python or [sys.executable, "-m", "perfguard"]
    env = dict(_env(tmp_path), HOME=str(tmp_path), PATH=f"/usr/bin:/bin:{os.environ.get('PATH', '')}")
    return subprocess.run(["git", "-C", str(repo), "bisect", "run", *command, "bisect", "step", *step],
                          capture_output=True, text=True, timeout=600, cwd=REPO, env=env, check=False)


def _aborted(proc: subprocess.CompletedProcess[str]) -> None:
    output = proc.stdout + proc.stderr
    assert "is the first bad commit" not in output, output[-3000:]
    assert "only 'skip'ped commits" not in output, output[-3000:]
    assert proc.returncode != 0 and "exit code 128" in output, output[-3000:]


def test_git_bisect_run_aborts_on_a_broken_suite(tmp_path):
    repo, shas = _toy_history(tmp_path)
    suite = tmp_path / "broken.toml"
    suite.write_text("[suite\nname = 'broken'\n")
    proc = _bisect_run(tmp_path, repo, shas, "--suite", str(suite), "--case", "r/mycc/cpu", "--good", shas[0])
    _aborted(proc)
    assert "malformed TOML" in proc.stderr and "git bisect run aborts" in proc.stderr


def test_git_bisect_run_aborts_when_the_good_commit_does_not_build(tmp_path):
    repo, shas = _toy_history(tmp_path)
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo).replace("[compiler]\n", '[compiler]\nbuild = "exit 3"\n'))
    proc = _bisect_run(tmp_path, repo, shas, "--suite", str(suite), "--case", "r/mycc/cpu", "--good", shas[0])
    _aborted(proc)
    assert "build of base failed" in proc.stderr


def test_git_bisect_run_aborts_on_an_internal_error(tmp_path):
    repo, shas = _toy_history(tmp_path)
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo))
    python = [sys.executable, "-c", CRASH + "\nimport sys\nfrom perfguard.cli import main\nsys.exit(main())"]
    proc = _bisect_run(tmp_path, repo, shas, "--suite", str(suite), "--case", "r/mycc/cpu", "--good", shas[0],
                       python=python)
    _aborted(proc)
    assert "perfguard: internal error: RuntimeError: boom in the loader" in proc.stderr


def test_bisect_step_errors_exit_128(tmp_path):
    repo, shas = _toy_history(tmp_path, 1)
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo))
    proc = _cli(tmp_path, "bisect", "step", "--suite", str(suite))  # missing --case and --good
    assert proc.returncode == 128 and "Traceback" not in proc.stderr, proc.stderr
    assert "the following arguments are required" in proc.stderr
    proc = _cli(tmp_path, "bisect", "step", "--suite", str(suite), "--case", "r/mycc/cpu", "--good", "no-such-ref")
    _one_line(proc, 128, "perfguard: error: unknown git ref 'no-such-ref'", "git bisect run aborts")
    proc = _cli(tmp_path, "bisect", "step", "--suite", str(suite), "--case", "nope/*", "--good", shas[0])
    _one_line(proc, 128, "perfguard: error: ", "nope/*")


# --------------------------------------------------------------------------------------------
# (c) outputs are checked before any work, and never left half written

def _blocked_cases(tmp_path: Path, suite: Path) -> list[tuple[str, list[str]]]:
    blocked = str(tmp_path / "afile" / "out.json")
    folder = str(tmp_path / "afile" / "dir")
    ok = str(tmp_path / "ok.json")
    s = str(suite)
    bisect = ["bisect", "passes", "--suite", s, "--case", "resnet_t/none/cpu", "--good-pipeline", "none",
              "--bad-pipeline", "touch", "--quiet"]
    return [
        ("--out", ["run", s, "--out", blocked, "--quiet"]),
        ("--keep-artifacts", ["run", s, "--out", ok, "--keep-artifacts", folder, "--quiet"]),
        ("--out", ["baseline", "update", s, "--out", blocked, "--quiet"]),
        ("--write", ["calibrate", s, "--case", "*/touch/*", "--write", blocked, "--quiet"]),
        ("--json", ["calibrate", s, "--case", "*/touch/*", "--json", blocked, "--quiet"]),
        ("--json", ["check", s, "--against-pipeline", "none", "--json", blocked, "--quiet"]),
        ("--report", ["check", s, "--against-pipeline", "none", "--report", folder, "--quiet"]),
        ("--out", ["compile", s, "--out", folder, "--quiet"]),
        ("--json", [*bisect, "--json", blocked, "--state", str(tmp_path / "state.json")]),
        ("--state", [*bisect, "--state", blocked]),
    ]


@pytest.mark.parametrize("index", range(10))
def test_unwritable_output_is_refused_before_any_compile(tmp_path, marked, index):
    suite, marker = marked
    option, args = _blocked_cases(tmp_path, suite)[index]
    path = args[args.index(option) + 1]
    proc = _cli(tmp_path, *args)
    _one_line(proc, 2, "perfguard: error: ", f"{option} {path} is not writable", "is not a folder")
    assert not marker.exists(), "perfguard compiled before it checked its outputs"
    assert not (tmp_path / "ok.json").exists()


def test_unwritable_default_output_folder_is_refused(tmp_path, marked):
    suite, marker = marked
    (tmp_path / "perfguard-results").write_text("a file where run's default folder would go\n")
    proc = _cli(tmp_path, "run", str(suite), "--quiet")
    _one_line(proc, 2, "perfguard: error: the result file (set --out FILE) perfguard-results/", "is not a folder")
    (tmp_path / ".perfguard").write_text("a file where bisect's state folder would go\n")
    proc = _cli(tmp_path, "bisect", "passes", "--suite", str(suite), "--case", "resnet_t/none/cpu",
                "--good-pipeline", "none", "--bad-pipeline", "touch", "--quiet")
    _one_line(proc, 2, "perfguard: error: the state folder (set --state FILE)", "is not a folder")
    assert not marker.exists()


def test_check_writable_on_paths_root_cannot_write_either(tmp_path):
    from perfguard.results import check_writable

    (tmp_path / "afile").write_text("x")
    for path, directory in ((tmp_path / "afile" / "x.json", False), (Path("/proc/perfguard.json"), False),
                            (tmp_path / "afile", True), (tmp_path, False), (Path("/proc/perfguard-dir"), True)):
        with pytest.raises(Exception) as info:
            check_writable(path, "--out", directory=directory)
        assert type(info.value).__name__ == "UserError" and str(info.value).startswith(f"--out {path} ")
    check_writable(tmp_path / "new" / "deeper" / "x.json", "--out")
    check_writable(tmp_path / "new-dir", "--out", directory=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # the probes left nothing behind


def _full_disk(monkeypatch, where: str) -> None:
    def fail(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, where, fail)


@pytest.mark.parametrize("where", ["replace", "fsync"])
def test_the_shared_writer_leaves_no_half_file_on_a_full_disk(tmp_path, monkeypatch, where):
    from perfguard.errors import StorageError
    from perfguard.results import write_json_atomic, write_text_atomic

    target = tmp_path / "result.json"
    target.write_text('{"old": true}\n')
    _full_disk(monkeypatch, where)
    with pytest.raises(StorageError, match="No space left on device"):
        write_json_atomic(target, {"new": True})
    with pytest.raises(StorageError, match="No space left on device"):
        write_text_atomic(tmp_path / "summary.md", "# summary\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]
    assert json.loads(target.read_text()) == {"old": True}


def test_the_shared_writer_keeps_links_and_writes_pipes_in_place(tmp_path):
    from perfguard.results import write_json_atomic, write_text_atomic

    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_json_atomic(link, {"a": 1})
    assert link.is_symlink() and json.loads(real.read_text()) == {"a": 1}
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    write_text_atomic(fifo, "through the pipe\n")
    assert reader.communicate(timeout=30)[0] == "through the pipe\n" and fifo.exists()


BISECT_DOCUMENT = REPO / "tests" / "golden" / "bisect-example.json"


def test_report_outputs_are_checked_first_and_a_full_disk_leaves_nothing(tmp_path):
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "report"
    proc = _cli(tmp_path, "report", str(BISECT_DOCUMENT), "--out", str(out), "--summary-md",
                str(tmp_path / "afile" / "summary.md"))
    _one_line(proc, 2, "perfguard: error: --summary-md ", "is not writable")
    assert not out.exists(), "the report was written before its other outputs were checked"
    fault = """
import errno, os
def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")
os.replace = full
"""
    proc = _cli(tmp_path, "report", str(BISECT_DOCUMENT), "--out", str(out), fault=fault)
    _one_line(proc, 2, "perfguard: error: ", "index.html", "No space left on device")
    assert list(out.iterdir()) == [], [p.name for p in out.iterdir()]


@pytest.mark.slow
def test_a_failed_compile_leaves_no_half_written_folder(tmp_path, marked):
    suite, _ = marked
    fault = """
import errno
from perfguard.measure.job import Job
compile = Job.compile
def compile_then_fill_the_disk(self):
    compile(self)
    raise OSError(errno.ENOSPC, "No space left on device")
Job.compile = compile_then_fill_the_disk
"""
    out = tmp_path / "art"
    proc = _cli(tmp_path, "compile", str(suite), "--out", str(out), "--case", "*/none/*", "--quiet", fault=fault)
    _one_line(proc, 2, "perfguard: error: No space left on device")
    assert not out.exists()
    out.mkdir()  # an empty folder given by the user stays, empty
    proc = _cli(tmp_path, "compile", str(suite), "--out", str(out), "--case", "*/none/*", "--quiet", fault=fault)
    assert proc.returncode == 2 and out.is_dir() and list(out.iterdir()) == []


# --------------------------------------------------------------------------------------------
# (d) a bad git ref inside a real repository


def test_unknown_git_refs_are_exit_2_with_one_line(tmp_path):
    repo, shas = _toy_history(tmp_path, 1)
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo))
    missing = "0" * 40  # looks like a sha, is not in the repository
    for ref in ("no-such-ref", missing, "HEAD^{tree}"):
        proc = _cli(tmp_path, "check", str(suite), "--base-ref", ref, "--quiet")
        _one_line(proc, 2, f"perfguard: error: unknown git ref {ref!r} in {repo}")
    proc = _cli(tmp_path, "bisect", "commits", "--suite", str(suite), "--case", "r/mycc/cpu", "--good", "nope",
                "--bad", shas[-1], "--state", str(tmp_path / "s.json"))
    _one_line(proc, 2, "perfguard: error: unknown git ref 'nope'")
    proc = _cli(tmp_path, "bisect", "passes", "--suite", str(suite), "--case", "r/mycc/cpu", "--good", shas[0],
                "--bad", missing, "--state", str(tmp_path / "s.json"))
    _one_line(proc, 2, f"perfguard: error: unknown git ref {missing!r}")
    assert not (tmp_path / "s.json").exists()


# --------------------------------------------------------------------------------------------
# (e) bisect documents, the error tree, programming errors in stats


def test_bisect_passes_documents_have_case_probes_and_the_version_constant(tmp_path, monkeypatch, capsys):
    import contextlib

    from perfguard.bisect import BISECT_VERSION
    from perfguard.compile.checkout import CompilerCheckout

    repo, shas = _toy_history(tmp_path, 1)
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo, extra='[pipelines.other]\npasses = ["mycc.passes:identity"]\n'))
    same = {"decision": "same", "direction": None, "ratio": 1.0, "ci_low": 0.99, "ci_high": 1.01}

    def no_regression(suite, case, variants, comparisons, settings, progress):
        from perfguard.bisect.state import ProbeRecord

        return ProbeRecord.from_json({
            "status": "ok", "verdicts": {f"{a}->{b}": dict(same, baseline=a, candidate=b) for a, b in comparisons},
            "entries": {v.label: {"trace": None} for v in variants}, "looks": []})

    @contextlib.contextmanager
    def trees(suite, refs):
        yield {ref: CompilerCheckout(ref[:10], repo, repo, ref) for ref in refs}

    monkeypatch.setattr("perfguard.flows.probe.run_probe", no_regression)
    monkeypatch.setattr("perfguard.flows.bisection.pass_search.run_probe", no_regression)
    monkeypatch.setattr("perfguard.flows.probe.checkouts", trees)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "versions.json"
    code = cli.main(["bisect", "passes", "--suite", str(suite), "--case", "r/mycc/cpu", "--good", shas[0],
                     "--bad", shas[1], "--json", str(out), "--state", str(tmp_path / "a.json"), "--quiet"])
    assert code == 5
    document = json.loads(out.read_text())
    assert document["total_probes"] == 1 and document["version"] == BISECT_VERSION and document["case"] == "r/mycc/cpu"
    assert "probes: 1," in capsys.readouterr().out
    out = tmp_path / "pipelines.json"
    code = cli.main(["bisect", "passes", "--suite", str(suite), "--case", "r/mycc/cpu", "--good-pipeline", "mycc",
                     "--bad-pipeline", "other", "--json", str(out), "--state", str(tmp_path / "b.json"), "--quiet"])
    assert code == 5
    document = json.loads(out.read_text())
    assert document["status"] == "no-regression" and document["case"] == "r/mycc/cpu"
    assert document["version"] == BISECT_VERSION and document["suite"] == "toy"


def test_the_error_tree():
    import perfguard.compile.checkout
    import perfguard.errors as errors

    assert issubclass(errors.BuildError, errors.UserError)
    assert perfguard.compile.checkout.BuildError is errors.BuildError
    assert errors.BuildError("build of base failed", "base").label == "base"
    for declared_never_raised in ("CorrectnessError", "MeasurementError"):
        assert not hasattr(errors, declared_never_raised)
        assert declared_never_raised not in (errors.__doc__ or "")


def test_every_exception_class_of_perfguard_is_in_the_one_documented_tree():
    import ast
    import builtins
    import inspect

    import perfguard.errors as errors

    tree = {name: kind for name, kind in vars(errors).items()
            if inspect.isclass(kind) and issubclass(kind, BaseException) and kind.__module__ == errors.__name__}
    # No module but perfguard.errors defines an exception: a class whose base is one is flagged.
    exception_names = set(tree) | {name for name, kind in vars(builtins).items()
                                   if inspect.isclass(kind) and issubclass(kind, BaseException)}
    elsewhere = []
    for path in (REPO / "perfguard").rglob("*.py"):
        if path.name == "errors.py" and path.parent.name == "perfguard":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    (b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "")
                    in exception_names for b in node.bases):
                elsewhere.append(f"{path.relative_to(REPO)}: {node.name}")
    assert elsewhere == []
    for name, kind in tree.items():  # each is described in the tree and has a one-line docstring
        assert f"``{name}``" in (errors.__doc__ or ""), name
        assert kind.__doc__ and "\n" not in kind.__doc__.strip(), name
    # What each branch means at the exit: the user's to fix (2), or a bug when it escapes (70).
    assert cli.exit_code_of(errors.StoreError("x")) == ExitCode.USAGE
    for decode in (errors.FieldError, errors.RefusedValue, errors.TraceError, errors.NsightError):
        assert issubclass(decode, ValueError) and cli.exit_code_of(decode("x")) == ExitCode.INTERNAL
    assert errors.ProtocolError is errors.FieldError


def test_stats_raise_programming_errors_not_user_errors():
    from perfguard.errors import UserError
    from perfguard.stats.compare import compare_paired
    from perfguard.stats.multiple import benjamini_hochberg
    from perfguard.stats.options import ComparisonOptions

    for call in (lambda: compare_paired([[1.0]], [], ComparisonOptions(rel_floor=0.0)),
                 lambda: compare_paired([[1.0]], [[1.0]], ComparisonOptions(alpha=2.0)),
                 lambda: benjamini_hochberg([0.5], q=0.0)):
        with pytest.raises((ValueError, TypeError)) as info:
            call()
        assert not isinstance(info.value, UserError)
