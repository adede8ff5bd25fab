"""Output read in a CI log: real commands with stdout and stderr piped to files and no ``COLUMNS``
(GitHub Actions' logs are not terminals). Rich wrapped every table at 80 columns there, mid-hash
and mid-name; the nightly printed its Markdown summary with GitHub's escapes (``2026\\-12\\-04``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from perfguard.history.store import Store
from perfguard.report.escape import md_code, md_text
from perfguard.report.plain import plain_text

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
    from perfguard.history.store.alert_rows import Alert, AlertChange
    from perfguard.report.nightly import _alert_changes

    alert = Alert(1, "s", "cpu", "regression", "untriaged", "a" * 40, "b" * 40, changes=(
        AlertChange(1, "bert_t/mycc/cpu", "latency", "ratio", 1.054, 1.03, 1.08),
        AlertChange(2, "bert_t/mycc/cpu", "node_count", "absolute", 1.785, 1.785, 1.785)))
    text = _alert_changes(alert, "; ")
    assert "node\\_count (absolute) +78.5% (exact)" in text and "[+78.5%, +78.5%]" not in text
    assert "**+5.4%** [+3.0%, +8.0%]" in text
