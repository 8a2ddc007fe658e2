"""reports/outcomes.csv holds, per method x dataset x question, what the runner scored."""

from __future__ import annotations

import pytest

from skillrag.files import read_jsonl
from skillrag.report.outcomes import ANSWER_CHARS, KEY, read_outcomes, write_outcomes

METHODS = ["skill_rag", "no_retrieval", "single_step", "probing_rag"]
DATASETS = ["musique", "hotpotqa"]


def test_rows_equal_the_traces_scores_sorted_by_method_dataset_question(workspace, tmp_path):
    out = write_outcomes(workspace.runs, tmp_path / "outcomes.csv", METHODS, DATASETS)
    frame = read_outcomes(out.read_text())
    traces = [t for m in METHODS for d in DATASETS for t in read_jsonl(workspace.run_file(m, d))]
    assert len(frame) == len(traces)
    keys = list(frame[list(KEY)].itertuples(index=False, name=None))
    assert keys == sorted(keys)
    rows = {(r.method, r.dataset, r.question_id): r for r in frame.itertuples(index=False)}
    for trace in traces:
        row = rows[(trace["method"], trace["dataset"], trace["question_id"])]
        assert (row.acc, row.em) == (trace["scores"]["acc"], trace["scores"]["em"])
        assert row.f1 == pytest.approx(trace["scores"]["f1"], abs=1e-4)
        assert row.no_answer == int(not trace["answer"])
        assert (row.llm_calls, row.retrievals) == (trace["totals"]["llm_calls"], trace["totals"]["retrievals"])
        assert (row.termination, row.answer) == (trace["termination"], trace["answer"])
    assert frame["acc"].sum() > 0 and frame["acc"].sum() < len(frame)  # both outcomes occur


def test_long_answers_are_cut_and_an_empty_answer_reads_back_empty(workspace, tmp_path):
    from skillrag.files import write_jsonl

    run = workspace.run_file("single_step", "hotpotqa")
    traces = list(read_jsonl(run))
    traces[0]["answer"], traces[1]["answer"] = "x" * 500, ""
    write_jsonl(run, traces)
    frame = read_outcomes(write_outcomes(workspace.runs, tmp_path / "o.csv", ["single_step"], ["hotpotqa"]).read_text())
    by_id = frame.set_index("question_id")["answer"]
    assert by_id[traces[0]["question_id"]] == "x" * (ANSWER_CHARS - 1) + "…"
    assert by_id[traces[1]["question_id"]] == ""
    assert frame.set_index("question_id").loc[traces[1]["question_id"], "no_answer"] == 1


def test_a_missing_run_is_named(workspace, tmp_path):
    with pytest.raises(FileNotFoundError, match="ircot/hotpotqa.jsonl is missing"):
        write_outcomes(workspace.runs, tmp_path / "o.csv", ["ircot"], ["hotpotqa"])
