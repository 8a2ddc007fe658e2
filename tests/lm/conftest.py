"""Tiny randomly initialised causal LMs built in memory, with a byte-level tokenizer built here,
so the LM runtime is tested offline in seconds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from skillrag.lm.hf import HFCausalLM

EOS = "<eos>"


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """One token per printable ASCII character, space and newline (so any generation decodes to
    clean text), plus a merge of two newlines into one token, so a prompt that ends in a newline
    tokenizes differently alone and followed by another newline (the prefix boundary case)."""
    symbols = [chr(b) for b in range(33, 127)] + ["Ġ", "Ċ"]  # byte-level symbols of " " and "\n"
    vocab = {symbol: i for i, symbol in enumerate(symbols)}
    vocab["ĊĊ"] = len(vocab)  # "\n\n" in byte-level symbols
    vocab[EOS] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[("Ċ", "Ċ")]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=EOS, pad_token=EOS)


def tiny_model(arch: str, vocab_size: int, eos_id: int) -> torch.nn.Module:
    torch.manual_seed(0)
    common = {
        "vocab_size": vocab_size,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "eos_token_id": eos_id,
        "pad_token_id": eos_id,
        "bos_token_id": None,
    }
    if arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common))
    else:  # gemma3: sliding-window and full-attention layers mixed, a different cache layout
        config = Gemma3TextConfig(
            **common,
            head_dim=8,
            tie_word_embeddings=False,
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        )
        model = Gemma3ForCausalLM(config)
    # Random init gives near-uniform logits; larger weights make greedy choices well separated,
    # so batched and unbatched runs pick the same tokens despite float noise.
    with torch.no_grad():
        model.lm_head.weight.mul_(20)
    return model.eval()


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models gain nothing from threads, and on a busy 2-core machine two intra-op threads
    make every small op wait for the other core (tests ran 10x slower under load)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    return byte_tokenizer()


@pytest.fixture(params=["llama", "gemma3"])
def lm(request, tokenizer) -> HFCausalLM:
    model = tiny_model(request.param, len(tokenizer), tokenizer.eos_token_id)
    return HFCausalLM(model, tokenizer, name=f"tiny-{request.param}")


@pytest.fixture
def llama(tokenizer) -> HFCausalLM:
    return HFCausalLM(
        tiny_model("llama", len(tokenizer), tokenizer.eos_token_id), tokenizer, name="tiny-llama"
    )


@contextmanager
def forced(lm: HFCausalLM, text: str) -> Iterator[None]:
    """Every greedy generation writes `text` first (then whatever the model prefers): after each
    prompt pass (a forward over more than one position per row) the LM head's logits get a large
    bias towards the next scripted token, step by step. The hidden states stay the model's own,
    so what is pooled is what the model computes for that text."""
    ids = lm.tokenizer(text, add_special_tokens=False).input_ids
    step = [0]

    def count(module, args, kwargs):
        step[0] = 0 if kwargs["input_ids"].shape[1] > 1 else step[0] + 1

    def bias(module, args, output):
        if step[0] < len(ids):
            output[..., ids[step[0]]] += 1e4
        return output

    handles = [
        lm.model.register_forward_pre_hook(count, with_kwargs=True),
        lm.model.lm_head.register_forward_hook(bias),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
