"""The batching front: tasks written as sequential code get the results of direct calls, on a
rule-based fake and on a tiny real model, with their calls gathered into shared batches."""

from __future__ import annotations

import threading

import pytest
import torch

from skillrag.eval.batching import Batcher
from skillrag.lm.base import Option
from skillrag.lm.hf import HFCausalLM
from skillrag.methods.error_policy import is_question_failure
from skillrag.prompts.cot import STOP, cot_prompt
from tests.fakes import CORPUS, OverlapRetriever, RuleLM
from tests.lm.conftest import byte_tokenizer, tiny_model

QUESTIONS = [f"Who directed the film number {i}?" for i in range(7)]
OPTIONS = [Option(" yes", "\nSo:", 4, ("\n",)), Option(" no", "\nWhy:", 6, ("\n",))]


def _calls(lm, retriever, question: str) -> tuple:
    """What a task asks: a search, a CoT answer over the hits, label scores, a choice."""
    hits = retriever.search(question, 2)
    prompt = cot_prompt(question, [h.passage for h in hits])
    [gen] = lm.generate([prompt.text], 12, stop=STOP, capture=[2, 4], prefix=prompt.prefix)
    scores = lm.loglikelihood(prompt.text, [" yes", " no"])
    choice = lm.choose_and_generate(prompt.text, OPTIONS, prefix=prompt.prefix)
    return [h.passage.id for h in hits], gen, scores, choice


def _same_generation(a, b) -> bool:
    return (a.text, a.token_ids, a.prompt_tokens, a.stopped_by) == (b.text, b.token_ids, b.prompt_tokens, b.stopped_by)


def test_fronts_give_the_results_of_direct_calls_in_shared_batches():
    direct, batched = RuleLM(), RuleLM()
    retriever = OverlapRetriever(CORPUS)
    expected = [_calls(direct, retriever, q) for q in QUESTIONS]
    with Batcher(batched, retriever, workers=4, batch_size=3, retry_alone=is_question_failure) as batcher:
        got = list(batcher.map(lambda slot, q: _calls(batcher.lm(slot), batcher.retriever(slot), q), QUESTIONS))
    for (ids, gen, scores, choice), (ids2, gen2, scores2, choice2) in zip(expected, got, strict=True):
        assert ids == ids2 and scores == scores2 and _same_generation(gen, gen2)
        assert all((gen.hidden[layer] == gen2.hidden[layer]).all() for layer in (2, 4))
        assert (choice.scores, choice.index) == (choice2.scores, choice2.index)
        assert _same_generation(choice.generation, choice2.generation)
    for call in ("generate", "choose", "loglikelihood"):
        sizes = [len(prompts) for kind, prompts in batched.calls if kind == call]
        assert sum(sizes) == len(QUESTIONS) and max(sizes) > 1 and max(sizes) <= 3  # shared, capped at batch_size


def test_only_calls_that_can_share_a_batch_are_batched():
    lm = RuleLM()
    closed, passages = cot_prompt(QUESTIONS[0]), cot_prompt(QUESTIONS[1], CORPUS[:2])

    def task(slot, prompt):
        return batcher.lm(slot).generate([prompt.text], 8, stop=STOP, prefix=prompt.prefix)[0].text

    with Batcher(lm, None, workers=4, batch_size=8, retry_alone=is_question_failure) as batcher:
        texts = list(batcher.map(task, [closed, passages, closed, passages]))
    assert texts == [RuleLM()._reply(p.text) for p in (closed, passages, closed, passages)]
    assert sorted(len(prompts) for _, prompts in lm.calls) == [2, 2]  # one call per prefix
    assert all(len({p.startswith(closed.prefix) for p in prompts}) == 1 for _, prompts in lm.calls)


def test_an_error_reaches_only_the_task_whose_call_caused_it():
    lm = RuleLM(fail={"number 3?": RuntimeError("CUDA out of memory")})

    def task(slot, question):
        try:
            return _calls(batcher.lm(slot), batcher.retriever(slot), question)[1].text
        except RuntimeError as err:
            return f"failed: {err}"

    with Batcher(lm, OverlapRetriever(CORPUS), workers=4, batch_size=4, retry_alone=is_question_failure) as batcher:
        texts = list(batcher.map(task, QUESTIONS))
    assert [t.startswith("failed") for t in texts] == [i == 3 for i in range(len(QUESTIONS))]
    assert texts[3] == "failed: CUDA out of memory"


def test_a_bug_in_a_shared_call_reaches_every_task_in_it():
    lm = RuleLM(fail={"number 3?": TypeError("a bug")})

    def task(slot, question):
        try:
            return batcher.lm(slot).generate([cot_prompt(question).text], 8)[0].text
        except TypeError:
            return "bug"

    with Batcher(lm, None, workers=4, batch_size=4, retry_alone=is_question_failure) as batcher:
        texts = list(batcher.map(task, QUESTIONS[:4]))
    shared = next(prompts for _, prompts in lm.calls if any("number 3?" in p for p in prompts))
    assert len(shared) > 1 and texts.count("bug") == len(shared)  # not retried until it passes


def test_a_task_error_is_raised_in_item_order_and_leaving_stops_every_thread():
    before = threading.active_count()
    done: list[int] = []

    def task(slot, i):
        if i == 2:
            raise KeyError("a bug")
        batcher.lm(slot).generate([f"Question: {i}?\nRationale:"], 4)
        done.append(i)
        return i

    with pytest.raises(KeyError, match="a bug"), Batcher(RuleLM(), None, workers=3, batch_size=3, retry_alone=is_question_failure) as batcher:
        got: list[int] = []
        got.extend(batcher.map(task, list(range(9))))  # keeps what came before the error
    assert got == [0, 1]  # the results before the failing item, in order
    assert threading.active_count() == before


@pytest.fixture
def llama():
    """The tiny random llama of the LM tests (float32), on one torch thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tokenizer = byte_tokenizer()
    yield HFCausalLM(tiny_model("llama", len(tokenizer), tokenizer.eos_token_id), tokenizer, name="tiny-llama")
    torch.set_num_threads(threads)


def test_tiny_model_through_the_front_equals_one_prompt_at_a_time(llama):
    """Float32: greedy rows do not depend on their batch neighbours, so a batched run of the
    methods' calls gives each task what a call of its own gives."""
    prompts = [cot_prompt(q, CORPUS[i % 3 : i % 3 + 1] if i % 2 else ()) for i, q in enumerate(QUESTIONS)]

    def ask(lm, prompt):
        [gen] = lm.generate([prompt.text], 10, stop=STOP, capture=[1, 3], prefix=prompt.prefix)
        choice = lm.choose_and_generate(prompt.text, OPTIONS, prefix=prompt.prefix)
        return gen, choice, lm.loglikelihood(prompt.text, [" yes", " no"])

    expected = [ask(llama, p) for p in prompts]
    with Batcher(llama, None, workers=4, batch_size=4, retry_alone=is_question_failure) as batcher:
        got = list(batcher.map(lambda slot, p: ask(batcher.lm(slot), p), prompts))
    for (gen, choice, scores), (gen2, choice2, scores2) in zip(expected, got, strict=True):
        assert _same_generation(gen, gen2)
        assert gen.logprobs == pytest.approx(gen2.logprobs, abs=1e-4)
        assert all(gen.hidden[layer] == pytest.approx(gen2.hidden[layer], abs=1e-4) for layer in (1, 3))
        assert (choice.index, choice.generation.text) == (choice2.index, choice2.generation.text)
        assert scores == pytest.approx(scores2, rel=1e-6, abs=1e-5)


def test_calls_differing_only_in_budget_share_one_model_call_each_row_to_its_own(llama, monkeypatch):
    """DRAGIN's budget left shrinks as its CoT grows, so its calls differ in max_new_tokens from
    question to question: they still share one model call, and each row ends at its own budget
    exactly as a call of its own would (tokens, text, why it stopped, attention summary)."""
    prompts = [cot_prompt(q) for q in QUESTIONS[:4]]
    budgets = [3, 9, 5, 12]

    def ask(lm, prompt, budget):
        [gen] = lm.generate([prompt.text], budget, stop=STOP, prefix=prompt.prefix, attention=True)
        return gen

    expected = [ask(llama, p, b) for p, b in zip(prompts, budgets)]
    model_calls = []
    generate = llama._generate
    monkeypatch.setattr(llama, "_generate", lambda ids, *args: model_calls.append(len(ids)) or generate(ids, *args))
    with Batcher(llama, None, workers=4, batch_size=4, retry_alone=is_question_failure) as batcher:
        got = list(batcher.map(lambda slot, item: ask(batcher.lm(slot), *item), list(zip(prompts, budgets))))
    assert model_calls == [4]
    for gen, gen2, budget in zip(expected, got, budgets, strict=True):
        assert _same_generation(gen, gen2) and gen2.new_tokens <= budget
        assert gen.logprobs == pytest.approx(gen2.logprobs, abs=1e-5)
        assert gen.attention.received == pytest.approx(gen2.attention.received, abs=1e-5)
        assert gen.attention.prompt == pytest.approx(gen2.attention.prompt, abs=1e-5)
    assert [g.stopped_by for g in got].count("length") >= 2  # the budgets, not stops, ended most rows
