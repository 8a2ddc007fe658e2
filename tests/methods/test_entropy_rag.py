"""entropy_rag: Probing-RAG's rounds, the answer's mean token entropy in the prober's place."""

from __future__ import annotations

import pytest

from skillrag.config import EntropyRAGParams, MethodsParams
from skillrag.data.schema import Question
from skillrag.methods import METHODS, Components, build_method
from tests.fakes import CORPUS, FakeLM, OverlapRetriever, scripted

QUESTION = Question("q1", "hotpotqa", "In what year was the director of Cast Away born?", ["1952"])


def reply(answer: str, entropy: float):
    return scripted([" Thinking", ".", "\n", "Answer", ":", f" {answer}"], entropies=[entropy] * 6)


def run(replies, cut=0.5, **params):
    lm, retriever = FakeLM(replies), OverlapRetriever(CORPUS)
    methods = MethodsParams(entropy_rag=EntropyRAGParams(cut=cut), **params)
    trace = build_method("entropy_rag", Components(lm, retriever, params=methods, k=2)).answer(QUESTION)
    assert lm.exhausted, "the script was not fully used"
    return trace, retriever


def test_a_confident_closed_book_answer_is_accepted_without_retrieval():
    trace, retriever = run([reply("1952", 0.5)])
    assert retriever.queries == []
    assert [(r.stage, r.score, r.accepted) for r in trace.rounds] == [("no_retrieval", 0.5, True)]
    assert (trace.termination, trace.answer) == ("accepted", "1952")


def test_an_unsure_answer_retrieves_with_the_question_then_requeries_like_probing_rag():
    trace, retriever = run([reply("Tom Hanks", 1.2), reply("Tom Hanks", 0.9), reply("1952", 0.2)])
    q = QUESTION.question
    assert retriever.queries == [q, f"{q} Tom Hanks"]
    assert [r.stage for r in trace.rounds] == ["no_retrieval", "retrieval", "requery"]
    assert [r.score for r in trace.rounds] == pytest.approx([1.2, 0.9, 0.2])
    assert [r.accepted for r in trace.rounds] == [False, False, True]
    assert (trace.termination, trace.answer) == ("accepted", "1952")


def test_max_rounds_ends_an_answer_that_stays_unsure():
    trace, _ = run([reply(x, 2.0) for x in "abc"], max_rounds=1)
    assert (trace.termination, trace.answer, len(trace.rounds)) == ("max_rounds", "c", 3)


def test_it_needs_no_prober_and_an_auto_cut_is_the_tuned_one():
    assert not METHODS["entropy_rag"].needs_prober
    lm = FakeLM([reply("1952", 0.7)])
    components = Components(lm, OverlapRetriever(CORPUS), thresholds={"methods.entropy_rag.cut": 0.8})
    trace = build_method("entropy_rag", components).answer(QUESTION)
    assert (trace.rounds[0].accepted, trace.termination) == (True, "accepted")
    with pytest.raises(ValueError, match="skillrag tune-thresholds"):
        build_method("entropy_rag", Components(lm, OverlapRetriever(CORPUS)))
