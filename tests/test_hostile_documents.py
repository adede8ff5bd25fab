"""Hostile documents and suites: what a user (or an attacker) hands perfguard never crashes it.

Property-based (hypothesis, bounded and seeded): valid documents from ``tests/golden/v1`` and
files shaped as pytest-benchmark and asv write them are mutated (NaN, infinities, numbers that
overflow, huge, negative and zero numbers, wrong types, deep nesting, missing keys, truncated
text, bytes that are not UTF-8), and suite files get hostile durations and tolerances. Every
reader and every command that reads them (``compare``, ``report``, ``history ingest``,
``validate``) either takes the input or refuses it with exit 2 and one line; never exit 70, never
a traceback, and never a half-written output: a ``--json`` file, a report or a history store is
either absent or complete. The probes of issue 23 run as real ``python -m perfguard`` processes.
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from perfguard.cli import main
from perfguard.errors import StorageError, UserError
from perfguard.units import parse_duration, parse_size

from .conftest import REPO, run_cli

GOLDEN = REPO / "tests" / "golden" / "v1"
RESULT = GOLDEN / "result-run.json"
VERDICTS = GOLDEN / "verdicts-compare.json"

# Few examples, always the same ones: the file runs in well under a minute on a busy machine.
BOUNDED = settings(max_examples=30, derandomize=True, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                          HealthCheck.data_too_large])


class Raw:
    """A token written verbatim into the JSON text (Python cannot hold ``1e400`` as a float)."""

    def __init__(self, text: str) -> None:
        self.text = text


HOSTILE: list[Any] = [
    math.nan, math.inf, -math.inf, Raw("1e400"), Raw("-1e400"), 10**400, 2**64, -(2**63) - 1, -1, -0.5, 0, 0.0,
    1e308, 5e-324, 1e-300, "x", "", None, True, [], {}, "[/bold]", "\ud800", Raw("[" * 5000 + "]" * 5000),
]


def _paths(document: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every path into ``document`` (keys and indexes), and those that end at a number."""
    every: list[tuple[Any, ...]] = []
    numbers: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), document)]
    while stack:
        path, value = stack.pop()
        if path:
            every.append(path)
        if isinstance(value, dict):
            stack.extend((path + (k,), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((path + (i,), v) for i, v in enumerate(value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            numbers.append(path)
    return sorted(every, key=repr), sorted(numbers, key=repr)


def _parent(document: Any, path: tuple[Any, ...]) -> Any:
    """The container that holds ``path``'s last step, or None when an earlier mutation removed it."""
    node = document
    for step in path[:-1]:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return None
    if isinstance(node, dict) and path[-1] in node or isinstance(node, list) and path[-1] < len(node):
        return node
    return None


def mutations(original: Path | dict[str, Any]) -> st.SearchStrategy[bytes]:
    """The bytes of ``original`` (a file or a JSON object) after one to three hostile edits of its
    values (half of them on numbers), then maybe cut short, given bytes that are not UTF-8 or
    buried in deep nesting."""
    text = original.read_text() if isinstance(original, Path) else json.dumps(original)
    every, numbers = _paths(json.loads(text))

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        document = json.loads(text)
        raws: dict[str, str] = {}
        for _ in range(draw(st.integers(1, 3))):
            path = draw(st.sampled_from(numbers) if numbers and draw(st.booleans()) else st.sampled_from(every))
            parent = _parent(document, path)
            if parent is None:
                continue
            if isinstance(parent, dict) and draw(st.integers(0, 5)) == 0:
                del parent[path[-1]]  # a missing key
                continue
            value = draw(st.sampled_from(HOSTILE))
            if isinstance(value, Raw):
                marker = f"@raw{len(raws)}@"
                raws[json.dumps(marker)] = value.text
                value = marker
            parent[path[-1]] = value
        out = json.dumps(document, allow_nan=True, indent=1)
        for marker, raw in raws.items():
            out = out.replace(marker, raw)
        data = out.encode()
        ending = draw(st.sampled_from(["as is", "as is", "truncated", "not utf-8", "deep"]))
        if ending == "truncated":
            data = data[: draw(st.integers(0, len(data) - 1))]
        elif ending == "not utf-8":
            at = draw(st.integers(0, len(data)))
            data = data[:at] + b"\xff\xfe\xc3" + data[at:]
        elif ending == "deep":
            depth = draw(st.sampled_from([99, 101, 5000, 100_000]))
            data = b"[" * depth + data + b"]" * depth
        return data

    return build()


@pytest.fixture(autouse=True)
def _own_temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a command leaves in the temporary folder (the traceback file of an internal
    error, should one happen) lands in this test's folder, not in /tmp."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))


def _fresh(tmp_path: Path) -> Path:
    """A folder of its own for one example (hypothesis runs many in one test's tmp_path)."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


def _call(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def _documented(code: int, err: str, allowed: set[int], *, hypothesis: bool = True) -> None:
    """An exit the command documents; on 2 one line naming what to fix; never a traceback."""
    if hypothesis:  # --hypothesis-show-statistics: how many examples got through, how many were refused
        event(f"exit {code}")
    assert code in allowed, err
    assert "Traceback" not in err and "internal error" not in err, err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("perfguard: error: "), err


def _stored_documents(store: Path) -> int:
    if not store.exists():
        return 0
    with sqlite3.connect(store) as conn:
        return int(conn.execute("select count(*) from documents").fetchone()[0])


# --- the readers ----------------------------------------------------------------------------------


def _readers() -> dict[str, Callable[[Path], Any]]:
    from perfguard.bisect.document import load_bisect
    from perfguard.compare.verdicts import load_verdicts
    from perfguard.report import load_document
    from perfguard.results import load_result, read_json
    from perfguard.store.extract import extract

    def ingest(path: Path) -> Any:
        return extract(read_json(path, missing="{path}: missing", not_json="{path}: not JSON ({exc})"), str(path))

    return {"result": load_result, "verdicts": load_verdicts, "bisect": load_bisect, "any": load_document,
            "ingest": ingest}


@pytest.mark.parametrize("golden", ["result-run.json", "verdicts-compare.json", "bisect-commits.json"])
@BOUNDED
@given(data=st.data())
def test_every_reader_takes_a_hostile_document_or_refuses_it_in_one_line(tmp_path: Path, golden: str,
                                                                        data: st.DataObject) -> None:
    path = _fresh(tmp_path) / golden
    path.write_bytes(data.draw(mutations(GOLDEN / golden)))
    for name, read in _readers().items():
        try:
            read(path)
        except UserError as exc:  # the only way out: StorageError and its parent
            message = str(exc)
            assert "\n" not in message and str(path) in message, (name, message)


# --- the commands ---------------------------------------------------------------------------------


@BOUNDED
@given(data=st.data())
def test_compare_of_a_hostile_result_exits_as_documented_and_writes_all_or_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject) -> None:
    folder = _fresh(tmp_path)
    candidate, out = folder / "candidate.json", folder / "verdicts.json"
    candidate.write_bytes(data.draw(mutations(RESULT)))
    code, err = _call(capsys, "compare", str(RESULT), str(candidate), "--json", str(out))
    _documented(code, err, {0, 1, 2, 3})
    if code == 2:
        assert not out.exists()
    else:
        from perfguard.compare.verdicts import load_verdicts

        load_verdicts(out)  # complete and valid


@pytest.mark.parametrize("original", [RESULT, VERDICTS], ids=["result", "verdicts"])
@BOUNDED
@given(data=st.data())
def test_report_of_a_hostile_document_exits_as_documented_and_writes_all_or_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], original: Path, data: st.DataObject) -> None:
    folder = _fresh(tmp_path)
    document, out = folder / original.name, folder / "report"
    document.write_bytes(data.draw(mutations(original)))
    code, err = _call(capsys, "report", str(document), "--out", str(out))
    _documented(code, err, {0, 2})
    written = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert written == (["comment.md", "index.html", "summary.md"] if code == 0 else []), written


@pytest.mark.parametrize("original", [RESULT, VERDICTS], ids=["result", "verdicts"])
@BOUNDED
@given(data=st.data())
def test_history_ingest_of_a_hostile_document_stores_it_whole_or_not_at_all(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], original: Path, data: st.DataObject) -> None:
    folder = _fresh(tmp_path)
    document, store = folder / original.name, folder / "history.sqlite"
    document.write_bytes(data.draw(mutations(original)))
    code, err = _call(capsys, "history", "ingest", str(document), "--store", str(store))
    _documented(code, err, {0, 2})
    assert _stored_documents(store) == (1 if code == 0 else 0)


def _pytest_benchmark_file() -> dict[str, Any]:
    stats = {"min": 1e-3, "max": 2e-3, "mean": 1.4e-3, "stddev": 1e-4, "rounds": 3, "median": 1.2e-3, "iqr": 1e-4,
             "q1": 1.1e-3, "q3": 1.3e-3, "iqr_outliers": 0, "stddev_outliers": 1, "outliers": "1;0",
             "ld15iqr": 1e-3, "hd15iqr": 2e-3, "ops": 700.0, "total": 4.2e-3, "iterations": 1,
             "data": [1e-3, 1.2e-3, 2e-3]}
    return {"machine_info": {"node": "n", "cpu": {"brand_raw": "cpu"}, "python_implementation": "CPython",
                             "python_version": "3.11"},
            "commit_info": {"id": "abc", "project": "p"}, "datetime": "2026-12-01T10:00:00+00:00", "version": "5.3.1",
            "benchmarks": [{"group": None, "name": f"test_{n}", "fullname": f"t.py::test_{n}", "params": None,
                            "stats": dict(stats)} for n in ("a", "b[1]")]}


def _asv_results() -> dict[str, Any]:
    return {"version": 2, "commit_hash": "a" * 40, "env_name": "existing", "date": 1796146105000,
            "params": {"machine": "m"}, "python": "3.11", "requirements": {}, "env_vars": {},
            "result_columns": ["result", "params", "stats_ci_99_a", "stats_ci_99_b", "samples"],
            "results": {"b.time_x": [[1e-3, 2e-3], [["1", "2"]], [9e-4, 1.9e-3], [1.1e-3, 2.1e-3],
                                     [[1e-3, 1.1e-3], [2e-3, 2.1e-3]]],
                        "b.mem_y": [[4096], []]}}


ASV_BENCHMARKS = {"b.time_x": {"name": "b.time_x", "type": "time", "unit": "seconds"},
                  "b.mem_y": {"name": "b.mem_y", "type": "memory", "unit": "bytes"}, "version": 2}


@pytest.mark.parametrize("fmt", ["pytest-benchmark", "asv"])
@BOUNDED
@given(data=st.data())
def test_history_ingest_of_a_hostile_file_of_another_tool_stores_it_whole_or_not_at_all(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, data: st.DataObject) -> None:
    folder = _fresh(tmp_path)
    store = folder / "history.sqlite"
    if fmt == "pytest-benchmark":
        path = folder / "0001_run.json"
        path.write_bytes(data.draw(mutations(_pytest_benchmark_file())))
    else:
        (folder / "results" / "m").mkdir(parents=True)
        (folder / "results" / "benchmarks.json").write_text(json.dumps(ASV_BENCHMARKS))
        (folder / "results" / "m" / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
        path = folder / "results" / "m" / "aaaaaaaa-existing.json"
        path.write_bytes(data.draw(mutations(_asv_results())))
    code, err = _call(capsys, "history", "ingest", "--format", fmt, str(path), "--store", str(store))
    _documented(code, err, {0, 2})
    assert _stored_documents(store) == (1 if code == 0 else 0)


def test_an_asv_export_into_a_folder_whose_results_hold_infinity_keeps_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """asv writes Infinity for an interval it cannot compute; exporting again into that folder
    merges the file and writes it back as asv would, not exit 70."""
    repo = tmp_path / "compiler"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    argv = ["export", "asv", str(RESULT), "--out", str(tmp_path / "site"), "--repo", str(repo), "--commit", "a" * 40]
    assert _call(capsys, *argv)[0] == 0
    (results,) = (tmp_path / "site" / "results").glob("*/aaaaaaaa-*.json")
    document = json.loads(results.read_text())
    document["results"]["other.time_y"] = [[math.inf], [], None, None, None, [0.0], [math.inf]]
    results.write_text(json.dumps(document))
    code, err = _call(capsys, *argv)
    _documented(code, err, {0}, hypothesis=False)
    assert json.loads(results.read_text())["results"]["other.time_y"][0] == [math.inf]


@pytest.mark.parametrize("recorded", ['{"input_ids": [5, 7]}', "[" * 100_000 + "]" * 100_000, '{"input_ids": [1e400, 0]}',
                                      '{"input_ids": [9, 3]}', '{"input_ids": "x"}', '["input_ids"]', "NaN", "{",
                                      '{"input_ids": [0, 1' + "0" * 400 + "]}"])
def test_a_model_file_with_hostile_input_ranges_gets_inputs_all_the_same(recorded: str) -> None:
    """A model's ``perfguard.input_ranges`` metadata is the user's file too: a range that is not
    one is ignored, as for a model that records none."""
    from perfguard.models.inputs import input_specs, make_feeds
    from perfguard.models.zoo import build_bert

    model = build_bert(layers=1, hidden=16, heads=2, seq_len=8, vocab=100)
    for prop in model.metadata_props:
        if prop.key == "perfguard.input_ranges":
            prop.value = recorded
    specs = {spec.name: spec for spec in input_specs(model)}
    feeds = make_feeds(list(specs.values()), seed=0)
    low, high = (5, 7) if recorded == '{"input_ids": [5, 7]}' else (0, 100)  # else: the embedding's rows
    assert (specs["input_ids"].low, specs["input_ids"].high) == (low, high)
    assert low <= feeds["input_ids"].min() and feeds["input_ids"].max() < high


# --- suites and the units they are written in -------------------------------------------------------

DURATIONS = st.one_of(
    st.sampled_from(['"1e400s"', '"nan s"', '"inf s"', '"-1s"', '"0s"', '"1e-400s"', '"25h"', '"2h"', '"1e9h"',
                     '"9999999999999999999999s"', '"20ms"', '"1s"', '"59min"', "nan", "inf", "-inf", "1e400", "20",
                     "true", '""', "[]"]),
    st.builds(lambda n, unit: f'"{n}{unit}"', st.floats(allow_nan=False, allow_infinity=False, min_value=0),
              st.sampled_from(["s", "ms", "us", "ns", "min", "h"])),
)
NUMBERS = st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e-3", "1e308", "9223372036854775807", '"x"', "true"])


SUITE_KEYS = {"measure": {"min_time": DURATIONS, "max_time": DURATIONS, "timeout": DURATIONS,
                           "compile_timeout": DURATIONS},
              "correctness": {"rtol": NUMBERS, "atol": NUMBERS}, "runners.cpu": {"telemetry_interval": DURATIONS}}


@BOUNDED
@given(data=st.data())
def test_validate_of_a_suite_with_hostile_numbers_exits_0_or_2_naming_the_file_and_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject) -> None:
    suite = _fresh(tmp_path) / "suite.toml"
    text = ('[suite]\nname = "hostile"\n[models.resnet_t]\narch = "resnet"\n'
            "params = { depth = 2, width = 8, image_size = 32, num_classes = 10 }\n[pipelines.none]\npasses = []\n")
    written = []
    for table, keys in SUITE_KEYS.items():
        text += f"[{table}]\n"
        for key, values in keys.items():
            value = data.draw(st.none() | values)  # most keys keep their default: a refusal names the one
            if value is not None:
                text += f"{key} = {value}\n"
                written.append(key)
    suite.write_text(text)
    code, err = _call(capsys, "validate", str(suite))
    _documented(code, err, {0, 2})
    if code == 2:
        assert str(suite) in err and any(key in err for key in written), err


@settings(max_examples=200, derandomize=True, deadline=None, database=None)
@given(text=st.one_of(st.text(max_size=30), st.builds(lambda n, u: f"{n}{u}", st.floats(), st.sampled_from(
    ["s", "ms", "us", "min", "h", " s", "B", "KiB", "MB", "GiB", "gb", ""]))))
def test_a_duration_or_size_is_finite_and_bounded_or_a_user_error(text: str) -> None:
    try:
        seconds = parse_duration(text, "key", at_most=3600.0)
    except UserError as exc:
        assert "\n" not in str(exc)
    else:
        assert 0 < seconds <= 3600.0
    try:
        size = parse_size(text, "key")
    except UserError as exc:
        assert "\n" not in str(exc)
    else:
        assert 0 <= size <= 2**63


# --- the probes of issue 23, as a user runs them ----------------------------------------------------


def _one_line(proc: Any, *fragments: str) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfguard: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return str(lines[0])


def _edited_result(tmp_path: Path, name: str, edit: Callable[[dict[str, Any]], None], **dumps: Any) -> Path:
    data = json.loads(RESULT.read_text())
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data, **dumps))
    return path


def test_nan_latencies_are_refused_by_compare_report_and_ingest_naming_the_field(tmp_path: Path) -> None:
    def nan_latencies(data: dict[str, Any]) -> None:
        latency = data["cases"][1]["metrics"]["latency_s"]
        latency["per_worker"] = [[math.nan] * len(w) for w in latency["per_worker"]]

    path = _edited_result(tmp_path, "nan.json", nan_latencies)
    out = tmp_path / "verdicts.json"
    field = "nan.json: cases[1].metrics.latency_s.per_worker[0][0]: NaN is not a number"
    _one_line(run_cli("compare", str(RESULT), str(path), "--json", str(out)), field)
    assert not out.exists()
    _one_line(run_cli("report", str(path), "--out", str(tmp_path / "report")), field)
    assert not (tmp_path / "report").exists()
    store = tmp_path / "history.sqlite"
    _one_line(run_cli("history", "ingest", str(path), "--store", str(store)), field)  # not dropped silently
    assert _stored_documents(store) == 0


@pytest.mark.parametrize(("edit", "message"), [
    (lambda case: case["metrics"].update(node_count=-5), "metrics: field 'node_count' must be an integer from 0"),
    (lambda case: case["measurement"].update(min_time_s=-0.02), "measurement: field 'min_time_s' must be a finite "
                                                                  "number of seconds, 0 or more"),
    (lambda case: case["measurement"].update(workers_ok=-1), "measurement: field 'workers_ok' must be an integer"),
    (lambda case: case["metrics"]["latency_s"].update(median=1e300), "latency: field 'median' must be a finite "
                                                                      "number of seconds"),
], ids=["node_count", "min_time_s", "workers_ok", "median"])
def test_a_negative_or_absurd_value_the_schema_leaves_open_is_refused_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[dict[str, Any]], None],
        message: str) -> None:
    path = _edited_result(tmp_path, "absurd.json", lambda data: edit(data["cases"][2]))
    for argv in (["compare", str(RESULT), str(path)], ["report", str(path), "--out", str(tmp_path / "r")],
                 ["history", "ingest", str(path), "--store", str(tmp_path / "h.sqlite")]):
        code, err = _call(capsys, *argv)
        _documented(code, err, {2}, hypothesis=False)
        assert f"absurd.json: corrupt result file: {message}" in err, err
    assert not (tmp_path / "r").exists() and not (tmp_path / "h.sqlite").exists()


def test_a_node_count_of_10_to_the_400_is_refused_by_compare_report_and_ingest(tmp_path: Path) -> None:
    path = _edited_result(tmp_path, "big.json", lambda d: d["cases"][0]["metrics"].update(node_count=10**400))
    field = "big.json: cases[0].metrics.node_count: "
    _one_line(run_cli("compare", str(RESULT), str(path)), field, "too large an integer")
    _one_line(run_cli("report", str(path), "--out", str(tmp_path / "report")), field)
    _one_line(run_cli("history", "ingest", str(path), "--store", str(tmp_path / "h.sqlite")), field)


def test_json_nested_100000_deep_is_refused_in_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    _one_line(run_cli("compare", str(deep), str(deep)), "deep.json: nested deeper than 100 levels")


def test_a_min_time_of_1e400s_is_refused_by_validate_naming_the_file_and_key(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text('[suite]\nname = "s"\n[models.resnet_t]\narch = "resnet"\n'
                     'params = { depth = 2, width = 8, image_size = 32, num_classes = 10 }\n'
                     '[pipelines.none]\npasses = []\n[measure]\nmin_time = "1e400s"\n')
    _one_line(run_cli("validate", str(suite)), f"{suite}: [measure].min_time: duration must be at most 1h",
              "'1e400s'")


def test_half_a_surrogate_pair_in_a_name_is_refused_before_a_report_or_the_store_gets_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _edited_result(tmp_path, "surrogate.json", lambda data: data["suite"].update(name="smoke\ud800"))
    report, store = tmp_path / "report", tmp_path / "h.sqlite"
    for argv in (["report", str(path), "--out", str(report)], ["history", "ingest", str(path), "--store", str(store)]):
        code, err = _call(capsys, *argv)
        _documented(code, err, {2}, hypothesis=False)
        assert "surrogate.json: suite.name: a string holds half of a UTF-16 surrogate pair" in err, err
    assert not report.exists() and not store.exists()


def test_the_reader_names_the_field_of_each_refused_number(tmp_path: Path) -> None:
    from perfguard.results import read_json

    cases = {"NaN": "NaN is not a number", "-Infinity": "-Infinity is not a number", "1e400": "overflows",
             "18446744073709551616": "too large an integer", "-9223372036854775809": "too large an integer"}
    for token, why in cases.items():
        path = tmp_path / "doc.json"
        path.write_text(f'{{"a": [1, {{"b": {token}}}]}}')
        with pytest.raises(StorageError) as caught:
            read_json(path, missing="{path}: missing", not_json="{path}: not JSON")
        message = str(caught.value)
        assert message.startswith(f"{path}: a[1].b: {token} ") and why in message, message
    path.write_text('{"a": [1, {"b": 9223372036854775808}], "c": 1e308}')  # 2**63 itself: the bound
    assert read_json(path, missing="", not_json="")["a"][1]["b"] == 2**63
