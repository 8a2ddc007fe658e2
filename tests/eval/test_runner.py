"""The resumable runner and the summary, with the scripted fake LM."""

import json

import pytest

from skillrag.data.schema import Question
from skillrag.eval.runner import read_traces, run_method, settings_file
from skillrag.eval.summary import summarize
from skillrag.files import DataError
from skillrag.methods import Components, build_method
from tests.fakes import CORPUS, FakeLM, OverlapRetriever

QUESTIONS = [Question(f"nq-{i}", "nq", f"Question number {i}?", ["Paris"], "eval") for i in range(4)]
SETTINGS = {"method": "no_retrieval", "lm": {"model": "fake", "max_new_tokens": 96}}


def _method(replies):
    return build_method("no_retrieval", Components(FakeLM(replies=replies), OverlapRetriever(CORPUS)))


def test_run_resumes_after_a_crash_mid_write(tmp_path):
    out = tmp_path / "runs" / "no_retrieval" / "nq.jsonl"
    run_method(_method([" x\nAnswer: Paris", " y\nAnswer: Rome"]), QUESTIONS[:2], out, SETTINGS)
    with out.open("a") as handle:
        handle.write('{"question_id": "nq-2", "trunc')  # killed mid-line
    method = _method([" z\nAnswer: Paris", " w\nAnswer: Paris"])
    traces = run_method(method, QUESTIONS, out, SETTINGS)
    assert [t.question_id for t in traces] == [q.id for q in QUESTIONS]
    assert method.parts.lm.exhausted  # exactly the two missing questions were answered
    assert len(read_traces(out)) == 4
    assert all(json.loads(line) for line in out.read_text().splitlines())


def test_resuming_under_other_settings_is_refused_and_keeps_the_traces(tmp_path):
    out = tmp_path / "nq.jsonl"
    run_method(_method([" x\nAnswer: Paris"]), QUESTIONS[:1], out, SETTINGS)
    before = out.read_text()
    assert json.loads(settings_file(out).read_text()) == SETTINGS

    other = {**SETTINGS, "lm": {"model": "fake", "max_new_tokens": 32}}
    with pytest.raises(DataError, match=r"holds 1 traces run with other settings \(changed: lm\)"):
        run_method(_method([" y\nAnswer: Rome"]), QUESTIONS, out, other)
    assert out.read_text() == before and json.loads(settings_file(out).read_text()) == SETTINGS

    settings_file(out).unlink()  # traces from before settings were recorded
    with pytest.raises(DataError, match="no settings were recorded"):
        run_method(_method([" y\nAnswer: Rome"]), QUESTIONS, out, SETTINGS)

    out.unlink()  # the remedy the error names
    assert len(run_method(_method([" y\nAnswer: Rome"]), QUESTIONS[:1], out, other)) == 1


def test_summary_metrics_and_costs(tmp_path):
    traces = run_method(
        _method([" a\nAnswer: Paris", " b\nAnswer: The Paris", " c\nAnswer: Rome", " d\nAnswer:"]),
        QUESTIONS,
        tmp_path / "nq.jsonl",
        SETTINGS,
    )
    summary = summarize(traces)
    assert summary["n"] == 4
    assert summary["em"] == 0.5  # "Paris" and "The Paris" (article dropped)
    assert summary["acc"] == 0.5
    assert summary["llm_calls"] == 1 and summary["retrievals"] == 0
    assert summary["never_retrieved"] == 4
    assert summary["terminations"] == {"done": 4}
