"""`skillrag evaluate --questions PATH --name NAME` with the fake LM and retriever: the user's
questions go through the questions gate's row checks and are answered by the trained artifacts,
written under NAME only; the default pipeline's outputs are not touched; bad files fail in one
line naming file:line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillrag import cli
from skillrag.pipeline import runtime, stages
from tests.conftest import REPO, write_rows
from tests.fake_cli import PausingLM, make_workspace
from tests.fakes import CORPUS, OverlapRetriever
from tests.pipeline.stages.test_locks import HOLDER


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(runtime, "open_lm", lambda params: PausingLM())
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
    monkeypatch.setattr(stages, "ensure_index", lambda params, paths, say: None)  # the faked retriever is the index
    return make_workspace(tmp_path / "ws")


def _evaluate(root: Path, *args: str, options: tuple[str, ...] = ()) -> tuple[int, str]:
    """`skillrag [options] evaluate args` in `root`."""
    try:
        result = CliRunner().invoke(
            cli.app, ["--params", str(root / "params.yaml"), *options, "evaluate", *args], catch_exceptions=False
        )
    except Exception as err:  # noqa: BLE001 - what cli.run() prints as one line
        return 1, str(err)
    return result.exit_code, result.output


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file() and "custom" not in p.parts}


def test_custom_questions_are_written_under_their_name_only(workspace, tmp_path):
    assert _evaluate(workspace)[0] == 0
    before = _snapshot(workspace)
    mine = write_rows(
        tmp_path / "mine" / "private" / "questions.jsonl",
        [{"id": f"p-{i}", "question": f"Where is landmark {i} of our team?", "answers": ["Paris"]} for i in range(3)],
    )
    write_rows(tmp_path / "mine" / "extra.jsonl", [{"id": "e-0", "question": "Where is landmark 8 of the extra set?", "answers": ["Rome"]}])
    code, out = _evaluate(workspace, "--questions", str(mine.parent.parent), "--name", "team-a")
    assert code == 0, out
    assert _snapshot(workspace) == before  # default traces, metrics and questions untouched
    metrics = json.loads((workspace / "reports" / "custom" / "team-a" / "metrics.json").read_text())
    assert {dataset: m["n"] for dataset, m in metrics["single_step"].items()} == {"private": 3, "extra": 1}
    traces = (workspace / "data" / "custom" / "team-a" / "runs" / "no_retrieval" / "private.jsonl").read_text().splitlines()
    assert [json.loads(line)["question_id"] for line in traces] == ["p-0", "p-1", "p-2"]
    assert json.loads((workspace / "reports" / "custom" / "team-a" / "validation" / "questions.json").read_text())["success"]
    report = (workspace / "reports" / "custom" / "team-a" / "report.md").read_text()
    assert report.startswith("# Evaluation on `team-a`") and "| single_step |" in report and "## Cost" in report


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a", "question": "Where?", "answers": ["x"]}', "{not json"], r"bad\.jsonl:2: malformed JSON"),
        (['{"id": "a", "question": "Where?", "answers": []}'], r"bad\.jsonl:1: question 'a' has no answers"),
        (['{"id": "a", "answers": ["x"]}'], r"bad\.jsonl:1: missing field 'question'"),
    ],
)
def test_a_bad_question_file_fails_naming_file_and_line(workspace, tmp_path, lines, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    code, out = _evaluate(workspace, "--questions", str(bad), "--name", "x")
    assert code == 1
    assert re.search(message, out), out
    assert not (workspace / "data" / "custom" / "x" / "runs").exists()


def test_duplicate_ids_fail_the_questions_gate(workspace, tmp_path):
    bad = write_rows(tmp_path / "dup.jsonl", [{"id": "a", "question": f"Where is {i}?", "answers": ["x"]} for i in range(2)])
    code, out = _evaluate(workspace, "--questions", str(bad), "--name", "x")
    assert code == 1 and "quality gate 'questions' failed" in out and "expect_column_values_to_be_unique" in out


def test_questions_and_name_go_together(workspace, tmp_path):
    code, out = _evaluate(workspace, "--questions", str(tmp_path))
    assert code == 1 and "--questions and --name go together" in out
    code, out = _evaluate(workspace, "--questions", str(tmp_path), "--name", "../up")
    assert code == 1 and "--name '../up'" in out


def test_a_named_run_of_the_evaluation_questions_is_paired_with_the_pipelines_run(workspace):
    assert _evaluate(workspace)[0] == 0
    questions = workspace / "data" / "questions" / "eval"
    code, out = _evaluate(workspace, "--questions", str(questions), "--name", "k1", options=("--set", "retrieval.k=1"))
    assert code == 0, out
    report = (workspace / "reports" / "custom" / "k1" / "report.md").read_text()
    section = report.split("## Against the pipeline's run\n\n")[1]
    assert "Run settings that differ: `retrieval.k` 3 → 1." in section
    (nq,) = [line.split(" | ") for line in section.splitlines() if line.startswith("| single_step@k1 vs single_step | nq |")]
    assert nq[3] == str(sum(1 for _ in (questions / "nq.jsonl").open()))  # every question, paired
    assert "Questions whose strict ACC flipped (pipeline → this run)" in section


def test_a_relative_questions_file_names_its_folders_dataset(workspace, tmp_path, monkeypatch):
    folder = tmp_path / "heldout"
    write_rows(folder / "questions.jsonl", [{"id": "h-0", "question": "Where is landmark 2 of ours?", "answers": ["Paris"]}])
    monkeypatch.chdir(folder)
    code, out = _evaluate(workspace, "--questions", "questions.jsonl", "--name", "rel")
    assert code == 0, out
    written = sorted(p.name for p in (workspace / "data" / "custom" / "rel" / "questions" / "eval").iterdir())
    assert written == ["heldout.jsonl"]


def test_a_file_naming_a_hidden_dataset_is_refused(workspace, tmp_path):
    bad = write_rows(tmp_path / ".jsonl", [{"id": "a", "question": "Where is 1?", "answers": ["x"]}])
    code, out = _evaluate(workspace, "--questions", str(bad), "--name", "x")
    assert code == 1 and "names dataset '.jsonl'" in out
    assert not (workspace / "data" / "custom" / "x").exists()


def test_a_missing_prober_stops_the_run_before_any_method_answers(workspace, tmp_path):
    mine = write_rows(tmp_path / "mine.jsonl", [{"id": "m-0", "question": "Where is landmark 2?", "answers": ["Paris"]}])
    methods = ("--set", "evaluate.methods=[no_retrieval,single_step,probing_rag]")
    code, out = _evaluate(workspace, "--questions", str(mine), "--name", "x", options=methods)
    assert code == 1 and "probing_rag need the trained prober, absent at" in out and "skillrag train-probe" in out
    assert not (workspace / "data" / "custom" / "x").exists()


def test_a_limit_on_the_users_questions_is_said(workspace, tmp_path):
    mine = write_rows(tmp_path / "mine.jsonl", [{"id": f"m-{i}", "question": f"Where is landmark {i}?", "answers": ["Paris"]} for i in range(3)])
    code, out = _evaluate(workspace, "--questions", str(mine), "--name", "x", options=("--set", "evaluate.limit=1"))
    assert code == 0, out
    assert "evaluate.limit=1: only the first 1 questions of each dataset are answered" in " ".join(out.split())


def test_a_second_run_of_one_name_is_refused_before_it_writes_anything(workspace, tmp_path):
    """While a named run holds its locks, a second call with the same NAME (other questions) stops
    without touching the running call's question copy or gate result."""
    first = write_rows(tmp_path / "a.jsonl", [{"id": f"a-{i}", "question": f"Where is landmark {i}?", "answers": ["Paris"]} for i in range(3)])
    assert _evaluate(workspace, "--questions", str(first), "--name", "int4")[0] == 0
    custom = workspace / "data" / "custom" / "int4"
    before = {p: p.read_bytes() for p in [*custom.rglob("*.jsonl"), *(workspace / "reports" / "custom").rglob("*.json")]}
    locks = workspace / ".skillrag" / "locks" / "custom" / "int4"
    held = [str(locks / name) for name in ("evaluate.lock", "evaluate-no_retrieval.lock", "evaluate-single_step.lock")]
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, *held], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = write_rows(tmp_path / "a2" / "a.jsonl", [{"id": "b-0", "question": "Where is landmark 7?", "answers": ["Rome"]}])
        code, out = _evaluate(workspace, "--questions", str(second), "--name", "int4")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert code == 1 and "is already running on this workspace" in out
    assert {p: p.read_bytes() for p in before} == before
