"""Names are data: hostile model, pipeline, runner and case names through every command that
prints them, the suite's name rules, and the one place file names are made from names.

Suites name their models and pipelines with what a suite may hold (``test_sum[float32]``, a ``[``
and a ``]`` that join into ``[/x]`` in the case id, ``[bold]``, ``:fire:``, a right-to-left
override); documents (a result file, a pytest-benchmark import) carry what a suite refuses
(newlines, ESC, tabs, ``[/x]``, backslashes, 300 characters). Every command must show them
literally (control characters and bidi marks as escapes, ``perfguard.names.visible``) and exit
with its documented code, never 70. The suite-based commands run on the ``mock`` backend with the
smallest sampling and identical pipelines (a check or a probe of identical artifacts is decided
without timing), so the file runs in seconds.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from perfguard.names import MAX_FILENAME_LENGTH, MAX_NAME_LENGTH, name_problem, safe_filename, visible

from .conftest import TINY_MODELS, run_cli, smallest_measure

RTL = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: unescaped, it reverses the text after it on the line

# Valid in a suite: brackets (pytest ids), a model "m[" and a pipeline "x]" whose case id holds
# "[/x]" (the closing tag Rich refused with MarkupError), markup and emoji codes, a bidi mark.
SUITE = TINY_MODELS.replace("[models.resnet_t]", '[models."test_sum[float32]"]') + TINY_MODELS.replace(
    "[models.resnet_t]", '[models."m["]') + smallest_measure(1) + """
[suite]
name = "hostile[/x]"
backend = "mock"
runners = ["cpu"]
[check]
workers = 2
max_workers = 2
[pipelines."x]:fire:"]
passes = ["noop"]
[pipelines."[bold]p\\u202eevil"]
passes = ["noop", "noop"]
"""
PIPELINES = ("x]:fire:", f"[bold]p{RTL}evil")
CASES = [f"{m}/{p}/cpu" for m in ("test_sum[float32]", "m[") for p in PIPELINES]

# Only documents can carry these (a suite refuses them).
DOCUMENT_NAMES = ["a[/x]b\nnl", f"\x1b[31mred{RTL}evil\ttab", "x" * 300 + "\\back", "[/bold]:fire:",
                  "test_sum[float32]"]


def _shown(name: str) -> str:
    """How a name must appear on the terminal: literally, control characters and bidi marks escaped."""
    return visible(name)


def _column(stdout: str, index: int) -> str:
    """The text of column ``index`` of every Rich table in ``stdout``, concatenated: a long name is
    folded onto several lines of its cell, so it is found here whole."""
    cells = [line.split("│")[index + 1].strip() for line in stdout.splitlines()
             if line.startswith("│") and line.count("│") > index + 1]
    return "".join(cells)


def _clean(proc: object, *codes: int) -> None:
    returncode, stdout, stderr = proc.returncode, proc.stdout, proc.stderr  # type: ignore[attr-defined]
    assert returncode in codes, stdout + stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    # Nothing a name holds reached the terminal raw: no ESC, no bidi override, no emoji for :fire:.
    assert "\x1b" not in stdout + stderr and RTL not in stdout + stderr and "\N{FIRE}" not in stdout


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "suite.toml"
    path.write_text(SUITE)
    return path


@pytest.fixture(scope="module")
def result(suite: Path) -> Iterator[tuple[Path, object]]:
    """One real run of the hostile suite (the mock backend, one worker), its models kept."""
    out = suite.parent / "result.json"
    proc = run_cli("run", str(suite), "--out", str(out), "--keep-artifacts", str(suite.parent / "kept"),
                   cwd=suite.parent)
    yield out, proc


# -- suite-based commands --------------------------------------------------------------------------


def test_run_shows_case_ids_literally_in_its_progress_and_table(result: tuple[Path, object]) -> None:
    out, proc = result
    _clean(proc, 0)
    shown = _column(proc.stdout, 0)  # type: ignore[attr-defined]
    for case in CASES:
        assert _shown(case) in shown
    assert "perfguard run: hostile[/x]" in proc.stdout  # type: ignore[attr-defined]
    # Without a terminal the progress is one line per step, names as they are.
    assert "perfguard: compile m[/x]:fire:/cpu" in proc.stderr  # type: ignore[attr-defined]
    assert {c["id"] for c in json.loads(out.read_text())["cases"]} == set(CASES)
    # The models were written inside the work folder under safe file names.
    written = sorted(p.name for p in (out.parent / "kept" / "models").iterdir())
    assert written == sorted(f"{safe_filename(m)}.onnx" for m in ("test_sum[float32]", "m["))


def test_check_shows_case_and_pipeline_names_literally(suite: Path) -> None:
    proc = run_cli("check", str(suite), "--against-pipeline", PIPELINES[0], "--quiet", cwd=suite.parent)
    _clean(proc, 0)
    shown = _column(proc.stdout, 0)
    for case in CASES:
        if f"/{PIPELINES[0]}/" not in case:
            assert _shown(case) in shown
    assert f"vs pipeline {PIPELINES[0]} (pipeline)" in proc.stdout


def test_tune_shows_the_case_literally(suite: Path) -> None:
    proc = run_cli("tune", str(suite), "--case", "m[/[bold]", "--passes", "noop", "--budget", "2", "--no-proof",
                   "--screen-workers", "2", "--batch", "2", "--state", str(suite.parent / "tune-state.json"),
                   cwd=suite.parent)
    _clean(proc, 3)  # nothing better: every candidate compiles to the incumbent's artifact
    assert f"tune {_shown(CASES[3])}:" in proc.stdout


def test_bisect_shows_pipeline_and_case_names_literally(suite: Path) -> None:
    proc = run_cli("bisect", "passes", "--suite", str(suite), "--case", "m[/x]", "--good-pipeline", PIPELINES[0],
                   "--bad-pipeline", PIPELINES[1], "--state", str(suite.parent / "bisect-state.json"),
                   "--no-explain", cwd=suite.parent)
    _clean(proc, 5)  # the edit (one more noop) changes nothing: no reproducible regression
    assert f"edit script {PIPELINES[0]} -> {_shown(PIPELINES[1])}: insert noop" in proc.stdout
    assert "compile m[/good/cpu" in proc.stderr


# -- document-based commands -----------------------------------------------------------------------


def test_compare_shows_names_from_result_files_literally(result: tuple[Path, object], tmp_path: Path) -> None:
    out, _ = result
    document = json.loads(out.read_text())
    for case, name in zip(document["cases"], DOCUMENT_NAMES, strict=False):
        case["id"], case["model"], case["pipeline"] = f"{name}/p[/]/cpu", name, "p[/]"
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(document))
    proc = run_cli("compare", str(hostile), str(hostile), "--json", str(tmp_path / "v.json"))
    _clean(proc, 0)
    shown = _column(proc.stdout, 0)
    for name in DOCUMENT_NAMES[:len(document["cases"])]:
        assert _shown(f"{name}/p[/]/cpu") in shown
    rows = json.loads((tmp_path / "v.json").read_text())["verdicts"]
    assert {r["case"] for r in rows} == {c["id"] for c in document["cases"]}  # the data itself is unchanged


def _pytest_benchmark(path: Path, when: str, commit: str, scale: float) -> Path:
    """A pytest-benchmark --benchmark-json file whose benchmark, project and machine names are hostile."""
    path.write_text(json.dumps({
        "machine_info": {"node": "host[/x]", "cpu": {"brand_raw": f"cpu{RTL}"}, "python_implementation": "CPython",
                         "python_version": "3.11"},
        "commit_info": {"id": commit, "project": "proj[/p]"}, "datetime": when, "version": "4.0.0",
        "benchmarks": [{"name": name, "fullname": f"t.py::{name}",
                        "stats": {"median": 0.001 * scale, "data": [0.001 * scale] * 5}} for name in DOCUMENT_NAMES]}))
    return path


def test_history_list_show_and_changes_show_imported_names_literally(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'history.sqlite'}"
    files = [_pytest_benchmark(tmp_path / "a.json", "2026-01-01T00:00:00+00:00", "a" * 40, 1.0),
             _pytest_benchmark(tmp_path / "b.json", "2026-01-02T00:00:00+00:00", "b" * 40, 1.5)]
    proc = run_cli("history", "ingest", "--format", "pytest-benchmark", *map(str, files), "--store", store)
    _clean(proc, 0)
    assert "(pytest-benchmark:proj[/p])" in proc.stdout

    listed = run_cli("history", "list", "--store", store)
    _clean(listed, 0)
    cases = _column(listed.stdout, 0)
    for name in DOCUMENT_NAMES:
        assert _shown(name) in cases
    assert "host[/x]:cpu\\u202e" in _column(listed.stdout, 2)  # case, metric, runner

    shown = run_cli("history", "show", DOCUMENT_NAMES[0], "--store", store)
    _clean(shown, 0)
    assert f"{_shown(DOCUMENT_NAMES[0])} latency (absolute, runner host[/x]:cpu\\u202e): 2 night(s)" in shown.stdout

    # A change of a hostile series, with a hostile note, as the nightly records one.
    from perfguard.store import Store

    with Store.open(store) as opened:
        series = opened.series(case=DOCUMENT_NAMES[1])[0]
        opened.upsert_change(series.id, good_commit="a" * 40, bad_commit="b" * 40, time="2026-01-02T00:00:00Z",
                             ratio=1.5, ci_low=1.4, ci_high=1.6, status="pending", note="[/note]\x1b[2J")
    changes = run_cli("history", "changes", "--store", store)
    _clean(changes, 0)
    assert _shown(DOCUMENT_NAMES[1]) in _column(changes.stdout, 3)  # after the id and alert columns
    assert "[/note]\\x1b[2J" in _column(changes.stdout, 10)


# -- the suite's name rules ------------------------------------------------------------------------

MODEL = '[models."{name}"]\narch = "resnet"\nparams = {{ depth = 2, width = 8, image_size = 32, num_classes = 10 }}\n'
PIPELINE = '[pipelines."{name}"]\npasses = ["noop"]\n'


def _suite_text(models: list[str], pipelines: list[str], runners: str = '["cpu"]') -> str:
    return (f'[suite]\nbackend = "mock"\nrunners = {runners}\n' + "".join(MODEL.format(name=m) for m in models)
            + "".join(PIPELINE.format(name=p) for p in pipelines))


@pytest.mark.parametrize("text, table, name", [
    (_suite_text(["a/b"], ["p"]), "[models]", "'a/b'"),
    (_suite_text(["../../x"], ["p"]), "[models]", "'../../x'"),
    (_suite_text(["m"], ["a\\\\b"]), "[pipelines]", "'a\\\\b'"),
    (_suite_text([".."], ["p"]), "[models]", "'..'"),
    (_suite_text(["m"], [""]), "[pipelines]", "''"),
    (_suite_text(["m"], ["tab\\there"]), "[pipelines]", "'tab\\there'"),
    (_suite_text(["esc\\u001b[2J"], ["p"]), "[models]", "'esc\\x1b[2J'"),
    (_suite_text(["n" * (MAX_NAME_LENGTH + 1)], ["p"]), "[models]", f"'{'n' * (MAX_NAME_LENGTH + 1)}'"),
    (_suite_text(["m"], ["p"], '["cpu/x"]'), "[suite] runners", "'cpu/x'"),
])
def test_a_bad_name_in_a_suite_is_exit_2_naming_file_table_and_name(tmp_path: Path, text: str, table: str,
                                                                      name: str) -> None:
    path = tmp_path / "suite.toml"
    path.write_text(text)
    for command in (["validate", str(path)], ["run", str(path), "--out", str(tmp_path / "r.json")]):
        proc = run_cli(*command, cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert f"{path}: {table}:" in proc.stderr and name in proc.stderr, proc.stderr
    assert not (tmp_path / "r.json").exists() and not list(tmp_path.parent.glob("x.onnx"))


@pytest.mark.parametrize("name", ["test_sum[float32]", "a[bold]b", "npu:cpu", "with space", "ünï", f"rtl{RTL}",
                                  "n" * MAX_NAME_LENGTH, "a..b"])
def test_names_a_suite_may_use(name: str) -> None:
    assert name_problem(name) is None


# -- file names made from names --------------------------------------------------------------------

FOLDER = os.path.join(os.sep, "work", "folder")


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.one_of(st.text(), st.sampled_from(["", ".", "..", "../../x", "/etc/passwd", "a\\..\\b", "con", "NUL.txt",
                                             "..\x00", "\ud800", "x" * 300])))
def test_safe_filename_never_leaves_its_folder(name: str) -> None:
    safe = safe_filename(name)
    assert safe and safe not in (".", "..") and not safe.startswith(".")
    assert len(safe) <= MAX_FILENAME_LENGTH and re.fullmatch(r"[A-Za-z0-9._+=@,-]+", safe)
    for suffix in ("", ".onnx", ".json"):
        joined = os.path.normpath(os.path.join(FOLDER, safe + suffix))
        assert os.path.dirname(joined) == FOLDER
    assert safe_filename(name) == safe  # the same name always names the same file


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.text(), st.text())
def test_names_that_read_alike_name_different_files(a: str, b: str) -> None:
    if a != b:
        assert safe_filename(a) != safe_filename(b)


def test_a_plain_name_is_its_own_file_name() -> None:
    assert safe_filename("resnet_s") == "resnet_s" and safe_filename("iree-cpu.v2") == "iree-cpu.v2"
    assert safe_filename("a/b") != safe_filename("a_b") and safe_filename("a/b").startswith("a_b-")


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.text())
def test_visible_text_holds_no_control_character_or_bidi_mark(text: str) -> None:
    shown = visible(text)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or ord(c) in (0x200E, 0x200F, 0x2028, 0x2029)
                   or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 or 0xD800 <= ord(c) <= 0xDFFF
                   for c in shown)
    shown.encode("utf-8")  # a lone surrogate from a JSON document could not be printed at all


def test_a_model_name_that_bypassed_the_suite_stays_in_its_folder(tmp_path: Path) -> None:
    """A name no suite accepts (from a document, a test's own ModelSpec) is still written inside
    the work folder: the loader makes its file name with ``safe_filename``."""
    from perfguard.models.loader import materialize
    from perfguard.suite import ModelSpec

    folder = tmp_path / "work" / "models"
    spec = ModelSpec(name="../../x", arch="resnet", params={"depth": 2, "width": 8, "image_size": 32,
                                                             "num_classes": 10})
    loaded = materialize(spec, folder)
    assert loaded.path.parent == folder and loaded.path.is_file()
    assert not (tmp_path / "x.onnx").exists() and [p.name for p in tmp_path.iterdir()] == ["work"]
