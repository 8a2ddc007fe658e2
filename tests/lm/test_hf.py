"""HFCausalLM on tiny in-memory models: every output is checked against a plain full forward pass
over prompt + generated tokens, which is what the lean decode loop must reproduce."""

from __future__ import annotations

import pytest
import torch

from skillrag.lm import ChooseCall, HFCausalLM, Option, ScoreCall, default_layers

PROMPTS = ["Question: who?\nRationale:", "Q: a much longer question, padded less?\nRationale:", "Hi"]
ALL_LAYERS = [1, 2, 3]


def reference(lm: HFCausalLM, prompt_ids: list[int], generated: list[int]):
    """Hidden states (HF indexing) and next-token log-probs of one full pass over prompt + generated."""
    with torch.no_grad():
        out = lm.model(torch.tensor([prompt_ids + generated]), output_hidden_states=True)
    return out.hidden_states, torch.log_softmax(out.logits[0].float(), dim=-1)


def assert_same(a, b, atol=1e-4):
    assert a.token_ids == b.token_ids
    assert a.text == b.text
    assert a.stopped_by == b.stopped_by
    assert a.logprobs == pytest.approx(b.logprobs, abs=atol)
    assert a.entropies == pytest.approx(b.entropies, abs=atol)
    assert (a.pooled is None) == (b.pooled is None)
    for name, layers in (a.pooled or {}).items():
        for layer in layers:
            torch.testing.assert_close(layers[layer], b.pooled[name][layer], atol=atol, rtol=1e-4)


def test_hidden_states_are_one_float_vector_per_requested_layer(lm):
    [gen] = lm.generate(PROMPTS[:1], 6, capture=[1, 3])
    assert set(gen.hidden) == {1, 3}
    for vector in gen.hidden.values():
        assert vector.shape == (lm.hidden_size,)
        assert vector.dtype == torch.float32 and vector.device.type == "cpu"
        assert torch.isfinite(vector).all()
    [plain] = lm.generate(PROMPTS[:1], 6)
    assert plain.hidden is None
    assert plain.token_ids == gen.token_ids


@pytest.mark.parametrize("layers", [[0], [4]])
def test_capture_rejects_layers_the_model_does_not_have(llama, layers):
    with pytest.raises(ValueError, match="outside 1..3"):
        llama.generate(PROMPTS[:1], 2, capture=layers)


@pytest.mark.parametrize("stop_at", [None, 5])
def test_outputs_match_a_full_forward_pass_over_the_kept_tokens(lm, stop_at):
    """Log-probs, entropies and pooled states come from the generated tokens only; with a stop
    string, only from the tokens kept before it."""
    prompt = PROMPTS[0]
    [free] = lm.generate([prompt], 10)
    stop = [free.text[stop_at : stop_at + 2]] if stop_at is not None else []
    [gen] = lm.generate([prompt], 10, stop=stop, capture=ALL_LAYERS)
    kept = gen.token_ids
    assert kept == free.token_ids[: len(kept)]
    if stop:
        assert gen.stopped_by == "stop" and len(kept) < len(free.token_ids)

    prompt_ids = lm.encode(prompt)
    hidden_states, logprobs = reference(lm, prompt_ids, kept)
    positions = torch.arange(len(prompt_ids), len(prompt_ids) + len(kept))
    for layer in ALL_LAYERS:
        expected = hidden_states[layer][0, positions].mean(dim=0)
        torch.testing.assert_close(gen.hidden[layer], expected, atol=1e-4, rtol=1e-4)
    predicting = logprobs[positions - 1]
    assert gen.logprobs == pytest.approx(predicting[torch.arange(len(kept)), kept].tolist(), abs=1e-4)
    entropies = -(predicting.exp() * predicting).sum(dim=-1)
    assert gen.entropies == pytest.approx(entropies.tolist(), abs=1e-4)


@pytest.mark.parametrize("with_stop", [False, True])
def test_batched_results_equal_unbatched_despite_padding(lm, with_stop):
    stop = []
    if with_stop:  # rows end at different steps and leave the batch early
        free = lm.generate(PROMPTS, 8)
        stop = [free[0].text[2:4], free[2].text[5:7]]
    together = lm.generate(PROMPTS, 8, stop=stop, capture=ALL_LAYERS)
    if with_stop:
        assert len({len(g.token_ids) for g in together}) > 1
    for prompt, batched in zip(PROMPTS, together):
        [alone] = lm.generate([prompt], 8, stop=stop, capture=ALL_LAYERS)
        assert_same(batched, alone)
        assert batched.prompt_tokens == len(lm.encode(prompt))


def test_stop_strings_cut_the_text_and_drop_the_tokens_after_it(llama):
    prompt = PROMPTS[1]
    [free] = llama.generate([prompt], 12)
    late, early = free.text[7:9], free.text[4:6]
    cut = min(free.text.find(late), free.text.find(early))
    [gen] = llama.generate([prompt], 12, stop=[late, "never generated", early])
    assert gen.stopped_by == "stop"
    assert gen.text == free.text[:cut]
    # The kept tokens are the fewest that cover the text.
    assert llama.decode(gen.token_ids).startswith(gen.text)
    assert len(llama.decode(gen.token_ids[:-1])) < len(gen.text)
    assert gen.token_ids == free.token_ids[: len(gen.token_ids)]
    assert len(gen.logprobs) == len(gen.entropies) == len(gen.token_ids)


@pytest.mark.parametrize("at", [0, 4])
def test_eos_ends_a_row_and_is_not_kept(llama, tokenizer, at):
    prompt = PROMPTS[0]
    [free] = llama.generate([prompt], 12)
    eos = free.token_ids[at]
    llama.model.generation_config.eos_token_id = eos
    lm = HFCausalLM(llama.model, tokenizer)
    [gen] = lm.generate([prompt], 12, capture=[3])
    end = free.token_ids.index(eos)
    assert gen.stopped_by == "eos"
    assert gen.token_ids == free.token_ids[:end]
    assert gen.text == lm.decode(gen.token_ids)
    # An empty answer is represented by the state of its first generated token (the EOS).
    prompt_ids = lm.encode(prompt)
    hidden_states, _ = reference(lm, prompt_ids, free.token_ids[: max(end, 1)])
    expected = hidden_states[3][0, len(prompt_ids) : len(prompt_ids) + max(end, 1)].mean(dim=0)
    torch.testing.assert_close(gen.hidden[3], expected, atol=1e-4, rtol=1e-4)


PREFIX = "Answer briefly.\nQuestion: one?\nAnswer: 1\n"
# The first body starts with a newline that merges with the prefix's last one into one token.
BODIES = ["\nQuestion: two?\nAnswer:", "Question: three, a longer one?\nAnswer:"]


def test_prefix_cache_gives_the_uncached_results(lm):
    for body in BODIES:
        prompt = PREFIX + body
        [plain] = lm.generate([prompt], 8, capture=ALL_LAYERS)
        for _ in range(2):  # the first call fills the prefix cache, the second reuses it
            [cached] = lm.generate([prompt], 8, capture=ALL_LAYERS, prefix=PREFIX)
            assert_same(cached, plain)
            assert cached.extra["cached_prompt_tokens"] > 0


def test_prefix_cache_in_a_padded_batch_gives_the_uncached_results(llama):
    prompts = [PREFIX + body for body in BODIES]
    plain = llama.generate(prompts, 8, capture=ALL_LAYERS)
    cached = llama.generate(prompts, 8, capture=ALL_LAYERS, prefix=PREFIX)
    for a, b in zip(cached, plain):
        assert_same(a, b)


def test_prefix_must_start_every_prompt(llama):
    with pytest.raises(ValueError, match="does not start with"):
        llama.generate([PREFIX + BODIES[0], "Other text"], 4, prefix=PREFIX)


def test_an_empty_prompt_is_refused(llama):
    with pytest.raises(ValueError, match="at least one token"):
        llama.generate(["Hi", ""], 4)


def test_loglikelihood_matches_a_manual_computation(lm):
    prompt = "Which skill?\nSkill:"
    continuations = [" rewrite", " exit", "", " decompose the question"]
    got = lm.loglikelihood(prompt, continuations)
    prompt_ids = lm.encode(prompt)
    for text, score in zip(continuations, got):
        cont = lm.tokenizer(text, add_special_tokens=False).input_ids
        _, logprobs = reference(lm, prompt_ids, cont)
        expected = sum(logprobs[len(prompt_ids) - 1 + j, token].item() for j, token in enumerate(cont))
        assert score == pytest.approx(expected, abs=1e-3)
    assert got[2] == 0.0


ROUTE_PREFIX = "Pick a step, then write it.\nQ: a?\nStep: rewrite\nQuery: a b\n\n"
ROUTE_PROMPT = ROUTE_PREFIX + "Q: who directed it?\nStep:"
OPTIONS = [
    Option(" rewrite", "\nQuery:", 8, ("\n",)),
    Option(" decompose", "\nQueries:\n-", 12, ("\n\n",)),
    Option(" stop"),
]


@pytest.mark.parametrize("prefix", [None, ROUTE_PREFIX])
def test_choose_and_generate_scores_like_loglikelihood_and_generates_like_generate(lm, prefix):
    labels = [option.label for option in OPTIONS]
    expected_scores = lm.loglikelihood(ROUTE_PROMPT, labels)
    for index, option in enumerate(OPTIONS):
        choice = lm.choose_and_generate(ROUTE_PROMPT, OPTIONS, prefix=prefix, pick=lambda _, i=index: i)
        assert choice.scores == pytest.approx(expected_scores, abs=1e-4)
        assert choice.index == index
        if option.max_new_tokens == 0:
            assert choice.generation is None
            assert choice.prompt_tokens == len(lm.encode(ROUTE_PROMPT))
            continue
        continued = ROUTE_PROMPT + option.label + option.lead
        [plain] = lm.generate([continued], option.max_new_tokens, stop=option.stop)
        assert_same(choice.generation, plain)
        assert choice.prompt_tokens == plain.prompt_tokens == len(lm.encode(continued))


def test_choose_and_generate_picks_the_likeliest_label_by_default(llama):
    choice = llama.choose_and_generate(ROUTE_PROMPT, OPTIONS)
    assert choice.index == max(range(len(OPTIONS)), key=choice.scores.__getitem__)


def test_choose_and_generate_runs_the_prompt_once(llama, monkeypatch):
    """One pass over the prompt (the cached prefix is not run again), one batch scoring the
    labels, then one forward per generated token on top of them."""
    llama.choose_and_generate(ROUTE_PROMPT, OPTIONS, prefix=ROUTE_PREFIX)  # fills the prefix cache
    lengths = []
    forward = llama.model.forward
    monkeypatch.setattr(
        llama.model,
        "forward",
        lambda input_ids, **kw: lengths.append(input_ids.shape) or forward(input_ids, **kw),
    )
    choice = llama.choose_and_generate(ROUTE_PROMPT, OPTIONS, prefix=ROUTE_PREFIX, pick=lambda _: 0)
    body = len(llama.encode(ROUTE_PROMPT)) - len(llama.encode(ROUTE_PREFIX))
    assert lengths[0] == (1, body)  # the prompt's body only
    assert lengths[1][0] == len(OPTIONS)  # the labels, batched
    fed = len(llama.tokenizer(OPTIONS[0].label + OPTIONS[0].lead).input_ids)
    assert lengths[2] == (1, fed) and len(lengths) <= 3 + choice.generation.new_tokens


@pytest.mark.parametrize(("layers", "expected"), [(30, range(11, 31)), (18, range(7, 19)), (3, range(2, 4))])
def test_default_layers_are_the_posterior_two_thirds(layers, expected):
    assert default_layers(layers) == list(expected)


ROUTE_PROMPTS = [ROUTE_PROMPT, ROUTE_PREFIX + "Q: where was the film shot, and when?\nStep:", ROUTE_PREFIX + "Q: x\nStep:"]


def test_choices_served_in_one_batch_equal_one_at_a_time(llama):
    """Float32, full attention: a batch of router calls (prompts of different lengths, every
    option picked by some call, with and without the cached prefix) gives each call its own
    call's scores, choice and continuation."""
    calls = [
        ChooseCall(prompt, tuple(OPTIONS), prefix, lambda _, i=i: i % len(OPTIONS))
        for i, (prompt, prefix) in enumerate(
            [(p, ROUTE_PREFIX) for p in ROUTE_PROMPTS] + [(p, None) for p in ROUTE_PROMPTS[1:]]
        )
    ]
    alone = [llama.serve_choices([call])[0] for call in calls]
    batched = llama.serve_choices(calls)
    assert [c.index for c in batched] == [c.index for c in alone] == [0, 1, 2, 0, 1]
    for one, many in zip(alone, batched, strict=True):
        assert many.scores == pytest.approx(one.scores, rel=1e-6, abs=1e-5)
        assert many.prompt_tokens == one.prompt_tokens
        assert (many.generation is None) == (one.generation is None)
        if one.generation is not None:
            assert_same(many.generation, one.generation, atol=1e-5)


def test_loglikelihoods_served_in_one_batch_equal_one_at_a_time(llama):
    calls = [ScoreCall(prompt, (" rewrite", "", " decompose the question")) for prompt in ROUTE_PROMPTS]
    alone = [llama.loglikelihood(call.prompt, call.continuations) for call in calls]
    batched = llama.serve_scores(calls)
    for one, many in zip(alone, batched, strict=True):
        assert many == pytest.approx(one, rel=1e-6, abs=1e-5)
        assert many[1] == 0.0
