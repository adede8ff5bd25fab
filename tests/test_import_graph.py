"""The perfguard modules import each other without a cycle.

Every ``import`` counts: at module level, under ``if TYPE_CHECKING:`` and inside functions. A
function-level import hides a cycle from Python but not from a reader: two modules that need each
other mean a type lives in the wrong one. ``from pkg import name`` is an edge to ``pkg.name`` when
that is a module, else to ``pkg``; the implicit import of a parent package is not an edge (every
submodule would otherwise form a cycle with a package that re-exports it).

The packages are also layered (``LAYERS``): a package imports only its own modules and those of
the layers before it, so a stage never reaches up into the flow that composes it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "perfguard"

#: The layer order, lowest first: the one place it is declared. Each entry is a top-level module
#: or package of perfguard (``""`` is ``perfguard/__init__.py``, the version); the foundation
#: modules come first, then the stages in the order a run flows through them. ``results`` (the
#: documents) sits below ``workers`` because a worker's responses carry document parts (the
#: correctness check) and the profile trace reader parses JSON as every document reader does.
#: ``store`` (the history store, its tables, the rows and alerts it answers with) sits below
#: ``report`` and ``history``, which read it and are never read by it. ``counting`` drives
#: backends, workers and the artifact cache, so it sits above ``compile``; the hooks a backend's
#: compile calls in a counted compile are the backends' own (``backends.counting_hooks``), and the
#: counted process has its own entry point (``python -m perfguard.counting``). Every entry is a
#: folder (or a top-level module): drawn by folders, the layers are the picture
#: (:func:`test_no_two_folders_import_each_other`).
LAYERS = [
    "", "errors", "jsonfields", "jsonparse", "units", "names", "atomic", "redact", "exit_codes", "children", "scratch", "progress",
    "schemas",
    "stats", "runners", "suite", "models", "backends", "results", "workers", "compile", "counting", "measure",
    "compare",
    "profile", "bisect", "tune", "store", "report", "history", "formats", "flows", "cli", "__main__",
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imported(node: ast.AST, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    """The perfguard modules one import statement names."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    if not isinstance(node, ast.ImportFrom):
        return
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        yield candidate if candidate in known else base


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` (the text of ``module``) imports anywhere."""
    targets: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        for name in _imported(node, module, is_package, known):
            # ``import perfguard.a.b.c`` where c is a name: keep the longest known prefix.
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
    return targets


def import_graph() -> dict[str, set[str]]:
    """Module name -> the perfguard modules it imports."""
    modules = _modules()
    known = set(modules)
    return {module: imports_of(path.read_text(encoding="utf-8"), module, path.name == "__init__.py", known)
            for module, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None (depth-first search, deterministic order)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def all_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles found by removing one edge of each found cycle until none is left (for the message)."""
    graph = {k: set(v) for k, v in graph.items()}
    cycles = []
    while (cycle := find_cycle(graph)) is not None:
        cycles.append(cycle)
        graph[cycle[-2]].discard(cycle[-1])
    return cycles


def test_imports_inside_functions_and_type_checking_blocks_are_edges() -> None:
    source = """
from typing import TYPE_CHECKING
from . import c
from .sub import thing
import pkg.d.name
if TYPE_CHECKING:
    from pkg.e import Type
def f():
    from pkg import f as module_f
"""
    known = {"pkg", "pkg.a", "pkg.c", "pkg.d", "pkg.e", "pkg.f", "pkg.sub"}
    assert imports_of(source, "pkg.a", False, known) == {"pkg.c", "pkg.sub", "pkg.d", "pkg.e", "pkg.f"}
    assert imports_of("from .. import a", "pkg.sub", True, known) == {"pkg.a"}


def test_the_graph_covers_the_package() -> None:
    graph = import_graph()
    assert len(graph) > 50 and "perfguard.errors" in graph["perfguard.units"]


def test_find_cycle_reports_the_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_perfguard_has_no_import_cycle() -> None:
    cycles = all_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join("  " + " -> ".join(c) for c in cycles)


def _package(module: str) -> str:
    """The layer a module belongs to: its top-level folder (or module) of perfguard (``""`` for
    perfguard itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def upward_edges(graph: dict[str, set[str]], layers: list[str]) -> list[str]:
    """Each import of a module from a later layer than the importer's, as ``a -> b``."""
    rank = {name: index for index, name in enumerate(layers)}
    return sorted(f"{module} -> {target}" for module, targets in graph.items() for target in targets
                  if rank[_package(target)] > rank[_package(module)])


def test_upward_edges_names_each_import_from_a_later_layer() -> None:
    graph = {"p.low.a": {"p.high.b", "p.low.c"}, "p.high.b": {"p.low.a"}, "p.low.c": set()}
    assert upward_edges(graph, ["low", "high"]) == ["p.low.a -> p.high.b"]


def test_the_store_sits_below_report_and_history() -> None:
    assert LAYERS.index("store") < LAYERS.index("report") < LAYERS.index("history")
    edges = [e for e in upward_edges(import_graph(), LAYERS) if e.startswith("perfguard.store")]
    assert edges == []


def test_the_counting_hooks_are_the_backends_and_import_nothing_of_perfguard() -> None:
    assert LAYERS.index("backends") < LAYERS.index("counting")
    assert import_graph()["perfguard.backends.counting_hooks"] == set()


def test_every_package_has_a_layer() -> None:
    missing = sorted({_package(m) for m in import_graph()} - set(LAYERS))
    assert not missing, f"add to LAYERS in {Path(__file__).name}: {', '.join(missing)}"


def test_no_package_imports_one_above_it() -> None:
    edges = upward_edges(import_graph(), LAYERS)
    assert not edges, "imports from a higher layer (see LAYERS):\n" + "\n".join("  " + e for e in edges)


def folder_pairs(graph: dict[str, set[str]]) -> list[str]:
    """Each pair of top-level folders (or modules) of perfguard that import each other, drawn by
    folders, as ``a <-> b: one import each way``."""
    def top(module: str) -> str:
        return module.split(".")[1] if "." in module else ""

    edges: dict[tuple[str, str], str] = {}
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if top(module) != top(target):
                edges.setdefault((top(module), top(target)), f"{module} -> {target}")
    return [f"{a} <-> {b}: {edges[(a, b)]}; {edges[(b, a)]}" for (a, b) in sorted(edges) if a < b and (b, a) in edges]


def test_folder_pairs_names_two_folders_that_import_each_other() -> None:
    graph = {"p.a.x": {"p.b.y"}, "p.b.y": set(), "p.b.z": {"p.a.w"}, "p.a.w": set(), "p.c": {"p.a.x"}}
    assert folder_pairs(graph) == ["a <-> b: p.a.x -> p.b.y; p.b.z -> p.a.w"]


def test_the_layers_are_folders() -> None:
    """A layer is a folder (or a top-level module): a subpackage with a layer of its own would
    have its folder import, and be imported by, its parent's (as ``history/store`` did)."""
    assert [layer for layer in LAYERS if "." in layer] == []


def test_no_two_folders_import_each_other() -> None:
    pairs = folder_pairs(import_graph())
    assert not pairs, "folders that import each other:\n" + "\n".join("  " + p for p in pairs)
