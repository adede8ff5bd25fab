"""A broken compiler is a finding, not bad input (issue 25, item 5): a night whose compiler commit's
user passes do not import records a ``broken`` night, exits 4 and raises a ``broken`` alert for the
last good night's commit .. this one; the next good night is checked against the last good night
and closes the alert as ``fixed``. A real git repository, three nights, few workers."""

from __future__ import annotations

import pytest

from perfguard.store import Store

from .conftest import run_cli
from .factories import compiler_suite, git, make_compiler_repo, pass_source

BROKEN_PASSES = "raise ImportError('half-merged refactor')\n"


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("broken")
    repo, shas = make_compiler_repo(tmp / "cc", [
        ("initial", {"mycc/__init__.py": "", "mycc/passes.py": pass_source(0)}),
        ("break the passes", {"mycc/passes.py": BROKEN_PASSES}),
        ("fix the passes", {"mycc/passes.py": pass_source(0)}),
    ])
    suite = tmp / "suite.toml"
    suite.write_text(compiler_suite(repo, workers=2, max_workers=4).replace("step_workers = 4", "step_workers = 2"))
    store = f"sqlite:///{tmp / 'history.sqlite'}"
    out = []
    for sha in shas:
        git(repo, "checkout", "-q", sha)
        summary = tmp / f"summary-{sha[:7]}.md"
        proc = run_cli("nightly", str(suite), "--store", store, "--summary", str(summary), "--quiet",
                       "--no-bisect", "--no-recheck", cwd=tmp, timeout=600)
        out.append({"code": proc.returncode, "out": proc.stdout + proc.stderr,
                    "summary": summary.read_text() if summary.exists() else ""})
    return {"shas": shas, "store": store, "nights": out}


def test_a_broken_night_exits_4_with_a_broken_alert_and_a_stored_broken_night(nights):
    first, broken, _ = nights["nights"]
    good_sha, bad_sha, _ = nights["shas"]
    assert first["code"] == 0, first["out"]
    assert broken["code"] == 4, broken["out"]
    assert "### Compiler broken" in broken["summary"]
    assert "half-merged refactor" in broken["summary"]
    with Store.open(nights["store"], create=False) as store:
        stored = store.nights("toy")
        assert [n.status for n in stored] == ["good", "broken", "good"]
        assert stored[1].commit == bad_sha and stored[1].document_id is None
        assert "half-merged refactor" in stored[1].note
        [alert] = [a for a in store.alerts(suite="toy") if a.kind == "broken"]
        assert (alert.first_commit, alert.last_commit) == (good_sha, bad_sha)


def test_the_next_good_night_is_checked_against_the_last_good_one_and_closes_the_alert(nights):
    _, _, fixed = nights["nights"]
    good_sha, bad_sha, fixed_sha = nights["shas"]
    assert fixed["code"] == 0, fixed["out"]
    assert f"checked against the previous night at `{good_sha[:10]}`" in fixed["summary"]
    assert "the compiler builds again" in fixed["summary"]
    with Store.open(nights["store"], create=False) as store:
        [alert] = [a for a in store.alerts(suite="toy") if a.kind == "broken"]
        assert alert.status == "fixed"
        assert (alert.fix_first_commit, alert.fix_last_commit) == (bad_sha, fixed_sha)
        assert alert.events[-1].to_status == "fixed"
