"""The classifier's feature path on a real (tiny, randomly initialised) transformers model: the
question's state comes from one generate call with one new token, batched like any call."""

from __future__ import annotations

import numpy as np
import torch

from skillrag.lm.hf import HFCausalLM
from skillrag.methods.complexity import STRATEGIES, fit_classifier, question_states
from tests.lm.conftest import byte_tokenizer, tiny_model

QUESTIONS = ["Who wrote the play Hamlet?", "In what year was the director of Cast Away born?", "What is the capital of France?"]


def test_question_states_on_a_real_model_feed_the_classifier():
    torch.set_num_threads(1)
    tokenizer = byte_tokenizer()
    lm = HFCausalLM(tiny_model("llama", len(tokenizer), tokenizer.eos_token_id), tokenizer, name="tiny-llama")
    layers = [2, 3]
    x = question_states(lm, QUESTIONS, layers)
    assert x.shape == (3, lm.hidden_size) and np.isfinite(x).all()
    alone = np.stack([question_states(lm, [q], layers)[0] for q in QUESTIONS])
    np.testing.assert_allclose(x, alone, atol=1e-4)  # a question's state does not depend on its batch
    assert not np.allclose(x[0], x[1])  # the state reads the question

    classifier = fit_classifier(x, list(STRATEGIES), layers, {"name": lm.name}, c=10.0)
    for question, strategy in zip(QUESTIONS, STRATEGIES):
        routing = classifier.choose(lm, question)
        assert routing.skill == strategy and abs(sum(routing.scores.values()) - 1) < 1e-5
