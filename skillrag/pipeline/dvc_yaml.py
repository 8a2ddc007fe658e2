"""dvc.yaml, derived from skillrag.registry: `skillrag dvc-yaml` writes it, `--check` says whether
the committed file is what the registry gives.

A stage depends on the code it runs: its stage module's import closure (every skillrag module
it imports, at any depth of a file, package `__init__`s included, plus the packages' data files:
the prompt templates), and that of each method it builds by name, which the import graph cannot
see (skillrag.methods.factory imports a method's module when asked for it). A package whose
every file is in the closure is listed as its folder. The stage registry
(`skillrag/pipeline/stages/__init__.py`), the CLI and `skillrag/__init__.py` shape no output, so they are
no dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillrag.registry import METHODS, STAGES, Out, StageEntry

PACKAGE = Path(__file__).resolve().parents[1]  # skillrag/
NOT_CODE = {"skillrag/__init__.py", "skillrag/pipeline/stages/__init__.py", "skillrag/cli.py"}
HEADER = """\
# Generated from skillrag/registry.py by `skillrag dvc-yaml`: edit the registry, not this file
# (tests/pipeline/test_dvc_yaml.py fails when the two differ). Each stage command is a `skillrag` CLI call.
# A stage depends on its data, the params.yaml keys it reads and the code it runs (its stage
# module's import closure, and the modules of the methods it builds by name). Speed-only knobs
# (lm.threads, lm.batch_size, lm.concurrency, lm.reuse_cache, index.threads, extract.checkpoint_*)
# are not listed. `cache: false` outputs are tracked in git; the others live in the DVC cache only
# and are rebuilt on a new machine: a stage reading one at run time depends on its fingerprint and
# names it under `meta.needs` (DVC ignores `meta`; `skillrag repro` rebuilds a missing one first).
"""


def _file(module: str, root: Path) -> Path | None:
    path = root / Path(*module.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imports(file: Path, root: Path) -> set[str]:
    """The skillrag modules `file` imports, at any depth of the file (function-level too)."""
    found = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("skillrag")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("skillrag"):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if _file(f"{node.module}.{a.name}", root)}
    return found


def code_closure(module: str, root: Path = PACKAGE.parent) -> set[str]:
    """Paths (relative to `root`) of every file importing `module` runs, plus its packages' data files."""
    seen: set[Path] = set()
    todo = [module]
    while todo:
        parts = todo.pop().split(".")
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__, ...
            file = _file(".".join(parts[:depth]), root)
            if file is not None and file not in seen:
                seen.add(file)
                if file.relative_to(root).as_posix() not in NOT_CODE:
                    todo.extend(_imports(file, root))
    data = {p for f in seen if f.name == "__init__.py" for p in f.parent.iterdir() if p.suffix == ".txt"}
    return {p.relative_to(root).as_posix() for p in seen | data} - NOT_CODE


def package_files(folder: Path) -> set[Path]:
    """The files a folder dependency covers (byte-code caches aside)."""
    return {p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def stage_code(stage: StageEntry, root: Path = PACKAGE.parent) -> set[str]:
    """Every file stage `stage` runs."""
    modules = [stage.module, *(f"skillrag.methods.{METHODS[m].module}" for m in stage.methods)]
    return set().union(*(code_closure(module, root) for module in modules))


def _folded(files: set[str], root: Path) -> list[str]:
    """`files` with each package folder all of whose files are listed written as the folder."""
    listed = set(files)
    for init in sorted((root / "skillrag").rglob("__init__.py"), key=lambda p: len(p.parts)):
        folder = init.parent
        if folder == root / "skillrag":
            continue
        members = {p.relative_to(root).as_posix() for p in package_files(folder)}
        if members and members <= listed:
            listed = (listed - members) | {folder.relative_to(root).as_posix()}
    return sorted(listed)


def _params(keys: tuple[str, ...], tree: Mapping[str, Any]) -> list[str]:
    """`keys`, each (sub)section all of whose keys are listed written as the section."""
    chosen = list(dict.fromkeys(keys))
    for section, values in tree.items():
        if not isinstance(values, dict) or section == "profiles":
            continue
        for name, keys_in in [(section, values), *((f"{section}.{k}", v) for k, v in values.items() if isinstance(v, dict))]:
            members = [f"{name}.{k}" for k in keys_in]
            if all(m in chosen for m in members):
                at = chosen.index(members[0])
                chosen = [k for k in chosen if k not in members]
                chosen.insert(at, name)
    return chosen


def _out(out: Out | str, indent: str) -> list[str]:
    path, out = (out, Out(out)) if isinstance(out, str) else (out.path, out)
    note = f"   # {out.note}" if out.note else ""
    if out.cache and not out.persist:
        return [f"{indent}- {path}{note}"]
    flags = [*([] if out.cache else ["cache: false"]), *(["persist: true"] if out.persist else [])]
    return [f"{indent}- {path}:{note}", *(f"{indent}    {flag}" for flag in flags)]


def _flow(key: str, items: list[str], width: int = 110) -> list[str]:
    """`key: [a, b, ...]` as a YAML flow list wrapped at `width` (paths quoted where YAML needs it)."""
    lines, line = [], f"    {key}: ["
    for i, item in enumerate(items):
        text = (f'"{item}"' if "{" in item else item) + (", " if i < len(items) - 1 else "]")
        if len(line) + len(text.rstrip()) > width:
            lines.append(line.rstrip())
            line = "      "
        line += text
    return [*lines, line]


def stage_yaml(stage: StageEntry, tree: Mapping[str, Any], root: Path = PACKAGE.parent) -> list[str]:
    """The lines of one stage: its data first in `deps`, then its code."""
    lines = [f"  {stage.name}:" + (f"   # {stage.note}" if stage.note else ""), f"    cmd: skillrag {stage.command}"]
    lines += _flow("deps", [*stage.inputs, *_folded(stage_code(stage, root), root)])
    if stage.params:
        lines += _flow("params", _params(stage.params, tree))
    lines += ["    outs:"] + [line for out in (*stage.outs, Out(stage.timing)) for line in _out(out, "      ")]
    for kind, paths in (("metrics", stage.metrics), ("plots", stage.plots)):
        if paths:
            lines += [f"    {kind}:"] + [line for path in paths for line in _out(Out(path), "      ")]
    if stage.needs:
        lines += ["    meta:", f"      needs: [{', '.join(stage.needs)}]"]
    return lines


def render(params_tree: Mapping[str, Any], root: Path = PACKAGE.parent) -> str:
    """dvc.yaml's text for the registry, the code under `root` and params.yaml's sections."""
    blocks = ["\n".join(stage_yaml(stage, params_tree, root)) for stage in STAGES.values()]
    return HEADER + "stages:\n" + "\n\n".join(blocks) + "\n"


def write(project: Path, check: bool = False) -> bool:
    """Write `project`/dvc.yaml from the registry (params.yaml beside it); with `check`, write
    nothing. Returns whether the file was already what the registry gives."""
    import yaml

    text = render(yaml.safe_load((project / "params.yaml").read_text()))
    target = project / "dvc.yaml"
    current = target.read_text() if target.exists() else None
    if not check and current != text:
        target.write_text(text)
    return current == text
