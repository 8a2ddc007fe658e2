"""The skillrag packages form layers: no package imports, directly or through others, a package
that imports it back. Every import counts, at any depth of a module (a function-level import is
still a dependency); a top-level module (`skillrag/answering.py`) is a package of its own."""

from __future__ import annotations

import ast
from collections import defaultdict

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from tests.conftest import REPO

PACKAGE = REPO / "skillrag"


def package_of(module: str) -> str | None:
    """`skillrag.methods.base` -> `methods`; None for a module outside skillrag or the root itself."""
    parts = module.split(".")
    return parts[1] if parts[0] == "skillrag" and len(parts) > 1 else None


def import_edges() -> dict[tuple[str, str], set[str]]:
    """(importing package, imported package) -> the files that make the edge."""
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for file in sorted(PACKAGE.rglob("*.py")):
        source = package_of(".".join(file.relative_to(REPO).with_suffix("").parts))
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from skillrag import runtime` imports the package named by the alias
                modules = [f"{node.module}.{a.name}" if node.module == "skillrag" else node.module for a in node.names]
            else:
                continue
            for module in modules:
                target = package_of(module)
                if source is not None and target is not None and target != source:
                    edges[(source, target)].add(str(file.relative_to(REPO)))
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
