"""No import circle in skillrag, at either scale: no package imports, directly or through others, a
package that imports it back (the packages form layers), and no module does so inside a package
(`retrieval/fingerprint.py` importing the backends that import it). Every import counts, at any
depth of a module (a function-level import is still a dependency); a top-level module
(`skillrag/answering.py`) is a package of its own."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from tests.conftest import REPO

PACKAGE = REPO / "skillrag"


def package_of(module: str) -> str | None:
    """`skillrag.methods.base` -> `methods`; None for a module outside skillrag or the root itself."""
    parts = module.split(".")
    return parts[1] if parts[0] == "skillrag" and len(parts) > 1 else None


def module_of(file: Path) -> str:
    """`skillrag/methods/base.py` -> `skillrag.methods.base`; a package's `__init__.py` is the package."""
    parts = file.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_edges(root: Path = PACKAGE) -> dict[tuple[str, str], set[str]]:
    """(importing module, imported skillrag module) -> the file that makes the edge. `from a.b import c`
    imports module `a.b.c` when there is one, else `a.b`; importing a submodule is not counted as
    importing its package's `__init__` (that would make every re-exporting package a circle)."""
    modules = {module_of(file) for file in root.rglob("*.py")}
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for file in sorted(root.rglob("*.py")):
        source = module_of(file)
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names]
            else:
                continue
            for target in targets:
                if target in modules and target != source:
                    edges[(source, target)].add(str(file.relative_to(REPO)))
    return edges


def import_edges() -> dict[tuple[str, str], set[str]]:
    """(importing package, imported package) -> the files that make the edge."""
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for (source, target), files in module_edges().items():
        a, b = package_of(source), package_of(target)
        if a is not None and b is not None and a != b:
            edges[(a, b)] |= files
    return edges


def cycles(edges: dict[tuple[str, str], set[str]]) -> list[list[str]]:
    """The groups of packages that import each other (strongly connected, more than one)."""
    names = sorted({name for edge in edges for name in edge})
    index = {name: i for i, name in enumerate(names)}
    rows, cols = zip(*((index[a], index[b]) for a, b in edges)) if edges else ((), ())
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(graph, directed=True, connection="strong")
    groups = defaultdict(list)
    for name, label in zip(names, labels):
        groups[label].append(name)
    return sorted(group for group in groups.values() if len(group) > 1)


def test_the_finder_sees_a_cycle_and_a_layered_graph_as_such():
    assert cycles({("a", "b"): {"x"}, ("b", "c"): {"y"}, ("c", "a"): {"z"}, ("c", "d"): {"w"}}) == [["a", "b", "c"]]
    assert cycles({("a", "b"): {"x"}, ("b", "c"): {"y"}, ("a", "c"): {"z"}}) == []


def test_no_import_cycle_between_skillrag_packages():
    edges = import_edges()
    assert ("methods", "lm") in edges  # the walk sees real imports
    found = cycles(edges)
    detail = [
        f"{a} -> {b} ({', '.join(sorted(files))})"
        for group in found
        for (a, b), files in sorted(edges.items())
        if a in group and b in group
    ]
    assert not found, "packages that import each other: " + "; ".join(map(str, found)) + "\n" + "\n".join(detail)


def test_no_import_cycle_between_modules_inside_a_package():
    edges = module_edges()
    assert ("skillrag.methods.skill_rag", "skillrag.methods.checked") in edges  # edges inside a package count
    found = cycles(edges)
    detail = [f"{a} -> {b}" for group in found for (a, b) in sorted(edges) if a in group and b in group]
    assert not found, "modules that import each other: " + "; ".join(map(str, found)) + "\n" + "\n".join(detail)


def test_only_the_cli_imports_the_pipeline():
    """The method library never depends on the machinery that runs it as a pipeline."""
    importers = sorted(source for (source, target) in import_edges() if target == "pipeline")
    assert importers == ["cli"], f"library packages importing skillrag.pipeline: {importers}"
