"""The CLI is a leaf: nothing outside ``perfguard/cli`` imports ``perfguard.cli``, except
``perfguard/__main__.py``.

Core code that needs something of the CLI means that thing lives in the wrong place (the
environment rules of a comparison belong with comparing, not with the table that prints it). Every
import counts: module level, under ``if TYPE_CHECKING:`` and inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import REPO

PACKAGE = REPO / "perfguard"


def _imports_of(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module an import statement anywhere in ``tree`` names (module and function level,
    relative imports resolved, ``from a import b`` counted as both ``a`` and ``a.b``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_only_main_and_the_cli_import_the_cli():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "cli" or relative == Path("__main__.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        imported = _imports_of(tree, _module_name(path), path.name == "__init__.py")
        if any(name == "perfguard.cli" or name.startswith("perfguard.cli.") for name in imported):
            offenders.append(str(relative))
    assert offenders == [], f"core modules that import perfguard.cli: {offenders}"


def test_the_scan_sees_function_level_and_relative_imports():
    source = "def f():\n    from perfguard.cli._verdicts import x\n"
    assert "perfguard.cli._verdicts" in _imports_of(ast.parse(source), "perfguard.comparisons", False)
    assert "perfguard.cli" in _imports_of(ast.parse("from .cli import main\n"), "perfguard.check", False)
    assert "perfguard.cli" in _imports_of(ast.parse("from . import cli\n"), "perfguard.check", False)
