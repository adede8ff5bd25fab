"""Output read in a CI log: real commands with stdout and stderr piped to files and no ``COLUMNS``
(GitHub Actions' logs are not terminals). Rich wrapped every table at 80 columns there, mid-hash
and mid-name; the nightly printed its Markdown summary with GitHub's escapes (``2026\\-12\\-04``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfguard.report.escape import md_code, md_text
from perfguard.report.plain import plain_text
from perfguard.store import Store

from .test_history_site import build_store
from .test_site_alerts import _fill

LONG_MODEL = "a_model_whose_name_alone_is_longer_than_the_eighty_columns_of_rich_s_default_console"


def _piped(tmp_path: Path, *args: str) -> tuple[int, list[str], list[str]]:
    """Run ``perfguard ARGS`` as a CI job does: stdout and stderr are files, COLUMNS unset."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        code = subprocess.run([sys.executable, "-m", "perfguard", *args], stdout=stdout, stderr=stderr, env=env,
                              cwd=tmp_path, timeout=600, check=False).returncode
    return code, out.read_text().splitlines(), err.read_text().splitlines()


def test_history_alerts_in_a_log_keeps_every_commit_range_and_case_on_one_line(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    alerts = _fill(built.url)
    with Store.open(built.url, create=False) as store:
        found = store.alerts()
    code, lines, err = _piped(tmp_path, "history", "alerts", "--store", built.url)
    assert code == 0, err
    assert len(found) == len(alerts.ids)
    for alert in found:
        commits = f"{(alert.first_commit or '?')[:10]}..{(alert.last_commit or '?')[:10]}"
        row = [line for line in lines if commits in line]
        assert row, f"{commits} is split across lines:\n" + "\n".join(lines)
        for change in alert.changes:  # each change's line names the case whole
            assert any(change.case in line for line in lines), change.case


SUITE = f"""
[suite]
name = "logs"

[measure]
workers = 1
rounds = 2
warmup = 1
min_time = "1ms"
compile_repeats = 1
memory_probes = 1
timeout = "60s"
compile_timeout = "60s"

[models.{LONG_MODEL}]
arch = "resnet"
params = {{ depth = 1, width = 4, image_size = 16, num_classes = 4 }}

[pipelines.none]
passes = []
"""


def test_the_run_table_and_its_progress_lines_do_not_wrap_in_a_log(tmp_path: Path) -> None:
    (tmp_path / "suite.toml").write_text(SUITE)
    code, lines, err = _piped(tmp_path, "run", "suite.toml", "--out", str(tmp_path / "r.json"))
    assert code == 0, "\n".join(err)
    case = f"{LONG_MODEL}/none/cpu"
    assert len(case) > 80
    assert any(case in line and "ok" in line for line in lines), "\n".join(lines)  # the row, whole
    progress = [line for line in err if line.startswith("perfguard: ")]
    assert progress and any(case in line for line in progress), "\n".join(err)


def test_the_nightly_prints_its_summary_as_plain_text(tmp_path: Path) -> None:
    """The console gets the summary without Markdown escapes; ``--summary`` gets the Markdown."""
    (tmp_path / "suite.toml").write_text(SUITE.replace('name = "logs"', 'name = "my_suite-2026-12-04"'))
    store = f"sqlite:///{tmp_path / 'h.sqlite'}"
    Store.open(store, create=True).close()
    code, lines, err = _piped(tmp_path, "nightly", "suite.toml", "--store", store, "--bisect-only",
                              "--summary", str(tmp_path / "summary.md"))
    assert code == 0, "\n".join(err)
    assert "perfguard nightly: bisections (my_suite-2026-12-04)" in lines, lines
    assert not any("\\" in line for line in lines), lines
    assert "my\\_suite" in (tmp_path / "summary.md").read_text()  # GitHub's copy stays escaped


def test_plain_text_undoes_the_escapes_of_names_and_keeps_tables_on_one_line() -> None:
    name = "<b>bert_t</b>/my*cc/cpu @team | #12 2026-12-04"
    markdown = "\n".join([f"## nightly: {md_text(name)}", "", f"At {md_code('da70fe1a79')}.", "",
                          "| alert | changes |", "|---|---|", f"| 1 | {md_text(name)} **+5.0%** |", "",
                          f"- {md_text('- 1. starts like a list')}", ""])
    text = plain_text(markdown)
    assert text.splitlines()[:2] == [f"nightly: {name}", "=" * len(f"nightly: {name}")]
    assert "At da70fe1a79." in text
    assert f"1 | {name} +5.0%" in text.splitlines()
    assert "- - 1. starts like a list" in text.splitlines()
    assert "\u200b" not in text and "&lt;" not in text
    assert "\\x1b" in plain_text(md_text("a\x1bb"))  # control characters stay visible escapes


def test_an_exact_change_in_the_nightly_summary_has_no_zero_width_interval() -> None:
    from perfguard.report.nightly import _alert_changes
    from perfguard.store.alert_rows import Alert, AlertChange

    alert = Alert(1, "s", "cpu", "regression", "untriaged", "a" * 40, "b" * 40, changes=(
        AlertChange(1, "bert_t/mycc/cpu", "latency", "ratio", 1.054, 1.03, 1.08),
        AlertChange(2, "bert_t/mycc/cpu", "node_count", "absolute", 1.785, 1.785, 1.785)))
    text = _alert_changes(alert, "; ")
    assert "node\\_count (absolute) +78.5% (exact)" in text and "[+78.5%, +78.5%]" not in text
    assert "**+5.4%** [+3.0%, +8.0%]" in text


# --- issue 43: tables fit 120 columns, titles are lines of their own, words and numbers read -----------

def _fits(lines: list[str], width: int = 120) -> None:
    long = [line for line in lines if len(line) > width]
    assert not long, f"{len(long)} line(s) over {width} columns:\n" + "\n".join(long)


def _check_document(case_name: str = LONG_MODEL[:60]) -> object:
    """The hand-built check of ``tests/test_report`` (a latency and a node-count regression, an
    undecided compile time, an improvement, a failed case), its hostile case renamed long."""
    import json

    from perfguard.report import parse_document

    from .test_report import HOSTILE_MODEL, make_verdicts

    return parse_document(json.loads(json.dumps(make_verdicts()).replace(HOSTILE_MODEL, case_name)))


def test_the_check_table_fits_a_log_with_its_title_and_reasons_on_lines_of_their_own(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from perfguard.cli._verdicts import print_verdicts

    monkeypatch.delenv("COLUMNS", raising=False)
    print_verdicts(_check_document())  # type: ignore[arg-type]
    lines = capsys.readouterr().out.splitlines()
    _fits(lines)
    assert lines[0] == "perfguard check: head vs main (1234567890) (base-ref)"  # not wrapped, not centred
    case = f"{LONG_MODEL[:60]}/fast|`x`/cpu"
    assert any(line.startswith("│ " + case[:30]) for line in lines), "\n".join(lines)
    assert f"{case} node_count: 20 -> 26 (+6, +30.00 %), floor 2 %" in lines  # the why, plain words
    assert any(line.startswith(f"{case} latency: 1 ms -> 1.25 ms: regression +25.00%") for line in lines)
    assert "2 regressions, 1 improvement, 2 same, 1 undecided, 1 failed" in "\n".join(lines)
    assert "1 improvements" not in "\n".join(lines)


def test_medians_and_detectable_changes_read_without_exponents_or_absurd_percentages() -> None:
    from perfguard.compare.check import detectable
    from perfguard.report.format import plural
    from perfguard.units import format_duration

    assert format_duration(0.0009996) == "1 ms"  # was 1e+03 us
    assert format_duration(999.7) == "1000 s" and format_duration(1234.5) == "1234 s"
    assert format_duration(812e-6) == "812 us" and format_duration(9.9996e-7) == "1 us"
    assert detectable(1507.95, 3) == "over 100%, far beyond what 3 samples resolve"  # was 150795%
    assert detectable(0.25, 3) == "25%"
    assert (plural(1, "regression"), plural(2, "regression"), plural(0, "case")) == (
        "1 regression", "2 regressions", "0 cases")


def test_history_list_show_and_alerts_fit_a_log_with_unpadded_titles(tmp_path: Path) -> None:
    built = build_store(tmp_path)
    _fill(built.url)
    printed = {}
    for command in ("list", "show", "alerts", "changes"):
        args = (command, "resnet_s/bn_fused_folded") if command == "show" else (command,)
        code, lines, err = _piped(tmp_path, "history", *args, "--store", built.url)
        assert code == 0, err
        _fits(lines)
        titles = [line for line in lines if " in sqlite:" in line or "night(s)" in line]
        assert titles, lines
        assert all(line == line.strip() for line in titles), titles  # never padded or centred
        printed[command] = lines
    assert "  why: memory: +285 us in Transpose, +24 nodes: memory" in printed["alerts"]  # under its alert


def test_the_nightly_summary_as_plain_text_fits_a_log() -> None:
    row = " | ".join(["3", "regression", "untriaged", "a" * 10 + ".." + "b" * 10, "; ".join(
        f"resnet_s/bn_fused_folded_{i}/cpu latency (ratio) **+5.0%** [+3.0%, +8.0%]" for i in range(4))])
    markdown = "\n".join(["## perfguard nightly: smoke", "", "| alert | state | triage | commits | changes |",
                          "|---|---|---|---|---|", f"| {row} |", "", "x " * 100])
    lines = plain_text(markdown).splitlines()
    _fits(lines)
    assert lines[0] == "perfguard nightly: smoke"
    assert "resnet_s/bn_fused_folded_3/cpu" in " ".join(lines)
