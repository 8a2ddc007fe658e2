"""dvc.yaml lists, for each stage, exactly the code the stage runs: the skillrag modules its stage
module imports (followed through every import, package `__init__`s included) plus the data files
of the packages involved (the prompt templates). A stage that under-lists code is not re-run when
that code changes; one that over-lists is re-run for nothing. The stage registry
(`skillrag/stages/__init__.py`), the CLI (which only prints) and `skillrag/__init__.py` are left
out: they shape no output."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, SHARED_DATA

STAGE_MODULES = {
    "prepare": "skillrag.stages.questions",
    "index": "skillrag.stages.indexing",
    "extract": "skillrag.stages.states",
    "train_probe": "skillrag.stages.probing",
    "train_router": "skillrag.stages.routing",
    "train_adaptive": "skillrag.stages.adaptive",
    "tune_thresholds": "skillrag.stages.thresholds",
    "evaluate": "skillrag.stages.evaluation",
    "analyze": "skillrag.stages.analysis",
    "report": "skillrag.stages.reporting",
}
NOT_CODE_DEPS = {"skillrag/__init__.py", "skillrag/stages/__init__.py"}


def _file(module: str) -> Path | None:
    path = REPO / Path(*module.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imports(file: Path) -> set[str]:
    """The skillrag modules `file` imports, at any depth of the file (function-level too)."""
    found = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("skillrag")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("skillrag"):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if _file(f"{node.module}.{a.name}")}
    return found


def code_closure(module: str) -> set[str]:
    """Repo-relative paths of every file importing `module` runs, plus its packages' data files."""
    seen: set[Path] = set()
    todo = [module]
    while todo:
        parts = todo.pop().split(".")
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__, ...
            file = _file(".".join(parts[:depth]))
            if file is not None and file not in seen:
                seen.add(file)
                if str(file.relative_to(REPO)) not in NOT_CODE_DEPS:
                    todo.extend(_imports(file))
    data = {p for f in seen if f.name == "__init__.py" for p in f.parent.iterdir() if p.suffix == ".txt"}
    return {str(p.relative_to(REPO)) for p in seen | data} - NOT_CODE_DEPS


def listed_code(deps: list[str]) -> set[str]:
    """The files the stage's code deps cover (a folder covers its files, caches aside)."""
    files = set()
    for dep in deps:
        path = REPO / dep
        if dep.startswith("skillrag"):
            members = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
            files |= {str(p.relative_to(REPO)) for p in members}
    return files


@pytest.mark.parametrize("stage", STAGE_MODULES)
def test_each_stage_depends_on_exactly_the_code_it_runs(stage):
    deps = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"][stage]["deps"]
    needed, listed = code_closure(STAGE_MODULES[stage]), listed_code(deps)
    assert not needed - listed, f"{stage} runs code dvc.yaml does not list: {sorted(needed - listed)}"
    assert not listed - needed, f"{stage} lists code it does not run: {sorted(listed - needed)}"


def test_dvc_status_follows_exactly_the_keys_each_stage_reads(tmp_path):
    """With every stage's outputs recorded in dvc.lock (`dvc commit`, no stage run), editing the
    paper profile leaves the default pipeline up to date, and editing probe.threshold makes only
    the stages that load the prober stale: real DVC on the real dvc.yaml and params.yaml."""
    import os
    import shutil
    import subprocess
    import sys

    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO / "dvc.yaml", project / "dvc.yaml")
    shutil.copytree(REPO / "skillrag", project / "skillrag", ignore=shutil.ignore_patterns("__pycache__"))
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["prepare"]["local_dir"] = str(SHARED_DATA)
    params["index"]["corpus_file"] = str(SHARED_DATA / "corpus" / "passages.jsonl")
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    for stage in stages.values():  # stand-in outputs: dvc commit records them as if the stages ran
        for out in [*stage.get("outs", []), *stage.get("metrics", []), *stage.get("plots", [])]:
            path = project / (out if isinstance(out, str) else next(iter(out)))
            if path.suffix:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("{}\n")
            else:
                path.mkdir(parents=True, exist_ok=True)
                (path / "stand-in").write_text("x\n")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def dvc(*args: str) -> str:
        done = subprocess.run(["dvc", *args], cwd=project, env=env, capture_output=True, text=True, check=True)
        return done.stdout

    dvc("init", "--no-scm", "-q")
    dvc("commit", "-f", "-q")
    assert "up to date" in dvc("status")

    def stale_after(edit) -> set[str]:
        before = (project / "params.yaml").read_text()
        tree = yaml.safe_load(before)
        edit(tree)
        (project / "params.yaml").write_text(yaml.safe_dump(tree, sort_keys=False))
        status = json.loads(dvc("status", "--json"))
        (project / "params.yaml").write_text(before)
        return set(status)

    assert stale_after(lambda t: t["profiles"]["paper"].update({"lm.max_new_tokens": 512})) == set()
    # the stages that load the prober: evaluate, and tune_thresholds (its default target is the
    # share of dev answers the prober rejects)
    assert stale_after(lambda t: t["probe"].update(threshold=0.1)) == {"evaluate", "tune_thresholds"}
    assert stale_after(lambda t: t["methods"]["flare"].update(theta=0.3)) == {"evaluate"}
    assert stale_after(lambda t: t["probe"].update(lr=0.5)) == {"train_probe"}
    assert stale_after(lambda t: t["lm"].update(threads=1, batch_size=2, concurrency=2, reuse_cache=0)) == set()
