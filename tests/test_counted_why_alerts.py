"""Why, counted, beyond ``check``: ``perfguard profile --counts`` and the alert a counted night
raises for a culprit (its explanation carries the attribution, and the nightly's summary, the
GitHub issue, the history site and ``history alerts`` show the same lines).

One module-scoped real ``profile --counts`` (slow): the counted suite of ``tests/test_counts.py``
(a tiny ResNet under ONNX Runtime; the user pass that inserts two Transposes per Conv against no
pass), one profiled worker per side and one Valgrind process counting both. Its explanation is
then what a bisection stored for its culprit: the golden bisect document with that explanation
in place of its own, ingested into a real store (SQLite) whose alert links it. One more slow test
explains that pair as a bisection's culprit (``explain_pipelines``, counted), the path the
nightly's explanation takes. The rest are pure:
the documents' JSON, and hostile function names through the Markdown and HTML writers (a fake:
the counted functions are typed in).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfguard.report.counted_why import pair_view
from perfguard.results.counted_functions import NO_SYMBOL, CountedPair, CountedWhy, FunctionCount, attribute
from perfguard.results.explanation import Dimension, Explanation
from perfguard.store import Night, Store
from perfguard.store.alert_rows import Alert, AlertExplanation, explanation_of

from .test_counts import _suite

EXPLAINED = Path(__file__).parent / "golden" / "explained" / "bisect-passes-pipelines-explain.json"
GOLDEN_RUN = Path(__file__).parent / "golden" / "v1" / "result-run.json"
GOOD, BAD = "a" * 40, "b" * 40
CASE = "r/transposes/cpu"


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict]:
    """One real ``profile --counts``: the Transposes pass against no pass."""
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (.ci/run installs it in CI)")
    folder = tmp_path_factory.mktemp("profile-counts")
    suite = _suite(folder)
    out = folder / "profile.json"
    proc = subprocess.run([sys.executable, "-m", "perfguard", "profile", str(suite), "--case", CASE,
                           "--against-pipeline", "none", "--counts", "--profile-workers", "1", "--profile-runs", "3",
                           "--json", str(out), "--quiet"], capture_output=True, text=True, cwd=folder,
                          env={**os.environ, "COLUMNS": "200"}, timeout=1200, check=False)
    assert proc.returncode == 0 and out.exists(), proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.timeout(1300)
def test_profile_counts_says_why_counted_with_the_stripped_runtime(profiled) -> None:
    proc, document = profiled
    (explanation,) = document["explanations"]
    counted = CountedWhy.from_json(explanation["counted"])
    assert counted.total_delta > 0 and counted.functions  # two Transposes per Conv: more instructions
    assert f"why, counted, {CASE}: +" in proc.stdout
    view = pair_view(CountedPair(CASE, "none", "transposes", counted))
    assert view.text_lines()[0] in proc.stdout  # the headline: by function, or said not attributed (stripped)
    assert "instructions per inference (transposes vs none), " + (
        "by function" if view.attributed else "not attributed by function") in proc.stdout
    # ONNX Runtime's library is stripped: said once, not shown as addresses
    assert "in onnxruntime_pybind11_state" in proc.stdout and "which has no symbols (stripped" in proc.stdout
    assert "0x0000" not in proc.stdout
    assert Explanation.from_json(explanation).to_json() == explanation  # the document reads back as written


@pytest.mark.slow
@pytest.mark.timeout(1300)
def test_a_counted_culprit_is_explained_with_its_counted_attribution_as_the_nightly_does(tmp_path: Path) -> None:
    """The nightly and ``bisect`` explain a culprit through ``explain_versions`` (here its pipeline
    form, the pass list that isolates a regression): counted (``--counts``), both sides are counted
    too and the explanation, and so the alert, carries the attribution."""
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (.ci/run installs it in CI)")
    from perfguard.flows.bisection.culprit_explain import explain_pipelines
    from perfguard.profile.explain import ProfileSettings
    from perfguard.progress import Progress
    from perfguard.suite import load_suite

    suite = load_suite(_suite(tmp_path)).counted("instructions")  # as --counts does
    (case,) = suite.select("r/none/cpu")
    explanation = explain_pipelines(suite, case, [], ["tp_passes:two_transposes"], ("good", "culprit"),
                                    ProfileSettings(workers=1, runs=3), Progress())
    assert explanation.counted is not None and explanation.counted.total_delta > 0, explanation.failures
    found = explanation_of({"explanations": [explanation.to_json()]})
    assert found is not None and found.counted == CountedPair(case.id, "good", "culprit", explanation.counted)


def _alert_store(url: str, explanation: dict) -> Alert:
    """A store with one confirmed change whose bisection (the golden one, explained by
    ``explanation``) named a culprit; its alert."""
    bisect = json.loads(EXPLAINED.read_text())
    bisect["explanations"] = [explanation]
    with Store.open(url) as store:
        store.ingest_file(GOLDEN_RUN)
        series = next(s for s in store.series() if s.key.kind == "absolute" and s.key.metric == "latency")
        change = store.upsert_change(series.id, good_commit=GOOD, bad_commit=BAD, time="2026-12-01T03:00:00Z",
                                     ratio=1.04, ci_low=None, ci_high=None, status="confirmed")
        document = store.ingest_json(bisect, source="nightly bisect").document_id
        store.link_bisect(change.id, document, BAD, "tp_passes:two_transposes")
        (alert,) = store.raise_alerts(series.key.suite)
        return alert


@pytest.mark.slow
@pytest.mark.timeout(1300)
def test_a_counted_culprits_alert_says_why_counted_in_the_summary_the_issue_the_site_and_the_terminal(
        profiled, tmp_path: Path) -> None:
    from perfguard.flows.nightly.night import NightReport
    from perfguard.history.notify import issue_body
    from perfguard.history.site import build_site
    from perfguard.report.nightly import markdown_summary

    from .conftest import run_cli

    _, document = profiled
    (explanation,) = document["explanations"]
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    alert = _alert_store(url, explanation)
    assert alert.explanation is not None and alert.explanation.counted is not None
    assert alert.explanation.counted.why == CountedWhy.from_json(explanation["counted"])
    headline = f"why, counted, {CASE}: "
    first_function = next(d for d in alert.explanation.counted.why.functions if d.name != NO_SYMBOL)

    report = NightReport(alert.suite, Night(2, alert.suite, BAD, "2026-12-01T03:00:00Z", 2),
                         Night(1, alert.suite, GOOD, "2026-11-30T03:00:00Z", 1), None, alerts=[alert])
    summary = markdown_summary(report)
    assert headline in summary and first_function.name.replace("_", "\\_") in summary
    assert "which has no symbols (stripped" in summary

    body = issue_body(alert)
    assert "**Why, counted**" in body and headline in body and "which has no symbols (stripped" in body

    with Store.open(url, create=False) as store:
        build_site(store, tmp_path / "site")
    page = (tmp_path / "site" / f"alert-{alert.id}.html").read_text(encoding="utf-8")
    assert 'id="why-counted"' in page and "instructions per inference (transposes vs none)" in page

    listed = run_cli("history", "alerts", "--store", url)
    assert listed.returncode == 0 and "why, counted," in listed.stdout, listed.stdout + listed.stderr
    assert "instructions per inference" in listed.stdout


# --- the documents (pure) -------------------------------------------------------------------------

HOSTILE = "conv_<script>alert(1)</script>|`x` [a](javascript:alert(2))"


def _why() -> CountedWhy:
    return attribute((FunctionCount(HOSTILE, "model.so", 800.0), FunctionCount(NO_SYMBOL, "libort.so", 100.0)),
                     (FunctionCount("fused_" + HOSTILE, "model.so", 900.0), FunctionCount(NO_SYMBOL, "libort.so", 150.0)),
                     250.0)


def test_an_explanation_and_an_alert_keep_their_counted_attribution_through_json() -> None:
    explanation = Explanation(CASE, "none", "transposes", Dimension("unclear", "none", (), "unclear"), None,
                              counted=_why())
    data = json.loads(json.dumps(explanation.to_json()))
    assert Explanation.from_json(data) == explanation
    assert "counted" not in Explanation(CASE, "a", "b", explanation.dimension, None).to_json()  # as before
    found = explanation_of({"explanations": [data]})
    assert found is not None and found.counted == CountedPair(CASE, "none", "transposes", _why())
    assert AlertExplanation.from_json(json.loads(json.dumps(found.to_json()))) == found
    old = {k: v for k, v in found.to_json().items() if k != "counted"}  # an alert stored before
    assert AlertExplanation.from_json(old).counted is None
    with pytest.raises(ValueError, match="kind"):
        CountedWhy.from_json({**_why().to_json(), "functions": [{**_why().functions[0].to_json(), "kind": "moved"}]})


def test_hostile_function_names_stay_data_in_the_nightly_summary_the_issue_and_the_site(tmp_path: Path) -> None:
    from perfguard.flows.nightly.night import NightReport
    from perfguard.history.notify import issue_body
    from perfguard.history.site import build_site
    from perfguard.report.nightly import markdown_summary

    from .test_hostile_markdown import assert_inert, render_markdown

    explanation = Explanation(CASE, "none", "transposes", Dimension("unclear", "none", (), "unclear"), None,
                              counted=_why())
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    alert = _alert_store(url, explanation.to_json())
    report = NightReport(alert.suite, Night(2, alert.suite, BAD, "2026-12-01T03:00:00Z", 2),
                         Night(1, alert.suite, GOOD, "2026-11-30T03:00:00Z", 1), None, alerts=[alert])
    body = issue_body(alert)  # its counted part: the footer's own *not planned* is emphasis on purpose
    for markdown in (markdown_summary(report), body[body.index("**Why, counted**"):body.index("Triage with")]):
        assert "why, counted" in markdown and "libort.so, which has no symbols" in markdown
        assert_inert(markdown, render_markdown(markdown))
    with Store.open(url, create=False) as store:
        build_site(store, tmp_path / "site")
    page = (tmp_path / "site" / f"alert-{alert.id}.html").read_text(encoding="utf-8")
    assert 'id="why-counted"' in page and "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
