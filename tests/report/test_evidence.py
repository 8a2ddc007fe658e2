"""The report states how easy retrieval was made: the share of evaluated questions whose gold
passages are in the corpus (from the flags prepare keeps in each question's meta) and how the
corpus was built."""

from __future__ import annotations

from pathlib import Path

from skillrag.config import load_params
from skillrag.files import write_jsonl
from skillrag.report.evidence import evidence_counts, evidence_section
from tests.conftest import REPO


def write_eval(questions_dir: Path, dataset: str, metas: list[dict]) -> None:
    rows = [
        {"id": f"{dataset}-{i}", "dataset": dataset, "question": f"q {i}?", "answers": ["a"], "split": "eval", "meta": meta}
        for i, meta in enumerate(metas)
    ]
    write_jsonl(questions_dir / "eval" / f"{dataset}.jsonl", rows)


def test_counts_read_the_flags_and_an_absent_flag_is_not_recorded_never_present(tmp_path):
    write_eval(tmp_path, "nq", [
        {"gold_context_in_corpus": True, "answer_in_corpus": True},
        {"gold_context_in_corpus": False, "answer_in_corpus": True},
        {"answer_in_corpus": False},
        {"gold_context_in_corpus": True, "answer_in_corpus": True},  # beyond evaluate.limit
    ])
    write_eval(tmp_path, "triviaqa", [{"answer_in_corpus": True}])
    assert evidence_counts(tmp_path, ["nq", "triviaqa"], limit=3) == {
        "nq": {"questions": 3, "gold_in_corpus": 1, "answer_in_corpus": 2, "gold_not_recorded": 1},
        "triviaqa": {"questions": 1, "gold_in_corpus": 0, "answer_in_corpus": 1, "gold_not_recorded": 1},
    }


def test_the_section_states_the_share_the_sampling_rule_and_the_corpus(tmp_path):
    write_eval(tmp_path, "nq", [{"gold_context_in_corpus": True}, {"gold_context_in_corpus": True}, {}, {}])
    params = load_params(REPO / "params.yaml", overrides=["evaluate.limit=null"])
    text = evidence_section(params, tmp_path, ["nq"])
    assert "Over all evaluation sets, 50% (2) of 4 questions have their gold passages in the corpus" in text
    assert "preferring evidence in the corpus" in text and "not the whole of Wikipedia" in text
    assert "| nq | 4 | 50% (2) | 0% (0) | 50% (2) |" in text
    unpreferred = load_params(REPO / "params.yaml", overrides=["prepare.prefer_evidence_in_corpus=false"])
    assert "without regard to the corpus" in evidence_section(unpreferred, tmp_path, ["nq"])
