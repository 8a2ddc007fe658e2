"""Scheduled re-evaluation: the alarm on constructed outcomes (a significant drop fires, one
flipped question stays quiet, a change under identical inputs is called non-deterministic, a
device change is said); evaluating twice on unchanged inputs gives identical outcomes (tiny
in-memory model); and real git and DVC bring a throw-away project up to date."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from skillrag.data.schema import Question
from skillrag.eval.runner import run_method
from skillrag.lm.hf import HFCausalLM
from skillrag.methods import Components, build_method
from skillrag.pipeline.reevaluation import (
    NonDeterministic,
    Regression,
    RunInputs,
    bring_up_to_date,
    committed_outcomes,
    judge,
    run_inputs,
)
from skillrag.report.outcomes import outcome_frame, write_outcomes
from tests.fakes import CORPUS, OverlapRetriever
from tests.lm.conftest import byte_tokenizer, tiny_model

SETTINGS = {"method": "single_step", "params": {"retrieval.k": 3}, "inputs": {"model": {"digest": "abc"}, "questions": "q1"}}
RUN = ("single_step", "nq")


def _trace(index: int, right: bool, answer: str | None = None, method: str = "single_step") -> dict:
    answer = ("gold" if right else "wrong") if answer is None else answer
    return {"method": method, "dataset": "nq" if index % 2 else "hotpotqa", "question_id": f"q{index:02d}",
            "question": f"Q{index}?", "answer": answer, "termination": "done",
            "totals": {"llm_calls": 1, "retrievals": 1}, "scores": {"acc": float(right), "em": float(right), "f1": float(right)}}


def _outcomes(right: list[bool]):
    return outcome_frame(_trace(i, r) for i, r in enumerate(right))


def _inputs(device: str = "cpu", **settings) -> dict:
    return {run: RunInputs({**SETTINGS, **settings}, device) for run in (RUN, ("single_step", "hotpotqa"))}


COMMITTED = [True] * 30 + [False] * 10


def test_a_significant_drop_on_the_same_questions_fails_naming_the_test():
    dropped = [False] * 12 + [True] * 18 + [False] * 10  # 12 right -> wrong, none the other way
    verdict = judge(_outcomes(COMMITTED), None, _outcomes(dropped), {}, _inputs(), alpha=0.05)
    assert {(r["scope"], r["metric"]) for r in verdict.regressions} >= {("all datasets", "acc"), ("all datasets", "em")}
    assert not any(r["metric"] == "no_answer" for r in verdict.regressions)
    with pytest.raises(Regression, match=r"single_step/all datasets/acc: 0\.750 -> 0\.450 \(12 worse, 0 better"):
        verdict.check()


def test_one_flipped_question_stays_quiet():
    flipped = [False, *COMMITTED[1:]]
    verdict = judge(_outcomes(COMMITTED), None, _outcomes(flipped), {}, _inputs(), alpha=0.05)
    assert verdict.tests and not verdict.regressions and not verdict.unexplained
    assert verdict.lines() == [f"no regression at alpha 0.05 ({len(verdict.tests)} one-sided tests, holm-corrected)"]
    verdict.check()


def test_a_missing_committed_question_is_a_regression():
    verdict = judge(_outcomes(COMMITTED), None, _outcomes(COMMITTED[:-1]), {}, _inputs(), alpha=0.05)
    with pytest.raises(Regression, match="1 committed outcome"):
        verdict.check()


def test_changed_outcomes_under_identical_inputs_are_non_deterministic():
    before = _outcomes(COMMITTED)
    after = outcome_frame([_trace(0, True, answer="gold, again"), *(_trace(i, r) for i, r in enumerate(COMMITTED) if i)])
    verdict = judge(before, before, after, _inputs(), _inputs(), alpha=0.05)
    assert verdict.unexplained == {"single_step/hotpotqa": 1} and not verdict.regressions
    with pytest.raises(NonDeterministic, match="non-deterministic: 1 outcomes changed with identical inputs"):
        verdict.check()
    # a changed input digest explains the change; a changed device is reported, not called a bug
    assert not judge(before, before, after, _inputs(), _inputs(inputs={"model": {"digest": "new"}}), 0.05).unexplained
    moved = judge(before, before, after, _inputs(), _inputs(device="cuda"), alpha=0.05)
    assert not moved.unexplained and "device changed: single_step/hotpotqa cpu -> cuda" in moved.lines()[-1]


def test_run_inputs_read_the_settings_files_and_the_last_runs_device(tmp_path):
    run = tmp_path / "single_step" / "nq.settings.json"
    run.parent.mkdir()
    run.write_text(json.dumps({**SETTINGS, "provenance": [{"device": "cpu"}, {"device": "cuda"}]}))
    (run.parent / "nq.part-0.settings.json").write_text(json.dumps(SETTINGS))
    assert run_inputs(tmp_path) == {RUN: RunInputs(SETTINGS, "cuda")}


def test_evaluating_twice_on_unchanged_inputs_reproduces_every_outcome(tmp_path):
    """Determinism, with a tiny randomly initialised transformer (seeded) behind the real HF wrapper."""
    import torch

    tokenizer = byte_tokenizer()
    questions = [Question(f"nq-{i}", "nq", f"Where is item {i}?", ["Paris"], "eval") for i in range(4)]
    outcomes = []
    for attempt in range(2):
        torch.manual_seed(0)
        lm = HFCausalLM(tiny_model("llama", len(tokenizer), tokenizer.eos_token_id), tokenizer, name="tiny")
        method = build_method("single_step", Components(lm, OverlapRetriever(CORPUS), None, k=2, max_new_tokens=12))
        traces = run_method(method, questions, tmp_path / f"run{attempt}.jsonl", SETTINGS)
        outcomes.append(outcome_frame(t.to_dict() for t in traces))
    assert len(outcomes[0]) == 4 and outcomes[0].equals(outcomes[1])
    assert judge(outcomes[0], outcomes[0], outcomes[1], _inputs(), _inputs(), 0.05).unexplained == {}


# Real git and DVC: a project whose `evaluate` stage writes single_step's traces on nq, the first
# `right.txt` of 20 questions right, and records that input in the run's settings file.
STAGE = (
    "python -c \"import json,pathlib; k=int(pathlib.Path('right.txt').read_text()); d=pathlib.Path('data/runs/single_step');"
    " d.mkdir(parents=True, exist_ok=True);"
    " rows=[dict(method='single_step', dataset='nq', question_id=f'nq-{i:02d}', question='Q?', golds=['g'],"
    " answer='g' if i<k else 'x', termination='done', totals=dict(llm_calls=1, retrievals=1),"
    " scores=dict(acc=float(i<k), em=float(i<k), f1=float(i<k))) for i in range(20)];"
    " (d/'nq.jsonl').write_text(''.join(json.dumps(r)+chr(10) for r in rows));"
    " (d/'nq.settings.json').write_text(json.dumps(dict(method='single_step', inputs=dict(right=k),"
    " provenance=[dict(device='cpu')])))\""
)


def _git_out(project: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=project, check=True, capture_output=True, text=True).stdout


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=project, check=True, capture_output=True)


@pytest.fixture
def project(tmp_path) -> Path:
    """A git + DVC project with one stage, `evaluate`, its outcomes committed at 16 of 20 right."""
    root = tmp_path / "project"
    root.mkdir()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    _git(root, "init", "-q")
    subprocess.run(["dvc", "init", "-q"], cwd=root, check=True, env=env)
    (root / "right.txt").write_text("16")
    (root / "params.yaml").write_text(yaml.safe_dump({
        "reevaluate": {"alpha": 0.05}, "evaluate": {"methods": ["single_step"], "datasets": ["nq"]}}))
    stage = {"cmd": STAGE, "deps": ["right.txt"], "outs": ["data/runs"]}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"evaluate": stage}}))
    subprocess.run(["dvc", "repro", "-q"], cwd=root, check=True, env=env)
    write_outcomes(root / "data" / "runs", root / "reports" / "outcomes.csv", ["single_step"], ["nq"])
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "outcomes")
    return root


def test_the_runner_brings_the_runs_up_to_date_and_git_has_the_committed_outcomes(project):
    assert bring_up_to_date(project, force_evaluate=False) == []  # nightly, nothing changed: nothing runs
    assert bring_up_to_date(project) == ["evaluate"]  # weekly: forced all the same
    (project / "right.txt").write_text("3")
    assert bring_up_to_date(project, force_evaluate=False) == ["evaluate"]
    assert (project / "data/runs/single_step/nq.jsonl").read_text().count('"acc": 1.0') == 3
    assert _git_out(project, "status", "--porcelain", "dvc.lock") == " M dvc.lock\n"  # recorded, not committed
    assert committed_outcomes(project, "HEAD")["acc"].sum() == 16
    with pytest.raises(FileNotFoundError, match="no committed reports/outcomes.csv at 'nosuchref'"):
        committed_outcomes(project, "nosuchref")


@pytest.mark.slow  # a temporary Prefect server
def test_reevaluate_flow_fails_on_a_significant_drop_and_passes_on_noise(project, prefect_server):
    from flows.reevaluate import reevaluate_flow

    (project / "right.txt").write_text("15")  # one question flipped: noise
    rows = reevaluate_flow(project=str(project))
    assert {(r["scope"], r["metric"]): r["worse"] for r in rows}[("nq", "acc")] == 1
    (project / "right.txt").write_text("4")  # 12 questions lost
    with pytest.raises(Regression, match=r"single_step/nq/acc: 0\.800 -> 0\.200"):
        reevaluate_flow(project=str(project))
    reevaluate_flow(project=str(project), alpha=1e-9)  # a flow parameter overrides params.yaml
