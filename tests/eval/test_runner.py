"""The resumable runner and the summary, with the scripted fake LM."""

import json

from skillrag.data.schema import Question
from skillrag.eval.runner import read_traces, run_method
from skillrag.eval.summary import summarize
from skillrag.methods import Components, build_method
from tests.fakes import CORPUS, FakeLM, OverlapRetriever

QUESTIONS = [Question(f"nq-{i}", "nq", f"Question number {i}?", ["Paris"], "eval") for i in range(4)]


def _method(replies):
    return build_method("no_retrieval", Components(FakeLM(replies=replies), OverlapRetriever(CORPUS)))


def test_run_resumes_after_a_crash_mid_write(tmp_path):
    out = tmp_path / "runs" / "no_retrieval" / "nq.jsonl"
    run_method(_method([" x\nAnswer: Paris", " y\nAnswer: Rome"]), QUESTIONS[:2], out)
    with out.open("a") as handle:
        handle.write('{"question_id": "nq-2", "trunc')  # killed mid-line
    method = _method([" z\nAnswer: Paris", " w\nAnswer: Paris"])
    traces = run_method(method, QUESTIONS, out)
    assert [t.question_id for t in traces] == [q.id for q in QUESTIONS]
    assert method.parts.lm.exhausted  # exactly the two missing questions were answered
    assert len(read_traces(out)) == 4
    assert all(json.loads(line) for line in out.read_text().splitlines())


def test_summary_metrics_and_costs(tmp_path):
    traces = run_method(
        _method([" a\nAnswer: Paris", " b\nAnswer: The Paris", " c\nAnswer: Rome", " d\nAnswer:"]),
        QUESTIONS,
        tmp_path / "nq.jsonl",
    )
    summary = summarize(traces)
    assert summary["n"] == 4
    assert summary["em"] == 0.5  # "Paris" and "The Paris" (article dropped)
    assert summary["acc"] == 0.5
    assert summary["llm_calls"] == 1 and summary["retrievals"] == 0
    assert summary["never_retrieved"] == 4
    assert summary["terminations"] == {"done": 4}
