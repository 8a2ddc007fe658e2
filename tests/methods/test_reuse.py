"""Generation reuse: a repeated deterministic call is answered from memory, keyed on everything
that determines it, within a bounded memory."""

from __future__ import annotations

import pytest

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
    [{"max_new_tokens": 8}, {"stop": ("\n",)}, {"capture": [4]}, {"capture": None}, {"prefix": None}],
)
def test_anything_that_shapes_a_generation_keys_it(change):
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


def test_loglikelihood_is_reused_and_choices_pass_through():
    inner = RuleLM()
    lm = ReusingLM(inner, capacity=8)
    assert lm.loglikelihood("a prompt", [" yes", " no"]) == lm.loglikelihood("a prompt", [" yes", " no"])
    lm.loglikelihood("a prompt", [" no"])
    assert [kind for kind, _ in inner.calls] == ["loglikelihood", "loglikelihood"]
    assert lm.stats == ReuseStats(lookups=3, hits=1)
