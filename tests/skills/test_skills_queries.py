"""Query helpers, the three query skills (parse, echo, repeat, fallback) and the exit skill."""

from __future__ import annotations

import pytest

from skillrag.data.schema import Passage
from skillrag.skills import EvidenceFocusing, FailureState, QueryRewriting, QuestionDecomposition, exit_answer
from skillrag.skills.base import copies_exemplar, render
from skillrag.skills.decompose import clauses, entity_spans
from skillrag.skills.queries import clean_query, fresh, is_echo, keywords, query_key
from tests.fakes import FakeLM

QUESTION = (
    "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
)
PASSAGES = (
    Passage(
        "p1",
        "Kiss and Tell (1945 film)",
        "Kiss and Tell is a 1945 comedy film starring Shirley Temple as Corliss Archer.",
    ),
)


def state(**changes) -> FailureState:
    base = {
        "question": QUESTION,
        "reasoning": "The film starred Shirley Temple.",
        "answer": "Shirley Temple",
        "passages": PASSAGES,
        "hidden": None,
        "round": 1,
        "issued": frozenset({query_key(QUESTION)}),
    }
    return FailureState(**(base | changes))


def test_query_identity_is_the_content_word_set():
    assert keywords("Who wrote the novel Jurassic Park?") == ["wrote", "novel", "jurassic", "park"]
    assert query_key("Jurassic Park novel author") == query_key("author of the novel, Jurassic park")
    assert fresh(["jurassic park", "Park Jurassic!", "the of", "crichton"], [query_key("novel")]) == [
        "jurassic park",
        "crichton",
    ]
    assert fresh(["jurassic park"], [query_key("Jurassic Park")]) == []


def test_echo_is_near_total_content_word_overlap():
    assert is_echo("government position held woman portrayed Corliss Archer film Kiss Tell", QUESTION)
    assert not is_echo("Shirley Temple government position", QUESTION)
    assert not is_echo("", QUESTION)


@pytest.mark.parametrize(
    "line",
    [
        'Query: "Shirley Temple diplomat"',
        "- Shirley Temple diplomat.",
        "2) search query: Shirley Temple diplomat?",
        "  Shirley Temple diplomat",
    ],
)
def test_clean_query_strips_labels_bullets_and_quotes(line):
    assert clean_query(line) == "Shirley Temple diplomat"


def test_the_router_prompt_renders_the_failure_state_after_a_shared_prefix():
    prefix, body = render(state().fields())
    assert prefix.endswith("\n\n") and "{" not in prefix + body
    assert QUESTION in body and QUESTION not in prefix
    assert "Kiss and Tell (1945 film)" in body and body.endswith("Next step:")
    for skill in (QueryRewriting, QuestionDecomposition, EvidenceFocusing):
        assert f"Next step:{skill.label}{skill.lead}" in prefix  # every skill has an exemplar


def test_a_skill_reads_the_output_it_is_given_without_an_lm_call():
    lm = FakeLM()
    result = EvidenceFocusing(lm).apply(state(), " Shirley Temple diplomatic posts")
    assert result.queries == ("Shirley Temple diplomatic posts",) and lm.calls == []


def test_a_skill_chosen_without_the_lm_writes_after_its_label_on_the_router_prompt():
    lm = FakeLM([" Shirley Temple ambassador"])
    assert QueryRewriting(lm).apply(state()).queries == ("Shirley Temple ambassador",)
    assert lm.kinds() == ["skill_query_rewriting"]
    assert lm.calls[0][1].endswith("Answer: Shirley Temple\nNext step: rewrite\nQuery:")


def test_rewriting_returns_the_generated_query():
    lm = FakeLM([" Shirley Temple United States ambassador\nQuery: more"])
    result = QueryRewriting(lm).apply(state())
    assert (result.queries, result.fallback) == (("Shirley Temple United States ambassador",), None)


@pytest.mark.parametrize(
    ("output", "why"),
    [
        ("", "is empty"),
        (" " + QUESTION, "echoes the question"),
        (" Kiss and Tell Shirley Temple", "repeats an issued query"),
    ],
)
def test_rewriting_falls_back_on_unusable_output(output, why):
    issued = state().issued | {query_key("Shirley Temple Kiss and Tell")}
    result = QueryRewriting(FakeLM([output])).apply(state(issued=issued))
    assert result.fallback == f"query_rewriting: output {why} -> fallback"
    assert result.queries == (
        "government position held woman portrayed corliss archer film kiss tell shirley temple",
    )


def test_a_fallback_issued_before_gives_no_query_and_says_so():
    rewrite_fallbacks = QueryRewriting(FakeLM()).fallback(state())
    issued = state().issued | {query_key(q) for q in rewrite_fallbacks}
    result = QueryRewriting(FakeLM([""])).apply(state(issued=issued))
    assert result.queries == ()
    assert result.fallback.endswith("; the fallback was issued before too")


def test_decomposition_keeps_up_to_three_fresh_sub_queries():
    output = (
        " Corliss Archer in Kiss and Tell\n- "
        + QUESTION
        + "\n- the\n- Shirley Temple career\n- Temple\n- Tell"
    )
    result = QuestionDecomposition(FakeLM([output])).apply(state())
    assert result.queries == ("Corliss Archer in Kiss and Tell", "Shirley Temple career", "Temple")


def test_a_copy_of_a_few_shot_example_takes_the_fallback():
    """Decomposition on an unrelated question returned its exemplar's sub-queries."""
    copied = (
        " film starring Tom Hanks as a FedEx employee stranded on an island\n- director of the film Cast Away"
    )
    result = QuestionDecomposition(FakeLM()).apply(state(), copied)
    assert result.fallback == "question_decomposition: output copies a few-shot example -> fallback"
    assert result.queries == ("government position held woman", "portrayed corliss archer film kiss tell")
    focus = EvidenceFocusing(FakeLM()).apply(state(), " Antoine de Saint-Exupery death")
    assert focus.fallback == "evidence_focusing: output copies a few-shot example -> fallback"


def test_a_query_about_an_exemplar_topic_is_no_copy_when_the_question_asks_about_it():
    question = "Where did Antoine de Saint-Exupery die?"
    about = state(question=question, issued=frozenset({query_key(question)}))
    result = EvidenceFocusing(FakeLM()).apply(about, " Antoine de Saint-Exupery death")
    assert (result.queries, result.fallback) == (("Antoine de Saint-Exupery death",), None)
    assert copies_exemplar("Antoine de Saint-Exupery death", state())
    assert not copies_exemplar("Shirley Temple death", state())


def test_decomposition_fallback_splits_clauses_without_breaking_titles():
    assert clauses(QUESTION) == ["government position held woman", "portrayed corliss archer film kiss tell"]
    assert entity_spans('Who wrote "The Old Man and the Sea"?') == ["old man sea"]
    result = QuestionDecomposition(FakeLM([""])).apply(state())
    assert result.queries == ("government position held woman", "portrayed corliss archer film kiss tell")


def test_decomposition_fallback_uses_entity_spans_for_a_one_clause_question():
    question = "Where was Cast Away filmed?"
    result = QuestionDecomposition(FakeLM([""])).apply(state(question=question, issued=frozenset()))
    assert result.queries == ("cast away", "cast away filmed")


def test_focusing_fallback_searches_question_terms_missing_from_the_evidence():
    result = EvidenceFocusing(FakeLM([" Shirley Temple diplomatic posts"])).apply(state())
    assert result.queries == ("Shirley Temple diplomatic posts",)
    fallback = EvidenceFocusing(FakeLM([""])).apply(state())
    assert fallback.queries == ("government position held woman portrayed shirley temple",)


def test_exit_keeps_the_answer_or_abstains():
    assert exit_answer("Paris", "answer", "I cannot answer.") == "Paris"
    assert exit_answer("Paris", "abstain", "I cannot answer.") == "I cannot answer."
