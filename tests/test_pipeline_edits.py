"""A pipeline the suite file edits at a commit is a code change (issue 43 item 1).

The tutorial's layout (``docs/guides/tutorial.md``): a compiler ``mycc`` with one pass of its own and
the suite in the same repository. A commit swaps ``fuse_bn_into_conv`` and ``constant_folding`` in
its pipeline: the node count goes from 17 to 77. Replayed nightly, that night's series continue
across the edit, the alert holds the node-count step and names the commit, and a night whose own
check has an exact regression never says "nothing new". The replay is two nights of the tutorial's
smallest model without re-check (about 20 s on a loaded 2-core machine).
"""

from __future__ import annotations

import json
import types

import pytest

from .conftest import REPO, run_cli
from .factories import git, make_compiler_repo

# The tutorial's pass (docs/guides/tutorial.md), as the example compiler repository holds it.
PASSES = (REPO / "examples" / "compiler-repo" / "mycc" / "passes.py").read_text()

TUTORIAL_ORDER = '["mycc.passes:drop_identity", "fuse_bn_into_conv", "constant_folding"]'
SWAPPED_ORDER = '["mycc.passes:drop_identity", "constant_folding", "fuse_bn_into_conv"]'

SUITE = '''[suite]
name = "mycompiler"

[compiler]
path = ".."

[measure]
workers = 2
rounds = 3
warmup = 1
min_time = "2ms"

[check]
workers = 6
max_workers = 6

[models.resnet]
arch = "resnet"
params = {{ depth = 2, width = 8, image_size = 32, num_classes = 10 }}

[pipelines.mycc]
passes = {passes}
'''


def _tutorial_repo(root, *later):
    """The tutorial's repository (pass and suite, one commit), then ``later`` commits."""
    return make_compiler_repo(root, [("mycc: the drop_identity pass and a perfguard suite",
                                      {"mycc/__init__.py": "", "mycc/passes.py": PASSES,
                                       "suites/mycompiler.toml": SUITE.format(passes=TUTORIAL_ORDER),
                                       ".gitignore": ".perfguard/\n"}), *later])


def test_a_pipeline_edit_replayed_nightly_raises_an_alert_naming_its_commit_with_the_node_count(tmp_path):
    repo, shas = _tutorial_repo(tmp_path / "mycc", ("mycc: fold constants before fusing batch norms",
                                                    {"suites/mycompiler.toml": SUITE.format(passes=SWAPPED_ORDER)}))
    from perfguard.report.plain import plain_text

    suite = repo / "suites" / "mycompiler.toml"
    store = f"sqlite:///{tmp_path / 'history.sqlite'}"
    nights = []
    for sha in shas:
        git(repo, "checkout", "-q", sha)
        summary = tmp_path / f"summary-{sha[:8]}.md"
        proc = run_cli("nightly", str(suite), "--store", store, "--summary", str(summary), "--no-recheck",
                       "--quiet", cwd=tmp_path, timeout=900)
        nights.append((proc, plain_text(summary.read_text())))
    first, (second, text) = nights[0][0], nights[1]
    assert first.returncode == 0, first.stdout + first.stderr
    assert second.returncode == 1, second.stdout + second.stderr
    assert "Nothing new" not in text and "New confirmed regressions" in text, text
    assert f"mycc at {shas[1][:10]}" in text, text  # the edit, at its commit, with both pass lists
    assert "fuse_bn_into_conv, constant_folding -> mycc.passes:drop_identity, constant_folding" in text, text

    out = tmp_path / "alerts.json"
    proc = run_cli("history", "alerts", "--store", store, "--json", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    alerts = json.loads(out.read_text())["alerts"]
    (alert,) = [a for a in alerts if a["kind"] == "regression"]
    assert alert["culprit_commit"] == shas[1] and alert["last_commit"] == shas[1], alerts
    nodes = [c for c in alert["changes"] if (c["case"], c["metric"]) == ("resnet/mycc/cpu", "node_count")]
    assert len(nodes) == 1 and nodes[0]["ratio"] == pytest.approx(77 / 17), alert["changes"]

    # the series page marks the break as the commit that edited the pipeline, not a new environment
    from perfguard.history.site_model import collect
    from perfguard.store import Store

    with Store.open(store) as opened:
        site = collect(opened)
    (view,) = [v for v in site.series if v.key.metric == "node_count" and len(v.points) == 2]
    labels = [m.label for m in view.markers]
    assert any(label.startswith(f"pipeline mycc edited at {shas[1][:10]}") for label in labels), labels
    assert not any("environment changed" in label for label in labels), labels
    assert [p.value for p in view.points] == [17.0, 77.0]


def test_the_commit_of_an_edit_in_a_range_of_several_is_found_in_the_suite_files_history(tmp_path):
    from perfguard.flows.nightly.pipeline_edits import edit_commit
    from perfguard.store.edits import PipelineEdit
    from perfguard.suite import load_suite

    repo, shas = _tutorial_repo(tmp_path / "mycc",
                                ("a note", {"docs/a.txt": "a\n"}),
                                ("swap two passes", {"suites/mycompiler.toml": SUITE.format(passes=SWAPPED_ORDER)}),
                                ("a comment in the suite", {"suites/mycompiler.toml": "# mine\n" +
                                                            SUITE.format(passes=SWAPPED_ORDER)}))
    suite = load_suite(repo / "suites" / "mycompiler.toml")
    edit = PipelineEdit("mycompiler", "mycc", "b" * 64, "a" * 64, (), (), shas[0], shas[3])
    commit, note = edit_commit(suite, edit)
    assert commit == shas[2] and "changed at" in note, note
    one = PipelineEdit("mycompiler", "mycc", "b" * 64, "a" * 64, (), (), shas[1], shas[2])
    assert edit_commit(suite, one) == (shas[2], "")
    # defined anew twice in the range: no commit named, the commits that touched the suite file listed
    (repo / "suites" / "mycompiler.toml").write_text(SUITE.format(passes='["constant_folding"]'))
    git(repo, "commit", "-qam", "only folding")
    twice = PipelineEdit("mycompiler", "mycc", "b" * 64, "a" * 64, (), (), shas[0], git(repo, "rev-parse", "HEAD"))
    commit, note = edit_commit(suite, twice)
    assert commit is None and shas[2][:10] in note and shas[3][:10] in note, note


def test_a_night_whose_own_check_has_an_exact_regression_never_says_nothing_new():
    from perfguard.compare.verdicts import Verdict
    from perfguard.flows.nightly.night import NightReport
    from perfguard.report.nightly import markdown_summary
    from perfguard.stats.verdict import Comparison
    from perfguard.store import Night

    nodes = Comparison(decision="different", direction="regression", ratio=77 / 17, ci_low=77 / 17,
                       ci_high=77 / 17, p_value=0.0, mde=0.0, n_pairs=1, baseline_median=17, candidate_median=77,
                       floor=0.05, reason="exceeds", method="deterministic")
    row = Verdict("resnet/mycc/cpu", "node_count", "nodes", False, "median:5%", "base", "head", True, nodes,
                  "different", "regression")
    report = NightReport("mycompiler", Night(2, "mycompiler", "b" * 40, "2026-12-02T03:00:00Z", 2),
                         Night(1, "mycompiler", "a" * 40, "2026-12-01T03:00:00Z", 1),
                         types.SimpleNamespace(verdicts=[row]))  # type: ignore[arg-type]
    report.detected = True  # the whole night (or its follow-up): tonight's changes were detected, none held it
    text = markdown_summary(report)
    assert "Nothing new" not in text
    assert "- resnet/mycc/cpu node\\_count: 17 -> 77 (+352.9%)" in text or \
        "- resnet/mycc/cpu node_count: 17 -> 77 (+352.9%)" in text, text
    assert report.exit_regression
