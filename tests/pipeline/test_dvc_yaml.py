"""dvc.yaml is derived from skillrag.registry (`skillrag dvc-yaml`), and under real DVC it re-runs
what an edit changes and nothing else: each stage depends on the code it runs (its stage
module's import closure, and the modules of the methods it builds by name), on its data and on
exactly the params.yaml keys it reads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from skillrag import registry
from skillrag.pipeline import dvc_yaml
from tests.conftest import REPO, SHARED_DATA


def stages() -> dict[str, dict]:
    return yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


def listed_code(deps: list[str]) -> set[str]:
    """The files a stage's code deps cover (a folder covers its files, caches aside)."""
    files = set()
    for dep in (d for d in deps if d.startswith("skillrag")):
        path = REPO / dep
        members = [path] if path.is_file() else dvc_yaml.package_files(path)
        files |= {p.relative_to(REPO).as_posix() for p in members}
    return files


def test_committed_dvc_yaml_is_what_the_registry_gives():
    """Fails when dvc.yaml and skillrag/registry.py (or the code's imports) disagree: run `skillrag dvc-yaml`."""
    expected = dvc_yaml.render(yaml.safe_load((REPO / "params.yaml").read_text()))
    assert (REPO / "dvc.yaml").read_text() == expected, "dvc.yaml is stale: run `skillrag dvc-yaml` and commit it"


def test_the_primary_methods_run_first_and_each_trainer_just_before_its_first_reader():
    """Issue 49: a run that spans jobs has the primary comparisons (skill_rag against probing_rag
    and single_step) before the other methods, and no trainer that only later methods read
    (Adaptive-RAG's classifier, the trigger thresholds) delays them. `skillrag repro` runs
    dvc.yaml's order where the graph allows."""
    order = list(stages())
    evaluated = [name.removeprefix("evaluate-") for name in order if name.startswith("evaluate-")]
    assert evaluated == ["no_retrieval", "single_step", "probing_rag", "skill_rag", "ircot", "adaptive_rag", "flare", "dragin", "entropy_rag"]
    assert order.index("train_probe") < order.index("evaluate-no_retrieval")
    assert order.index("evaluate-skill_rag") < order.index("train_adaptive") == order.index("evaluate-adaptive_rag") - 1
    assert order.index("evaluate-skill_rag") < order.index("tune_thresholds") == order.index("evaluate-flare") - 1


def test_dvc_yaml_check_exits_non_zero_on_a_stale_file(tmp_path):
    from typer.testing import CliRunner

    from skillrag import cli

    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    args = ["--params", str(tmp_path / "params.yaml"), "dvc-yaml"]
    assert CliRunner().invoke(cli.app, [*args, "--check"]).exit_code == 1
    assert (tmp_path / "dvc.yaml").read_text() == "stages: {}\n"  # --check writes nothing
    assert CliRunner().invoke(cli.app, args).exit_code == 0
    assert CliRunner().invoke(cli.app, [*args, "--check"]).exit_code == 0


def test_the_import_closure_follows_function_level_imports_package_inits_and_prompt_files(tmp_path):
    package = tmp_path / "skillrag"
    for name, text in {
        "__init__.py": "", "a.py": "def f():\n    from skillrag.sub import b\n", "sub/__init__.py": "",
        "sub/b.py": "from skillrag import c\n", "c.py": "", "unused.py": "", "sub/template.txt": "x",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert dvc_yaml.code_closure("skillrag.a", tmp_path) == {
        "skillrag/a.py", "skillrag/sub/__init__.py", "skillrag/sub/b.py", "skillrag/c.py", "skillrag/sub/template.txt",
    }


def test_each_stage_is_the_registrys_with_the_code_it_runs():
    found = stages()
    assert list(found) == list(registry.STAGES)
    for name, entry in registry.STAGES.items():
        assert listed_code(found[name]["deps"]) == dvc_yaml.stage_code(entry), name
        assert found[name]["cmd"] == f"skillrag {entry.command}"


def test_an_evaluate_stage_runs_its_own_method_only_and_summarize_runs_none():
    modules = {f"skillrag/methods/{entry.module}.py" for entry in registry.METHODS.values()}
    found = stages()
    skill_rag = listed_code(found["evaluate-skill_rag"]["deps"])
    assert {"skillrag/methods/skill_rag.py", "skillrag/methods/checked.py"} <= skill_rag
    assert not skill_rag & (modules - {"skillrag/methods/skill_rag.py"})
    # the runs gate reads each run's settings (retrieves, trigger), not the methods' classes
    assert not listed_code(found["summarize"]["deps"]) & modules
    assert set(found["summarize"]["deps"]) >= {f"data/runs/{m}" for m in registry.METHODS}


def test_outputs_follow_the_layout_small_products_in_git():
    outs = {next(iter(o)) if isinstance(o, dict) else o: o for s in stages().values() for o in s["outs"]}
    cached = {path for path, out in outs.items() if isinstance(out, str)}
    assert cached == {"data/corpus", "data/index", "data/states/vectors", "data/data_docs"}
    for gate in registry.GATES:
        assert outs[f"reports/validation/{gate}.json"] == {f"reports/validation/{gate}.json": {"cache": False}}
    assert outs["data/runs/flare"] == {"data/runs/flare": {"cache": False, "persist": True}}
    for name, stage in stages().items():  # the index is read through its fingerprint
        assert "data/index" not in stage["deps"], name
        if "data/fingerprints/index.json" in stage["deps"]:
            assert stage["meta"] == {"needs": ["data/index"]}, name


STAND_IN = """import pathlib, sys, uuid
name, *outs = sys.argv[1:]
with open("ran.log", "a") as log:
    log.write(name + "\\n")
for out in map(pathlib.Path, outs):  # new content every run: the stages after it are stale
    if out.suffix:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(uuid.uuid4().hex)
    else:
        out.mkdir(parents=True, exist_ok=True)
        (out / "stand-in").write_text(uuid.uuid4().hex)
"""


def _outs(stage: dict) -> list[str]:
    return [o if isinstance(o, str) else next(iter(o)) for kind in ("outs", "metrics", "plots") for o in stage.get(kind, [])]


@pytest.fixture
def project(tmp_path):
    """The real dvc.yaml, params.yaml and code under real DVC, every stage's command replaced by a
    stand-in that writes new outputs and logs its name to ran.log; every stage's outputs recorded
    in dvc.lock (`dvc commit`) as if it had run. Yields a `dvc(*args) -> stdout` runner."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copytree(REPO / "skillrag", root / "skillrag", ignore=shutil.ignore_patterns("__pycache__"))
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["prepare"]["local_dir"] = str(SHARED_DATA)
    params["index"]["corpus_file"] = str(SHARED_DATA / "corpus" / "passages.jsonl")
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "standin.py").write_text(STAND_IN)
    pipeline = {"stages": stages()}
    for name, stage in pipeline["stages"].items():
        stage["cmd"] = " ".join(["python standin.py", name, *_outs(stage)])
        for path in map(root.joinpath, _outs(stage)):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}\n") if path.suffix else (path.mkdir(exist_ok=True), (path / "stand-in").write_text("x\n"))
    for stage in pipeline["stages"].values():  # inputs no stage writes (the report's side experiments)
        for path in map(root.joinpath, stage.get("deps", [])):
            if not path.exists():
                path.mkdir(parents=True)
                (path / "stand-in").write_text("x\n")
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def dvc(*args: str) -> str:
        done = subprocess.run(["dvc", *args], cwd=root, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    dvc("init", "--no-scm", "-q")
    dvc("commit", "-f", "-q")
    assert "up to date" in dvc("status")
    dvc.root = root
    return dvc


def test_dvc_status_follows_exactly_the_keys_each_stage_reads(project):
    """Editing the paper profile leaves the default pipeline up to date, and editing a key makes
    only the stages that read it stale: real DVC on the real dvc.yaml and params.yaml."""

    def stale_after(edit) -> set[str]:
        before = (project.root / "params.yaml").read_text()
        tree = yaml.safe_load(before)
        edit(tree)
        (project.root / "params.yaml").write_text(yaml.safe_dump(tree, sort_keys=False))
        status = json.loads(project("status", "--json"))
        (project.root / "params.yaml").write_text(before)
        return set(status)

    assert stale_after(lambda t: t["profiles"]["paper"].update({"lm.max_new_tokens": 512})) == set()
    # the stages that load the prober: the gated methods, and tune_thresholds (its default target
    # is the share of dev answers the prober rejects)
    gated = {"evaluate-probing_rag", "evaluate-skill_rag"}
    assert stale_after(lambda t: t["probe"].update(threshold=0.1)) == gated | {"tune_thresholds"}
    assert stale_after(lambda t: t["methods"]["flare"].update(theta=0.3)) == {"evaluate-flare"}
    assert stale_after(lambda t: t["methods"].update(max_rounds=t["methods"]["max_rounds"] + 1)) == gated | {"evaluate-entropy_rag"}
    assert stale_after(lambda t: t["lm"].update(layers="all")) == {
        "extract", "train_router", "train_adaptive", "evaluate-no_retrieval", "evaluate-single_step"
    }
    assert stale_after(lambda t: t["probe"].update(lr=0.5)) == {"train_probe"}
    # hybrid's knobs: every stage that retrieves (DVC cannot tell which backend a stage will use)
    retrieving = {f"evaluate-{name}" for name, entry in registry.METHODS.items() if entry.retrieves}
    assert stale_after(lambda t: t["retrieval"].update(fusion_k=30)) == {"extract", "train_router", "train_adaptive", *retrieving}
    assert stale_after(lambda t: t["lm"].update(threads=1, batch_size=2, concurrency=2, reuse_cache=0)) == set()


def test_editing_one_method_re_runs_that_method_and_the_stages_after_the_summary_only(project):
    """`dvc repro` after an edit of adaptive_rag's module runs evaluate-adaptive_rag, summarize,
    analyze and report, and nothing else; an edit of the evaluation stage's module runs every
    method. A method module another stage imports re-runs that stage too: tune_thresholds reads
    flare's, dragin's and entropy_rag's triggers, and train_router runs skill_rag's and
    probing_rag's own retries (the after-evidence cuts' evidence), so an edit of skill_rag's
    module re-runs train_router and what reads its outputs."""

    def ran_after_editing(module: str) -> list[str]:
        (project.root / "ran.log").unlink(missing_ok=True)
        path = project.root / "skillrag" / module
        path.write_text(path.read_text() + "\n# an edit\n")
        project("repro", "-q")
        return sorted((project.root / "ran.log").read_text().split())

    after_summary = ["analyze", "report", "summarize"]
    assert ran_after_editing("methods/adaptive_rag.py") == sorted(["evaluate-adaptive_rag", *after_summary])
    # train_probe reads the retries and the stored methods' generations keep the prober's layers (so
    # every method evaluates again), tune_thresholds reads the prober
    retried = ["train_router", "train_probe", "tune_thresholds", *(f"evaluate-{m}" for m in registry.METHODS)]
    assert ran_after_editing("methods/skill_rag.py") == sorted([*retried, *after_summary])
    assert ran_after_editing("pipeline/stages/evaluate.py") == sorted([*(f"evaluate-{m}" for m in registry.METHODS), *after_summary])
