"""Stored generations: every field comes back as made, shared tensors stay shared, and a store
made by another model is left out."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
import torch

from skillrag.eval.generations import load_generations, save_generations
from skillrag.lm.base import Attention, Generation
from skillrag.methods import ReusingLM
from skillrag.prompts.cot import STOP, cot_prompt
from tests.fakes import RuleLM

MODEL = {"model": {"name": "rule-lm", "dtype": "float32"}, "device": "cpu"}


def _made(capture=(1, 2, 3, 4)):
    lm = ReusingLM(RuleLM(), capacity=0, capture=capture, record=True)
    prompts = [cot_prompt(f"Question {i}?") for i in range(3)]
    lm.generate([p.text for p in prompts], 16, stop=STOP, prefix=prompts[0].prefix)
    return lm.made


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a == b


def _round_trip(tmp_path, made):
    save_generations(tmp_path, "nq.0", made, MODEL)
    found, foreign = load_generations(tmp_path, "nq", MODEL)
    assert foreign == [] and list(found) == [m.key for m in made]
    for stored, back in zip(made, found.values(), strict=True):
        assert (back.layers, back.attention) == (stored.layers, stored.attention)
        for field in fields(back.generation):
            assert _equal(getattr(back.generation, field.name), getattr(stored.generation, field.name)), field.name
    return found


def test_every_field_of_a_stored_generation_comes_back_as_made(tmp_path):
    made = _made()
    summary = Attention([0.5, 0.25], [0.1], [" Who"])
    made[0] = replace(made[0], generation=replace(made[0].generation, attention=summary), attention=True)
    found = _round_trip(tmp_path, made)
    assert found[made[0].key].generation.compute_s > 0 and found[made[0].key].attention


@pytest.mark.skipif("pooled" not in {f.name for f in fields(Generation)}, reason="Generation.pooled (contract C1) not merged yet")
def test_every_pooling_is_stored_and_a_tensor_shared_by_two_fields_stays_shared(tmp_path):
    made = _made()
    for i, m in enumerate(made):
        pooled = {"generated_mean": m.generation.hidden, "answer_last": {layer: torch.full((8,), float(i)) for layer in m.layers}}
        made[i] = replace(m, generation=replace(m.generation, pooled=pooled))
    back = _round_trip(tmp_path, made)[made[1].key].generation
    assert back.pooled["answer_last"][3].tolist() == [1.0] * 8
    assert back.pooled["generated_mean"][2] is back.hidden[2]


def test_chunks_add_up_and_another_model_s_are_left_out(tmp_path):
    made = _made()
    save_generations(tmp_path, "nq.0", made[:2], MODEL)
    save_generations(tmp_path, "nq.0", made[2:], MODEL)  # a resumed run adds a chunk
    other = save_generations(tmp_path, "nq.1", made, {**MODEL, "device": "cuda"})
    save_generations(tmp_path, "hotpotqa.0", made, MODEL)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hotpotqa.0.0.safetensors", "nq.0.0.safetensors", "nq.0.1.safetensors", "nq.1.0.safetensors"]
    found, foreign = load_generations(tmp_path, "nq", MODEL)
    assert len(found) == 3 and foreign == [other]
    assert save_generations(tmp_path, "nq.0", [], MODEL) is None


def test_a_store_kept_to_the_readers_layers_serves_them_bit_for_bit_and_computes_other_layers(tmp_path):
    """Kept to layer 2 (the prober's): a call for layer 2 gets exactly what computing it gives, in
    every pooling; a call for layer 3 is not served (computed), so nothing a method reads changes."""
    made = _made()
    save_generations(tmp_path / "all", "nq.0", made, MODEL)
    save_generations(tmp_path / "kept", "nq.0", made, MODEL, layers=[2])
    sizes = [(tmp_path / d / "nq.0.0.safetensors").stat().st_size for d in ("all", "kept")]
    assert sizes[1] < sizes[0] / 2
    found, _ = load_generations(tmp_path / "kept", "nq", MODEL)
    assert all(m.layers == frozenset({2}) for m in found.values())
    prompts = [cot_prompt(f"Question {i}?") for i in range(3)]
    texts = [p.text for p in prompts]
    seeded, fresh = (ReusingLM(RuleLM(), capacity=0, seeds=seeds) for seeds in (found, {}))
    served = seeded.generate(texts, 16, stop=STOP, capture=[2], prefix=prompts[0].prefix)
    computed = fresh.generate(texts, 16, stop=STOP, capture=[2], prefix=prompts[0].prefix)
    assert seeded.stats.hits == 3
    for a, b in zip(served, computed, strict=True):
        assert a.text == b.text and _equal(a.pooled, b.pooled) and _equal(a.hidden, b.hidden)
    seeded.generate(texts, 16, stop=STOP, capture=[3], prefix=prompts[0].prefix)
    assert seeded.stats.hits == 3  # layer 3 was not kept: computed, not served
