"""Sharded runs and checks (``--shard K/N``) and ``perfguard merge``: the partition's guarantees
(disjoint, covering, deterministic, groups together), the one family of a merged check (known
truth: p-values whose Benjamini-Hochberg decision changes between a shard and the whole), the
refusals (a missing, duplicated or foreign shard: exit 2, one line), and a real check of a
generated suite in 3 shards merged, then reported and ingested like any verdicts document.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from perfguard.compare.check import FAMILIES, Sampling, control_false_discoveries, uncorrected
from perfguard.compare.merge import corrected_union, family_plan, merge_verdicts
from perfguard.compare.verdicts import CheckMode, Verdict, VerdictsDocument, VerdictsSettings, load_verdicts
from perfguard.results.shard import ShardInfo
from perfguard.stats import bh_adjust
from perfguard.stats.adaptive import Look
from perfguard.stats.verdict import Comparison
from perfguard.suite import CaseSpec, MeasureSettings, ModelSpec, PipelineSpec, Tolerance
from perfguard.suite.shards import ShardSpec, case_groups, group_of, partition, shard_cases

from .conftest import REPO, run_cli

# --- the partition ---------------------------------------------------------------------------------


def _case(model: str, pipeline: str, runner: str = "cpu", workers: int = 2) -> CaseSpec:
    return CaseSpec(ModelSpec(model, arch="resnet"), PipelineSpec(pipeline, "ort", ()), runner,
                    MeasureSettings(workers=workers), Tolerance(1e-3, 1e-3))


_cases = st.lists(st.tuples(st.sampled_from("abcdefghij"), st.sampled_from(["p", "q", "r"]),
                            st.sampled_from(["cpu", "cuda"])), min_size=1, max_size=30, unique=True)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(_cases, st.integers(1, 7), st.randoms(use_true_random=False), st.data())
def test_shards_are_disjoint_cover_the_whole_keep_groups_together_and_are_deterministic(ids, n, rnd, data):
    cases = [_case(m, p, r) for m, p, r in ids]
    cost = {c.id: data.draw(st.floats(0, 100), label=c.id) for c in cases}
    parts = [shard_cases(cases, ShardSpec(k, n), cost) for k in range(1, n + 1)]
    seen = [c.id for part in parts for c in part]
    assert sorted(seen) == sorted(c.id for c in cases)  # covering, and disjoint (no id twice)
    for part in parts:
        groups = {group_of(c) for c in part}
        assert all(group_of(c) not in groups for other in parts if other is not part for c in other)
    shuffled = list(cases)
    rnd.shuffle(shuffled)  # the order the cases come in decides nothing
    again = [[c.id for c in shard_cases(shuffled, ShardSpec(k, n), dict(cost))] for k in range(1, n + 1)]
    assert [sorted(c.id for c in part) for part in parts] == [sorted(p) for p in again]


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.floats(0.1, 10), min_size=1, max_size=40), st.integers(1, 6))
def test_the_slowest_shard_is_within_grahams_list_scheduling_bound(costs, n):
    """Any list schedule (LPT is one) ends by the mean load plus (1 - 1/n) of the largest item."""
    items = {f"g{i:02d}": c for i, c in enumerate(costs)}
    loads = [sum(items[i] for i in b) for b in partition(items, n)]
    assert max(loads) <= sum(costs) / n + (1 - 1 / n) * max(costs) + 1e-9


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.floats(0.1, 10), min_size=1, max_size=8), st.integers(1, 3))
def test_lpt_is_within_four_thirds_of_the_best_partition(costs, n):
    """Graham's LPT bound against the true optimum, found by trying every assignment (small inputs)."""
    import itertools

    items = {f"g{i:02d}": c for i, c in enumerate(costs)}
    loads = [sum(items[i] for i in b) for b in partition(items, n)]
    best = min(max(sum(c for c, b in zip(costs, assign, strict=True) if b == k) for k in range(n))
               for assign in itertools.product(range(n), repeat=len(costs)))
    assert max(loads) <= (4 / 3 - 1 / (3 * n)) * best + 1e-9


def test_the_pipelines_of_a_model_on_a_runner_are_one_group():
    cases = [_case("m", "a"), _case("m", "b"), _case("m", "a", "cuda"), _case("n", "a")]
    assert {name: [c.id for c in members] for name, members in case_groups(cases).items()} == {
        "m/cpu": ["m/a/cpu", "m/b/cpu"], "m/cuda": ["m/a/cuda"], "n/cpu": ["n/a/cpu"]}


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2", ""])
def test_a_bad_shard_is_refused_in_one_line(text):
    from perfguard.errors import UserError

    with pytest.raises(UserError, match="--shard"):
        ShardSpec.parse(text)


def test_a_bad_shard_exits_2_with_one_line_on_every_command(tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text(SUITE)
    for args in (["run", str(suite), "--out", str(tmp_path / "r.json")],
                 ["check", str(suite), "--against-pipeline", "none"]):
        proc = run_cli(*args, "--shard", "4/3")
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "--shard 4/3" in proc.stderr, proc.stderr



def test_nightly_bisect_only_refuses_a_shard_in_one_line(tmp_path):
    """``--bisect-only`` returned before ``--shard`` was read, so a sharded bisection silently bisected
    every case; the combination is refused (exit 2, one line) before any store is opened."""
    suite = tmp_path / "s.toml"
    suite.write_text(SUITE)
    proc = run_cli("nightly", str(suite), "--store", str(tmp_path / "missing.sqlite"), "--bisect-only",
                   "--shard", "1/2", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--shard" in proc.stderr and "--bisect-only" in proc.stderr, proc.stderr

# --- one family from many shards: synthetic rows with known truth ----------------------------------

ALPHA = 0.05


def _row(case: str, p: float, decision: str = "different", metric: str = "latency") -> Verdict:
    comparison = Comparison(decision, "regression" if decision == "different" else "none", 1.2, 1.1, 1.3, p,
                            0.05, 10, 1.0, 1.2, 0.02, "test", alpha=ALPHA, confidence=1 - ALPHA)
    return Verdict(case, metric, "s", True, "median:2%", "base", "head", True, comparison, decision,  # type: ignore[arg-type]
                   comparison.direction)


def _sampling() -> Sampling:
    return Sampling(ALPHA, 1, (ALPHA,), (1 - ALPHA,), FAMILIES, 4, 2, 4, (Look(1, 4, 0),))


def _shard_doc(k: int, n: int, rows: list[Verdict], cases: tuple[str, ...], **info: str) -> VerdictsDocument:
    plan = family_plan(VerdictsSettings.of(_sampling(), ALPHA))
    corrected = control_false_discoveries(rows, plan)  # what the shard's own check decided
    document = VerdictsDocument.of(CheckMode("base-ref", "base", "head"), corrected,
                                   VerdictsSettings.of(_sampling(), ALPHA), None, [])
    shard = ShardInfo(k, n, cases, info.get("suite", "s" * 64), info.get("settings", "t" * 64), "h" * 40, "b" * 40,
                      part=tuple(sorted({r.case for r in rows})), rows=tuple((r.case, r.metric) for r in corrected))
    return dataclasses.replace(document, shard=shard)


def _shards() -> tuple[list[list[Verdict]], tuple[str, ...]]:
    """Three shards: shard 2's p = 0.03 is demoted in its own family of two (0.03 * 2 = 0.06 > 0.05)
    but passes the whole family of six, where the three tiny p-values of shard 3 lift it (step-up:
    0.03 * 6 / 5 = 0.036)."""
    one = [_row("a/p/cpu", 0.02)]
    two = [_row("b/p/cpu", 0.03), _row("c/p/cpu", 0.9, "same")]
    three = [_row("d/p/cpu", 0.001), _row("e/p/cpu", 0.002), _row("f/p/cpu", 0.003)]
    return [one, two, three], tuple(r.case for rows in (one, two, three) for r in rows)


def test_bh_decides_differently_per_shard_and_merged_and_merge_gives_the_whole_familys_answer():
    shards, cases = _shards()
    documents = [(f"v{k}.json", _shard_doc(k, 3, rows, cases)) for k, rows in enumerate(shards, 1)]
    per_shard = {r.case: r.decision for _, d in documents for r in d.verdicts}
    assert per_shard["a/p/cpu"] == "different" and per_shard["b/p/cpu"] == "unknown"  # each shard alone
    merged, _ = merge_verdicts(documents)
    decided = {r.case: r.decision for r in merged.verdicts}
    # The known truth of the whole family of six: sorted p = .001 .002 .003 .02 .03 .9, adjusted
    # (step-up) = .006 .006 .006 .03 .036 .9: 0.02 and 0.03 both pass at 0.05.
    assert decided == {"a/p/cpu": "different", "b/p/cpu": "different", "c/p/cpu": "same", "d/p/cpu": "different",
                       "e/p/cpu": "different", "f/p/cpu": "different"}
    one_family = control_false_discoveries([r for rows in shards for r in rows], family_plan(VerdictsSettings.of(_sampling(), ALPHA)))
    assert list(merged.verdicts) == one_family  # the same rows corrected in one family, by the production function
    expected = bh_adjust([r.comparison.p_value for rows in shards for r in rows])
    assert [r.bh_adjusted_p for r in merged.verdicts] == pytest.approx(expected)
    assert expected == pytest.approx([0.03, 0.036, 0.9, 0.006, 0.006, 0.006])
    assert merged.summary.regressions == 5 and merged.shard is None and merged.mode.merged_shards == 3


def test_a_decision_a_shard_let_through_is_undecided_in_the_whole_family():
    lone = [_row("a/p/cpu", 0.02)]
    others = [_row(f"z{i}/p/cpu", 0.8 + i / 100, "same") for i in range(9)]
    cases = tuple(r.case for r in lone + others)
    documents = [("v1.json", _shard_doc(1, 2, lone, cases)), ("v2.json", _shard_doc(2, 2, others, cases))]
    assert documents[0][1].verdicts[0].decision == "different"
    merged, _ = merge_verdicts(documents)
    row = merged.verdicts[0]
    assert row.decision == "unknown" and row.comparison.decision == "different"
    assert row.bh_adjusted_p == pytest.approx(0.2)  # 0.02 * 10 / 1
    assert "false-discovery control over the 10 latency comparisons" in row.comparison.reason
    assert uncorrected(row) == dataclasses.replace(lone[0], bh_adjusted_p=None)  # undone exactly


# --- refusals -----------------------------------------------------------------------------------


def _write_shards(folder: Path) -> list[Path]:
    shards, cases = _shards()
    paths = []
    for k, rows in enumerate(shards, 1):
        path = folder / f"v{k}.json"
        path.write_text(json.dumps(_shard_doc(k, 3, rows, cases).to_json()))
        paths.append(path)
    return paths


def _merge(*paths: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("merge", *map(str, paths), "--json", str(out), "--quiet")


def test_merge_refuses_a_missing_a_duplicated_and_a_foreign_shard_in_one_line(tmp_path):
    one, two, three = _write_shards(tmp_path)
    out = tmp_path / "merged.json"
    shards, cases = _shards()
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps(_shard_doc(3, 3, shards[2], cases, suite="x" * 64).to_json()))
    other_settings = tmp_path / "settings.json"
    other_settings.write_text(json.dumps(_shard_doc(3, 3, shards[2], cases, settings="y" * 64).to_json()))
    for paths, said in (((one, three), "shard 2/3 is missing"), ((one, two, two, three), "shard 2/3 is given twice"),
                        ((one, two, foreign), "its suite hash differs"),
                        ((one, two, other_settings), "its settings differs"), ((one,), "shards 2/3, 3/3 are missing")):
        proc = _merge(*paths, out=out)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and said in proc.stderr, proc.stderr
        assert not out.exists()  # nothing half written
    proc = _merge(one, two, three, out=out)
    assert proc.returncode == 1, proc.stderr  # the whole has regressions
    assert load_verdicts(out).summary.regressions == 5


# --- a real sharded check of a generated suite ------------------------------------------------------

SUITE = """
[suite]
name = "shards"

[measure]
workers = 2
rounds = 3
warmup = 1
min_time = "2ms"
compile_repeats = 2
memory_probes = 1
timeout = "60s"
compile_timeout = "60s"

[check]
workers = 3
step_workers = 2
max_workers = 5

[models.a]
arch = "resnet"
params = { depth = 2, width = 8, image_size = 32, num_classes = 10 }
[models.b]
arch = "resnet"
params = { depth = 2, width = 8, image_size = 48, num_classes = 10 }
[models.c]
arch = "bert"
params = { layers = 1, hidden = 32, heads = 2, seq_len = 16, vocab = 100 }

[pipelines.none]
passes = []
[pipelines.bn]
passes = ["fuse_bn_into_conv"]
"""


@pytest.fixture(scope="module")
def sharded_check(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The suite checked (--against-pipeline none) in 3 shards, one after another."""
    folder = tmp_path_factory.mktemp("shards")
    suite = folder / "suite.toml"
    suite.write_text(SUITE)
    out = {"suite": suite, "folder": folder}
    for k in (1, 2, 3):
        path = folder / f"shard-{k}" / "verdicts.json"
        path.parent.mkdir()
        proc = run_cli("check", str(suite), "--against-pipeline", "none", "--shard", f"{k}/3", "--json", str(path),
                       "--quiet")
        assert proc.returncode in (0, 1, 3), proc.stdout[-2000:] + proc.stderr
        out[f"v{k}"] = path
    return out


@pytest.mark.slow
def test_a_check_in_three_shards_merged_is_the_whole_family(sharded_check, tmp_path):
    paths = [sharded_check[f"v{k}"] for k in (1, 2, 3)]
    shards = [load_verdicts(p) for p in paths]
    infos = [d.shard for d in shards]
    assert all(i is not None for i in infos) and [i.k for i in infos if i] == [1, 2, 3]
    whole = ("a/none/cpu", "a/bn/cpu", "b/none/cpu", "b/bn/cpu", "c/none/cpu", "c/bn/cpu")
    assert all(i is not None and i.cases == whole for i in infos)
    own = [sorted({r.case for r in d.verdicts}) for d in shards]
    assert sorted(c for cases in own for c in cases) == ["a/bn/cpu", "b/bn/cpu", "c/bn/cpu"]  # each case once
    assert all(len(cases) == 1 for cases in own)  # one model (its pipelines together) per shard
    out = tmp_path / "merged.json"
    proc = run_cli("merge", *map(str, paths), "--json", str(out))
    merged = load_verdicts(out)
    from perfguard.compare.check import exit_code

    assert proc.returncode == exit_code(merged, False), proc.stdout[-2000:] + proc.stderr
    rows = [r for d in shards for r in d.verdicts]
    expected = corrected_union(rows, family_plan(shards[0].settings))
    assert sorted(merged.verdicts, key=lambda r: (r.case, r.metric)) == sorted(expected, key=lambda r: (r.case, r.metric))
    # The rule itself, recomputed here from the raw p-values on the sequential scale.
    members = [r for r in merged.verdicts if r.metric in FAMILIES and r.gated and math.isfinite(r.comparison.p_value)]
    for family in FAMILIES:
        rows_f = [r for r in members if r.metric == family]
        adjusted = bh_adjust([min(1.0, r.comparison.p_value * ALPHA / r.comparison.alpha) for r in rows_f])
        for row, p_adj in zip(rows_f, adjusted, strict=True):
            assert row.bh_adjusted_p == pytest.approx(p_adj)
            assert (row.decision == "different") == (row.comparison.decision == "different" and p_adj <= ALPHA)
    assert {c.id for c in merged.results.candidate.cases} == set(whole)
    assert merged.shard is None and merged.mode.merged_shards == 3
    # A merged document is a verdicts document like any other: report and history ingest take it.
    report = run_cli("report", str(out), "--out", str(tmp_path / "report"))
    assert report.returncode == 0 and (tmp_path / "report" / "index.html").exists(), report.stderr
    store = tmp_path / "h.sqlite"
    ingest = run_cli("history", "ingest", str(out), "--store", str(store))
    assert ingest.returncode == 0, ingest.stderr
    listed = run_cli("history", "list", "--store", str(store))
    assert listed.returncode == 0 and "c/bn/cpu" in listed.stdout, listed.stdout + listed.stderr


@pytest.mark.slow
def test_the_workflow_merge_job_runs_on_the_shard_documents(sharded_check, tmp_path):
    """The action's merge mode (the merge job of perf-pr.yml): its shell lines, run as GitHub runs
    them, on real shard documents laid out as download-artifact leaves them."""
    from .test_report import _yaml

    shards = tmp_path / "perfguard-shards"
    for k in (1, 2, 3):
        (shards / f"perfguard-shard-{k}").mkdir(parents=True)
        (shards / f"perfguard-shard-{k}" / "verdicts.json").write_bytes(sharded_check[f"v{k}"].read_bytes())
    steps = {s.get("id") or s.get("name"): s for s in _yaml(REPO / "action.yml")["runs"]["steps"]}
    output, summary = tmp_path / "github_output", tmp_path / "step_summary"
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary), "COLUMNS": "200"}
    out = tmp_path / "perfguard-out"  # the action's out-dir (under the runner's temp folder on GitHub)
    env["OUT"] = str(out)
    check_env = {**env, "SUITE": "", "BASE_REF": "", "AGAINST": "", "BASELINE": "", "CASES": "", "WORKERS": "",
                 "SHARD": "", "MERGE_FROM": str(shards)}
    proc = subprocess.run(["bash", "-c", steps["check"]["run"]], cwd=tmp_path, env=check_env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    said = dict(line.split("=", 1) for line in output.read_text().splitlines())
    merged = load_verdicts(tmp_path / "perfguard-out" / "verdicts.json")
    from perfguard.compare.check import exit_code

    assert said["exit-code"] == str(int(exit_code(merged, False)))
    assert said["regressions"] == str(merged.summary.regressions)
    assert (tmp_path / "perfguard-out" / "report" / "index.html").exists()
    proc = subprocess.run(["bash", "-c", steps["Job summary and comment body"]["run"]], cwd=tmp_path,
                          env={**env, "REPORT_URL": "https://example.invalid/run"}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "perfguard" in summary.read_text() and (tmp_path / "perfguard-out" / "comment.md").exists()


@pytest.mark.slow
def test_a_run_in_two_shards_merges_into_the_result_of_the_whole(tmp_path):
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    paths = []
    for k in (1, 2):
        path = tmp_path / f"r{k}.json"
        proc = run_cli("run", str(suite), "--case", "*/none/*", "--shard", f"{k}/2", "--out", str(path), "--quiet")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
        paths.append(path)
    out = tmp_path / "merged.json"
    proc = run_cli("merge", *map(str, paths), "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    from perfguard.results import load_result

    merged = load_result(out)
    assert [c.id for c in merged.cases] == ["a/none/cpu", "b/none/cpu", "c/none/cpu"] and merged.shard is None
    assert run_cli("merge", str(paths[0]), "--json", str(tmp_path / "m2.json")).returncode == 2


# --- a sharded night: which night a shard is checked against ----------------------------------------


def test_a_night_shard_is_checked_against_the_last_night_not_a_sibling_shard_of_tonight(tmp_path):
    from perfguard.flows.shards import shard_base, stored_shard
    from perfguard.results import load_result
    from perfguard.store import Store

    golden = load_result(REPO / "tests" / "golden" / "v1" / "result-run.json")
    yesterday, tonight = "a" * 40, "b" * 40

    def info(k: int, commit: str) -> ShardInfo:
        return ShardInfo(k, 2, ("x", "y", "z"), "s" * 64, "t" * 64, commit, None)

    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        def night(document, commit: str, time: str):
            ingested = store.ingest(document, source="nightly")
            return store.record_night("smoke", commit, ingested.document_id, time=time)

        assert shard_base(store, "smoke", info(1, tonight)) is None  # the first night
        before = night(dataclasses.replace(golden, started_at="2026-01-01T00:00:00Z", shard=info(2, yesterday)),
                       yesterday, "2026-01-01T03:00:00Z")
        sibling = night(dataclasses.replace(golden, started_at="2026-01-02T00:00:00Z", shard=info(1, tonight)),
                        tonight, "2026-01-02T03:00:00Z")
        assert stored_shard(store, sibling) == info(1, tonight)
        # Shard 2 of tonight skips its sibling (shard 1, tonight's commit) for yesterday's night...
        assert shard_base(store, "smoke", info(2, tonight)) == before
        # ...and a shard of another split, or of another commit, is a night like any other.
        assert shard_base(store, "smoke", ShardInfo(2, 3, ("x", "y", "z"), "s" * 64, "t" * 64, tonight)) == sibling
        assert shard_base(store, "smoke", info(2, "c" * 40)) == sibling


@pytest.mark.slow
def test_a_night_in_two_shards_then_one_follow_up_raises_one_alert(tmp_path):
    """Three nights of a real compiler repository, each as 2 shards (``nightly --shard K/2``) and one
    ``--follow-up``: the first measures, the second (a docs-only commit) is checked against the
    first and not against its sibling shard, the third (the pass inserts 24 no-op pairs) is one
    alert over both shards' cases, raised by the follow-up, which alone exits 1."""
    from perfguard.store import Store

    from .factories import compiler_suite, git, make_compiler_repo, pass_source

    versions = [("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)}),
                ("docs", {"docs/n1.txt": "note\n"}), ("slower", {"mycc/passes.py": pass_source(24, "slow")})]
    repo, shas = make_compiler_repo(tmp_path / "cc", versions)
    extra = ('[models.s]\narch = "resnet"\nparams = { depth = 2, width = 8, image_size = 48, num_classes = 10 }\n')
    suite = tmp_path / "suite.toml"
    suite.write_text(compiler_suite(repo, workers=4, max_workers=8).replace("[pipelines.mycc]", extra + "\n[pipelines.mycc]"))
    store = f"sqlite:///{tmp_path / 'h.sqlite'}"
    codes = []
    for sha in shas:
        git(repo, "checkout", "-q", sha)
        for k in (1, 2):
            proc = run_cli("nightly", str(suite), "--store", store, "--shard", f"{k}/2", "--json",
                           str(tmp_path / f"night-{sha[:7]}-{k}.json"), "--quiet", cwd=tmp_path, timeout=600)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        proc = run_cli("nightly", str(suite), "--store", store, "--follow-up", "--no-bisect", "--quiet", cwd=tmp_path,
                       timeout=600)
        codes.append(proc.returncode)
        assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr
    assert codes == [0, 0, 1], codes
    with Store.open(store) as opened:
        nights = opened.nights("toy")
        assert [n.commit for n in nights] == [shas[0]] * 2 + [shas[1]] * 2 + [shas[2]] * 2
        for night in nights[2:]:  # each shard of a later night was checked against the night before
            document = json.loads(json.dumps(opened.document(night.document_id)))
            assert document["shard"]["n"] == 2 and document["mode"]["base_commit"] in (shas[0], shas[1])
            assert document["mode"]["base_commit"] != night.commit
        # Both shards' node-count steps (exact: confirmed as seen; latency depends on the machine's
        # noise) are one alert for the commit range, raised once by the follow-up.
        exact = [c for c in opened.changes(suite="toy") if c.key.metric == "node_count"]
        assert {c.key.case for c in exact if c.status == "confirmed"} == {"r/mycc/cpu", "s/mycc/cpu"}
        assert all(c.bad_commit == shas[2] and c.good_commit == shas[1] for c in exact)
        (alert,) = opened.alerts(suite="toy")
        assert {(c.case, c.metric) for c in alert.changes} >= {("r/mycc/cpu", "node_count"), ("s/mycc/cpu", "node_count")}
