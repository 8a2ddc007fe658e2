"""End tokens and the chat format on a tiny random model with a Qwen-style tokenizer: the EOS set
covers the tokenizer, the generation config and the known end tokens; chat-framed prompts keep
the prefix KV cache exact."""

from __future__ import annotations

import pytest
import torch

from skillrag.lm.chat import ChatFrame
from skillrag.lm.hf import HFCausalLM
from tests.lm.conftest import byte_tokenizer, tiny_model

# Qwen2.5's layout: a default system turn, role markers, and the assistant turn left open.
TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PREFIX = "Answer briefly.\nQuestion: one?\nRationale: it is one.\nAnswer: 1\n\n"
BODIES = ["Question: two?\nRationale:", "Question: three, a longer one?\nRationale:"]


def qwen_style_tokenizer():
    """The byte tokenizer with Qwen's special tokens and chat template; its eos is `<|im_end|>`."""
    tokenizer = byte_tokenizer()
    tokenizer.add_tokens(["<|im_start|>", "<|im_end|>", "<|endoftext|>"], special_tokens=True)
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.chat_template = TEMPLATE
    return tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return qwen_style_tokenizer()


def qwen_style_lm(tokenizer, chat: bool) -> HFCausalLM:
    model = tiny_model("llama", len(tokenizer), tokenizer.convert_tokens_to_ids("<|im_end|>"))
    return HFCausalLM(model, tokenizer, name="tiny-qwen", chat=chat)


def test_eos_ids_join_tokenizer_generation_config_and_known_end_tokens(tokenizer):
    ids = tokenizer.convert_tokens_to_ids
    model = tiny_model("llama", len(tokenizer), ids("<|im_end|>"))
    model.generation_config.eos_token_id = [ids("~")]  # a config that names another end token
    lm = HFCausalLM(model, tokenizer)
    # `<|endoftext|>` is how Qwen's instruct models end plain text, named by neither (the byte
    # tokenizer's own `<eos>` is a known end token too).
    assert lm.eos_ids == {ids("<|im_end|>"), ids("~"), ids("<|endoftext|>"), ids("<eos>")}
    assert ids("<|im_start|>") not in lm.eos_ids


def test_a_row_ends_at_an_end_token_that_only_the_known_list_names(tokenizer):
    lm = qwen_style_lm(tokenizer, chat=False)
    endoftext = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    with torch.no_grad():  # make `<|endoftext|>` the likeliest token after a few steps
        lm.model.lm_head.weight[endoftext] = lm.model.lm_head.weight[lm.generate(["Hi"], 3)[0].token_ids[2]] * 1.5
    [gen] = lm.generate(["Hi"], 12)
    assert gen.stopped_by == "eos" and endoftext not in gen.token_ids


def test_the_chat_frame_opens_the_assistant_turn_with_the_prompts_last_line(tokenizer):
    frame = ChatFrame.of(tokenizer, "tiny-qwen")
    assert frame.head == "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    assert frame.tail == "<|im_end|>\n<|im_start|>assistant\n"
    assert frame.wrap("Passages: p\nQuestion: q?\nRationale:") == (
        frame.head + "Passages: p\nQuestion: q?" + frame.tail + "Rationale:"
    )


def test_chat_prompts_give_the_same_generations_with_and_without_the_prefix_cache(tokenizer):
    lm = qwen_style_lm(tokenizer, chat=True)
    prompts = [PREFIX + body for body in BODIES]
    cached = lm.generate(prompts, 10, capture=[2], prefix=PREFIX)
    uncached = lm.generate(prompts, 10, capture=[2])
    head_tokens = len(lm.encode(lm.chat.head))
    for with_cache, without in zip(cached, uncached):
        assert with_cache.extra["cached_prompt_tokens"] > head_tokens  # the few-shot block came from the cache
        assert without.extra["cached_prompt_tokens"] == 0
        assert with_cache.token_ids == without.token_ids and with_cache.text == without.text
        torch.testing.assert_close(with_cache.logprobs, without.logprobs, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(with_cache.hidden[2], without.hidden[2], atol=1e-4, rtol=1e-4)


def test_the_chat_format_reaches_the_model_and_the_plain_one_does_not(tokenizer):
    prompt = PREFIX + BODIES[0]
    plain, chat = qwen_style_lm(tokenizer, chat=False), qwen_style_lm(tokenizer, chat=True)
    [plain_gen], [chat_gen] = plain.generate([prompt], 2), chat.generate([prompt], 2)
    assert plain_gen.prompt_tokens == len(plain.encode(prompt))
    assert chat_gen.prompt_tokens == len(chat.encode(chat.chat.wrap(prompt))) > plain_gen.prompt_tokens
    # label scores run on the framed prompt too
    assert chat.loglikelihood(prompt, [" yes"]) != plain.loglikelihood(prompt, [" yes"])


def test_chat_without_a_template_is_refused_in_one_line():
    model = tiny_model("llama", len(byte_tokenizer()), 0)
    with pytest.raises(ValueError, match="has no chat template; use plain"):
        HFCausalLM(model, byte_tokenizer(), name="tiny", chat=True)


def test_a_pattern_stop_keeps_its_match_and_ends_the_row_there(tokenizer):
    import re

    lm = qwen_style_lm(tokenizer, chat=False)
    [free] = lm.generate(["Hi"], 12)
    piece = free.text[3:5]
    [gen] = lm.generate(["Hi"], 12, stop=[re.compile(re.escape(piece)), "never generated"])
    end = free.text.find(piece) + len(piece)
    assert gen.stopped_by == "stop" and gen.text == free.text[:end]
    assert gen.token_ids == free.token_ids[: len(gen.token_ids)] and len(gen.token_ids) < len(free.token_ids)
