"""What CI runs, and how it can be trusted: the workflows' supply chain and tokens, and tests that
cannot skip silently under CI=true.

The workflow checks read the real files (``.github/workflows/*.yml``, ``action.yml``, the example
repository's workflows under examples/, the runners guide docs/guides/runners.md, pyproject.toml);
actionlint and the older least-privilege checks live in tests/test_report.py, the action run step
by step (and the example's command lines) in tests/test_action.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO
from .test_action import EXAMPLE_WORKFLOWS, FAKE_PERFGUARD, _render
from .test_report import WORKFLOWS, _yaml

ACTION = REPO / "action.yml"
# Where the documentation tells a GPU user how to install the GPU wheel.
RUNNERS_GUIDE = REPO / "docs" / "guides" / "runners.md"
SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
TAG_COMMENT = re.compile(r"^#\s*v\d+(\.\d+)*\b")
# A program, in command position, that would run repository or compiler code (or install it).
RUNS_CODE = re.compile(r"(?:^|[;&|]|\$\(|\b(?:then|do|else)\b)\s*(?:\w+=\S*\s+)*(?:[\w./-]*/)?"
                       r"(perfguard|pip3?|python3?|tox|make|cmake|ninja|bash|sh)(?![\w.-])", re.M)
REMOTE_GIT = re.compile(r"(?:^|[;&|]|\$\(|\b(?:then|do|else)\b)\s*git\s+(?:-c\s+\S+\s+)*"
                        r"(fetch|pull|push|ls-remote|clone)\b", re.M)


def _sources() -> list[Path]:
    return [*WORKFLOWS, ACTION, *EXAMPLE_WORKFLOWS]


def _steps(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(job name, step) for every step of a workflow, or of the composite action."""
    if "jobs" in document:
        return [(name, step) for name, job in document["jobs"].items() for step in job.get("steps", [])]
    return [("action.yml", step) for step in document["runs"]["steps"]]


def _is(step: dict[str, Any], action: str) -> bool:
    return str(step.get("uses", "")).split("@")[0] == action


def _logical_lines(script: str) -> list[str]:
    """Shell lines with backslash continuations joined, so a command split over lines is one."""
    return script.replace("\\\n", " ").splitlines()


def test_every_action_is_pinned_by_a_commit_sha_with_its_tag_in_a_comment():
    """A tag can be moved to other code; a 40-hex commit cannot. Local actions (``./``) and docker
    images are not fetched by ref, so they are exempt; perfguard itself, in the example repository,
    has no release tag yet: tests/test_action.py checks its commit is one of this repository's."""
    seen = 0
    for path in _sources():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = re.match(r"\s*(?:-\s+)?uses:\s*(\S+)\s*(.*)$", line)
            if not match or match.group(1).startswith(("./", "docker://")):
                continue
            if match.group(1).split("@")[0].endswith("/perfguard"):
                assert SHA_PIN.match(match.group(1)), f"{path.name}:{number}: pin perfguard by a commit"
                continue
            seen += 1
            where = f"{path.name}:{number}: {line.strip()}"
            assert SHA_PIN.match(match.group(1)), f"not pinned by a full commit SHA: {where}"
            assert TAG_COMMENT.match(match.group(2)), f"name the release tag in a comment (# v1.2.3): {where}"
    assert seen >= 10, f"only {seen} uses: lines found; the scan is broken"


def test_jobs_that_can_write_check_out_nothing_and_run_no_code():
    """A job holding a write permission (contents, pull-requests, pages, id-token) never has the
    repository on disk: no checkout, no local action, no perfguard, pip or python in its scripts.
    A compiler built at a historical commit or a pull request's code cannot reach that token."""
    writers = 0
    for path in WORKFLOWS:
        for name, job in _yaml(path)["jobs"].items():
            permissions = job.get("permissions") or {}
            if "write" not in permissions.values():
                continue
            writers += 1
            where = f"{path.name}: job {name} ({permissions})"
            for step in job.get("steps", []):
                assert not _is(step, "actions/checkout"), f"{where} checks out the repository"
                assert not str(step.get("uses", "")).startswith("./"), f"{where} runs a local action"
                found = RUNS_CODE.search(step.get("run", ""))
                assert found is None, f"{where} runs {found.group(1) if found else ''!r}"
    assert writers >= 3, writers  # keep-history, pages, and the pull request's comment job


def test_only_the_keep_history_job_can_push_and_it_pushes_the_store_branch():
    nightly = _yaml(WORKFLOWS[1])
    writers = {name for name, job in nightly["jobs"].items() if (job.get("permissions") or {}).get("contents") == "write"}
    assert writers == {"keep-history"}, writers
    keep = nightly["jobs"]["keep-history"]
    # After notify: the triage it reads back from the alerts' issues (closed as not planned: wont-fix)
    # is in the store it hands on under the same artifact name, so the kept store holds it.
    assert keep["needs"] == ["bisect", "notify"] and keep["runs-on"] == "ubuntu-latest"
    notify = nightly["jobs"]["notify"]
    assert notify["needs"] == "bisect" and (notify["permissions"] or {}).get("contents") == "read"
    synced = [s for s in notify["steps"] if _is(s, "actions/upload-artifact") and s["with"]["name"] ==
              "perfguard-history-store"]
    assert len(synced) == 1 and synced[0]["with"]["overwrite"] is True
    scripts = " ".join(step.get("run", "") for step in keep["steps"])
    assert "refs/heads/perfguard-history" in scripts and "push" in scripts
    bisect = nightly["jobs"]["bisect"]
    assert bisect["permissions"] == {"contents": "read"}
    handed = [s for s in bisect["steps"] if _is(s, "actions/upload-artifact")]
    assert [s["with"]["name"] for s in handed] == ["perfguard-history-store"]
    received = [s for s in keep["steps"] if _is(s, "actions/download-artifact")]
    assert [s["with"]["name"] for s in received] == ["perfguard-history-store"]


def test_every_checkout_keeps_no_token_and_no_step_relies_on_one():
    """``persist-credentials: false`` everywhere; a git command that talks to a remote must then
    bring its own credentials (a credential helper on its command line), or it would fail on a
    private repository and, for the history branch, start an empty store."""
    checkouts = 0
    for path in [*WORKFLOWS, *EXAMPLE_WORKFLOWS]:
        for name, step in _steps(_yaml(path)):
            if _is(step, "actions/checkout"):
                checkouts += 1
                assert (step.get("with") or {}).get("persist-credentials") is False, f"{path.name}: job {name}"
            for line in _logical_lines(step.get("run", "")):
                if REMOTE_GIT.search(line):
                    assert "credential.helper" in line, f"{path.name}: job {name}: {line.strip()}"
    assert checkouts >= 6, checkouts


def test_history_branch_is_read_with_an_explicit_token_and_an_unreadable_branch_stops_the_job():
    nightly = _yaml(WORKFLOWS[1])
    readers = [(name, step) for name, step in _steps(nightly) if "perfguard-history" in step.get("run", "")
               and "FETCH_HEAD" in step.get("run", "")]
    assert {name for name, _ in readers} == {"measure", "publish"}, readers
    for name, step in readers:
        assert step.get("env", {}).get("GH_TOKEN") == "${{ github.token }}", name
        script = step["run"]
        # ls-remote exits 2 when the branch does not exist yet; anything else is an error.
        assert "ls-remote --exit-code" in script and '-ne 2' in script and "exit 1" in script, name
        assert "2>/dev/null" not in script, f"{name}: a failed fetch must not look like a first night"


def test_action_uploads_whatever_it_wrote_even_when_the_check_failed():
    steps = _yaml(ACTION)["runs"]["steps"]
    uploads = [step for step in steps if _is(step, "actions/upload-artifact")]
    assert uploads, "action.yml uploads nothing"
    for step in uploads:
        condition = str(step.get("if", "")).replace("${{", "").replace("}}", "").strip()
        # Always, unless the inputs were refused before there was a folder to upload.
        assert condition == "always() && steps.paths.outputs.out-dir != ''", f"{step.get('name')}: if: {step.get('if')!r}"
        assert step["with"]["path"] == "${{ steps.paths.outputs.out-dir }}/"
    check = next(step for step in steps if step.get("id") == "check")
    assert check["env"]["OUT"] == "${{ steps.paths.outputs.out-dir }}"
    assert '--json "$OUT/verdicts.json"' in check["run"]  # where the error document goes
    paths = next(step for step in steps if step.get("id") == "paths")
    assert 'root="$RUNNER_TEMP/perfguard"' in paths["run"] and 'echo "out-dir=$root/out/' in paths["run"]


def _gpu_extra() -> str:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    (spec,) = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    return str(spec)


def test_gpu_wheel_is_installed_with_the_range_of_the_gpu_extra():
    """``onnxruntime-gpu`` replaces the CPU wheel with ``--no-deps``: it is installed by hand, and
    every such line names the same range as pyproject's ``gpu`` extra, never a bare name."""
    spec = _gpu_extra()
    assert re.fullmatch(r"onnxruntime-gpu\s*[<>=!~]=?.+", spec), spec
    found: dict[str, int] = {}
    for path in [*WORKFLOWS, ACTION, RUNNERS_GUIDE, REPO / "pyproject.toml", REPO / "perfguard/backends/ort/execution_providers.py"]:
        # The ORT backend's install hint (a CUDA runner's) is one string split over two source lines.
        for line in _logical_lines(re.sub(r'"\n\s*"', "", path.read_text())):
            if "onnxruntime-gpu" not in line or not re.search(r"\bpip3?\"?\s+install\b", line):
                continue
            for token in re.findall(r"onnxruntime-gpu[^\s'\"]*", line):
                assert token == spec.replace(" ", ""), f"{path.name}: {line.strip()} (want {spec!r})"
                found[path.name] = found.get(path.name, 0) + 1
    assert found.get("perf-nightly.yml") == 2 and found.get(RUNNERS_GUIDE.name, 0) >= 1 and found.get("execution_providers.py") == 1, found


# --- tests that cannot skip silently ----------------------------------------------------------------

IREE_PURE_TEST = "test_timing_report_is_summed_per_pass_name_in_first_run_order_skipping_containers"


def _pytest_without_iree(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    """One pure test of tests/test_iree.py in a child pytest that finds no IREE tools (an empty
    PERFGUARD_IREE_BIN), with or without CI set."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env["PERFGUARD_IREE_BIN"] = str(tmp_path)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "tests/test_iree.py", "-q", "-p", "no:cacheprovider",
                           "-k", IREE_PURE_TEST], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


@pytest.mark.slow
def test_iree_tests_fail_under_ci_when_iree_is_missing_and_skip_with_the_reason_elsewhere(tmp_path):
    """CI installs the iree extra (.ci/run), so there a missing IREE is a broken setup, as for
    Chromium, actionlint and PostgreSQL; elsewhere the tests skip and say why."""
    in_ci = _pytest_without_iree(tmp_path, "true")
    assert in_ci.returncode == 1, in_ci.stdout[-3000:]
    assert "CI=true" in in_ci.stdout and "PERFGUARD_IREE_BIN" in in_ci.stdout, in_ci.stdout[-3000:]
    here = _pytest_without_iree(tmp_path, None)
    assert here.returncode == 0 and "1 skipped" in here.stdout, here.stdout[-3000:]
    assert "IREE is not installed" in here.stdout, here.stdout[-3000:]  # -ra prints the reason


# --- sharded checks and nights (issue 26) --------------------------------------------------------


def test_the_pull_request_check_runs_in_shards_and_one_merge_job_decides_reports_and_comments():
    jobs = _yaml(WORKFLOWS[0])["jobs"]
    assert int(_yaml(WORKFLOWS[0])["env"]["shards"]) >= 1
    plan, check, merge, comment = jobs["plan"], jobs["check"], jobs["merge"], jobs["comment"]
    assert plan["permissions"] == {} and "seq 1" in plan["steps"][0]["run"]
    assert check["needs"] == "plan" and check["strategy"]["fail-fast"] is False
    assert check["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    (action,) = [s for s in check["steps"] if s.get("uses") == "./"]
    assert action["with"]["shard"] == "${{ matrix.shard }}/${{ env.shards }}"
    assert action["with"]["report-name"] == "perfguard-shard-${{ matrix.shard }}"  # one artifact per shard
    assert merge["needs"] == "check" and "!cancelled()" in merge["if"] and merge["permissions"] == {"contents": "read"}
    (download,) = [s for s in merge["steps"] if _is(s, "actions/download-artifact")]
    assert download["with"] == {"pattern": "perfguard-shard-*", "path": "perfguard-shards"}
    (merging,) = [s for s in merge["steps"] if s.get("uses") == "./"]
    assert merging["with"]["merge-from"] == "perfguard-shards" and merging["with"]["report-name"] == "perfguard-report"
    assert merging["id"] == "perfguard" and merge["outputs"]["exit-code"] == "${{ steps.perfguard.outputs.exit-code }}"
    assert comment["needs"] == "merge" and "needs.merge.outputs.exit-code" in comment["if"]


def test_the_action_checks_a_shard_without_deciding_and_merges_shards_into_one_decision():
    steps = _yaml(ACTION)["runs"]["steps"]
    inputs = _yaml(ACTION)["inputs"]
    assert inputs["shard"]["default"] == "" and inputs["merge-from"]["default"] == ""
    check = next(step for step in steps if step.get("id") == "check")
    assert "--shard \"$SHARD\"" in check["run"] and "perfguard merge \"${shards[@]}\"" in check["run"]
    # A shard neither reports, comments nor fails: the merge job decides for the whole.
    for name in ("Job summary and comment body", "Comment on the pull request", "Fail on regression"):
        step = next(s for s in steps if s.get("name") == name)
        assert "inputs.shard == ''" in str(step["if"]), name
    mode = next(step for step in steps if step.get("id") == "mode")
    assert mode["if"] == "inputs.merge-from == ''"  # the merge job needs no merge-base


def test_the_nightly_shards_a_fleet_class_and_runs_one_follow_up_job_per_class():
    nightly = _yaml(WORKFLOWS[1])
    jobs = nightly["jobs"]
    plan = jobs["plan"]["steps"][0]
    assert plan["env"]["SHARDS"] == "${{ vars.PERFGUARD_SHARDS }}" and "parts=" in plan["run"]
    assert '"cpu"' in plan["run"] and 'os.environ.get("FLEET") == "true"' in plan["run"]  # SQLite: one writer
    assert jobs["measure"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.parts) }}"
    assert jobs["bisect"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"  # once per class
    measure = next(s for s in jobs["measure"]["steps"] if s.get("id") == "nightly")
    assert measure["env"]["SHARD"] == "${{ matrix.shard }}" and '--shard "$SHARD"' in measure["run"]
    stored = next(s for s in jobs["measure"]["steps"] if s.get("name") == "Store the night")
    assert stored["with"]["name"] == "perfguard-nightly-${{ matrix.label }}${{ matrix.part }}"  # one per shard
    follow = next(s for s in jobs["bisect"]["steps"] if "perfguard nightly" in s.get("run", ""))
    assert follow["env"]["SHARDS"] == "${{ matrix.shards }}"
    assert "mode=--follow-up" in follow["run"] and "mode=--bisect-only" in follow["run"]


def test_the_nightly_plan_splits_only_the_fleet_classes(tmp_path):
    """The plan step's Python, run with the variables a repository sets."""
    plan = _yaml(WORKFLOWS[1])["jobs"]["plan"]["steps"][0]["run"]
    script = plan.split("<<'PY'", 1)[1].split("\n", 1)[1].rsplit("PY", 1)[0]
    script = "\n".join(line[len("  "):] if line.startswith("  ") else line for line in script.splitlines())
    import textwrap

    env = {**os.environ, "GPU_RUNNER": '["self-hosted", "gpu"]', "NPU_RUNNER": "", "SHARDS": "3", "FLEET": "true"}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True,
                          check=True)
    import json

    said = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    classes, parts = json.loads(said["matrix"])["include"], json.loads(said["parts"])["include"]
    assert [(c["label"], c["shards"]) for c in classes] == [("cpu", 1), ("gpu", 3)]
    assert [(p["label"], p["shard"], p["part"]) for p in parts] == [
        ("cpu", "", ""), ("gpu", "1/3", "-1"), ("gpu", "2/3", "-2"), ("gpu", "3/3", "-3")]


# --- counts in CI, and nothing written into the checkout (issues 42 and 43) -------------------------------


def test_the_action_installs_valgrind_only_for_counts_and_keeps_the_cache_under_a_scoped_key():
    steps = {step.get("name"): step for step in _yaml(ACTION)["runs"]["steps"]}
    inputs = _yaml(ACTION)["inputs"]
    assert inputs["counts"]["default"] == "false" and inputs["cache"]["default"] == ""
    valgrind = steps["Install Valgrind (counts)"]
    assert valgrind["if"] == "inputs.counts == 'true'" and "apt-get install" in valgrind["run"]
    restore, save = steps["Restore the artifact cache"], steps["Save the artifact cache"]
    assert _is(restore, "actions/cache/restore") and _is(save, "actions/cache/save")
    assert restore["if"] == "steps.paths.outputs.cache == 'true'" and "always()" in save["if"]
    assert restore["with"]["key"] == save["with"]["key"] == "${{ steps.paths.outputs.cache-key }}"
    # A pull request's scope is its own; a branch's is the branch; the default branch's is restored last.
    paths = steps["Where perfguard writes"]["run"]
    assert 'scope="pr-$PR_NUMBER"' in paths and 'echo "$base-ref-${DEFAULT_BRANCH//,/_}:"' in paths


def test_the_pull_request_check_keeps_counts_and_compiles_in_the_action_s_cache_shared_with_the_nights():
    """The PR check's default-branch restore key is a prefix of the key the nightly saves on main,
    so the base side of a pull request is served from the night's compiles and counts."""
    pull_request, nightly = _yaml(WORKFLOWS[0]), _yaml(WORKFLOWS[1])
    assert pull_request["env"]["counts"] in ("true", "false")
    (action,) = [s for s in pull_request["jobs"]["check"]["steps"] if s.get("uses") == "./"]
    assert action["with"]["counts"] == "${{ env.counts }}" and action["with"]["cache"] == "true"
    assert "env" not in action  # no PERFGUARD_ARTIFACT_CACHE in the checkout any more
    (cache,) = [s for s in nightly["jobs"]["measure"]["steps"] if _is(s, "actions/cache")]
    context = {"matrix.label": "cpu", "matrix.part": "", "runner.os": "Linux", "runner.arch": "X64",
               "github.ref_name": "main", "github.run_id": "99", "github.run_attempt": "1", "runner.temp": "/t"}
    night_key = _render(cache["with"]["key"], context)
    assert night_key.startswith(f"{action['with']['cache-key']}-Linux-X64-ref-main:"), night_key
    assert _render(cache["with"]["path"], context) == "/t/perfguard/artifact-cache"


def test_the_nightly_writes_nothing_into_the_checkout():
    """Every file perfguard writes in a job that compiles (its venv, the store, the artifact cache,
    the night's documents) lies under the runner's temporary folder: an untracked file under the
    compiler's path makes each of its compiles "not cacheable"."""
    jobs = _yaml(WORKFLOWS[1])["jobs"]
    for name in ("measure", "bisect"):
        for step in jobs[name]["steps"]:
            path = str((step.get("with") or {}).get("path", ""))
            if path:
                assert path.startswith("${{ runner.temp }}/"), f"{name}: {step.get('name')}: {path}"
            script = step.get("run", "")
            assert ".perfguard" not in script and "mkdir -p nightly" not in script, f"{name}: {step.get('name')}"
            assert " -e ." not in script, f"{name}: an editable install follows the checkouts of the night"
            for key, value in (step.get("env") or {}).items():
                assert "github.workspace" not in str(value), f"{name}: {key}: {value}"
        (install,) = [s for s in jobs[name]["steps"] if s.get("name") == "Install perfguard"]
        assert 'venv="$RUNNER_TEMP/perfguard-venv"' in install["run"]


def _nightly_step(job: str, marker: str) -> dict[str, Any]:
    (step,) = [s for s in _yaml(WORKFLOWS[1])["jobs"][job]["steps"] if marker in s.get("run", "")]
    return step


@pytest.mark.parametrize(("counts", "job"), [("true", "measure"), ("false", "measure"), ("true", "bisect")])
def test_the_nightly_counts_when_asked_and_installs_valgrind_for_it(tmp_path, counts, job):
    """The nightly's own step run with bash and a fake perfguard: ``--counts`` on its command line
    exactly when COUNTS is true, and a perfguard exit 1 (a new regression) is not the step's end."""
    nightly = _yaml(WORKFLOWS[1])
    assert nightly["env"]["COUNTS"] == "${{ inputs.counts || vars.PERFGUARD_COUNTS == 'true' }}"
    assert nightly["on"]["workflow_dispatch"]["inputs"]["counts"]["type"] == "boolean"
    (valgrind,) = [s for s in nightly["jobs"][job]["steps"] if s.get("name") == "Install Valgrind (counts)"]
    assert valgrind["if"] == "env.COUNTS == 'true'" and "apt-get install" in valgrind["run"]
    step = _nightly_step(job, "perfguard nightly")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "perfguard").write_text(FAKE_PERFGUARD.replace('case "$1" in check|merge)', 'case "$1" in nightly)'))
    (fake / "perfguard").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "FAKE_LOG": str(tmp_path), "FAKE_EXIT": "1",
           "RUNNER_TEMP": str(tmp_path / "temp"), "GITHUB_OUTPUT": str(tmp_path / "out"), "SUITE": "s.toml",
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"), "COUNTS": counts, "CASES": "*/*/cpu", "SHARD": "",
           "LABEL": "cpu", "SHARDS": "1", "FLEET_STORE": "", "NIGHT": str(tmp_path / "temp" / "perfguard-nightly")}
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    import shlex

    nightly_line = shlex.split((tmp_path / "perfguard").read_text().splitlines()[0])
    assert nightly_line[:2] == ["nightly", "s.toml"] and ("--counts" in nightly_line) is (counts == "true")
