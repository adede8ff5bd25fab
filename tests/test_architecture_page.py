"""``docs/architecture.md`` matches the code: its picture is generated from ``LAYERS`` (the one
place the layer order is declared, ``tests/test_import_graph.py``), and its table has one row per
package of perfguard, each naming a folder that exists.

Regenerate the picture after changing ``LAYERS`` or ``ROOMS``: ``python tests/test_architecture_page.py``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if __package__:
    from .test_import_graph import LAYERS, PACKAGE
else:  # run as a script to rewrite the page
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_import_graph import LAYERS, PACKAGE

PAGE = PACKAGE.parent / "docs" / "architecture.md"

#: What each room of the picture holds, in a few words (one per layer of ``LAYERS``).
ROOMS = {
    "cli": "thin: arguments, progress, tables; the pytest plugin",
    "flows": "what composes stages: run, check, calibrate, compile here / measure there, probe, bisect, tune, the night",
    "formats": "other tools' files: pytest-benchmark, asv",
    "history": "series, change points, notices of alerts, the static site",
    "report": "views of documents: HTML, Markdown of a check and of a night, SVG",
    "store": "the history store: tables, migrations, ingest, queries, alerts",
    "tune": "the tuning space and the tune document",
    "bisect": "the noise-aware search, its state, the bisect document",
    "profile": "why: profiles, per-op diff, dimension, Nsight, Perfetto",
    "compare": "pure comparison of documents: verdicts, the gate, the merge of shards",
    "measure": "the protocol driven from the parent: groups, memory probes, the job",
    "counting": "taking counts: Valgrind, the counted worker, its dumps, the plan, the counts cache",
    "compile": "one case's compile stage: preflight, checkout, user passes, the artifact cache",
    "workers": "the process boundary: requests, responses, spawning and collecting workers",
    "results": "typed, versioned documents: result, explanation, counts, artifact folders",
    "backends": "the public contract: ort, iree, tvm, inductor, mock, plug-ins",
    "models": "zoo, loader, inputs",
    "suite": "the suite file: model, parse, gates, shards",
    "runners": "where a case runs: cpu, cuda, npu; fingerprints, telemetry",
    "stats": "pure statistics",
    "schemas": "the shipped JSON Schemas",
}


def _is_package(layer: str) -> bool:
    return (PACKAGE / layer.replace(".", "/") / "__init__.py").is_file()


def _has_room(layer: str) -> bool:
    """A package, or a module with a layer of its own (a dotted entry of ``LAYERS``)."""
    return _is_package(layer) or "." in layer


def _node(layer: str) -> str:
    return layer.replace(".", "_")


def mermaid(layers: list[str] = LAYERS) -> str:
    """The page's picture: one room per package layer (and per module with a layer of its own), highest first, each arrow to the layer below
    it; the single-purpose modules (the layers that are one module) as one room at the bottom."""
    packages = [layer for layer in reversed(layers) if layer and _has_room(layer)]
    modules = [layer for layer in layers if layer and layer != "__main__" and not _has_room(layer)]
    lines = ["flowchart TB"]
    lines += [f'    {_node(p)}["{p.replace(".", "/")} — {ROOMS[p]}"]' for p in packages]
    lines.append(f'    modules["single-purpose modules: {", ".join(modules)}"]')
    chain = [_node(p) for p in packages] + ["modules"]
    for start in range(0, len(chain) - 1, 5):
        lines.append("    " + " --> ".join(chain[start:start + 6]))
    return "\n".join(lines) + "\n"


def _page_picture(text: str) -> str:
    found = re.search(r"```mermaid\n(.*?)```", text, re.S)
    assert found, f"{PAGE.name} has no mermaid block"
    return found.group(1)


def _table_folders(text: str) -> list[str]:
    """The folders the package table names, in its order: ``| `store/` | ...``."""
    return re.findall(r"^\| `([a-z_/]+)/` \|", text, re.M)


def test_every_package_layer_has_a_room() -> None:
    packages = {layer for layer in LAYERS if layer and _has_room(layer)}
    assert sorted(packages - set(ROOMS)) == [] and sorted(set(ROOMS) - packages) == []


def test_the_picture_is_generated_from_the_layers() -> None:
    assert _page_picture(PAGE.read_text(encoding="utf-8")) == mermaid(), (
        f"{PAGE.relative_to(PACKAGE.parent)} is out of date: run python tests/test_architecture_page.py")


def test_the_table_has_one_row_per_package_layer_in_order() -> None:
    folders = _table_folders(PAGE.read_text(encoding="utf-8"))
    packages = [layer.replace(".", "/") for layer in LAYERS if layer and _is_package(layer)]
    assert folders == packages, "rows of the table, lowest layer first, one per package of LAYERS"


def test_the_generator_follows_the_order_it_is_given() -> None:
    text = mermaid(["", "errors", "stats", "runners", "store", "history"])
    assert 'store["store — the history store' in text
    assert "    history --> store --> runners --> stats --> modules\n" in text
    assert 'modules["single-purpose modules: errors"]' in text


if __name__ == "__main__":
    page = PAGE.read_text(encoding="utf-8")
    PAGE.write_text(page.replace(_page_picture(page), mermaid()), encoding="utf-8")
    print(f"wrote the picture of {PAGE}")
