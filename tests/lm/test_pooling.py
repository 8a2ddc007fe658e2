"""The three poolings of a generation's states (`Generation.pooled`): the answer span is exactly
the tokens of the answer text on the `Answer:` line, on scripted token boundaries and on the tiny
real model, whose generation is forced to a known text by a bias on its LM head (the residual
stream it pools is untouched) and checked against a plain forward pass pooled by hand."""

from __future__ import annotations

from itertools import accumulate

import pytest
import torch

from skillrag.lm import POOLINGS, HFCausalLM
from skillrag.lm.base import answer_tokens
from skillrag.prompts.cot import STOP
from tests.lm.conftest import forced
from tests.lm.test_hf import reference

LAYERS = [1, 2, 3]
PROMPT = "Question: where is Paris?\nRationale:"


def ends(pieces: list[str]) -> list[int]:
    return list(accumulate(len(p) for p in pieces))


@pytest.mark.parametrize(
    ("pieces", "span"),
    [
        ([" It", " is", ".", "\n", "Answer", ":", " Robert", " Zemeckis"], slice(6, 8)),
        ([" So", ".", "\n", "Answer", ": Rob", "ert", " Z", "\n"], slice(4, 7)),  # a token straddling the label
        ([" Thus", "\n", "answer", ":", "Paris"], slice(4, 5)),
        ([" No", " label", " here", "."], slice(3, 4)),  # no answer line: the last token
        ([" Ran", " out", ".", "\n", "Answer", ":"], slice(5, 6)),  # an empty answer: the last token
        ([], slice(0, 1)),  # nothing kept: the first generated token's state stands for it
    ],
)
def test_answer_tokens_are_those_of_the_answer_text_on_the_answer_line(pieces, span):
    assert answer_tokens("".join(pieces), ends(pieces)) == span


def by_hand(lm: HFCausalLM, kept: list[int], positions: slice) -> dict[int, torch.Tensor]:
    prompt_ids = lm.encode(PROMPT)
    hidden_states, _ = reference(lm, prompt_ids, kept)
    return {layer: hidden_states[layer][0, len(prompt_ids) :][positions] for layer in LAYERS}


def assert_pooled(gen, expected: dict[str, dict[int, torch.Tensor]]) -> None:
    assert set(gen.pooled) == set(POOLINGS)
    for name in POOLINGS:
        for layer in LAYERS:
            torch.testing.assert_close(gen.pooled[name][layer], expected[name][layer], atol=1e-4, rtol=1e-4)
    assert gen.hidden is gen.pooled["generated_mean"]


def test_the_answer_poolings_read_exactly_the_answer_lines_tokens(lm):
    text = " It is in France.\nAnswer: Paris\n"
    with forced(lm, text):
        [gen] = lm.generate([PROMPT], 40, stop=STOP, capture=LAYERS)
    assert gen.text == " It is in France.\nAnswer: Paris" and gen.stopped_by == "stop"
    first = gen.text.index("Paris")  # the byte tokenizer: one token per character here
    everything = by_hand(lm, gen.token_ids, slice(None))
    answer = by_hand(lm, gen.token_ids, slice(first, first + len("Paris")))
    assert_pooled(
        gen,
        {
            "generated_mean": {layer: v.mean(dim=0) for layer, v in everything.items()},
            "answer_mean": {layer: v.mean(dim=0) for layer, v in answer.items()},
            "answer_last": {layer: v[-1] for layer, v in answer.items()},
        },
    )
    assert not torch.allclose(gen.pooled["answer_mean"][2], gen.pooled["generated_mean"][2])


def test_without_an_answer_line_the_answer_poolings_take_the_last_kept_token(lm):
    text = " It is in France."
    with forced(lm, text):
        [gen] = lm.generate([PROMPT], len(text), stop=STOP, capture=LAYERS)
    assert gen.text == text and gen.stopped_by == "length"
    everything = by_hand(lm, gen.token_ids, slice(None))
    last = {layer: v[-1] for layer, v in everything.items()}
    assert_pooled(
        gen,
        {"generated_mean": {layer: v.mean(dim=0) for layer, v in everything.items()}, "answer_mean": last, "answer_last": last},
    )

