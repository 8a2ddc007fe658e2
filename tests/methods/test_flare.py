"""FLARE on a scripted LM whose token probabilities make the trigger fire or not, sentence by
sentence: the masked-sentence query, regeneration over the passages, and where the CoT ends."""

from __future__ import annotations

import pytest

from skillrag.config import FlareParams, MethodsParams
from skillrag.data.schema import Question
from skillrag.methods import Components, build_method
from tests.fakes import CORPUS, FakeLM, OverlapRetriever, scripted

QUESTION = Question("q1", "nq", "Who directed Cast Away?", ["Robert Zemeckis"])
LOW = 0.2  # below theta 0.5
ANSWER_LINE = ["\n", "Answer", ":", " Robert", " Zemeckis"]


def run(replies, theta=0.5, max_new_tokens=64, **flare):
    lm, retriever = FakeLM(replies), OverlapRetriever(CORPUS)
    params = MethodsParams(flare=FlareParams(theta=theta, look_ahead=16, **flare))
    trace = build_method("flare", Components(lm, retriever, params=params, k=2, max_new_tokens=max_new_tokens)).answer(
        QUESTION
    )
    assert lm.exhausted, "the script was not fully used"
    return trace, lm, retriever


def with_passages(*pieces: str, **kw):
    """A look-ahead that must be generated over retrieved passages."""

    def reply(prompt: str):
        assert "Passages:\n[1] " in prompt, "expected a prompt with the retrieved passages"
        return scripted(list(pieces), **kw)

    return reply


def test_confident_sentences_are_kept_without_retrieval_until_the_answer_line():
    cut_by_look_ahead = scripted([" Zemeckis", " directed", " it", ".", " He", " is"], stopped_by="length")
    trace, lm, retriever = run([cut_by_look_ahead, scripted([" American", ".", *ANSWER_LINE])])
    assert retriever.queries == []
    assert [r.stage for r in trace.rounds] == ["answer"]
    assert (trace.answer, trace.termination) == ("Robert Zemeckis", "done")
    assert trace.rounds[0].reasoning == "Zemeckis directed it. He is American."
    # every sentence of a look-ahead is used; the next look-ahead continues after them
    assert lm.calls[1][1].endswith("Rationale: Zemeckis directed it. He is")
    assert (trace.totals.llm_calls, trace.totals.retrievals, trace.totals.tokens_out) == (2, 0, 13)


def test_a_low_probability_token_retrieves_with_the_masked_sentence_and_regenerates():
    guess = [" Cast", " Away", " was", " directed", " by", " Tom", " Hanks", "."]
    probs = [0.9, 0.9, 0.9, 0.9, 0.9, LOW, LOW, 0.9]
    fixed = [" Cast", " Away", " was", " directed", " by", " Robert", " Zemeckis", "."]
    replies = [
        scripted([*guess, *ANSWER_LINE], probs=[*probs, *[0.9] * 5]),
        # regenerated over the passages: kept unchecked, even if unsure
        with_passages(*fixed, " He", probs=[*[LOW] * 8, 0.9], stopped_by="length"),
        with_passages(" is", " American", ".", *ANSWER_LINE),  # the passages stay in the prompt
    ]
    trace, _, retriever = run(replies)
    assert retriever.queries == ["Cast Away was directed by."]  # the regenerated sentence was not checked
    assert [r.stage for r in trace.rounds] == ["flare", "answer"]
    flare, final = trace.rounds
    assert flare.queries == ["Cast Away was directed by."] and flare.passage_ids == ["cast", "hanks"]
    assert flare.reasoning == "Cast Away was directed by Robert Zemeckis."
    assert (final.passage_ids, trace.answer, trace.termination) == (["cast", "hanks"], "Robert Zemeckis", "done")
    assert (trace.totals.retrievals, trace.totals.llm_calls) == (1, 3)


def test_a_probability_equal_to_theta_does_not_retrieve():
    trace, _, retriever = run([scripted([" Zemeckis", ".", *ANSWER_LINE], probs=[0.5] * 7)], theta=0.5)
    assert retriever.queries == [] and trace.answer == "Robert Zemeckis"


def test_when_masking_leaves_no_word_the_query_is_the_question_and_the_kept_text():
    replies = [
        scripted([" Zemeckis", " directed", " it", "."], stopped_by="length"),
        scripted([" 1952", ".", *ANSWER_LINE], probs=[LOW, LOW, *[0.9] * 5]),
        with_passages(" He", " was", " born", " in", " 1952", ".", *ANSWER_LINE),
    ]
    trace, _, retriever = run(replies)
    assert retriever.queries == ["Who directed Cast Away? Zemeckis directed it."]
    assert trace.rounds[-1].reasoning == "Zemeckis directed it. He was born in 1952."


def test_an_answer_line_whose_answer_is_masked_searches_with_the_question_not_the_label():
    replies = [
        scripted([" Zemeckis", " directed", " it", "."], stopped_by="length"),
        scripted(ANSWER_LINE, probs=[0.9, 0.9, 0.9, LOW, LOW]),
        with_passages(*ANSWER_LINE),
    ]
    trace, _, retriever = run(replies)
    assert retriever.queries == ["Who directed Cast Away? Zemeckis directed it."]
    assert trace.answer == "Robert Zemeckis"


def test_the_token_budget_ends_the_cot_without_an_answer():
    trace, lm, _ = run([scripted([" Zemeckis", " directed", " it", " and", " then"], stopped_by="length")], max_new_tokens=5)
    assert len(lm.calls) == 1
    assert (trace.answer, trace.termination, trace.rounds[-1].budget_hit) == ("", "max_rounds", True)


def test_theta_auto_reads_the_tuned_value_and_fails_clearly_without_it():
    lm, retriever = FakeLM([scripted([" Zemeckis", ".", *ANSWER_LINE], probs=[0.3] * 7)]), OverlapRetriever(CORPUS)
    tuned = Components(lm, retriever, k=2, thresholds={"methods.flare.theta": 0.25})
    trace = build_method("flare", tuned).answer(QUESTION)
    assert retriever.queries == [] and trace.answer == "Robert Zemeckis"  # 0.3 >= the tuned 0.25
    with pytest.raises(ValueError, match="skillrag tune-thresholds"):
        build_method("flare", Components(lm, retriever))


def test_max_iterations_bounds_the_sentences_and_the_tuning_score_reads_only_those():
    from skillrag.methods.flare import lowest_probability

    two = scripted([" Zemeckis", ".", " Born", " 1952", ".", *ANSWER_LINE], probs=[0.9, 0.9, 0.9, LOW, *[0.9] * 6])
    trace, _, retriever = run([two], max_iterations=1)
    assert retriever.queries == []  # the unsure second sentence is never reached
    assert (trace.rounds[-1].reasoning, trace.termination) == ("Zemeckis.", "max_rounds")
    assert lowest_probability(two, 1) == pytest.approx(0.9) and lowest_probability(two, 2) == pytest.approx(LOW)
