"""One CoT answer read back (skillrag.answering): strict and flexible answers and the
token-budget flag reach the round and the trace; an answer without an `Answer:` line is never
accepted by a checker; each stage's cut applies to its answers."""

from __future__ import annotations

from skillrag.answering import NO_ANSWER, ProberChecker, answer_batch
from skillrag.config import MethodsParams
from skillrag.data.schema import Question
from skillrag.methods import Components, build_method
from skillrag.methods.base import Method, Session
from tests.fakes import CORPUS, FakeLM, FakeProber, OverlapRetriever, answer

QUESTION = Question("q1", "nq", "Who directed Cast Away?", ["Robert Zemeckis"])


class BudgetLM(FakeLM):
    """FakeLM whose generations all end on the token budget."""

    def generate(self, prompts, max_new_tokens, stop=(), capture=None, prefix=None):
        out = super().generate(prompts, max_new_tokens, stop, capture, prefix)
        for gen in out:
            gen.stopped_by = "length"
        return out


def run(name, lm):
    return build_method(name, Components(lm, OverlapRetriever(CORPUS), k=2)).answer(QUESTION)


def test_a_generation_cut_by_the_budget_is_recorded_and_has_no_strict_answer():
    trace = run(
        "single_step", BudgetLM([" The director is Zemeckis. The film Cast Away is a 2000 film directed"])
    )
    round_ = trace.rounds[0]
    assert round_.budget_hit and (round_.answer, trace.answer) == ("", "")
    assert round_.flexible_answer == trace.flexible_answer == "The director is Zemeckis."


def test_a_generation_that_stops_on_its_own_is_not_a_budget_hit():
    trace = run("no_retrieval", FakeLM([answer("Robert Zemeckis")]))
    assert not trace.rounds[0].budget_hit
    assert trace.answer == trace.flexible_answer == "Robert Zemeckis"


class AbstainAfterOneRound(Method):
    """Answers closed-book, then stops as an abstaining exit does."""

    name = "abstain_after_one_round"

    def run(self, session: Session) -> None:
        session.answer_round("no_retrieval")
        session.stop("exit", self.components.params.abstain_answer)


def test_an_abstaining_exit_replaces_both_answers():
    components = Components(FakeLM([answer("Tom Hanks")]), OverlapRetriever(CORPUS))
    trace = AbstainAfterOneRound(components).answer(QUESTION)
    assert trace.rounds[0].flexible_answer == "Tom Hanks"
    assert trace.answer == trace.flexible_answer == MethodsParams().abstain_answer


def test_an_answer_without_an_answer_line_is_a_failure_state_whatever_the_prober_says():
    lm = FakeLM([" He made many films. Zemeckis, probably", answer("Robert Zemeckis")])
    prober = FakeProber([0.99, 0.99])
    trace = build_method("probing_rag", Components(lm, OverlapRetriever(CORPUS), prober, k=2)).answer(QUESTION)
    unread, over_passages = trace.rounds
    assert (unread.answer, unread.score, unread.accepted) == ("", 0.99, False)
    assert unread.fallbacks == [NO_ANSWER]
    assert over_passages.accepted and over_passages.fallbacks == []
    assert (trace.termination, trace.answer) == ("accepted", "Robert Zemeckis")


def test_an_empty_answer_line_is_rejected_too_and_the_loop_cannot_end_accepted_on_it():
    lm = FakeLM([answer(""), answer("")] + [answer("")] * 3)
    prober = FakeProber([0.99] * 5)
    trace = build_method("probing_rag", Components(lm, OverlapRetriever(CORPUS), prober, k=2)).answer(QUESTION)
    assert not any(r.accepted for r in trace.rounds if r.score is not None)
    assert trace.termination != "accepted"


def test_the_gate_judges_closed_book_answers_before_retrieval_and_answers_over_passages_after_evidence():
    prober = FakeProber([0.5, 0.5], cuts={"before_retrieval": 0.6, "after_evidence": 0.4})
    lm = FakeLM([answer("Tom Hanks"), answer("Robert Zemeckis")])
    closed, over = answer_batch(
        lm, [QUESTION.question] * 2, [[], CORPUS[:1]], ProberChecker(prober), max_new_tokens=8, capture=(1,)
    )
    assert (closed.accepted, over.accepted) == (False, True)
    assert closed.generation.pooled is not None and set(closed.hidden) == {1, 2, 4}
