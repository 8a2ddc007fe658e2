"""lm.dtype int8: int8 Linear weights applied once at load, float32 hidden states, its own
identity, and CPU only."""

from __future__ import annotations

import pytest
import torch

from skillrag.errors import ConfigError
from skillrag.lm import load_lm
from skillrag.lm.loading import model_identity, resolve_dtype

PROMPTS = ["Question: who wrote Hamlet?\nAnswer:", "Q: 2+2?\nA:"]


@pytest.fixture
def saved(tmp_path, llama):
    llama.model.save_pretrained(tmp_path)
    llama.tokenizer.save_pretrained(tmp_path)
    return tmp_path


def test_int8_loads_generates_and_captures_float32_states_near_float32s(saved):
    float32 = load_lm(str(saved), device="cpu", dtype="float32")
    int8 = load_lm(str(saved), device="cpu", dtype="int8")
    weight = int8.model.model.layers[0].mlp.up_proj.weight
    assert weight.qdata.dtype == torch.int8
    assert int8.model.model.embed_tokens.weight.dtype == torch.float32

    made, reference = int8.generate(PROMPTS, 6, capture=[2, 3]), float32.generate(PROMPTS, 6, capture=[2, 3])
    for gen, ref in zip(made, reference, strict=True):
        assert len(gen.token_ids) == len(gen.logprobs) > 0
        for layer in (2, 3):
            state = gen.pooled["generated_mean"][layer]
            assert state.dtype == torch.float32 and state.shape == (32,)
            if gen.token_ids == ref.token_ids:  # the same tokens: int8 moves the state a little, not a lot
                gap = (state - ref.pooled["generated_mean"][layer]).norm() / ref.pooled["generated_mean"][layer].norm()
                assert gap < 0.2


def test_int8_has_its_own_identity_and_runs_on_the_cpu_only():
    identity = model_identity("skillrag-tests/no-such-model", device="cpu", dtype="int8")
    assert identity["dtype"] == "int8"
    assert model_identity("skillrag-tests/no-such-model", device="cpu", dtype="float32")["dtype"] == "float32"
    assert resolve_dtype("int8", torch.device("cpu")) == torch.float32  # it loads float32, then quantizes
    with pytest.raises(ConfigError, match="int8 runs on the CPU only"):
        resolve_dtype("int8", torch.device("cuda"))
