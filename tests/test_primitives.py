"""The shared primitives, once each: "did you mean", the first line of an exception, atomic writes,
and the one vocabulary of units."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfguard.atomic import write_atomic, write_json_atomic
from perfguard.errors import (
    StorageError,
    UserError,
    close_names,
    did_you_mean,
    first_line,
    one_line,
    unknown_name_message,
)
from perfguard.units import (
    SIZE_UNITS,
    TIME_UNITS,
    format_bytes,
    format_duration,
    parse_duration,
    parse_size,
    to_bytes,
    to_seconds,
)

# -- did you mean ------------------------------------------------------------------------------


def test_did_you_mean_names_the_close_names_or_nothing() -> None:
    assert did_you_mean("wokers", ["workers", "warmup", "timeout"]) == " (did you mean 'workers'?)"
    assert did_you_mean("zzz", ["workers", "warmup"]) == ""
    assert did_you_mean("x", []) == ""
    assert did_you_mean("pass", ["passes", "pass_", "passed"]) == " (did you mean 'pass_', 'passes', 'passed'?)"
    assert did_you_mean("pass", ["passes", "pass_", "passed"], most=1) == " (did you mean 'pass_'?)"


def test_close_names_does_not_depend_on_the_order_of_the_valid_names() -> None:
    names = ["iree-opt-data-tiling", "iree-opt-level", "iree-opt-const-eval"]
    assert close_names("iree-opt-data-tilin", names) == close_names("iree-opt-data-tilin", reversed(names))


def test_unknown_name_message_lists_the_valid_names_sorted_once() -> None:
    assert (unknown_name_message("runner", "cdua", ["cuda", "cpu", "cuda"])
            == "unknown runner 'cdua' (did you mean 'cuda'?); valid: cpu, cuda")
    assert unknown_name_message("backend", "x", ["ort"]) == "unknown backend 'x'; valid: ort"
    many = [f"name{i:03d}" for i in range(70)]
    assert unknown_name_message("pass", "zz", many).endswith("name059, ...")


# -- the first line of an exception ------------------------------------------------------------


@pytest.mark.parametrize(("exc", "expected"), [
    (RuntimeError("boom"), "boom"),
    (RuntimeError(""), "RuntimeError"),
    (ValueError("   \n \t "), "ValueError"),
    (OSError("\n\n  no such file  \nmore detail"), "no such file"),
    (KeyError("k"), "'k'"),
    (RuntimeError("x" * 400), "x" * 300),
])
def test_first_line(exc: BaseException, expected: str) -> None:
    assert first_line(exc) == expected


def test_first_line_with_an_own_word_for_an_empty_message() -> None:
    assert first_line(RuntimeError(""), empty="(no message)") == "(no message)"
    assert first_line(RuntimeError("a\nb"), empty="(no message)") == "a"
    assert first_line(RuntimeError("abcdef"), limit=3) == "abc"


@pytest.mark.parametrize(("exc", "expected"), [
    (RuntimeError("a\n  b \n\nc"), "a b c"),
    (RuntimeError(""), "RuntimeError"),
    (UserError(" \n "), "UserError"),
    (RuntimeError("one"), "one"),
])
def test_one_line_keeps_the_whole_message(exc: BaseException, expected: str) -> None:
    assert one_line(exc) == expected


def test_no_copy_of_the_first_line_is_left_in_perfguard() -> None:
    root = Path(__file__).resolve().parents[1] / "perfguard"
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py") if p.name != "errors.py"
                 and any(copy in p.read_text() for copy in ("str(exc).strip().splitlines()", "get_close_matches"))]
    assert offenders == []


# -- atomic writes -----------------------------------------------------------------------------


def test_write_atomic_writes_text_and_bytes_and_creates_folders(tmp_path: Path) -> None:
    text = tmp_path / "a" / "b" / "notes.md"
    write_atomic(text, "µs and ünits\n")
    assert text.read_bytes() == "µs and ünits\n".encode()
    blob = tmp_path / "blob.bin"
    write_atomic(blob, b"\x00\xff" * 10)
    assert blob.read_bytes() == b"\x00\xff" * 10
    write_atomic(blob, b"")
    assert blob.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "blob.bin"]


def test_write_json_atomic_sorts_keys_and_refuses_nan_before_touching_the_file(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    write_json_atomic(path, {"b": 1, "a": [1.5]})
    assert path.read_text() == '{\n "a": [\n  1.5\n ],\n "b": 1\n}\n'
    with pytest.raises(ValueError):
        write_json_atomic(path, {"a": float("nan")})
    assert json.loads(path.read_text()) == {"a": [1.5], "b": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_write_atomic_failure_keeps_the_old_file_and_no_temporary(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.json"
    path.write_text("old")

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(StorageError, match=r"state\.json: cannot write: No space left on device"):
        write_atomic(path, b"new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_write_atomic_into_a_file_that_is_not_a_folder_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(StorageError, match="cannot write"):
        write_atomic(tmp_path / "afile" / "out.txt", "y")


def test_results_keeps_the_writer_names_it_always_exported() -> None:
    from perfguard import results

    assert results.write_text_atomic is write_atomic
    assert results.write_json_atomic is write_json_atomic


def test_the_atomic_writer_imports_no_numpy() -> None:
    code = "import sys, perfguard.atomic, perfguard.units; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert out.stdout.strip() == "False"


def test_the_worker_saves_reference_outputs_atomically_and_loadably(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    from perfguard.workers.worker import _load_outputs, _save_outputs

    path = str(tmp_path / "ref.npz")
    _save_outputs(path, [np.arange(6).reshape(2, 3), np.ones(2, dtype=np.float32)])
    first, second = _load_outputs(path)
    assert first.tolist() == [[0, 1, 2], [3, 4, 5]] and second.dtype == np.float32
    assert [p.name for p in tmp_path.iterdir()] == ["ref.npz"]


# -- units -------------------------------------------------------------------------------------


def test_one_time_vocabulary() -> None:
    assert set(TIME_UNITS) == {"s", "ms", "us", "\u00b5s", "\u03bcs", "ns", "min", "m", "h"}
    assert to_seconds(0.5, "ms") == 0.0005  # exactly as written: division, not * 1e-3
    assert to_seconds(0.3, "ms") == 0.3 / 1000
    assert to_seconds(200, "\u00b5s") == to_seconds(200, "\u03bcs") == to_seconds(200, "us") == 200 / 10**6
    assert to_seconds(2, "min") == to_seconds(2, "m") == 120.0 and to_seconds(1, "h") == 3600.0
    with pytest.raises(KeyError):
        to_seconds(1, "hr")


def test_one_size_vocabulary_mb_is_decimal_mib_is_binary() -> None:
    assert SIZE_UNITS["MB"] == 10**6 and SIZE_UNITS["MiB"] == 2**20
    assert to_bytes(10, "MB") == 10e6 and to_bytes(2, "MiB") == 2 * 1024**2
    with pytest.raises(KeyError):
        to_bytes(1, "mb")  # thresholds spell units exactly


@pytest.mark.parametrize(("text", "seconds"), [
    ("20ms", 0.02), ("5s", 5.0), (" 1.5 min ", 90.0), ("300us", 300e-6), ("300\u00b5s", 300e-6),
    ("300\u03bcs", 300e-6), ("10ns", 10e-9), ("1e-3s", 1e-3),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text, "k") == pytest.approx(seconds, rel=1e-15)


@pytest.mark.parametrize(("value", "fragment"), [
    (0.02, "expected a duration with a unit"), (True, "expected a duration with a unit"),
    ("0.02", "cannot read duration '0.02'"), ("10 parsecs", "cannot read duration"), ("", "cannot read duration"),
    ("0ms", "duration must be positive"), ("20MS", "cannot read duration"),
])
def test_parse_duration_refuses(value: object, fragment: str) -> None:
    with pytest.raises(UserError, match=f"^k: .*{fragment}"):
        parse_duration(value, "k")


@pytest.mark.parametrize(("value", "size"), [
    (4096, 4096), ("4096", 4096), ("1GiB", 1 << 30), ("512 mib", 512 << 20), ("2GB", 2 * 10**9),
    ("1.5kb", 1500), ("64B", 64), ("3 MB", 3 * 10**6),
])
def test_parse_size(value: object, size: int) -> None:
    assert parse_size(value, "opt") == size


@pytest.mark.parametrize("value", ["lots", "", "-1MiB", "0", 0, True, "1TiB", "1.2.3MB", None])
def test_parse_size_refuses(value: object) -> None:
    with pytest.raises(UserError, match=r"^opt: expected a (positive )?size"):
        parse_size(value, "opt")


def test_threshold_units_are_the_shared_vocabulary() -> None:
    from perfguard.stats.thresholds import parse_threshold

    assert parse_threshold("p90:0.5ms").absolute == 0.0005
    assert parse_threshold("max:1min", kind="time").absolute == 60.0
    assert parse_threshold("max:2MiB").absolute == 2 * 1024**2
    assert parse_threshold("max:10MB").absolute == 10**7
    with pytest.raises(UserError, match="unit 'mb' is not valid here"):
        parse_threshold("max:10mb")


def test_formatting() -> None:
    assert format_duration(0.00421) == "4.21 ms"
    assert format_duration(812e-6) == "812 us"
    assert format_duration(1.5) == "1.5 s"
    assert format_duration(float("nan")) == "n/a"
    assert format_bytes(100) == "100 B"
    assert format_bytes(12.3 * 2**20) == "12.3 MiB"
