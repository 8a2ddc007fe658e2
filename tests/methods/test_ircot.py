"""IRCoT's interleaving on a scripted LM: the query each step forms, the passages it collects,
where it stops."""

from __future__ import annotations

from skillrag.config import IrcotParams, MethodsParams
from skillrag.methods import Components, build_method
from skillrag.methods.ircot import next_thought
from tests.fakes import CORPUS, FakeLM, FakeProber, OverlapRetriever
from tests.methods.test_methods_pipelines import QUESTION, stages


def run_ircot(replies, max_steps=4, max_passages=15):
    lm, retriever = FakeLM(replies), OverlapRetriever(CORPUS)
    params = MethodsParams(ircot=IrcotParams(max_steps=max_steps, max_passages=max_passages))
    trace = build_method("ircot", Components(lm, retriever, params=params, k=2, max_new_tokens=16)).answer(QUESTION)
    assert lm.exhausted, "the script was not fully used"
    return trace, lm, retriever


def test_each_step_keeps_the_first_sentence_retrieves_with_it_and_stops_at_the_answer():
    trace, lm, retriever = run_ircot(
        [
            " Cast Away was directed by Robert Zemeckis. He was born in 1952.\nAnswer: 1952",
            " Robert Zemeckis was born in May 1952.\nAnswer: 1952",
        ]
    )
    first = "Cast Away was directed by Robert Zemeckis."
    assert retriever.queries == [QUESTION.question, first]
    assert stages(trace) == ["retrieval", "ircot"]
    assert [r.queries for r in trace.rounds] == [[QUESTION.question], [first]]
    # the new query's passages first, interleaved with those already collected, each once
    assert [r.passage_ids for r in trace.rounds] == [["cast", "zemeckis"], ["cast", "gump", "zemeckis"]]
    assert lm.calls[1][1].endswith(f"Question: {QUESTION.question}\nRationale: {first}")
    assert "[3] Robert Zemeckis:" in lm.calls[1][1]
    assert trace.rounds[0].answer == "" and trace.rounds[0].reasoning == first
    assert (trace.answer, trace.termination) == ("1952", "done")
    assert trace.rounds[1].reasoning == f"{first} Robert Zemeckis was born in May 1952."
    assert (trace.totals.llm_calls, trace.totals.retrievals) == (2, 2)


def test_the_first_step_answers_when_its_sentence_is_followed_by_the_answer_line():
    trace, _, retriever = run_ircot([" Zemeckis was born in 1952.\nAnswer: 1952"])
    assert retriever.queries == [QUESTION.question]
    assert (stages(trace), trace.answer, trace.termination) == (["retrieval"], "1952", "done")


def test_the_last_step_keeps_its_whole_continuation():
    trace, _, retriever = run_ircot(
        [" Cast Away is a film. It was made in 2000.", " Zemeckis directed it. He was born in 1952.\nAnswer: 1952"],
        max_steps=2,
    )
    assert retriever.queries == [QUESTION.question, "Cast Away is a film."]
    assert (trace.answer, trace.termination) == ("1952", "max_rounds")
    assert trace.rounds[-1].reasoning == "Cast Away is a film. Zemeckis directed it. He was born in 1952."


def test_the_passages_kept_are_bounded():
    trace, _, _ = run_ircot(
        [" Cast Away was directed by Robert Zemeckis. More.", " Done.\nAnswer: 1952"], max_passages=2
    )
    assert [len(r.passage_ids) for r in trace.rounds] == [2, 2]
    assert trace.rounds[1].passage_ids == ["cast", "gump"]


def test_saying_the_answer_is_or_writing_nothing_ends_the_reasoning():
    said, _, retriever = run_ircot([" So the answer is 1952. Then more."])
    assert retriever.queries == [QUESTION.question] and said.termination == "done"
    # no answer line written: no strict answer, as for every method; the flexible one reads the sentence
    assert said.answer == "" and said.flexible_answer == "1952."
    assert next_thought("") == ("", True)
    assert next_thought(" Born in 1952") == (" Born in 1952", False)  # one unfinished sentence: go on


def test_a_repeated_sentence_is_retrieved_with_again_as_in_the_paper():
    trace, _, retriever = run_ircot(
        [" Cast Away was directed by Robert Zemeckis. More.", " Cast Away was directed by Robert Zemeckis. More.", " So 1952.\nAnswer: 1952"]
    )
    assert retriever.queries == [QUESTION.question, *["Cast Away was directed by Robert Zemeckis."] * 2]
    assert (trace.answer, trace.termination) == ("1952", "done")


def test_an_unfinished_fragment_is_completed_and_the_whole_sentence_is_the_query():
    trace, lm, retriever = run_ircot([" Robert Zemeckis", " directed Cast Away. He was born in 1952.", " So.\nAnswer: 1952"])
    assert retriever.queries == [QUESTION.question, "Robert Zemeckis", "Robert Zemeckis directed Cast Away."]
    assert lm.calls[1][1].endswith("Rationale: Robert Zemeckis")
    assert (trace.answer, trace.termination) == ("1952", "done")


def test_a_sentence_saying_the_answer_keeps_the_answer_line_its_step_goes_on_to_write():
    first, _, _ = run_ircot([" So the answer is 1952. Zemeckis was born then.\nAnswer: 1952"])
    assert (first.answer, first.termination, len(first.rounds)) == ("1952", "done", 1)
    assert first.rounds[0].reasoning == "So the answer is 1952. Zemeckis was born then."
    later, _, retriever = run_ircot(
        [" Cast Away was directed by Robert Zemeckis. More.", " The answer is 1952. He was born then.\nAnswer: 1952"]
    )
    assert retriever.queries == [QUESTION.question, "Cast Away was directed by Robert Zemeckis."]
    assert (later.answer, later.termination) == ("1952", "done")
    assert later.rounds[-1].reasoning == "Cast Away was directed by Robert Zemeckis. The answer is 1952. He was born then."


class RecordingLM(FakeLM):
    """FakeLM that also records what determines each generation besides the prompt."""

    def __init__(self, replies):
        super().__init__(replies)
        self.asked = []

    def generate(self, prompts, max_new_tokens, stop=(), capture=None, prefix=None, attention=False):
        self.asked.append((list(prompts), max_new_tokens, tuple(stop), prefix, attention))
        return super().generate(prompts, max_new_tokens, stop, capture, prefix, attention)


def test_the_first_step_is_single_steps_generation_call():
    """Same prompt, budget, stop strings and prefix (only the capture may differ): evaluation's
    reuse serves IRCoT's first step from single_step's result."""
    asked = {}
    for name in ("single_step", "ircot"):
        lm = RecordingLM([" Zemeckis was born in 1952.\nAnswer: 1952"])
        params = MethodsParams(ircot=IrcotParams(max_passages=2))  # at least retrieval.k
        components = Components(lm, OverlapRetriever(CORPUS), FakeProber([0.9]), params=params, k=2, max_new_tokens=16, passage_words=5)
        build_method(name, components).answer(QUESTION)
        asked[name] = lm.asked
    assert len(asked["ircot"]) == 1 and asked["ircot"] == asked["single_step"]
