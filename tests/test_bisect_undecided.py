"""Undecided ends are said as undecided (issue 43, item 2): ``perfguard bisect commits`` whose
good -> bad comparison stayed UNKNOWN (a ~100 us model on a loaded 2-core runner: +28.7 %
[-6.8 %, +67.1 %]) used to say "no reproducible regression between good and bad" with exit 5.
It now says "undecided", exits 6 (``ExitCode.UNDECIDED``), keeps that comparison as the
document's ``endpoints`` and names the ``--metric`` that decides it when an exact metric (the
node count) changed between the ends.

The probes are fakes with fixed verdicts (no compile, no measurement): the search, the flow, the
document and the command are real."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from perfguard import cli
from perfguard.bisect.document import BisectResult, VerdictSummary
from perfguard.bisect.search import SequenceBisector, exact_changes, undecided
from perfguard.bisect.state import ProbeEntry, ProbeRecord
from perfguard.exit_codes import ExitCode

from .factories import compiler_suite
from .test_exit_codes import _toy_history

UNDECIDED = {"decision": "unknown", "direction": "none", "ratio": 1.287, "ci_low": 0.932, "ci_high": 1.671,
             "reason": "+28.70% [-6.80%, +67.10%]: p=0.31 > 0.01"}


def _probe(verdict: dict[str, Any], nodes: tuple[int, int]) -> Any:
    """A probe whose every comparison is ``verdict`` and whose two ends compiled to ``nodes``."""

    def probe(suite: object, case: object, variants: list[Any], comparisons: list[tuple[str, str]], settings: object,
              progress: object) -> ProbeRecord:
        return ProbeRecord.from_json({
            "status": "ok", "looks": [],
            "verdicts": {f"{a}->{b}": dict(verdict, baseline=a, candidate=b) for a, b in comparisons},
            "entries": {v.label: {"trace": None, "median_s": 1e-4, "node_count": n}
                        for v, n in zip(variants, nodes, strict=True)}})

    return probe


def test_the_search_tells_an_undecided_end_from_no_change() -> None:
    def probe(positions: list[int], comparisons: list[tuple[int, int]]) -> ProbeRecord:
        return ProbeRecord("ok", None, {f"v{a}->v{b}": VerdictSummary.from_json(UNDECIDED) for a, b in comparisons},
                           {"v0": ProbeEntry(node_count=17), "v3": ProbeEntry(node_count=77)})

    search = SequenceBisector(3, probe, lambda i: f"v{i}")
    assert search.confirm_endpoints() is None  # nothing to search, as before
    verdict, changed = search.endpoints()
    assert undecided(verdict) and changed == {"node_count": (17.0, 77.0)}
    assert exact_changes(ProbeEntry(node_count=17), ProbeEntry(node_count=17)) == {}
    assert not undecided(None)


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    from perfguard.compile.checkout import CompilerCheckout

    repo, shas = _toy_history(tmp_path, 3)
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo))

    @contextlib.contextmanager
    def trees(suite: object, refs: list[str]) -> Iterator[dict[str, CompilerCheckout]]:
        yield {ref: CompilerCheckout(ref[:10], repo, repo, ref) for ref in refs}

    monkeypatch.setattr("perfguard.flows.bisection.commit_search.checkouts", trees)
    monkeypatch.chdir(tmp_path)
    return suite, shas


def _bisect(suite: Path, shas: list[str], out: Path) -> int:
    return cli.main(["bisect", "commits", "--suite", str(suite), "--case", "r/mycc/cpu", "--good", shas[0],
                     "--bad", shas[-1], "--json", str(out), "--state", str(out.with_suffix(".state")), "--quiet"])


def test_undecided_ends_are_undecided_with_their_own_exit_code_and_the_deciding_metric(
        toy: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    suite, shas = toy
    monkeypatch.setattr("perfguard.flows.bisection.commit_search.run_probe", _probe(UNDECIDED, (17, 77)))
    out = suite.parent / "undecided.json"
    assert _bisect(suite, shas, out) == ExitCode.UNDECIDED == 6
    printed = capsys.readouterr().out
    assert "no reproducible regression" not in printed
    assert ("undecided between good and bad: latency (+28.7% [-6.8%, +67.1%]) could not be told from noise, so it "
            "is neither a regression nor none: nothing bisected") in printed
    assert "node_count changed between the ends (17 -> 77): rerun with --metric node_count" in printed
    document = json.loads(out.read_text())
    assert document["status"] == "undecided" and document["exact_changes"] == {"node_count": [17, 77]}
    assert document["endpoints"]["decision"] == "unknown"
    assert BisectResult.from_json(document).to_json() == document  # the format reads back whole
    from perfguard.report import build_report
    from perfguard.report.markdown import job_summary

    summary = job_summary(build_report([BisectResult.from_json(document)]))
    assert ("undecided: the ends could not be told from noise, nothing bisected; node\\_count 17 -&gt; 77: "
            "`--metric node_count` decides it.") in summary


def test_undecided_ends_without_an_exact_change_name_the_other_ways_and_a_decided_none_stays_exit_5(
        toy: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    suite, shas = toy
    monkeypatch.setattr("perfguard.flows.bisection.commit_search.run_probe", _probe(UNDECIDED, (17, 17)))
    assert _bisect(suite, shas, suite.parent / "a.json") == ExitCode.UNDECIDED
    assert "no exact metric changed between the ends: to decide, add workers (--workers, --max-workers)" in (
        capsys.readouterr().out)
    same = {"decision": "same", "direction": "none", "ratio": 1.0, "ci_low": 0.99, "ci_high": 1.01}
    monkeypatch.setattr("perfguard.flows.bisection.commit_search.run_probe", _probe(same, (17, 17)))
    assert _bisect(suite, shas, suite.parent / "b.json") == ExitCode.NO_REGRESSION
    assert "no reproducible regression between good and bad" in capsys.readouterr().out


def test_a_counted_bisection_says_each_version_was_counted_not_compiled() -> None:
    from perfguard.cli.bisect import _print_summary

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        _print_summary(BisectResult("commits", "no-regression", total_probes=3, metric="instructions"))
        _print_summary(BisectResult("commits", "no-regression", total_probes=3, metric="node_count"))
    lines = printed.getvalue().splitlines()
    assert "probes: 3 (instructions: each version counted once under Valgrind, not timed), wall time 0.0 s" in lines
    assert "probes: 3 (node_count: each version compiled once, not timed), wall time 0.0 s" in lines


def test_bisect_passes_between_commits_with_undecided_ends_is_undecided_too(
        toy: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from perfguard.compile.checkout import CompilerCheckout

    suite, shas = toy
    repo = Path(suite.parent / "cc-repo")

    @contextlib.contextmanager
    def trees(suite: object, refs: list[str]) -> Iterator[dict[str, CompilerCheckout]]:
        yield {ref: CompilerCheckout(ref[:10], repo, repo, ref) for ref in refs}

    monkeypatch.setattr("perfguard.flows.bisection.version_search.checkouts", trees)
    monkeypatch.setattr("perfguard.flows.bisection.version_search.run_probe", _probe(UNDECIDED, (17, 77)))
    out = suite.parent / "passes.json"
    code = cli.main(["bisect", "passes", "--suite", str(suite), "--case", "r/mycc/cpu", "--good", shas[0],
                     "--bad", shas[-1], "--json", str(out), "--state", str(suite.parent / "p.state"), "--quiet"])
    assert code == ExitCode.UNDECIDED
    document = json.loads(out.read_text())
    assert document["status"] == "undecided" and document["exact_changes"] == {"node_count": [17, 77]}
    assert "rerun with --metric node_count" in capsys.readouterr().out
