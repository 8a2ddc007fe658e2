"""dvc.yaml lists, for each stage, exactly the code the stage runs: the skillrag modules its stage
module imports (followed through every import, package `__init__`s included) plus the data files
of the packages involved (the prompt templates). A stage that under-lists code is not re-run when
that code changes; one that over-lists is re-run for nothing. The stage registry
(`skillrag/stages/__init__.py`), the CLI (which only prints) and `skillrag/__init__.py` are left
out: they shape no output.

`evaluate@<method>` (a `foreach` over the methods) runs the evaluation stage module and that
method's module, which the method registry imports by name (skillrag.methods.factory.MODULES);
its inputs and params follow the method's `reads`, and the stored stages it starts from
(skillrag.stages.evaluation.STARTS_FROM). DVC cannot splice a list into a `foreach` item, so
each item fills fixed slots, a shorter list repeating an entry already listed:
`python -m tests.test_dvc_yaml` prints the items this test expects."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

from skillrag.methods import METHODS
from skillrag.methods.complexity import STRATEGIES
from skillrag.methods.factory import MODULES
from skillrag.stages.evaluation import STARTS_FROM, STORED
from tests.conftest import REPO, SHARED_DATA

STAGE_MODULES = {
    "prepare": "skillrag.stages.questions",
    "index": "skillrag.stages.indexing",
    "extract": "skillrag.stages.states",
    "train_probe": "skillrag.stages.probing",
    "train_router": "skillrag.stages.routing",
    "train_adaptive": "skillrag.stages.adaptive",
    "tune_thresholds": "skillrag.stages.thresholds",
    "summarize": "skillrag.stages.summary",
    "analyze": "skillrag.stages.analysis",
    "report": "skillrag.stages.reporting",
}
NOT_CODE_DEPS = {"skillrag/__init__.py", "skillrag/stages/__init__.py"}
# stages that run methods by name (skillrag.methods.METHODS imports a method's module when asked
# for it): train_router records single_step's run settings, train_adaptive runs the strategies,
# summarize's runs gate reads every method's class
STAGE_METHODS = {"train_router": ("single_step", "probing_rag", "skill_rag"), "train_adaptive": STRATEGIES, "summarize": tuple(METHODS)}


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


# inputs a method `reads` (skillrag.stages.run_settings) -> the stage output holding it
INPUTS = {"questions": "data/questions", "index": "data/index", "prober": "data/probe", "router": "data/router",
          "thresholds": "data/thresholds", "adaptive": "data/adaptive"}
# params every evaluate@<method> reads: the model, which questions, how answers are scored
EVALUATE_PARAMS = {"lm.model", "lm.device", "lm.dtype", "lm.prompt_format", "lm.max_new_tokens",
                   "prepare.max_question_chars", "evaluate.datasets", "evaluate.limit", "methods.abstain_answer"}
SLOTS = {"code": 4, "input": 4, "param": 5}


def method_code(method: str) -> set[str]:
    return code_closure(f"skillrag.methods.{MODULES[method][0]}")


def stages() -> dict[str, dict]:
    """dvc.yaml's stages, a `foreach` expanded into its `<name>@<key>` stages."""
    found = {}
    for name, stage in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].items():
        if "foreach" not in stage:
            found[name] = stage
            continue
        for key, item in stage["foreach"].items():
            text = yaml.safe_dump(stage["do"]).replace("${key}", key)
            found[f"{name}@{key}"] = yaml.safe_load(re.sub(r"\$\{item\.(\w+)\}", lambda m, item=item: str(item[m.group(1)]), text))
    return found


def evaluate_needs(method: str) -> tuple[set[str], set[str], set[str]]:
    """What evaluate@<method> runs and reads: code beyond the evaluation module's, inputs, params."""
    reads = METHODS[method].reads
    inputs = {INPUTS[r] for r in reads if r in INPUTS} | {"data/index"}  # every method opens the index
    inputs |= {f"data/runs/{source}" for source in STARTS_FROM.get(method, ())}
    params = {r for r in reads if "." in r} | ({"lm.layers"} if method in STORED else set())
    for section, keys in yaml.safe_load((REPO / "params.yaml").read_text()).items():
        if isinstance(keys, dict) and {f"{section}.{k}" for k in keys} <= params:  # a whole section: by its name
            params = params - {f"{section}.{k}" for k in keys} | {section}
    return method_code(method) - code_closure("skillrag.stages.evaluation"), inputs, params - EVALUATE_PARAMS


def evaluate_item(method: str) -> dict[str, str]:
    """The `foreach` item dvc.yaml should hold for `method`."""
    code, inputs, params = evaluate_needs(method)
    extra = {"code": sorted(code - {"skillrag/methods/simple.py"}), "input": sorted(inputs - {"data/questions", "data/index"}),
             "param": sorted(params)}
    pad = {"code": "skillrag/methods/simple.py", "input": "data/questions", "param": "lm.model"}
    assert all(len(values) <= SLOTS[kind] for kind, values in extra.items()), f"{method}: more slots needed"
    return {f"{kind}{i}": (values[i] if i < len(values) else pad[kind]) for kind, values in extra.items() for i in range(SLOTS[kind])}


def test_evaluate_is_one_stage_per_method_each_reading_exactly_what_it_needs():
    found = stages()
    for method in METHODS:
        stage = found[f"evaluate@{method}"]
        code, inputs, params = evaluate_needs(method)
        needed = code_closure("skillrag.stages.evaluation") | code
        listed = listed_code(stage["deps"])
        assert listed == needed, f"evaluate@{method}: missing {sorted(needed - listed)}, extra {sorted(listed - needed)}"
        assert {d for d in stage["deps"] if d.startswith("data/")} == inputs | {"data/questions"}
        assert set(stage["params"]) == params | EVALUATE_PARAMS
        assert stage["outs"][0] == f"data/runs/{method}" and list(stage["outs"][1]) == [f"reports/timings/evaluate-{method}.json"]
        assert stage["cmd"] == f"skillrag evaluate --method {method}"


def test_summarize_reads_every_run_and_every_method_module():
    """The runs gate reads each method's class (does it retrieve, what triggers it)."""
    stage = stages()["summarize"]
    needed = code_closure("skillrag.stages.summary").union(*(method_code(m) for m in METHODS))
    assert listed_code(stage["deps"]) == needed
    assert {d for d in stage["deps"] if d.startswith("data/")} == {"data/questions", *(f"data/runs/{m}" for m in METHODS)}


@pytest.mark.parametrize("stage", STAGE_MODULES)
def test_each_stage_depends_on_exactly_the_code_it_runs(stage):
    deps = stages()[stage]["deps"]
    needed = code_closure(STAGE_MODULES[stage]).union(*(method_code(m) for m in STAGE_METHODS.get(stage, ())))
    listed = listed_code(deps)
    assert not needed - listed, f"{stage} runs code dvc.yaml does not list: {sorted(needed - listed)}"
    assert not listed - needed, f"{stage} lists code it does not run: {sorted(listed - needed)}"


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


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path)


def make_project(tmp_path: Path):
    """The real dvc.yaml, params.yaml and code under real DVC, every stage's command replaced by a
    stand-in that writes new outputs and logs its name to ran.log; every stage's outputs recorded
    in dvc.lock (`dvc commit`) as if it had run. Yields a `dvc(*args) -> stdout` runner."""
    import os
    import shutil
    import subprocess
    import sys

    root = tmp_path / "project"
    root.mkdir()
    shutil.copytree(REPO / "skillrag", root / "skillrag", ignore=shutil.ignore_patterns("__pycache__"))
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["prepare"]["local_dir"] = str(SHARED_DATA)
    params["index"]["corpus_file"] = str(SHARED_DATA / "corpus" / "passages.jsonl")
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "standin.py").write_text(STAND_IN)
    pipeline = yaml.safe_load((REPO / "dvc.yaml").read_text())
    for name, stage in pipeline["stages"].items():
        body = stage.get("do", stage)
        outs = [out if isinstance(out, str) else next(iter(out)) for kind in ("outs", "metrics", "plots") for out in body.get(kind, [])]
        body["cmd"] = " ".join(["python standin.py", f"{name}@${{key}}" if "do" in stage else name, *outs])
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def dvc(*args: str) -> str:
        done = subprocess.run(["dvc", *args], cwd=root, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    for name, stage in stages().items():  # stand-in outputs: dvc commit records them as if the stages ran
        for out in [*stage.get("outs", []), *stage.get("metrics", []), *stage.get("plots", [])]:
            path = root / (out if isinstance(out, str) else next(iter(out)))
            if path.suffix:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("{}\n")
            else:
                path.mkdir(parents=True, exist_ok=True)
                (path / "stand-in").write_text("x\n")
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
    gated = {"evaluate@probing_rag", "evaluate@skill_rag"}
    assert stale_after(lambda t: t["probe"].update(threshold=0.1)) == gated | {"tune_thresholds"}
    assert stale_after(lambda t: t["methods"]["flare"].update(theta=0.3)) == {"evaluate@flare"}
    assert stale_after(lambda t: t["methods"].update(max_rounds=t["methods"]["max_rounds"] + 1)) == gated | {"evaluate@entropy_rag"}
    assert stale_after(lambda t: t["lm"].update(layers="all")) == {
        "extract", "train_router", "train_adaptive", "evaluate@no_retrieval", "evaluate@single_step"
    }
    assert stale_after(lambda t: t["probe"].update(lr=0.5)) == {"train_probe"}
    assert stale_after(lambda t: t["lm"].update(threads=1, batch_size=2, concurrency=2, reuse_cache=0)) == set()


def test_editing_one_method_re_runs_that_method_and_the_stages_after_the_summary_only(project):
    """`dvc repro` after an edit of adaptive_rag's module runs evaluate@adaptive_rag, summarize,
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
    assert ran_after_editing("methods/adaptive_rag.py") == sorted(["evaluate@adaptive_rag", *after_summary])
    # train_probe reads the retries, tune_thresholds the prober, flare / dragin / entropy_rag the thresholds
    retried = ["train_router", "train_probe", "tune_thresholds", *(f"evaluate@{m}" for m in ("probing_rag", "skill_rag", "flare", "dragin", "entropy_rag"))]
    assert ran_after_editing("methods/skill_rag.py") == sorted([*retried, *after_summary])
    assert ran_after_editing("stages/evaluation.py") == sorted([*(f"evaluate@{m}" for m in METHODS), *after_summary])


if __name__ == "__main__":  # the `foreach` items of evaluate, for dvc.yaml
    print(yaml.safe_dump({m: evaluate_item(m) for m in METHODS}, sort_keys=False, width=200), end="")
