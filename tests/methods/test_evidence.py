"""Evidence across rounds: an answer after a retry sees the new passages and the earlier rounds',
up to `methods.max_passages`, and each round that retrieved records whether it found a gold
passage no earlier round had."""

from __future__ import annotations

import pytest

from skillrag.config import MethodsParams
from skillrag.data.schema import Question
from skillrag.methods import Components, build_method
from tests.fakes import CORPUS, FakeLM, FakeProber, OverlapRetriever, answer
from tests.methods.test_methods_pipelines import LOW, PRIOR, QUESTION, pick

DECOMPOSE = pick("question_decomposition", " Forrest Gump film\n- FedEx delivery company")


def run(question, choices, max_passages=6, scores=(LOW, LOW, 0.9)):
    lm = FakeLM([answer("a"), answer("b"), answer("c")], [PRIOR], choices)
    components = Components(lm, OverlapRetriever(CORPUS), FakeProber(list(scores)), MethodsParams(max_passages=max_passages), k=2)
    trace = build_method("skill_rag", components).answer(question)
    assert lm.exhausted, "the script was not fully used"
    return trace, lm


@pytest.mark.parametrize(
    ("cap", "expected"),
    [(6, ["gump", "cast", "fedex", "zemeckis", "hanks"]), (4, ["gump", "cast", "fedex", "zemeckis"]), (2, ["gump", "cast"])],
)
def test_a_decomposition_retry_answers_over_the_earlier_passages_up_to_the_cap(cap, expected):
    """The sub-queries find gump, hanks (Forrest Gump film) and fedex; the first retrieval found
    cast and zemeckis: newest first, interleaved with the earlier ones, at most `cap`."""
    trace, lm = run(QUESTION, [DECOMPOSE], max_passages=cap)
    assert [r.stage for r in trace.rounds] == ["no_retrieval", "retrieval", "question_decomposition"]
    assert trace.rounds[1].passage_ids == ["cast", "zemeckis"]
    assert trace.rounds[2].passage_ids == expected
    prompt = lm.calls[-1][1]  # the retry's answer prompt
    for passage in CORPUS:
        assert (passage.text in prompt) == (passage.id in expected)


def test_probing_rag_re_retrieval_keeps_the_earlier_passages_too():
    lm = FakeLM([answer("a"), answer("Apollo 11 Moon humans"), answer("c")])
    components = Components(lm, OverlapRetriever(CORPUS), FakeProber([LOW, LOW, 0.9]), MethodsParams(), k=2)
    trace = build_method("probing_rag", components).answer(QUESTION)
    assert trace.rounds[2].stage == "requery"
    assert trace.rounds[2].passage_ids == ["moon", "cast", "zemeckis"]  # its new passage added to the earlier ones


def test_each_retrieving_round_records_whether_it_found_a_gold_passage_no_earlier_round_had():
    gold = Question(QUESTION.id, QUESTION.dataset, QUESTION.question, QUESTION.answers, meta={"gold_passage_ids": ["zemeckis", "fedex"]})
    trace, _ = run(gold, [DECOMPOSE])
    assert [r.gold_gain for r in trace.rounds] == [None, True, True]  # closed-book; zemeckis; fedex
    rewrite = pick("query_rewriting", " Robert Zemeckis director")  # finds zemeckis again: no gain
    trace, _ = run(gold, [rewrite])
    assert [r.gold_gain for r in trace.rounds] == [None, True, False]
    trace, _ = run(QUESTION, [DECOMPOSE])  # no gold passages named: unknown
    assert [r.gold_gain for r in trace.rounds] == [None, None, None]
