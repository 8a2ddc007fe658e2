"""Every path through the methods, on a scripted LM, scripted prober and a six-passage corpus."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from skillrag.config import MethodsParams, load_params
from skillrag.data.schema import Question
from skillrag.methods import Components, ReuseStats, ReusingLM, Round, Trace, build_method
from skillrag.methods.base import interleave
from skillrag.methods.exploration import (
    NEVER_ACCEPTS,
    FirstRetry,
    SkillExploration,
    build_router_dataset,
    explored_states,
    fixers,
)
from skillrag.skills import QUERY_SKILLS, LearnedRouter
from skillrag.skills.router import OPTIONS
from tests.conftest import REPO
from tests.fakes import CORPUS, FakeLM, FakeProber, OverlapRetriever, answer

QUESTION = Question("q1", "hotpotqa", "In what year was the director of Cast Away born?", ["1952"])
PRIOR = [0.0, 0.0, 0.0, 0.0]  # the router's one-off calibration call (content-free prompt), charged to no trace
LOW = 0.1  # a prober score that rejects


def pick(skill: str, output: str = "") -> tuple[list[float], str]:
    """A scripted route-and-write call: label likelihoods that favour `skill`, then its output."""
    return [0.0 if name == skill else -5.0 for name in OPTIONS], output


def run(name, replies, scores=(), choices=(), with_router=None, state_layers=(), **params):
    lm = FakeLM(replies, [PRIOR] if choices else [], choices)
    retriever = OverlapRetriever(CORPUS)
    prober = FakeProber(scores) if scores else None
    components = Components(
        lm,
        retriever,
        prober,
        MethodsParams(**params),
        k=2,
        max_new_tokens=16,
        router=with_router,
        state_layers=state_layers,
    )
    trace = build_method(name, components).answer(QUESTION)
    assert trace.termination == "error" or lm.exhausted, "the script was not fully used"
    return trace, lm, retriever


def stages(trace: Trace) -> list[str]:
    return [r.stage for r in trace.rounds]


def test_no_retrieval_answers_closed_book():
    trace, _, retriever = run("no_retrieval", [answer("1952", "He was born in 1952.")])
    assert stages(trace) == ["no_retrieval"]
    assert (trace.answer, trace.termination) == ("1952", "done")
    assert trace.rounds[0].reasoning == "He was born in 1952."
    assert trace.rounds[0].score is None and trace.rounds[0].passage_ids == []
    assert (trace.totals.llm_calls, trace.totals.retrievals, trace.totals.tokens_out) == (1, 0, 7)
    assert trace.totals.tokens_in > 0 and retriever.queries == []


def test_single_step_retrieves_once_with_the_question():
    trace, lm, retriever = run("single_step", [answer("1952")])
    assert retriever.queries == [QUESTION.question]
    round_ = trace.rounds[0]
    assert (round_.stage, round_.queries, round_.passage_ids) == (
        "retrieval",
        [QUESTION.question],
        ["cast", "zemeckis"],
    )
    assert round_.passage_titles == ["Cast Away", "Robert Zemeckis"]
    assert "Robert Zemeckis (born May 14, 1952)" in lm.calls[0][1]
    assert (trace.termination, trace.totals.retrievals) == ("done", 1)


@pytest.mark.parametrize("name", ["probing_rag", "skill_rag"])
def test_stage_one_accept_skips_retrieval(name):
    trace, _, retriever = run(name, [answer("1952")], scores=[0.9])
    assert stages(trace) == ["no_retrieval"]
    assert (trace.termination, trace.answer, trace.rounds[0].score) == ("accepted", "1952", 0.9)
    assert retriever.queries == []


@pytest.mark.parametrize("name", ["probing_rag", "skill_rag"])
def test_stage_two_accept_after_one_retrieval(name):
    trace, _, retriever = run(name, [answer("Tom Hanks"), answer("1952")], scores=[LOW, 0.8])
    assert stages(trace) == ["no_retrieval", "retrieval"]
    assert [r.accepted for r in trace.rounds] == [False, True]
    assert (trace.termination, trace.answer) == ("accepted", "1952")
    assert retriever.queries == [QUESTION.question]


def test_probing_rag_requeries_with_answer_then_reasoning_never_repeating():
    replies = [
        answer("Tom Hanks"),
        answer("Tom Hanks", "A."),
        answer("Tom Hanks", "Zemeckis directed it."),
        answer("1952"),
    ]
    trace, _, retriever = run("probing_rag", replies, scores=[LOW, LOW, LOW, 0.9])
    q = QUESTION.question
    assert stages(trace) == ["no_retrieval", "retrieval", "requery", "requery"]
    assert retriever.queries == [q, f"{q} Tom Hanks", f"{q} Zemeckis directed it."]
    assert (trace.termination, trace.answer) == ("accepted", "1952")


def test_probing_rag_stops_at_max_rounds_with_the_last_answer():
    replies = [answer("a"), answer("b"), answer("c"), answer("d")]
    trace, *_ = run("probing_rag", replies, scores=[LOW] * 4, max_rounds=2)
    assert stages(trace) == ["no_retrieval", "retrieval", "requery", "requery"]
    assert (trace.termination, trace.answer, trace.totals.llm_calls) == ("max_rounds", "d", 4)


def test_probing_rag_is_exhausted_when_every_requery_was_issued():
    trace, *_ = run("probing_rag", ["", ""], scores=[LOW, LOW])
    assert stages(trace) == ["no_retrieval", "retrieval"]
    assert trace.termination == "exhausted"


SKILL_OUTPUTS = {
    "query_rewriting": (" Robert Zemeckis birth year", ["Robert Zemeckis birth year"]),
    "question_decomposition": (
        " director of Cast Away\n- Robert Zemeckis born",
        ["director of Cast Away", "Robert Zemeckis born"],
    ),
    "evidence_focusing": (" Robert Zemeckis year of birth", ["Robert Zemeckis year of birth"]),
}


@pytest.mark.parametrize("skill", QUERY_SKILLS)
def test_skill_round_uses_the_routed_skill_and_its_queries(skill):
    output, queries = SKILL_OUTPUTS[skill]
    replies = [answer("Tom Hanks"), answer("Steven Spielberg"), answer("1952")]
    trace, lm, retriever = run("skill_rag", replies, scores=[LOW, LOW, 0.9], choices=[pick(skill, output)])
    assert lm.kinds() == ["cot", "cot", "calibrate", "route", "cot"]
    assert stages(trace) == ["no_retrieval", "retrieval", skill]
    third = trace.rounds[2]
    assert third.queries == queries and retriever.queries == [QUESTION.question, *queries]
    assert third.router_scores[skill] == 0.0 and set(third.router_scores) == set(OPTIONS)
    assert third.fallbacks == []
    assert "zemeckis" in third.passage_ids
    # one call to route and write the queries, one to answer (the calibration is the run's cost)
    assert (third.cost.llm_calls, third.cost.retrievals) == (2, len(queries))
    assert (trace.termination, trace.answer, trace.totals.llm_calls) == ("accepted", "1952", 4)


@pytest.mark.parametrize(
    ("mode", "expected"), [("answer", "Steven Spielberg"), ("abstain", "I cannot answer this question.")]
)
def test_exit_stops_with_current_answer_or_abstains(mode, expected):
    replies = [answer("Tom Hanks"), answer("Steven Spielberg")]
    trace, lm, _ = run("skill_rag", replies, scores=[LOW, LOW], choices=[pick("exit")], exit_mode=mode)
    assert stages(trace) == ["no_retrieval", "retrieval", "exit"]
    assert (trace.termination, trace.answer, trace.rounds[-1].answer) == ("exit", expected, expected)
    assert lm.kinds() == ["cot", "cot", "calibrate", "route"]


def test_skill_rag_stops_at_max_rounds():
    replies = [answer("a"), answer("b"), answer("c"), answer("d")]
    choices = [
        pick("query_rewriting", " Zemeckis film director"),
        pick("evidence_focusing", " Forrest Gump director"),
    ]
    trace, *_ = run("skill_rag", replies, scores=[LOW] * 4, choices=choices, max_rounds=2)
    assert stages(trace) == ["no_retrieval", "retrieval", "query_rewriting", "evidence_focusing"]
    assert (trace.termination, trace.answer) == ("max_rounds", "d")
    assert trace.totals.llm_calls == 2 + 2 * 2  # stages 1-2, (route+write, answer) per retry


def test_a_repeated_skill_query_is_replaced_by_the_fallback():
    replies = [answer("a"), answer("Robert Zemeckis"), answer("b"), answer("c")]
    choices = [
        pick("query_rewriting", " Zemeckis birth year"),
        pick("query_rewriting", " birth year Zemeckis"),
    ]
    trace, _, retriever = run("skill_rag", replies, scores=[LOW, LOW, LOW, 0.9], choices=choices)
    repeat = trace.rounds[3]
    assert repeat.fallbacks == ["query_rewriting: output repeats an issued query -> fallback"]
    assert repeat.queries == ["year director cast away born b"]  # question words + current answer
    assert len({frozenset(q.lower().split()) for q in retriever.queries}) == len(retriever.queries)


def test_unusable_router_scores_fall_back_to_the_fixed_order():
    nan = float("nan")
    replies = [answer("a"), answer("b"), answer("1952")]
    choices = [([nan, nan, nan, nan], " Robert Zemeckis born")]
    trace, *_ = run("skill_rag", replies, scores=[LOW, LOW, 0.9], choices=choices)
    round_ = trace.rounds[2]
    assert round_.stage == "query_rewriting"  # first in the fixed order
    assert round_.fallbacks[0].startswith("router: scores cannot decide")
    assert set(trace.to_dict()["rounds"][2]["router_scores"].values()) == {None}


@pytest.mark.parametrize(
    ("output", "why"),
    [("", "is empty"), (" In what year was the director of Cast Away born", "echoes the question")],
)
def test_unusable_skill_output_falls_back(output, why):
    replies = [answer("a"), answer("Robert Zemeckis"), answer("1952")]
    trace, *_ = run("skill_rag", replies, scores=[LOW, LOW, 0.9], choices=[pick("query_rewriting", output)])
    round_ = trace.rounds[2]
    assert round_.fallbacks == [f"query_rewriting: output {why} -> fallback"]
    assert round_.queries == ["year director cast away born robert zemeckis"]


def test_an_lm_error_ends_the_question_not_the_run():
    trace, *_ = run("skill_rag", [answer("a"), RuntimeError("CUDA out of memory")], scores=[LOW])
    assert (trace.termination, trace.answer, trace.error) == ("error", "", "RuntimeError: CUDA out of memory")
    assert stages(trace) == ["no_retrieval"]
    assert (trace.totals.llm_calls, trace.totals.retrievals) == (
        2,
        1,
    )  # the failed call and its retrieval count


def test_on_round_sees_each_round_as_it_is_recorded():
    seen: list[Round] = []
    lm = FakeLM([answer("a"), answer("1952")])
    method = build_method(
        "probing_rag", Components(lm, OverlapRetriever(CORPUS), FakeProber([LOW, 0.9]), k=2)
    )
    trace = method.answer(QUESTION, on_round=seen.append)
    assert seen == trace.rounds and len(seen) == 2


def test_learned_router_routes_without_an_llm_call():
    router = LearnedRouter(
        (2, 4),
        ("evidence_focusing", "query_rewriting"),
        np.zeros(8, np.float32),
        np.ones(8, np.float32),
        np.zeros((2, 8), np.float32),
        np.array([1.0, 0.0], np.float32),
    )
    replies = [answer("a"), answer("b"), " Robert Zemeckis born", answer("1952")]
    trace, lm, _ = run("skill_rag", replies, scores=[LOW, LOW, 0.9], with_router=router, router="learned")
    assert trace.rounds[2].cost.llm_calls == 2  # the skill writes its query, then the answer
    assert lm.kinds() == ["cot", "cot", "skill_evidence_focusing", "cot"]
    assert trace.rounds[2].stage == "evidence_focusing"
    assert set(trace.rounds[2].router_scores) == {"evidence_focusing", "query_rewriting"}


def right(answer_text: str, golds) -> bool:
    return answer_text in golds


def explore(replies, choices=()):
    lm = FakeLM(replies, [], choices)
    components = Components(
        lm, OverlapRetriever(CORPUS), None, MethodsParams(), k=2, max_new_tokens=16, state_layers=(2, 4)
    )
    trace = SkillExploration(components, right).answer(QUESTION)
    assert lm.exhausted, "the script was not fully used"
    return trace, lm


RAW = [-3.0, -1.0, -2.0, -4.0]  # the router's raw label log-likelihoods on the failure state (OPTIONS order)


def test_exploration_tries_every_skill_from_the_failure_and_scores_the_labels_in_the_first_skills_call():
    replies = [
        answer("Tom Hanks"),  # single step: wrong by gold, a failure state
        answer("2000"),  # rewriting's answer (its query came with the label scores)
        " director of Cast Away\n- Robert Zemeckis born",  # decomposition's sub-queries
        answer("1952"),  # right
        " Zemeckis birth year",  # focusing's query: tried although decomposition already helped
        answer("1952"),
    ]
    trace, lm = explore(replies, [(RAW, " Cast Away film")])
    assert stages(trace) == ["retrieval", *QUERY_SKILLS]
    assert lm.kinds() == ["cot", "route", "cot", "skill_question_decomposition", "cot", "skill_evidence_focusing", "cot"]
    assert trace.rounds[1].queries == ["Cast Away film"] and trace.rounds[1].router_scores == dict(zip(OPTIONS, RAW))
    assert trace.rounds[1].score is None  # no prober: the labels come from gold
    # every skill starts from the failure's evidence, not from the previous skill's
    assert set(trace.rounds[0].passage_ids) <= set(trace.rounds[2].passage_ids)
    assert fixers(trace, right) == {"question_decomposition", "evidence_focusing"}
    x, labels = build_router_dataset([trace], right)
    assert labels == ["question_decomposition"] and x.shape == (1, FakeLM.hidden_size)  # the first that fixed it
    assert np.allclose(x[0], trace.rounds[0].state)
    (state,) = explored_states([trace], right)
    assert state.raw == tuple(RAW) and state.fixers == {"question_decomposition", "evidence_focusing"}


def test_exploration_labels_exit_when_no_skill_helps_and_leaves_right_answers_alone():
    replies = [answer("Tom Hanks"), answer("a"), " Cast Away\n- FedEx", answer("b"), "", answer("c")]
    trace, _ = explore(replies, [(RAW, " Cast Away film")])
    assert stages(trace)[1:] == list(QUERY_SKILLS)
    assert build_router_dataset([trace], right)[1] == ["exit"] and fixers(trace, right) == frozenset()
    solved, lm = explore([answer("1952")])  # the retry evidence comes from the methods' own retries (FirstRetry)
    assert stages(solved) == ["retrieval"] and lm.kinds() == ["cot"] and build_router_dataset([solved], right)[1] == []


OFFSETS = dict.fromkeys(OPTIONS, 0.0)  # fitted offsets: the prompt router needs no calibration call


def first_retry(name, replies, choices=(), **params):
    lm = FakeLM(replies, [], choices)
    components = Components(
        lm, OverlapRetriever(CORPUS), NEVER_ACCEPTS, MethodsParams(**params), k=2, max_new_tokens=16, router_offsets=OFFSETS
    )
    trace = FirstRetry(build_method(name, components)).answer(QUESTION)
    assert lm.exhausted, "the script was not fully used"
    return trace, lm


def test_first_retry_runs_skill_rags_own_router_and_skill_once_after_the_single_step_answer():
    trace, lm = first_retry(
        "skill_rag", [answer("Tom Hanks"), answer("1952")], [pick("question_decomposition", " director of Cast Away\n- Robert Zemeckis born")]
    )
    assert stages(trace) == ["retrieval", "question_decomposition"] and lm.kinds() == ["cot", "route", "cot"]
    assert (trace.answer, trace.termination, trace.totals.llm_calls) == ("1952", "done", 3)
    assert all(r.score is None and r.accepted is None for r in trace.rounds)  # ungated: no prober is consulted
    assert trace.rounds[1].router_scores == pytest.approx(dict(zip(OPTIONS, pick("question_decomposition")[0])))


def test_first_retry_keeps_the_answer_when_skill_rags_router_exits_and_requeries_for_probing_rag():
    exited, _ = first_retry("skill_rag", [answer("Tom Hanks")], [pick("exit")])
    assert stages(exited) == ["retrieval", "exit"] and (exited.answer, exited.termination) == ("Tom Hanks", "exit")
    requeried, lm = first_retry("probing_rag", [answer("Tom Hanks"), answer("1952")])
    assert stages(requeried) == ["retrieval", "requery"] and requeried.answer == "1952" and lm.kinds() == ["cot", "cot"]
    assert requeried.rounds[1].queries == [f"{QUESTION.question} Tom Hanks"]


def test_skill_rag_costs_two_calls_per_retry_against_probing_rags_one():
    """Same question, every answer rejected, max_rounds=3: Probing-RAG 2 + 3 calls; Skill-RAG
    2 + 2 x 3 (route and write, answer); the router's one-off calibration is charged to the run."""
    probing, *_ = run("probing_rag", [answer(x) for x in "abcde"], scores=[LOW] * 5, max_rounds=3)
    queries = [" Zemeckis film director", " Forrest Gump director", " FedEx company"]
    choices = [pick(skill, q) for skill, q in zip(QUERY_SKILLS, queries)]
    skill, *_ = run(
        "skill_rag", [answer(x) for x in "abcde"], scores=[LOW] * 5, choices=choices, max_rounds=3
    )
    assert (probing.totals.llm_calls, skill.totals.llm_calls) == (5, 8)
    assert [r.cost.llm_calls for r in skill.rounds] == [1, 1, 2, 2, 2]


def test_factory_rejects_what_it_cannot_build():
    lm, retriever = FakeLM(), OverlapRetriever(CORPUS)
    with pytest.raises(ValueError, match="unknown method 'self_rag'"):
        build_method("self_rag", Components(lm, retriever))
    with pytest.raises(ValueError, match="needs a trained prober"):
        build_method("probing_rag", Components(lm, retriever))
    with pytest.raises(ValueError, match="pass the trained router"):
        build_method("skill_rag", Components(lm, retriever, FakeProber([]), MethodsParams(router="learned")))


def test_a_method_built_from_params_retrieves_k_passages_cut_to_passage_words():
    params = load_params(REPO / "params.yaml", overrides=["retrieval.k=2", "retrieval.passage_words=3"])
    lm = FakeLM([answer("1952")])
    components = Components.from_params(params, lm, OverlapRetriever(CORPUS))
    trace = build_method("single_step", components).answer(QUESTION)
    assert trace.rounds[0].passage_ids == ["cast", "zemeckis"]
    prompt = lm.calls[0][1]
    assert "Cast Away is" in prompt and "2000 film" not in prompt and "Robert Zemeckis (born" in prompt


def test_interleave_alternates_lists_without_duplicates_up_to_k():
    a, b, c, d = CORPUS[:4]
    assert interleave([[a, b, c], [b, d]], k=3) == [a, b, d]
    assert interleave([[a], [c, d], []], k=5) == [a, c, d]


def test_follow_up_evidence_is_interleaved_with_the_previous_passages():
    replies = [answer("a"), answer("b"), answer("c")]
    choices = [pick("query_rewriting", " Apollo 11 Moon landing")]
    trace, *_ = run("skill_rag", replies, scores=[LOW, LOW, 0.9], choices=choices)
    assert [r.passage_ids for r in trace.rounds[1:]] == [["cast", "zemeckis"], ["moon", "cast", "zemeckis"]]


def test_a_reused_answer_is_charged_to_every_method_that_uses_it():
    """probing_rag's stage 1 is no_retrieval's answer: computed once, charged to both traces."""
    inner = FakeLM([answer("1952", "He was born in 1952.")])  # one reply: the second method must reuse it
    lm = ReusingLM(inner, capacity=8)
    components = Components(lm, OverlapRetriever(CORPUS), FakeProber([0.9, 0.9]), k=2, max_new_tokens=16)
    closed = build_method("no_retrieval", components).answer(QUESTION)
    gated = build_method("probing_rag", components).answer(QUESTION)
    assert inner.exhausted and len(inner.calls) == 1
    assert (gated.rounds[0].answer, gated.rounds[0].reasoning) == (closed.rounds[0].answer, "He was born in 1952.")
    assert replace(gated.totals, latency_s=0.0) == replace(closed.totals, latency_s=0.0)
    assert (gated.totals.llm_calls, gated.totals.tokens_out) == (1, 7) and gated.totals.tokens_in > 0
    assert lm.stats == ReuseStats(lookups=2, hits=1)
