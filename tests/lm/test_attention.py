"""The opt-in attention summary (DRAGIN's input) on tiny in-memory models: checked against a plain
eager forward pass over prompt + kept tokens, for single and batched (padded, prefix-cached)
calls, and without any effect on calls that do not ask for it."""

from __future__ import annotations

import pytest
import torch

from skillrag.lm import HFCausalLM

PROMPTS = ["Question: who?\nRationale:", "Q: a much longer question, padded less?\nRationale:"]


def reference(lm: HFCausalLM, prompt: str, generated: list[int]) -> tuple[list[float], list[float]]:
    """(received, prompt row) from one eager full pass: the last full-attention layer, head mean."""
    ids = lm.encode(prompt)
    config = lm.model.config.get_text_config()
    types = getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers
    layer = max(i for i, kind in enumerate(types) if kind == "full_attention")
    before = lm.model.config._attn_implementation
    lm.model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = lm.model(torch.tensor([ids + generated]), output_attentions=True)
    finally:
        lm.model.set_attn_implementation(before)
    weights = out.attentions[layer][0].float().mean(dim=0)  # [query, key]
    p, k = len(ids), len(generated)
    block = weights[p : p + k, p : p + k].tril(-1)
    received = block.max(dim=0).values.tolist() if k else []
    return received, weights[p - 1, :p].tolist()


def test_the_summary_matches_a_full_eager_pass(lm):
    [gen] = lm.generate(PROMPTS[:1], 8, attention=True)
    received, prompt_row = reference(lm, PROMPTS[0], gen.token_ids)
    assert gen.attention is not None and len(gen.attention.received) == gen.new_tokens == 8
    assert gen.attention.received == pytest.approx(received, abs=1e-4)
    assert gen.attention.received[-1] == 0.0  # no later token attends to the last one
    assert gen.attention.prompt == pytest.approx(prompt_row, abs=1e-4)
    assert sum(gen.attention.prompt) == pytest.approx(1.0, abs=1e-3)  # the whole row is over the prompt
    assert "".join(gen.attention.prompt_pieces) == PROMPTS[0]
    assert "".join(gen.pieces) == gen.text


def test_batched_and_prefix_cached_rows_match_the_single_call(llama):
    """On llama only: in gemma3's sliding-window layers pads take window slots (skillrag.lm.hf)."""
    lm = llama
    prefix = "Question: "
    prompts = [PROMPTS[0], "Question: a longer one, so the first row is padded?\nRationale:"]
    batched = lm.generate(prompts, 6, prefix=prefix, attention=True)
    assert batched[0].extra["cached_prompt_tokens"] > 0
    for prompt, gen in zip(prompts, batched):
        [alone] = lm.generate([prompt], 6, attention=True)
        assert gen.token_ids == alone.token_ids
        assert gen.attention.received == pytest.approx(alone.attention.received, abs=1e-4)
        assert gen.attention.prompt == pytest.approx(alone.attention.prompt, abs=1e-4)


def test_a_stop_string_keeps_the_summary_to_the_kept_tokens(llama):
    [free] = llama.generate(PROMPTS[:1], 10)
    stop = [free.text[5:7]]
    [gen] = llama.generate(PROMPTS[:1], 10, stop=stop, attention=True)
    assert gen.stopped_by == "stop" and 0 < gen.new_tokens < 10
    received, _ = reference(llama, PROMPTS[0], gen.token_ids)
    assert gen.attention.received == pytest.approx(received, abs=1e-4)


def test_callers_that_do_not_ask_see_no_change(llama):
    implementation = llama.model.config._attn_implementation
    [before] = llama.generate(PROMPTS[:1], 6, capture=[1, 3])
    llama.generate(PROMPTS[:1], 6, attention=True)
    [after] = llama.generate(PROMPTS[:1], 6, capture=[1, 3])
    assert llama.model.config._attn_implementation == implementation
    assert before.attention is None and after.attention is None
    assert after.token_ids == before.token_ids and after.logprobs == before.logprobs
    for layer in before.hidden:
        assert torch.equal(after.hidden[layer], before.hidden[layer])


def test_no_layer_runs_eager_attention_and_the_text_is_the_untapped_one(lm):
    """The summary costs one extra row of one layer: every layer keeps the model's own attention
    kernel (the tapped one computes its last row beside it), so the call's tokens, log-probs and
    hidden states are bit for bit those of the call without `attention`."""
    layers = lm.model.get_decoder().layers
    seen: list[str] = []
    hooks = [
        layer.self_attn.register_forward_pre_hook(lambda module, args: seen.append(module.config._attn_implementation))
        for layer in layers
    ]
    try:
        [tapped] = lm.generate(PROMPTS[:1], 6, capture=[1, 2], attention=True)
    finally:
        for hook in hooks:
            hook.remove()
    own = lm.model.config._attn_implementation
    assert own != "eager"
    per_pass = [seen[i : i + len(layers)] for i in range(0, len(seen), len(layers))]
    assert per_pass and all(kinds == per_pass[0] for kinds in per_pass)
    assert sorted(set(per_pass[0])) == sorted({own, "skillrag_attention_tap"})
    assert per_pass[0].count("skillrag_attention_tap") == 1
    [plain] = lm.generate(PROMPTS[:1], 6, capture=[1, 2])
    assert tapped.token_ids == plain.token_ids and tapped.logprobs == plain.logprobs
    for layer in plain.hidden:
        assert torch.equal(tapped.hidden[layer], plain.hidden[layer])
