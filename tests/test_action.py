"""The GitHub Action (``action.yml``) as a compiler's repository calls it, run for real: each step of
the composite action in order, its ``if:`` and ``${{ }}`` evaluated, its shell run with bash, with
fake ``python``, ``perfguard`` and ``apt-get`` that record what they were asked. So the command
line a workflow's inputs produce is asserted, not the text that builds it; and so is the example
repository under ``examples/compiler-repo`` (its workflow passes actionlint, its inputs exist in the
action of the perfguard commit it pins, its suite validates).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO
from .test_report import _linter_or_skip, _run_actionlint, _yaml

ACTION = REPO / "action.yml"
EXAMPLE = REPO / "examples" / "compiler-repo"
EXAMPLE_WORKFLOWS = sorted((EXAMPLE / ".github" / "workflows").glob("*.yml"))
# `uses: OWNER/perfguard@<commit>`: how a compiler's repository names the action.
PERFGUARD_PIN = re.compile(r"^[\w.-]+/perfguard@([0-9a-f]{40})$")

# --- a small evaluator of GitHub's expressions ------------------------------------------------------

TOKEN = re.compile(r"\s*(?:('(?:[^']|'')*')|(&&|\|\||==|!=|!|\(|\))|([A-Za-z_][\w.-]*(?:\(\))?)|(\d+))")
FUNCTIONS = {"always()": "True", "success()": "_ok", "failure()": "(not _ok)", "cancelled()": "False"}


def _evaluate(expression: str, lookup: dict[str, Any], ok: bool = True) -> Any:
    """A GitHub expression (string literals, context paths, ``== != ! && ||``, parentheses and the
    status functions) as Python: ``&&`` and ``||`` return an operand, as GitHub's do."""
    python, position = [], 0
    while position < len(expression.rstrip()):
        match = TOKEN.match(expression, position)
        assert match, f"cannot read {expression[position:]!r} in {expression!r}"
        literal, operator, name, number = match.groups()
        position = match.end()
        if literal is not None:
            python.append(repr(literal[1:-1].replace("''", "'")))
        elif operator is not None:
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(operator, f" {operator} "))
        elif number is not None:
            python.append(number)
        elif name in FUNCTIONS:
            python.append(FUNCTIONS[name])
        else:
            assert name is not None
            python.append({"true": "True", "false": "False", "null": "None"}.get(name, f"_get({name!r})"))
    return eval("".join(python), {"__builtins__": {}, "_get": lambda key: lookup.get(key, ""), "_ok": ok})


def _render(value: Any, lookup: dict[str, Any]) -> str:
    """A ``with:``/``env:`` value with every ``${{ }}`` replaced by its value, as GitHub renders it."""
    def one(match: re.Match[str]) -> str:
        result = _evaluate(match.group(1), lookup)
        return {True: "true", False: "false", None: ""}.get(result, str(result)) if isinstance(result, (bool, type(None))) else str(result)
    return re.sub(r"\$\{\{(.*?)\}\}", one, str(value), flags=re.S)


# --- running the composite action ---------------------------------------------------------------------

FAKE_PYTHON = """#!/bin/bash
# python -m venv DIR: a venv holding this fake python and a fake perfguard; python -m pip: recorded.
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  dir="${@: -1}"; mkdir -p "$dir/bin"; cp "$0" "$dir/bin/python"; cp "$FAKE_BIN/perfguard.fake" "$dir/bin/perfguard"
  echo "$0 $*" >> "$FAKE_LOG/python"; exit 0
fi
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "$0 $*" >> "$FAKE_LOG/pip"; exit 0; fi
exec "$REAL_PYTHON" "$@"
"""
FAKE_PERFGUARD = """#!/bin/bash
# Records its arguments (one command a line, shell-quoted), writes what --json names; check and merge
# exit $FAKE_EXIT.
printf '%q ' "$@" >> "$FAKE_LOG/perfguard"; echo >> "$FAKE_LOG/perfguard"
code=0
case "$1" in check|merge) code="${FAKE_EXIT:-0}" ;; esac
while [ $# -gt 0 ]; do
  case "$1" in
    --json) mkdir -p "$(dirname "$2")"; echo '{"summary": {"regressions": 1}}' > "$2"; shift ;;
    --summary-md|--comment-md) echo "# perfguard" > "$2"; shift ;;
  esac
  shift
done
exit "$code"
"""
FAKE_APT = """#!/bin/bash
echo "apt-get $*" >> "$FAKE_LOG/apt-get"
if [ "$1" = "install" ]; then printf '#!/bin/bash\\necho valgrind-3.19.0\\n' > "$FAKE_BIN/valgrind"; chmod +x "$FAKE_BIN/valgrind"; fi
"""
# What the action's scripts call besides bash builtins and the fakes; nothing else is on PATH, so an
# installed valgrind or perfguard cannot answer for the fakes.
TOOLS = ("bash", "mkdir", "find", "sort", "git", "id", "cat", "dirname", "env", "cp", "chmod")


@dataclass
class Run:
    """What one run of the action did: every step's outcome, the fakes' records, the runner's files."""

    outcomes: dict[str, str] = field(default_factory=dict)
    uses: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    log: Path = Path()
    temp: Path = Path()
    workspace: Path = Path()

    def perfguard(self) -> list[list[str]]:
        """Each perfguard command line, as its argument list."""
        return [shlex.split(line) for line in self.recorded("perfguard").splitlines()]

    def recorded(self, name: str) -> str:
        path = self.log / name
        return path.read_text() if path.exists() else ""

    def used(self, action: str) -> dict[str, str] | None:
        found = [with_ for uses, with_ in self.uses if uses.split("@")[0] == action]
        return found[0] if found else None


def _outputs(path: Path) -> dict[str, str]:
    """``$GITHUB_OUTPUT``: ``name=value`` lines and ``name<<END`` heredocs."""
    outputs: dict[str, str] = {}
    lines = iter(path.read_text().splitlines() if path.exists() else [])
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, end = line.split("<<", 1)
            body = []
            for inner in lines:
                if inner == end:
                    break
                body.append(inner)
            outputs[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


def _workspace(tmp_path: Path) -> tuple[Path, str]:
    """A compiler's checkout: two commits, the pull request's base and its head. Returns the base sha."""
    workspace = tmp_path / "workspace"
    shutil.copytree(EXAMPLE, workspace)
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@b"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=workspace, env=env, check=True)
    subprocess.run(["git", "add", "."], cwd=workspace, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "base"], cwd=workspace, env=env, check=True)
    # The head's pass writes another artifact (a doc string), so a real check has a pair to count.
    passes = workspace / "mycc" / "passes.py"
    passes.write_text(passes.read_text().replace("    return model", '    model.doc_string = "head"\n    return model'))
    subprocess.run(["git", "commit", "-qam", "head"], cwd=workspace, env=env, check=True)
    base = subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=workspace, capture_output=True, text=True, check=True)
    return workspace, base.stdout.strip()


def run_action(tmp_path: Path, inputs: dict[str, str], event: str = "pull_request", exit_code: int = 0,
               real: bool = False) -> Run:
    """Run action.yml's steps in order, as the runner would for a job of ``event`` with ``inputs``.
    ``real``: the venv's perfguard is this perfguard and the machine's tools (valgrind) are on PATH."""
    action = _yaml(ACTION)
    workspace, base_sha = _workspace(tmp_path)
    run = Run(log=tmp_path / "log", temp=tmp_path / "runner-temp", workspace=workspace)
    fake_bin = tmp_path / "bin"
    for folder in (run.log, run.temp, fake_bin):
        folder.mkdir()
    perfguard = '#!/bin/bash\nexec "$REAL_PYTHON" -m perfguard "$@"\n' if real else FAKE_PERFGUARD
    for name, text in (("python", FAKE_PYTHON), ("perfguard.fake", perfguard), ("apt-get", FAKE_APT),
                       ("sudo", '#!/bin/bash\nexec "$@"\n')):
        (fake_bin / name).write_text(text)
        (fake_bin / name).chmod(0o755)
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (fake_bin / tool).symlink_to(found)
    path = [str(fake_bin), *(os.environ["PATH"].split(os.pathsep) if real else [])]
    values = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    unknown = set(inputs) - set(values)
    assert not unknown, f"action.yml has no input {sorted(unknown)}"
    values.update(inputs)
    lookup: dict[str, Any] = {
        "github.event_name": event, "github.ref_name": "main" if event != "pull_request" else "7/merge",
        "github.event.pull_request.number": 7 if event == "pull_request" else "",
        "github.event.pull_request.base.sha": base_sha if event == "pull_request" else "",
        "github.event.pull_request.head.repo.full_name": "org/mycc", "github.repository": "org/mycc",
        "github.event.repository.default_branch": "main", "github.action_path": str(REPO),
        "github.token": "t0ken", "runner.temp": str(run.temp), "runner.os": "Linux",
    }
    for name, value in values.items():
        lookup[f"inputs.{name}"] = _render(value, lookup)
    ok = True
    for number, step in enumerate(action["runs"]["steps"]):
        step_id = step.get("id", f"step{number}")
        condition = str(step.get("if", "success()")).replace("${{", "").replace("}}", "")
        if not re.search(r"\b(always|success|failure|cancelled)\(\)", condition):
            condition = f"success() && ({condition})"  # GitHub's implicit status check
        if not _evaluate(condition, lookup, ok):
            run.outcomes[step.get("name", step_id)] = lookup[f"steps.{step_id}.outcome"] = "skipped"
            continue
        if "uses" in step:
            with_ = {key: _render(value, lookup) for key, value in (step.get("with") or {}).items()}
            run.uses.append((step["uses"], with_))
            run.outcomes[step.get("name", step["uses"])] = lookup[f"steps.{step_id}.outcome"] = "success"
            continue
        github_output, github_path = tmp_path / f"output-{number}", tmp_path / f"path-{number}"
        env = {key: _render(value, lookup) for key, value in (step.get("env") or {}).items()}
        env.update({"PATH": os.pathsep.join(path), "HOME": str(tmp_path), "REAL_PYTHON": sys.executable,
                    "FAKE_BIN": str(fake_bin), "FAKE_LOG": str(run.log), "FAKE_EXIT": str(exit_code),
                    "RUNNER_TEMP": str(run.temp), "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64",
                    "GITHUB_RUN_ID": "1234", "GITHUB_RUN_ATTEMPT": "1", "GITHUB_OUTPUT": str(github_output),
                    "GITHUB_PATH": str(github_path), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")})
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step["run"]],
                              cwd=workspace, env=env, capture_output=True, text=True, timeout=600 if real else 60)
        outcome = "success" if proc.returncode == 0 else "failure"
        run.outcomes[step.get("name", step_id)] = lookup[f"steps.{step_id}.outcome"] = outcome
        (run.log / f"step-{number}.out").write_text(proc.stdout + proc.stderr)
        ok = ok and proc.returncode == 0
        outputs = _outputs(github_output)
        run.outputs[step_id] = outputs
        for name, value in outputs.items():
            lookup[f"steps.{step_id}.outputs.{name}"] = value
        if github_path.exists():
            path[:0] = reversed(github_path.read_text().split())
    return run


def _untracked(workspace: Path) -> str:
    """Untracked files, ignored ones too, but Python's bytecode (a pass imported writes it; it does
    not make a compile "not cacheable")."""
    status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=workspace, capture_output=True,
                            text=True, check=True).stdout
    return "".join(line + "\n" for line in status.splitlines() if not line.rstrip("/").endswith("__pycache__"))


# --- the action ---------------------------------------------------------------------------------------


def test_counts_installs_valgrind_and_runs_a_counted_check_with_the_artifact_cache(tmp_path):
    run = run_action(tmp_path, {"suite": "perf/suite.toml", "counts": "true", "cache-key": "mycc"})
    assert run.outcomes["Install Valgrind (counts)"] == "success"
    assert "apt-get install -y -qq --no-install-recommends valgrind" in run.recorded("apt-get")
    out, cache = run.temp / "perfguard" / "out" / "perfguard-report", run.temp / "perfguard" / "artifact-cache"
    check, report = run.perfguard()
    merge_base = subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=run.workspace, capture_output=True, text=True,
                                check=True).stdout.strip()
    assert check == ["check", "perf/suite.toml", "--json", f"{out}/verdicts.json", "--report", f"{out}/report",
                     "--annotations", "--base-ref", merge_base, "--counts", "--artifact-cache", str(cache),
                     "--cache-max", "2GB"]
    assert report[:2] == ["report", f"{out}/verdicts.json"]
    # The cache is kept under a key of this pull request, restored from it and then from main's.
    restore, save = run.used("actions/cache/restore"), run.used("actions/cache/save")
    assert restore and save and restore["path"] == save["path"] == str(cache)
    assert save["key"] == restore["key"] == "mycc-Linux-X64-pr-7:1234-1"
    assert restore["restore-keys"].splitlines() == ["mycc-Linux-X64-pr-7:", "mycc-Linux-X64-pr-7:",
                                                    "mycc-Linux-X64-ref-main:"]
    assert run.outputs["check"] == {"exit-code": "0", "regressions": "1"}
    upload = run.used("actions/upload-artifact")
    assert upload and upload["path"] == f"{out}/"


def test_without_counts_nothing_is_counted_cached_or_installed(tmp_path):
    run = run_action(tmp_path, {"suite": "perf/suite.toml", "base-ref": "HEAD~1"})
    assert run.outcomes["Install Valgrind (counts)"] == "skipped" and run.recorded("apt-get") == ""
    assert run.outcomes["Restore the artifact cache"] == run.outcomes["Save the artifact cache"] == "skipped"
    check = run.perfguard()[0]
    assert check[-2:] == ["--base-ref", "HEAD~1"]
    assert "--counts" not in check and "--artifact-cache" not in check


def test_a_regression_is_reported_saved_and_then_fails_the_step(tmp_path):
    """GitHub runs the check's shell with -e: perfguard's exit 1 must reach the exit-code output
    rather than end the script, so the summary is written, the cache saved, and the last step fails."""
    run = run_action(tmp_path, {"suite": "perf/suite.toml", "counts": "true"}, exit_code=1)
    assert run.outputs["check"]["exit-code"] == "1" and run.outcomes["perfguard check"] == "success"
    assert run.outcomes["Job summary and comment body"] == "success"
    assert run.outcomes["Save the artifact cache"] == "success" and run.outcomes["Upload the report"] == "success"
    assert run.outcomes["Fail on regression"] == "failure"


def test_an_error_fails_the_check_step_and_still_uploads_and_saves(tmp_path):
    run = run_action(tmp_path, {"suite": "perf/suite.toml", "counts": "true"}, exit_code=2)
    assert run.outcomes["perfguard check"] == "failure" and run.outputs["check"]["exit-code"] == "2"
    assert run.outcomes["Upload the report"] == "success" and run.outcomes["Save the artifact cache"] == "success"
    assert run.outcomes["Job summary and comment body"] == "skipped"


@pytest.mark.parametrize(("inputs", "counted", "cached"), [
    ({"counts": "true", "cache": "false"}, True, False),
    ({"cache": "true"}, False, True),
])
def test_the_cache_follows_counts_unless_it_is_set(tmp_path, inputs, counted, cached):
    run = run_action(tmp_path, {"suite": "perf/suite.toml", "base-ref": "HEAD~1", **inputs})
    check = run.perfguard()[0]
    assert ("--counts" in check) is counted and ("--artifact-cache" in check) is cached
    assert (run.used("actions/cache/restore") is not None) is cached


def test_a_shard_keeps_a_cache_of_its_own_and_a_push_keys_by_its_branch(tmp_path):
    run = run_action(tmp_path, {"suite": "s.toml", "base-ref": "HEAD~1", "shard": "2/3", "cache": "true"}, event="push")
    restore = run.used("actions/cache/restore")
    assert restore and restore["key"] == "perfguard-Linux-X64-ref-main:shard-2-of-3-1234-1"
    assert restore["restore-keys"].splitlines()[:2] == ["perfguard-Linux-X64-ref-main:shard-2-of-3-",
                                                        "perfguard-Linux-X64-ref-main:"]
    assert run.perfguard()[0][:5] == ["check", "s.toml", "--json", f"{run.temp}/perfguard/out/perfguard-report/verdicts.json",
                                      "--shard"]


def test_the_merge_job_caches_nothing(tmp_path):
    (tmp_path / "shards" / "a").mkdir(parents=True)
    (tmp_path / "shards" / "a" / "verdicts.json").write_text("{}")
    run = run_action(tmp_path, {"suite": "s.toml", "merge-from": str(tmp_path / "shards"), "counts": "true"})
    assert run.outcomes["Restore the artifact cache"] == "skipped" and run.outcomes["Choose the baseline"] == "skipped"
    assert run.perfguard()[0][:2] == ["merge", str(tmp_path / "shards" / "a" / "verdicts.json")]


def test_a_counts_input_that_is_not_true_or_false_stops_before_anything_runs(tmp_path):
    run = run_action(tmp_path, {"suite": "s.toml", "counts": "yes"})
    assert run.outcomes["Where perfguard writes"] == "failure"
    assert 'input counts must be "true" or "false", got "yes"' in (run.log / "step-1.out").read_text()
    assert run.perfguard() == [] and run.outcomes["Upload the report"] == "skipped"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed (.ci/run installs it in CI)")
def test_a_counted_check_runs_through_the_action_and_leaves_its_counts_in_the_cache(tmp_path):
    """The action with counts: true, end to end with this perfguard and the machine's Valgrind: the
    example's pull request (its pass writes another artifact) checked and counted, the counts stored
    in the folder the cache step saves, the summary written, nothing in the checkout (about 30 s)."""
    run = run_action(tmp_path, {"suite": "perf/suite.toml", "counts": "true", "workers": "2"}, real=True)
    logs = "".join(path.read_text() for path in sorted(run.log.glob("step-*.out")))
    assert run.outcomes["perfguard check"] == "success", logs[-3000:]
    assert run.outputs["check"]["exit-code"] in ("0", "3") and run.outputs["check"]["regressions"] == "0", logs[-3000:]
    verdicts = json.loads((Path(run.outputs["paths"]["out-dir"]) / "verdicts.json").read_text())
    counted = {row["metric"] for row in verdicts["verdicts"] if row["case"] == "resnet/mycc/cpu"}
    assert "instructions" in counted and "estimated_cycles" not in counted, sorted(counted)  # --counts: no cache simulation
    assert list((run.temp / "perfguard" / "artifact-cache" / "counts").glob("*.json")), "no counts kept in the cache"
    assert "counts: 0 served, " in logs and (tmp_path / "summary.md").read_text().strip()
    assert _untracked(run.workspace) == ""


def test_perfguard_is_installed_from_the_action_into_a_venv_and_nothing_lands_in_the_checkout(tmp_path):
    run = run_action(tmp_path, {"suite": "perf/suite.toml", "counts": "true", "extras": "iree"})
    venv = run.temp / "perfguard" / "venv"
    assert run.recorded("python").split()[1:] == ["-m", "venv", "--system-site-packages", str(venv)]
    assert run.recorded("pip").split() == [f"{venv}/bin/python", "-m", "pip", "install", "--disable-pip-version-check",
                                           "-q", f"{REPO}[iree]"]
    # The caller's repository is never installed, and perfguard ran from the venv the action made.
    assert str(run.workspace) not in run.recorded("pip")
    assert (venv / "bin" / "perfguard").exists() and run.perfguard()
    assert _untracked(run.workspace) == "", "the action wrote into the checkout"
    assert run.outputs["paths"]["out-dir"].startswith(str(run.temp))


def test_an_explicit_perfguard_spec_is_installed_as_given(tmp_path):
    run = run_action(tmp_path, {"suite": "s.toml", "base-ref": "x", "perfguard-spec": "perfguard==0.1.0",
                                "extras": "iree"})
    assert run.recorded("pip").split()[-1] == "perfguard==0.1.0"


# --- the example repository ---------------------------------------------------------------------------


def _example_steps() -> list[dict[str, Any]]:
    (workflow,) = EXAMPLE_WORKFLOWS
    return list(_yaml(workflow)["jobs"]["check"]["steps"])


def _example_call() -> dict[str, Any]:
    (call,) = [step for step in _example_steps() if PERFGUARD_PIN.match(str(step.get("uses", "")))]
    return call


def test_example_workflows_pass_actionlint():
    assert EXAMPLE_WORKFLOWS, "no example workflow"
    command = _linter_or_skip()
    findings = _run_actionlint(command, EXAMPLE_WORKFLOWS)
    assert findings == [], json.dumps(findings, indent=1)


def test_example_calls_perfguard_by_a_commit_of_this_repository_whose_action_has_its_inputs():
    """A reference that exists: the pinned commit is in perfguard's history, and its action.yml
    takes every input the example gives and requires nothing the example leaves out."""
    call = _example_call()
    pin = PERFGUARD_PIN.match(call["uses"])
    assert pin, call["uses"]
    sha = pin.group(1)
    shown = subprocess.run(["git", "show", f"{sha}:action.yml"], cwd=REPO, capture_output=True, text=True)
    assert shown.returncode == 0, f"the example pins {sha}, which is not a commit of perfguard with an action.yml: {shown.stderr}"
    import yaml

    pinned = yaml.safe_load(shown.stdout)["inputs"]
    assert set(call["with"]) <= set(pinned), sorted(set(call["with"]) - set(pinned))
    assert {name for name, spec in pinned.items() if spec.get("required")} <= set(call["with"])
    assert set(call["with"]) <= set(_yaml(ACTION)["inputs"])  # and today's action still takes them


def test_example_checks_out_without_a_token_and_with_the_history_the_merge_base_needs():
    (checkout,) = [step for step in _example_steps() if str(step.get("uses", "")).startswith("actions/checkout@")]
    assert checkout["with"]["persist-credentials"] is False and checkout["with"]["fetch-depth"] == 0
    workflow = _yaml(EXAMPLE_WORKFLOWS[0])
    assert workflow["permissions"] == {} and workflow["jobs"]["check"]["permissions"] == {"contents": "read"}
    assert "pull_request_target" not in workflow["on"]


@pytest.mark.parametrize("event", ["pull_request", "push"])
def test_example_steps_command_lines(tmp_path, event):
    """The example's inputs, rendered for a pull request and for a push to main, through the action."""
    lookup = {"github.event_name": event}
    inputs = {key: _render(value, lookup) for key, value in _example_call()["with"].items()}
    run = run_action(tmp_path, inputs, event=event)
    assert run.outcomes["Install Valgrind (counts)"] == "success"
    base = subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=run.workspace, capture_output=True, text=True,
                          check=True).stdout.strip() if event == "pull_request" else "HEAD~1"
    out, cache = run.temp / "perfguard" / "out" / "perfguard-report", run.temp / "perfguard" / "artifact-cache"
    assert run.perfguard()[0] == [
        "check", "perf/suite.toml", "--json", f"{out}/verdicts.json", "--report", f"{out}/report", "--annotations",
        "--base-ref", base, "--case", "*/*/cpu", "--counts", "--artifact-cache", str(cache), "--cache-max", "2GB"]
    if event == "pull_request":  # the README shows the same command line
        readme = (EXAMPLE / "README.md").read_text().replace("\\\n", " ")
        (shown,) = [line for line in readme.splitlines() if line.startswith("perfguard check ")]
        shown = shown.replace("$RUNNER_TEMP", str(run.temp)).replace("<merge-base>", base)
        assert shlex.split(shown) == ["perfguard", *run.perfguard()[0]]
    scope = "pr-7" if event == "pull_request" else "ref-main"
    assert run.used("actions/cache/save") == {"path": str(cache), "key": f"mycc-Linux-X64-{scope}:1234-1"}
    assert _untracked(run.workspace) == ""


def test_example_suite_validates():
    proc = subprocess.run([sys.executable, "-m", "perfguard", "validate", str(EXAMPLE / "perf" / "suite.toml")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ok: 1 models, 2 pipelines, 2 cases" in proc.stdout
