"""The documentation site (``docs/``, ``mkdocs.yml``) and the README.

What the docs promise and these tests keep: the site builds with ``mkdocs build --strict`` (a broken
link or anchor, or a page missing from the navigation, fails); every command and option of the
parser is on the CLI reference page as built; every exit code is on the exit-code page; every key
the suite parser accepts is on the suite reference page (the keys are read from the parser's code,
not retyped); the worked third-party backend runs; the README stays one screen with the two
commands CI runs.
"""

from __future__ import annotations

import argparse
import ast
import html
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as ``mkdocs build --strict`` writes it (once for this module)."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        if os.environ.get("CI"):
            pytest.fail("CI=true but mkdocs or mkdocs-material is missing: the dev extra installs them")
        pytest.skip("mkdocs and mkdocs-material are not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return out


def _page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text()


def _text(page_html: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page_html))


# --- the build ------------------------------------------------------------------------------


def test_site_builds_strict_with_every_page_in_the_navigation(site: Path):
    built = {p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*.md")}
    for name in built:
        target = site / ("" if name == "index" else name) / "index.html"
        assert target.is_file(), name
    # The pictures the README and the guides show are published with the pages.
    for png in ("report.png", "history-site.png", "history-replay.png"):
        assert (site / png).is_file(), png


def test_strict_build_fails_on_a_broken_link(tmp_path: Path, site: Path):
    """--strict really rejects what it is there to reject (the config's ``validation`` section)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\n[gone](nowhere.md) and [anchor](#no-such-heading)\n")
    (tmp_path / "mkdocs.yml").write_text(
        (REPO / "mkdocs.yml").read_text().split("\nnav:")[0].replace("  - docs/gen_cli.py", f"  - {DOCS / 'gen_cli.py'}"))
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "out")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode != 0
    assert "nowhere.md" in proc.stderr and "no-such-heading" in proc.stderr, proc.stderr[-3000:]


# --- the references against the code --------------------------------------------------------


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("perfguard",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*path, name))


def test_every_command_and_option_is_on_the_cli_page(site: Path):
    from perfguard.cli import build_parser

    page = _page(site, "reference/cli")
    headings = list(re.finditer(r"<h[1-6][^>]*>\s*<code>(perfguard[^<]*)</code>", page))
    sections = {m.group(1): page[m.end():(headings[i + 1].start() if i + 1 < len(headings) else len(page))]
                for i, m in enumerate(headings)}
    missing = []
    for path, parser in _commands(build_parser()):
        if len(path) == 1:
            continue
        name = " ".join(path)
        section = sections.get(name)
        if section is None:
            missing.append(name)
            continue
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            for flag in action.option_strings or [str(action.metavar or action.dest)]:
                if f"<code>{html.escape(flag, quote=False)}</code>" not in section:
                    missing.append(f"{name} {flag}")
    assert missing == [], missing


def test_every_exit_code_is_on_the_exit_code_page(site: Path):
    from perfguard.exit_codes import ExitCode

    page = _page(site, "reference/exit-codes")
    for code in ExitCode:
        assert re.search(rf"<td>{int(code)}</td>\s*<td><code>{code.name}</code></td>", page), code


def _suite_keys() -> set[str]:
    """Every key the suite parser accepts: the allowed-key arguments of each ``*.table(raw, key,
    ALLOWED)`` call in ``perfguard/suite`` (tuples, names and ``*NAME`` resolved in the module)."""
    import perfguard.suite

    keys: set[str] = set()
    folder = Path(perfguard.suite.__file__).parent
    for source in sorted(folder.glob("*.py")):
        module = importlib.import_module(f"perfguard.suite.{source.stem}") if source.stem != "__init__" else perfguard.suite
        for node in ast.walk(ast.parse(source.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "table" and len(node.args) >= 3):
                continue
            allowed = node.args[2]
            items = allowed.elts if isinstance(allowed, ast.Tuple) else [allowed]
            for item in items:
                if isinstance(item, ast.Constant):
                    keys.add(str(item.value))
                elif isinstance(item, ast.Starred | ast.Name):
                    name = item.value.id if isinstance(item, ast.Starred) else item.id  # type: ignore[attr-defined]
                    keys.update(str(k) for k in getattr(module, name))
    return keys


def test_every_suite_key_is_on_the_suite_page(site: Path):
    keys = _suite_keys()
    # The derivation itself is checked: a key of each kind of table is there.
    assert {"workers", "rtol", "device_id", "step_workers", "latency", "pattern", "match", "dims", "build"} <= keys
    text = _text(_page(site, "reference/suite"))
    missing = sorted(key for key in keys if not re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", text))
    assert missing == [], missing


def test_every_shipped_schema_is_on_the_formats_page(site: Path):
    page = _page(site, "reference/formats")
    for schema in (REPO / "perfguard" / "schemas").glob("*.schema.json"):
        assert f"<code>{schema.name}</code>" in page, schema.name


# --- the worked third-party backend -----------------------------------------------------------


def _example_backend(tmp_path: Path):
    page = (DOCS / "reference" / "backends.md").read_text()
    (code,) = [block for block in re.findall(r"```python\n(.*?)```", page, re.S) if "class MyBackend" in block]
    path = tmp_path / "mypkg_backend.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("mypkg_backend", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_worked_backend_example_compiles_loads_and_runs(tmp_path: Path):
    import onnx
    from onnx import TensorProto, helper

    from perfguard.errors import UserError
    from perfguard.runners import get_runner
    from perfguard.suite import PipelineSpec

    backend = _example_backend(tmp_path).MyBackend()
    # x + 0 then Relu: ORT's "all" level may fold the Add; the answer must not change.
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "zero"], ["y"]), helper.make_node("Relu", ["y"], ["out"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])])
    model_path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model_path))
    pipeline = PipelineSpec(name="basic", backend="mybackend", passes=("ort_optimize",), options={"level": "all"})
    backend.check_pipeline(pipeline)
    with pytest.raises(UserError, match="unknown pass"):
        backend.check_pipeline(PipelineSpec(name="bad", backend="mybackend", passes=("fold",)))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    output = backend.compile(model_path, pipeline, out_dir)
    assert output.artifact.sha256 and output.trace.passes[0].name == "ort_optimize"
    executable = backend.load(output.artifact, get_runner("cpu"), threads=1)
    x = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], dtype=np.float32)
    np.testing.assert_array_equal(executable.run({"x": x})[0], np.maximum(x, 0))
    moves = backend.tuning_moves({"level": "all"})
    assert sorted(m.options["level"] for m in moves) == ["basic", "disabled"]
    assert backend.capabilities.profile is False and len(backend.execution_identity(output.artifact)) == 16


# --- the README ---------------------------------------------------------------------------------


def _readme_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
    return [line for block in blocks for line in block.splitlines()]


def test_readme_is_one_screen_with_the_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, len(lines)
    commands = _readme_commands()
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/perfguard run" in commands
    assert any(line.endswith(".venv/bin/python -m pytest") for line in commands), commands


def test_ci_runs_exactly_the_readme_test_command():
    last = (REPO / ".ci" / "run").read_text().rstrip("\n").splitlines()[-1]
    (test_command,) = [line for line in _readme_commands() if line.endswith("-m pytest")]
    assert last == test_command


def test_getting_started_gives_the_readme_s_commands():
    """The two pages a newcomer starts from give the same commands (issue 43): the test line CI runs,
    the main job's line."""
    started = re.findall(r"```bash\n(.*?)```", (DOCS / "getting-started.md").read_text(), re.S)
    lines = [line for block in started for line in block.splitlines()]
    readme = _readme_commands()
    for ends in ("-m pytest", "perfguard run"):
        assert [x for x in lines if x.endswith(ends)] == [x for x in readme if x.endswith(ends)], ends


def test_the_docs_home_says_why_with_the_measured_comparison_quoted_exactly():
    """docs/index.md's "Why perfguard" quotes docs/measured.md (issue 43): every figure it gives
    (a percentage, a factor, seconds) stands in measured.md, and it links to the comparison."""
    home = (DOCS / "index.md").read_text()
    assert "## Why perfguard" in home
    why = home.split("## Why perfguard", 1)[1].split("\n## ", 1)[0]
    assert "(measured.md#what-a-comparison-costs-beside-pytest-benchmark-and-asv)" in why
    measured = " ".join((DOCS / "measured.md").read_text().split())
    assert "### What a comparison costs, beside pytest-benchmark and asv" in measured
    figures = re.findall(r"[+-]?\d+(?:\.\d+)?(?: ?%|×| s\b)", " ".join(why.split()))
    assert len(figures) >= 10, figures
    assert [f for f in figures if f not in measured] == []


def test_readme_links_into_the_docs_resolve():
    targets = re.findall(r"\]\((docs/[^)#]+)", README.read_text())
    assert len(targets) >= 15, targets
    missing = [t for t in targets if not (REPO / t).exists()]
    assert missing == [], missing
