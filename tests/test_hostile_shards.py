"""Hostile sizes, shards and merge (issue 32, items 3 and 10): ``--shard K/N`` with a huge N or
K, a shard document claiming a billion shards, a shard whose verdict rows were removed, a p-value
outside [0, 1], and command-line counts of ten digits are each one line and exit 2; nothing is
sized by N before it is checked, and the partition's memory follows the cases, not N.

The shard documents are the synthetic ones of ``test_shards`` (known rows, written by the
production ``to_json``) and the golden result file split in two; the refusals run
``python -m perfguard``."""

from __future__ import annotations

import dataclasses
import json
import tracemalloc
from pathlib import Path

import pytest

from perfguard.results import load_result
from perfguard.results.shard import ShardInfo
from perfguard.suite.shards import MAX_SHARDS, assignment

from .conftest import REPO, run_cli
from .test_shards import SUITE, _merge, _write_shards


def _one_line(proc, said: str) -> None:
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert said in proc.stderr, proc.stderr


@pytest.mark.parametrize(("shard", "said"), [
    ("1/100000000", "N is at most 10000"),
    ("1/99999999999999999999999", "N is at most 10000, found a number of 23 digits"),
    ("99999999999999999999/3", "K must be from 1 to N"),
    ("²/3", "expected K/N with whole numbers"),
])
def test_a_hostile_shard_is_one_line_on_run_check_and_nightly(tmp_path, shard, said):
    suite = tmp_path / "s.toml"
    suite.write_text(SUITE)
    for args in (["run", str(suite), "--out", str(tmp_path / "r.json")],
                 ["check", str(suite), "--against-pipeline", "none"],
                 ["nightly", str(suite), "--store", f"sqlite:///{tmp_path / 'h.sqlite'}"]):
        _one_line(run_cli(*args, "--shard", shard, cwd=tmp_path), said)


def test_the_partition_never_allocates_by_n():
    """Three groups over the most shards allowed: the bins never used are never made (the old
    partition made a load and a list per shard before placing anything)."""
    costs = {"a": 3.0, "b": 2.0, "c": 1.0}
    tracemalloc.start()
    try:
        placed = assignment(costs, MAX_SHARDS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert placed == {"a": 0, "b": 1, "c": 2}
    assert peak < 20_000  # a list per shard alone is 10,000 x 56 bytes


def _with(path: Path, change) -> Path:
    data = json.loads(path.read_text())
    change(data)
    out = path.with_name("hostile-" + path.name)
    out.write_text(json.dumps(data))
    return out


def test_merge_refuses_a_shard_claiming_a_billion_shards(tmp_path):
    one, two, three = _write_shards(tmp_path)
    billion = _with(one, lambda d: d["shard"].update(n=1_000_000_000))
    _one_line(_merge(billion, two, three, out=tmp_path / "m.json"), "n: 1000000000 is greater than the maximum of 10000")


def test_merge_refuses_a_shard_whose_rows_were_removed(tmp_path):
    one, two, three = _write_shards(tmp_path)
    cut = _with(two, lambda d: d.update(verdicts=d["verdicts"][:1]))
    proc = _merge(one, cut, three, out=tmp_path / "m.json")
    _one_line(proc, "shard 2/3: its row c/p/cpu latency is missing")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("value", [7.5, -0.1])
def test_merge_refuses_a_p_value_outside_zero_to_one(tmp_path, value):
    one, two, three = _write_shards(tmp_path)
    for field in ("p_value", "bh_adjusted_p"):
        def change(d, field=field):
            row = d["verdicts"][0]
            (row["comparison"] if field == "p_value" else row)[field] = value
        _one_line(_merge(one, _with(two, change), three, out=tmp_path / "m.json"), f"'{field}' must be from 0 to 1")


def test_merge_refuses_a_nan_p_value(tmp_path):
    one, two, three = _write_shards(tmp_path)
    bad = two.with_name("nan.json")
    bad.write_text(two.read_text().replace('"p_value": 0.03', '"p_value": NaN'))
    assert "NaN" in bad.read_text()
    _one_line(_merge(one, bad, three, out=tmp_path / "m.json"), "NaN is not a number")


def test_a_shard_of_format_1_merges_with_a_warning(tmp_path):
    """A shard written before shard format 2 lists no part and no rows: merged as before, with one
    warning that its rows are unchecked (the versioned loader's rule for older documents)."""
    one, two, three = _write_shards(tmp_path)

    def older(d):
        for key in ("version", "part", "rows"):
            del d["shard"][key]
    proc = _merge(_with(one, older), two, three, out=tmp_path / "m.json")
    assert proc.returncode == 1, proc.stderr  # the whole has regressions, as with format-2 shards
    assert "shard format 1" in proc.stdout and "cannot be checked" in proc.stdout


def test_a_newer_shard_format_is_refused(tmp_path):
    one, two, three = _write_shards(tmp_path)
    newer = _with(one, lambda d: d["shard"].update(version=3))
    _one_line(_merge(newer, two, three, out=tmp_path / "m.json"), "upgrade perfguard")


def test_merge_refuses_a_run_shard_without_one_of_its_cases(tmp_path):
    golden = load_result(REPO / "tests" / "golden" / "v1" / "result-run.json")
    ids = tuple(c.id for c in golden.cases)
    paths = []
    for k, part in ((1, ids[:2]), (2, ids[2:])):
        info = ShardInfo(k, 2, ids, "s" * 64, "t" * 64, None, None, part=part)
        document = dataclasses.replace(golden, cases=tuple(c for c in golden.cases if c.id in part), shard=info)
        path = tmp_path / f"r{k}.json"
        path.write_text(json.dumps(document.to_json()))
        paths.append(path)
    assert _merge(*paths, out=tmp_path / "whole.json").returncode == 0
    cut = _with(paths[1], lambda d: d.update(cases=d["cases"][:1]))
    _one_line(_merge(paths[0], cut, out=tmp_path / "m.json"), f"shard 2/2 holds no result of case {ids[3]}")


@pytest.mark.parametrize("args", [["run", "--workers", "99999999999999999999"], ["run", "--rounds", "10000000000"],
                                  ["check", "--against-pipeline", "none", "--max-workers", "100000"]])
def test_command_line_counts_are_range_checked(tmp_path, args):
    suite = tmp_path / "s.toml"
    suite.write_text(SUITE)
    _one_line(run_cli(args[0], str(suite), *args[1:], cwd=tmp_path), "must be from 1 to")


def test_the_help_names_the_cap_the_parser_enforces():
    from perfguard.cli._shard import HELP_MAX_SHARDS

    assert HELP_MAX_SHARDS == MAX_SHARDS
