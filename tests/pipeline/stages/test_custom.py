"""`skillrag evaluate --questions PATH --name NAME` with the fake LM and retriever: the user's
questions go through the questions gate's row checks and are answered by the trained artifacts,
written under NAME only; the default pipeline's outputs are not touched; bad files fail in one
line naming file:line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillrag import cli
from skillrag.pipeline import runtime
from tests.conftest import write_rows
from tests.fake_cli import PausingLM, make_workspace
from tests.fakes import CORPUS, OverlapRetriever


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(runtime, "open_lm", lambda params: PausingLM())
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
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
    assert nq[2] == str(sum(1 for _ in (questions / "nq.jsonl").open()))  # every question, paired
    assert "Questions whose strict ACC flipped (pipeline → this run)" in section
