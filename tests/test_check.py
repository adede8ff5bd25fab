"""`perfguard check`, `compare`, `baseline update`, `calibrate` with real compiles and measurements.

Noise-sensitive assertions are one-sided on purpose: an A/A check must never say DIFFERENT, and a
large real regression (tens of percent) must be called a regression in the right direction.
"""

from __future__ import annotations

import json
import math

import pytest

from perfguard.results import load_schema, schema_errors

from .conftest import run_cli
from .factories import compiler_suite, git, make_compiler_repo, pass_source

pytestmark = pytest.mark.slow

PIPELINE_SUITE = """
[suite]
name = "pipes"

[measure]
rounds = 6
warmup = 2
min_time = "3ms"
compile_repeats = 3
memory_probes = 1

[check]
workers = 6
step_workers = 4
max_workers = 14

[models.r]
arch = "resnet"
params = { depth = 4, width = 16, image_size = 64, num_classes = 10 }

[pipelines.none]
passes = []
[pipelines.none_again]
passes = []
[pipelines.bn_unfolded]
passes = ["fuse_bn_into_conv"]
"""


def _rows(document, metric="latency"):
    return {r["case"]: r for r in document["verdicts"] if r["metric"] == metric}


def _assert_verdict_follows_its_numbers(row):
    """The decision rule (perfguard/stats/verdict.py) holds on the numbers the row reports: what a
    real comparison guarantees whatever the machine's noise, where no exact verdict can be."""
    c = row["comparison"]
    ratio, low, high, floor = c["ratio"], c["ci_low"], c["ci_high"], c["floor"]
    significant = c["p_value"] <= c["alpha"] and (low > 1 or high < 1)
    inside = 1 - floor <= low and high <= 1 + floor
    if row["decision"] == "different":
        assert significant and abs(ratio - 1) > floor, c
        assert row["direction"] == ("regression" if ratio > 1 else "improvement"), row
    elif row["decision"] == "same":
        assert inside and not (significant and abs(ratio - 1) > floor) and row["direction"] == "none", c
    else:
        assert row["decision"] == "unknown" and row["direction"] == "none", row
        # Undecided by the rule, or a DIFFERENT that false-discovery control demoted.
        assert not inside and (not (significant and abs(ratio - 1) > floor) or c["decision"] == "different"), c


@pytest.mark.timing
def test_against_pipeline_aa_is_never_different_and_unfolded_bn_is_a_regression(write_suite, tmp_path):
    suite = write_suite(PIPELINE_SUITE)
    out = tmp_path / "v.json"
    proc = run_cli("check", str(suite), "--against-pipeline", "none", "--json", str(out), "--quiet")
    document = json.loads(out.read_text())
    assert schema_errors(document, "verdicts") == []
    latency = _rows(document)
    assert latency["r/none_again/cpu"]["decision"] != "different"  # A/A: never cry wolf
    # Two pipelines with no passes compile to one artifact: SAME by execution identity, not timed.
    aa = latency["r/none_again/cpu"]
    assert aa["decision"] == "same" and aa["comparison"]["method"] == "identity", aa
    assert "identical artifact" in aa["comparison"]["reason"]
    assert _rows(document, "memory")["r/none_again/cpu"]["comparison"]["method"] == "identity"
    entries = {c["pipeline"]: c for c in document["results"]["candidate"]["cases"]}
    assert "latency_s" not in entries["none_again"]["metrics"] and entries["none_again"]["not_measured"]
    assert "peak_rss_bytes" not in entries["none_again"]["metrics"]
    # "none" is still timed: bn_unfolded is compared with it.
    assert "not_measured" not in entries["none"] and entries["none"]["metrics"]["latency_s"]["n"] > 0
    assert entries["none"]["artifact"]["execution_identity"] == entries["none_again"]["artifact"]["execution_identity"]
    assert entries["bn_unfolded"]["artifact"]["execution_identity"] != entries["none"]["artifact"]["execution_identity"]
    assert "1 of 2 comparisons had identical artifacts" in proc.stdout
    # Compile time from 3 unpaired compiles a side cannot decide its 25 % floor: one summary line,
    # no undecided row per case (the rows say gated: false).
    compile_rows = _rows(document, "compile_time")
    assert all(r["gated"] is False for r in compile_rows.values() if r["decision"] == "unknown")
    if any(r["decision"] == "unknown" for r in compile_rows.values()):
        assert "compile time not gated in" in proc.stdout
        assert document["summary"]["not_gated"] == sum(1 for r in document["verdicts"] if r.get("gated") is False)
    table = [line for line in proc.stdout.splitlines() if "compile_time" in line]
    assert all("unknown" not in line for line in table), table
    regression = latency["r/bn_unfolded/cpu"]
    assert regression["decision"] == "different" and regression["direction"] == "regression", regression
    assert regression["comparison"]["ci_low"] > 1.0  # the interval, not a size a busy machine dilutes
    nodes = _rows(document, "node_count")["r/bn_unfolded/cpu"]
    assert nodes["decision"] == "different" and nodes["direction"] == "regression"
    assert proc.returncode == 1, proc.stderr
    assert "REGRESSION" in proc.stdout
    assert document["summary"]["regressions"] >= 1 and document["mode"]["kind"] == "pipeline"


@pytest.mark.timing
def test_base_ref_check_finds_the_commit_that_slows_a_user_pass(tmp_path):
    repo, shas = make_compiler_repo(tmp_path / "cc", [
        ("fast pass", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)}),
        ("docs only", {"README": "toy compiler\n"}),
        ("slow pass", {"mycc/passes.py": pass_source(24)}),
    ])
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo))
    out = tmp_path / "v.json"
    proc = run_cli("check", str(suite), "--base-ref", shas[1], "--json", str(out), "--quiet")
    document = json.loads(out.read_text())
    row = _rows(document)["r/mycc/cpu"]
    assert row["decision"] == "different" and row["direction"] == "regression", row["comparison"]["reason"]
    assert proc.returncode == 1
    assert document["mode"]["base_commit"] == shas[1]
    assert set(document["results"]) == {"baseline", "candidate"}
    assert document["results"]["baseline"]["compiler"]["commit"] == shas[1]
    # No change between two commits: never DIFFERENT; the worktree is gone afterwards.
    out2 = tmp_path / "same.json"
    same = run_cli("check", str(suite), "--base-ref", "HEAD", "--json", str(out2), "--quiet")
    unchanged = json.loads(out2.read_text())
    row = _rows(unchanged)["r/mycc/cpu"]
    # The passes did not change: the two sides' artifacts are identical, SAME without timing.
    assert row["decision"] == "same" and row["comparison"]["method"] == "identity", row
    assert all(c.get("not_measured") and "latency_s" not in c["metrics"]
               for side in unchanged["results"].values() for c in side["cases"])
    assert same.returncode == 0
    # --measure-identical times them anyway: an A/A of the measurement, never DIFFERENT.
    out3 = tmp_path / "measured.json"
    run_cli("check", str(suite), "--base-ref", "HEAD", "--json", str(out3), "--quiet", "--measure-identical")
    measured = _rows(json.loads(out3.read_text()))["r/mycc/cpu"]
    assert measured["comparison"]["method"] == "paired-wilcoxon" and measured["decision"] != "different", measured
    assert git(repo, "worktree", "list").count("\n") == 0


@pytest.mark.timing
def test_base_ref_check_compiles_the_base_with_the_pipelines_of_the_suite_at_that_ref(tmp_path):
    """The suite file lives in the compiler's repository and a commit edits a pipeline: the base
    side is compiled with the pipeline as the suite at the base ref defined it."""
    repo = tmp_path / "cc"
    text = compiler_suite(repo).replace('passes = ["mycc.passes:extra_work"]', 'passes = ["mycc.passes:identity"]')
    repo, shas = make_compiler_repo(repo, [
        ("passes and suite", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(24), "suite.toml": text}),
        ("the pipeline runs the slow pass", {"suite.toml": compiler_suite(repo)}),
    ])
    out = tmp_path / "v.json"
    proc = run_cli("check", str(repo / "suite.toml"), "--base-ref", shas[0], "--json", str(out), "--quiet")
    document = json.loads(out.read_text())
    assert document["mode"]["base_pipelines"] == ["mycc"]
    base, head = (document["results"][side]["cases"][0]["key"]["pipeline"]["passes"] for side in ("baseline", "candidate"))
    assert (base, head) == (["mycc.passes:identity"], ["mycc.passes:extra_work"])
    row = _rows(document)["r/mycc/cpu"]
    assert row["decision"] == "different" and row["direction"] == "regression", row["comparison"]["reason"]
    assert proc.returncode == 1


@pytest.mark.timing
def test_stored_baseline_update_check_and_compare(tmp_path):
    repo, _ = make_compiler_repo(tmp_path / "cc", [("v1", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)})])
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo))
    baseline = tmp_path / "baselines" / "toy.json"
    proc = run_cli("baseline", "update", str(suite), "--out", str(baseline), "--quiet")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "v.json"
    proc = run_cli("check", str(suite), "--baseline", str(baseline), "--json", str(out), "--quiet")
    document = json.loads(out.read_text())
    assert document["mode"]["kind"] == "baseline"
    # Two runs minutes apart: unpaired, at the 10 % across-runs floor (the suite's paired floor is
    # 2 %: [thresholds] across_runs applies, tests/test_compare_rules.py). One real A/A cannot test a
    # false-alarm rate (tests/test_stats_sim.py::test_unpaired_is_conservative does, <= 1 %); a
    # run at a busy moment of a shared machine may differ by more than 10 %, and then says so.
    aa = _rows(document)["r/mycc/cpu"]
    assert aa["comparison"]["method"] == "unpaired-mann-whitney" and aa["comparison"]["floor"] >= 0.10
    _assert_verdict_follows_its_numbers(aa)
    # The exit code follows the verdicts: 1 exactly when one is a regression (or a side failed),
    # else 0; 3 needs --fail-on-unknown, which this check does not pass.
    summary = document["summary"]
    regressions = [r for r in document["verdicts"] if r["decision"] == "different" and r["direction"] == "regression"]
    assert summary["regressions"] == len(regressions) and summary["failed"] == 0, summary
    assert proc.returncode == (1 if regressions else 0), (proc.returncode, regressions, proc.stderr)
    # Make the compiler slower in the working tree: the stored baseline catches a large regression.
    (repo / "mycc" / "passes.py").write_text(pass_source(40))
    result = tmp_path / "slow.json"
    run_cli("run", str(suite), "--out", str(result), "--quiet", "--workers", "6")
    proc = run_cli("compare", str(baseline), str(result), "--json", str(tmp_path / "c.json"))
    compared = json.loads((tmp_path / "c.json").read_text())
    row = _rows(compared)["r/mycc/cpu"]
    # Unpaired, minutes apart, either side possibly at a busy moment: the latency never reads as
    # an improvement, whatever its size; the node count decides the gate.
    assert row["direction"] in ("regression", "none")
    # The extra nodes are a deterministic node-count regression, so the gate fails either way.
    assert _rows(compared, "node_count")["r/mycc/cpu"]["direction"] == "regression"
    assert proc.returncode == 1
    # A corrupt baseline is a one-line exit 2.
    baseline.write_text("{not json")
    proc = run_cli("check", str(suite), "--baseline", str(baseline))
    assert proc.returncode == 2 and "corrupt result file" in proc.stderr and "Traceback" not in proc.stderr


def test_strict_env_refuses_a_baseline_from_another_machine(tmp_path):
    repo, _ = make_compiler_repo(tmp_path / "cc", [("v1", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)})])
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo))
    result = tmp_path / "r.json"
    assert run_cli("run", str(suite), "--out", str(result), "--quiet", "--workers", "4").returncode == 0
    document = json.loads(result.read_text())
    document["environment"]["cpu"]["cpu_model"] = "Some Other CPU 9000"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(document))
    proc = run_cli("compare", str(other), str(result))
    assert "environments differ" in proc.stdout and "cpu_model" in proc.stdout
    proc = run_cli("compare", str(other), str(result), "--strict-env")
    assert proc.returncode == 2 and "--strict-env" in proc.stderr


@pytest.mark.timing
def test_calibrate_reports_noise_and_writes_floors_the_suite_can_include(write_suite, tmp_path):
    suite = write_suite(PIPELINE_SUITE.replace("[pipelines.none_again]\npasses = []\n", ""))
    floors = tmp_path / "pipes.floors.toml"
    proc = run_cli("calibrate", str(suite), "--case", "*/none/*", "--write", str(floors), "--json",
                   str(tmp_path / "cal.json"))
    assert proc.returncode == 0, proc.stderr
    calibration = json.loads((tmp_path / "cal.json").read_text())
    row = calibration["cases"][0]
    assert row["case"] == "r/none/cpu" and row["status"] == "ok" and row["noise_sd"] >= 0
    # One real A/A calls "different" at most alpha of the time (the simulation tests that rate);
    # here: the row flags exactly that, and the floor it recommends is above two standard errors.
    assert row["false_positive"] is (row["decision"] == "different")
    assert calibration["false_positives"] == int(row["false_positive"])
    assert row["recommended_floor"] >= max(0.01, 2 * row["noise_sd"] / math.sqrt(row["workers"]))
    assert "latency = \"median:" in floors.read_text()
    included = write_suite(PIPELINE_SUITE.replace('[check]', f'[thresholds]\ninclude = "{floors.name}"\n\n[check]'),
                           name="with_floors.toml")
    from perfguard.suite import load_suite

    loaded = load_suite(included)
    gate = loaded.thresholds.gate("r/none/cpu", "latency")
    assert gate.relative == pytest.approx(row["recommended_floor"])
    assert loaded.thresholds.gate("r/bn_unfolded/cpu", "latency").relative == pytest.approx(0.02)


def test_check_usage_errors_are_exit_2(write_suite, tmp_path):
    suite = write_suite(PIPELINE_SUITE)
    proc = run_cli("check", str(suite))
    assert proc.returncode == 2 and "one of the arguments" in proc.stderr
    proc = run_cli("check", str(suite), "--against-pipeline", "nope")
    assert proc.returncode == 2 and "unknown pipeline 'nope'" in proc.stderr
    proc = run_cli("check", str(suite), "--base-ref", "no-such-ref", cwd=tmp_path)
    assert proc.returncode == 2 and "is not inside a git repository" in proc.stderr, proc.stderr
    # Inside a real repository, a bad ref is named as such: before any checkout or compile.
    repo, _ = make_compiler_repo(tmp_path / "cc", [("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)})])
    in_repo = write_suite(compiler_suite(repo), name="in_repo.toml")
    for ref in ("no-such-ref", "0" * 40):
        proc = run_cli("check", str(in_repo), "--base-ref", ref)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"perfguard: error: unknown git ref {ref!r} in {repo}"), proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_verdicts_schema_ships():
    assert load_schema("verdicts")["title"].startswith("perfguard verdicts")
