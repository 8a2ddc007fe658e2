"""Generation reuse: a repeated deterministic call is answered from memory or stored seeds,
keyed on what determines it, served when only what is captured differs, within a bounded memory."""

from __future__ import annotations

import re

import pytest
import torch

from skillrag.methods import ReuseStats, ReusingLM
from skillrag.prompts.cot import STOP, cot_prompt
from tests.fakes import CORPUS, RuleLM

CLOSED = cot_prompt("Who directed Cast Away?")
OPEN = cot_prompt("Who directed Cast Away?", CORPUS[:2])


def _ask(lm, prompt=CLOSED, **changes):
    call = {"max_new_tokens": 16, "stop": STOP, "capture": [2, 4], "prefix": prompt.prefix, **changes}
    return lm.generate([prompt.text], **call)[0]


def test_a_repeated_generation_is_the_identical_result_computed_once():
    inner = RuleLM()
    lm = ReusingLM(inner, capacity=8)
    first = _ask(lm)
    assert _ask(lm) is first and len(inner.calls) == 1
    assert lm.stats == ReuseStats(lookups=2, hits=1)
    assert lm.stats.as_dict() == {"lookups": 2, "hits": 1, "hit_rate": 0.5}


@pytest.mark.parametrize(
    "change",
    [{"max_new_tokens": 8}, {"stop": ("\n",)}, {"stop": (re.compile("Answer:"),)}, {"prefix": None}, {"capture": [1, 2, 4]}, {"attention": True}],
)
def test_what_determines_a_generation_or_a_capture_it_lacks_makes_it_new(change):
    inner = RuleLM()
    lm = ReusingLM(inner, capacity=8)
    _ask(lm)
    _ask(lm, **change)
    assert len(inner.calls) == 2 and lm.stats.hits == 0


def test_a_batch_computes_only_what_is_not_remembered_and_keeps_its_order():
    inner = RuleLM()
    lm = ReusingLM(inner, capacity=8)
    _ask(lm, OPEN, prefix=None)
    texts = [g.text for g in lm.generate([CLOSED.text, OPEN.text, CLOSED.text], 16, stop=STOP, capture=[2, 4])]
    assert texts == [inner._reply(p) for p in (CLOSED.text, OPEN.text, CLOSED.text)]
    assert inner.calls[-1] == ("generate", [CLOSED.text])  # the repeat within the call is computed once
    assert lm.stats == ReuseStats(lookups=4, hits=2)


def test_memory_is_bounded_least_recently_used_first():
    inner = RuleLM()
    lm = ReusingLM(inner, capacity=2)
    prompts = [cot_prompt(f"Question {i}?") for i in range(3)]
    for prompt in prompts:
        _ask(lm, prompt)
    _ask(lm, prompts[2])  # remembered
    _ask(lm, prompts[0])  # dropped when the third came in
    assert lm.stats.hits == 1 and len(inner.calls) == 4
    off = ReusingLM(RuleLM(), capacity=0)
    _ask(off), _ask(off)
    assert off.stats == ReuseStats(lookups=2, hits=0)


@pytest.mark.parametrize("asked", [[4], [2], None])
def test_a_generation_that_captured_more_serves_a_call_asking_for_fewer_layers_or_none(asked):
    inner = RuleLM()
    lm = ReusingLM(inner, capacity=8)
    stored = _ask(lm)
    served = _ask(lm, capture=asked)
    fresh = _ask(ReusingLM(RuleLM(), capacity=0), capture=asked)
    assert len(inner.calls) == 1 and lm.stats.hits == 1
    assert served.text == stored.text and served.token_ids == stored.token_ids
    assert (served.hidden is None) == (fresh.hidden is None)
    assert sorted(served.hidden or {}) == sorted(fresh.hidden or {})
    assert all(torch.equal(served.hidden[layer], fresh.hidden[layer]) for layer in served.hidden or {})
    assert sorted(stored.hidden) == [2, 4]  # the remembered result is left as it was


def test_attention_calls_are_served_only_by_generations_made_with_attention():
    inner = RuleLM()
    lm = ReusingLM(inner, capacity=8)
    _ask(lm, attention=True)
    _ask(lm, attention=True)
    _ask(lm)
    assert len(inner.calls) == 2 and lm.stats.hits == 1


def test_seeds_serve_read_only_and_every_computed_generation_is_recorded_wide():
    maker = ReusingLM(RuleLM(), capacity=0, capture=[1, 2, 3, 4], record=True)
    asked_none = _ask(maker, capture=None)
    assert asked_none.hidden is None  # the caller gets what it asked for ...
    [made] = maker.made
    assert made.layers == {1, 2, 3, 4} and sorted(made.generation.hidden) == [1, 2, 3, 4]  # ... the record all layers
    inner = RuleLM()
    lm = ReusingLM(inner, capacity=0, seeds={made.key: made})
    served = _ask(lm)
    assert inner.calls == [] and lm.stats.hits == 1 and sorted(served.hidden) == [2, 4]
    _ask(lm, OPEN)
    assert len(inner.calls) == 1 and lm.seeds == {made.key: made}


def test_a_reused_generation_carries_the_compute_time_it_took_when_made():
    lm = ReusingLM(RuleLM(), capacity=8)
    other = cot_prompt("Who wrote Cast Away?")
    first = lm.generate([CLOSED.text, other.text], 16, stop=STOP, prefix=CLOSED.prefix)
    assert first[0].compute_s == first[1].compute_s > 0  # each row its share of the call
    again = _ask(lm, capture=None)
    assert again.compute_s == first[0].compute_s


def test_loglikelihood_and_choices_pass_through():
    inner = RuleLM()
    lm = ReusingLM(inner, capacity=8)
    assert lm.loglikelihood("a prompt", [" yes", " no"]) == lm.loglikelihood("a prompt", [" yes", " no"])
    assert [kind for kind, _ in inner.calls] == ["loglikelihood", "loglikelihood"]
    assert lm.stats == ReuseStats()
