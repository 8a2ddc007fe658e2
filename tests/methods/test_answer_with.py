"""One CoT answer read back: strict and flexible answers and the token-budget flag reach the
round and the trace."""

from __future__ import annotations

from skillrag.config import MethodsParams
from skillrag.data.schema import Question
from skillrag.methods import Components, build_method
from skillrag.methods.base import Method, Session
from tests.fakes import CORPUS, FakeLM, OverlapRetriever, answer

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
        session.stop("exit", self.parts.params.abstain_answer)


def test_an_abstaining_exit_replaces_both_answers():
    parts = Components(FakeLM([answer("Tom Hanks")]), OverlapRetriever(CORPUS))
    trace = AbstainAfterOneRound(parts).answer(QUESTION)
    assert trace.rounds[0].flexible_answer == "Tom Hanks"
    assert trace.answer == trace.flexible_answer == MethodsParams().abstain_answer
