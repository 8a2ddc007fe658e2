"""`skillrag ask` answers a real question from the shared data end to end: the bundled model,
the Lucene index and the prober trained by the tiny pipeline."""

import json

import pytest

from skillrag.files import read_jsonl
from tests.e2e.conftest import run

pytestmark = pytest.mark.e2e


def test_ask_skill_rag_on_a_real_question(dvc_project):
    question = next(iter(read_jsonl(dvc_project / "data" / "questions" / "eval" / "hotpotqa.jsonl")))
    out = run(["skillrag", "ask", question["question"], "--method", "skill_rag", "--json"], dvc_project).stdout
    trace = json.loads(out[out.index("{"):])
    assert trace["termination"] in {"accepted", "exit", "max_rounds", "exhausted"}, trace.get("error")
    stages = [r["stage"] for r in trace["rounds"]]
    assert stages[0] == "no_retrieval"
    assert all(r["score"] is None or 0.0 <= r["score"] <= 1.0 for r in trace["rounds"])
    if not trace["rounds"][0]["accepted"]:
        assert stages[1] == "retrieval" and trace["rounds"][1]["passage_ids"]
    assert trace["totals"]["llm_calls"] >= 1


def test_ask_live_output_shows_rounds(dvc_project):
    out = run(["skillrag", "ask", "Who wrote the novel Jurassic Park?", "--method", "probing_rag"], dvc_project)
    text = out.stdout + out.stderr
    assert "round 0" in text and "answer:" in text
