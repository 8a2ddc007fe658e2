"""`skillrag recommit` on a small real DVC project: which stale stages it accepts (code or params
alone) and refuses (data, outputs), what it calls a difference between two runs' outputs, and its
commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillrag.pipeline.recommit import (
    ABSENT,
    NEWLY_LISTED,
    Change,
    RecommitRefused,
    checkout,
    commit,
    differences,
    run_tiny,
    split,
    stale,
    tiny_project,
)

DVC_YAML = """\
stages:
  first:
    cmd: cp input.txt mid.txt && date +%s%N >> mid.txt
    deps: [input.txt, skillrag/one.py]
    params: [a.x]
    outs: [mid.txt]
  second:
    cmd: cp mid.txt out.txt && date +%s%N >> out.txt
    deps: [mid.txt, skillrag]
    outs: [{out.txt: {cache: false}}]
"""


def _sh(root: Path, *command: str) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Two stages, run and committed: `first` reads a data file, a code file and a param; `second`
    reads the code folder."""
    root = tmp_path / "project"
    (root / "skillrag").mkdir(parents=True)
    (root / "skillrag" / "one.py").write_text('"""One."""\n')
    (root / "input.txt").write_text("data\n")
    (root / "params.yaml").write_text("a:\n  x: 1\n")
    (root / "dvc.yaml").write_text(DVC_YAML)
    _sh(root, "git", "init", "-q")
    _sh(root, "dvc", "init", "-q")
    _sh(root, "dvc", "repro", "-q")
    _sh(root, "git", "add", "-A")
    _sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "run")
    return root


def test_a_code_and_params_change_is_accepted_and_committed_without_running(project: Path) -> None:
    (project / "skillrag" / "one.py").write_text('"""One, renamed words."""\n')
    (project / "params.yaml").write_text("a:\n  x: 1\n  y: 2\n")
    (project / "dvc.yaml").write_text(DVC_YAML.replace("params: [a.x]", "params: [a.x, a.y]"))
    written = {name: (project / name).read_text() for name in ("mid.txt", "out.txt")}  # each run stamps the time
    stages, must_run = split(stale(project))
    assert (stages, must_run) == (["first", "second"], [])
    commit(project, stages)
    assert stale(project) == []
    assert {name: (project / name).read_text() for name in written} == written  # nothing ran again


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda root: (root / "input.txt").write_text("other data\n"), "first: changed deps input.txt modified"),
        (lambda root: (root / "out.txt").unlink(), "second: changed outs out.txt deleted"),
        (lambda root: (root / "dvc.yaml").write_text(DVC_YAML.replace("cp mid.txt out.txt", "cat mid.txt > out.txt")),
         "second: changed command"),
    ],
    ids=["data", "missing-output", "command"],
)
def test_data_outputs_and_commands_make_their_stage_run_and_leave_the_other_recordable(project: Path, damage, named: str) -> None:
    (project / "skillrag" / "one.py").write_text('"""Also a code change."""\n')
    damage(project)
    stages, must_run = split(stale(project))
    assert [str(change) for change in must_run] == [named]
    assert stages == [name for name in ("first", "second") if not named.startswith(name)]


def test_a_newly_listed_dependency_is_recordable_and_a_stage_that_never_ran_is_not(project: Path) -> None:
    (project / "extra.txt").write_text("a file the first stage now reads\n")
    third = "  third:\n    cmd: cp out.txt third.txt\n    deps: [out.txt]\n    outs: [third.txt]\n"
    (project / "dvc.yaml").write_text(DVC_YAML.replace("deps: [input.txt,", "deps: [extra.txt, input.txt,") + third)
    changes = stale(project)
    assert Change("first", "changed deps", "extra.txt", NEWLY_LISTED) in changes
    stages, must_run = split(changes)
    assert (stages, must_run) == (["first"], [Change("third", "never run")])


def test_on_a_new_machine_an_absent_cache_only_output_keeps_its_recorded_hash(project: Path) -> None:
    """Only git survives a new machine: `first`'s cached mid.txt is gone with the DVC cache, and a
    code change must still be recordable for `first` and for `second`, which reads mid.txt."""
    (project / "mid.txt").unlink()
    _sh(project, "rm", "-rf", ".dvc/cache")
    (project / "skillrag" / "one.py").write_text('"""One, renamed words."""\n')
    recorded = (project / "dvc.lock").read_text()
    stages, must_run = split(stale(project))
    assert (stages, must_run) == (["first", "second"], [])
    commit(project, stages)
    absent = [Change("first", "changed outs", "mid.txt", ABSENT), Change("second", "changed deps", "mid.txt", ABSENT)]
    assert sorted(stale(project), key=str) == absent  # the code change is recorded, the absence stays
    assert split(absent) == ([], [])
    mid_hash = [line for line in recorded.splitlines() if "md5" in line]
    assert set(mid_hash) & set((project / "dvc.lock").read_text().splitlines())  # mid.txt's hash as recorded


def test_a_tiny_project_holds_every_input_no_stage_writes(tmp_path: Path) -> None:
    """The report reads experiments/ and the named runs' folders, which no stage writes: DVC refuses
    a stage whose dependency is missing, so the tiny project (recommit's runs, the e2e tests) has them."""
    import yaml

    repo = Path(__file__).resolve().parents[2]
    tiny = tiny_project(repo, tmp_path / "tiny")
    stages = yaml.safe_load((tiny / "dvc.yaml").read_text())["stages"]
    written = {out if isinstance(out, str) else next(iter(out))
               for entry in stages.values() for kind in ("outs", "metrics", "plots") for out in entry.get(kind, [])}
    read = {dep for entry in stages.values() for dep in entry.get("deps", []) if not dep.startswith(("..", "$"))}
    unwritten = {dep for dep in read if not any(dep == out or out.startswith(f"{dep}/") or dep.startswith(f"{out}/") for out in written)}
    assert {"experiments", "data/custom", "reports/custom"} <= unwritten
    assert [dep for dep in sorted(unwritten) if not (tiny / dep).exists()] == []
    assert (tiny / "experiments" / "README.md").read_text() == (repo / "experiments" / "README.md").read_text()


def test_an_unknown_base_is_refused(project: Path, tmp_path: Path) -> None:
    with pytest.raises(RecommitRefused, match="'nosuch' is no commit"), checkout(project, "nosuch", tmp_path / "tree"):
        pass


def _trace(answer: str, latency: float) -> dict:
    return {"question_id": "q1", "answer": answer, "rounds": [{"answer": answer, "cost": {"latency_s": latency}}],
            "totals": {"llm_calls": 1, "latency_s": latency}}


RECORDED = ["evaluate", "summarize", "extract", "index"]


def _run_folder(root: Path, traces: list[dict], metrics: dict | None = None, stages: str = "") -> Path:
    """A finished project's outputs: method m's traces on nq, its metrics, and an index file."""
    (root / "data" / "runs" / "m").mkdir(parents=True)
    (root / "dvc.yaml").write_text(
        "stages:\n  evaluate:\n    outs: [data/runs/m]\n  summarize:\n    outs: [{reports/metrics.json: {cache: false}}]\n"
        "  extract:\n    outs: [data/states]\n  index:\n    outs: [data/index]\n" + stages
    )
    (root / "data" / "runs" / "m" / "nq.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    (root / "data" / "index").mkdir()
    (root / "data" / "index" / "docs.jsonl").write_text(json.dumps({"differs": str(root)}) + "\n")  # an input: skipped
    (root / "reports").mkdir()
    (root / "reports" / "metrics.json").write_text(json.dumps(metrics or {"m": {"nq": {"acc": 0.5, "latency_s": 1.0}}}))
    return root


def test_runs_that_differ_only_in_wall_clock_fields_are_the_same(tmp_path: Path) -> None:
    base = _run_folder(tmp_path / "base", [_trace("Paris", 1.5)])
    head = _run_folder(tmp_path / "head", [_trace("Paris", 9.0)], {"m": {"nq": {"acc": 0.5, "latency_s": 7.0, "latency_s_ci95": [6.0, 8.0]}}})
    assert differences(base, head, RECORDED) == []


def test_numbers_within_the_tolerance_and_equal_vectors_are_the_same(tmp_path: Path) -> None:
    from skillrag.vectors import encode_vector

    base_trace, head_trace = _trace("Paris", 1.0), _trace("Paris", 1.0)
    base_trace["rounds"][0] |= {"score": 0.73125, "state": encode_vector([0.5, -1.25])}
    head_trace["rounds"][0] |= {"score": 0.73125 + 1e-7, "state": encode_vector([0.5 + 1e-7, -1.25])}
    assert differences(_run_folder(tmp_path / "base", [base_trace]), _run_folder(tmp_path / "head", [head_trace]), RECORDED) == []
    head_trace["rounds"][0]["state"] = encode_vector([0.5, -1.0])
    assert differences(_run_folder(tmp_path / "base2", [base_trace]), _run_folder(tmp_path / "head2", [head_trace]), RECORDED) == [
        "data/runs/m/nq.jsonl, record 1: rounds[0].state[1]: -1.25 at the base, -1.0 now"
    ]


def test_state_rows_are_compared_and_run_provenance_is_not(tmp_path: Path) -> None:
    import pandas as pd

    base, head = _run_folder(tmp_path / "base", [_trace("Paris", 1.0)]), _run_folder(tmp_path / "head", [_trace("Paris", 1.0)])
    for root, made_by in ((base, "aaa"), (head, "bbb")):
        (root / "data" / "runs" / "m" / "nq.settings.json").write_text(json.dumps({"params": {"k": 3}, "provenance": [{"git_commit": made_by}]}))
        (root / "data" / "states").mkdir()
    pd.DataFrame({"id": ["q1", "q2"], "acc": [1.0, 0.0]}).to_parquet(base / "data" / "states" / "shard-0.parquet")
    pd.DataFrame({"id": ["q1", "q2"], "acc": [1.0, 1.0]}).to_parquet(head / "data" / "states" / "shard-0.parquet")
    assert differences(base, head, RECORDED) == ["data/states/shard-0.parquet, record 2: acc: 0.0 at the base, 1.0 now"]


def test_only_what_the_recorded_stages_write_is_compared(tmp_path: Path) -> None:
    new_stage = "  index_dense:\n    outs: [data/dense, {data/fingerprints/dense.json: {cache: false}}]\n"
    base = _run_folder(tmp_path / "base", [_trace("Paris", 1.0)])
    head = _run_folder(tmp_path / "head", [_trace("Paris", 1.0)], stages=new_stage)
    (head / "data" / "fingerprints").mkdir()
    (head / "data" / "fingerprints" / "dense.json").write_text('{"encoder": "minilm"}')  # a stage run, not recorded
    assert differences(base, head, RECORDED) == []
    (head / "data" / "runs" / "m" / "nq.extra.json").write_text("{}")
    assert differences(base, head, RECORDED) == ["data/runs/m/nq.extra.json: only in the working tree"]
    assert differences(base, head, ["summarize"]) == []


def test_a_changed_answer_a_changed_metric_and_a_missing_file_are_each_named(tmp_path: Path) -> None:
    base = _run_folder(tmp_path / "base", [_trace("Paris", 1.0), _trace("Rome", 1.0)])
    head = _run_folder(tmp_path / "head", [_trace("Paris", 1.0), _trace("Milan", 1.0)],
                       {"m": {"nq": {"acc": 0.0, "latency_s": 1.0}}})
    (base / "data" / "runs" / "m" / "hotpotqa.jsonl").write_text(json.dumps(_trace("Oslo", 1.0)) + "\n")
    assert differences(base, head, RECORDED) == [
        "data/runs/m/hotpotqa.jsonl: only at the base",
        'data/runs/m/nq.jsonl, record 2: answer: "Rome" at the base, "Milan" now',
        "reports/metrics.json, record 1: m.nq.acc: 0.5 at the base, 0.0 now",
    ]


@pytest.mark.parametrize(("users", "seen"), [(None, "COMPATIBLE"), ("AUTO", "AUTO")])
def test_the_tiny_runs_pin_mkls_numerics_unless_the_user_chose(tmp_path: Path, monkeypatch, users, seen) -> None:
    """Unpinned, float32 MKL products let the same tiny run give two router scores ~1e-3 apart, and
    recommit refused a change that changed nothing (skillrag.pipeline.recommit._env)."""
    if users is None:
        monkeypatch.delenv("MKL_CBWR", raising=False)
    else:
        monkeypatch.setenv("MKL_CBWR", users)
    project = tmp_path / "tiny"
    project.mkdir()
    (project / "dvc.yaml").write_text(
        "stages:\n  env:\n    cmd: python -c \"import os; print(os.environ.get('MKL_CBWR', ''), end='')\" > seen.txt\n"
        "    outs: [{seen.txt: {cache: false}}]\n"
    )

    run_tiny(project)

    assert (project / "seen.txt").read_text() == seen
