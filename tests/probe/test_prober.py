import json
import pickle

import pytest
import torch

from skillrag.probe.prober import ProbeError, Prober


@pytest.fixture
def saved(trained, tmp_path):
    directory = tmp_path / "probe"
    trained.save(directory, {"model": "tiny-llama"})
    return directory


def test_save_writes_safetensors_per_layer_and_the_record(trained, saved):
    assert sorted(p.name for p in saved.iterdir()) == [
        "layer_3.safetensors",
        "layer_4.safetensors",
        "layer_5.safetensors",
        "probe.json",
    ]
    record = json.loads((saved / "probe.json").read_text())
    assert record["model"] == "tiny-llama"
    assert record["layers"] == [3, 4, 5]
    assert record["hidden_size"] == 16
    assert record["hidden"] == [8]
    assert record["threshold"] == 0.0
    assert record["data_sha256"] == trained.info["data_sha256"]
    assert record["params"]["lr"] == 0.01


def test_round_trip_gives_identical_scores_without_pickle(trained, saved, make_states, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("weights must not be unpickled")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    loaded = Prober.load(saved, expected_model="tiny-llama", expected_hidden_size=16)
    features, _ = make_states(50, seed=7)
    assert torch.equal(loaded.score_batch(features), trained.score_batch(features))
    assert loaded.info["model"] == "tiny-llama"
    assert (loaded.layers, loaded.hidden, loaded.threshold) == (
        trained.layers,
        trained.hidden,
        trained.threshold,
    )


def test_score_of_one_answer_matches_its_batch_row(trained, make_states):
    features, _ = make_states(4, seed=8)
    hidden = {layer: x[2] for layer, x in features.items()}
    assert trained.score(hidden) == pytest.approx(float(trained.score_batch(features)[2]))


def test_score_is_the_mean_of_the_layer_probabilities(trained, make_states):
    features, _ = make_states(6, seed=9)
    per_layer = torch.stack(list(trained.layer_probs(features).values()))
    assert torch.allclose(trained.score_batch(features), per_layer.mean(dim=0))


def test_accepts_above_half_plus_threshold(trained):
    assert trained.accepts(0.51) and not trained.accepts(0.5)
    trained_copy = Prober(trained.probers, threshold=0.2, info=trained.info)
    assert trained_copy.accepts(0.71) and not trained_copy.accepts(0.69)


def test_scoring_states_without_a_probed_layer_names_it(trained, make_states):
    features, _ = make_states(2, seed=10)
    del features[4]
    with pytest.raises(ProbeError, match=r"lack layers \[4\]"):
        trained.score_batch(features)


def test_scoring_states_of_another_size_is_a_clear_error(trained):
    with pytest.raises(ProbeError, match="size 12, the prober expects 16"):
        trained.score({layer: torch.zeros(12) for layer in trained.layers})


def test_load_for_another_model_names_both(saved):
    with pytest.raises(ProbeError, match="'tiny-llama'.*'smollm2-135m'"):
        Prober.load(saved, expected_model="smollm2-135m")


def test_load_for_another_hidden_size_names_both(saved):
    with pytest.raises(ProbeError, match="hidden size 16.*hidden size 576"):
        Prober.load(saved, expected_hidden_size=576)


def test_missing_directory_names_the_command_that_builds_it(tmp_path):
    with pytest.raises(ProbeError, match="skillrag train-probe.*dvc repro train_probe"):
        Prober.load(tmp_path / "nowhere")


def test_missing_layer_weights_are_named(saved):
    (saved / "layer_4.safetensors").unlink()
    with pytest.raises(ProbeError, match=r"lacks weights for layers \[4\]"):
        Prober.load(saved)


def test_save_requires_the_model_id_and_keeps_structure_from_the_modules(trained, tmp_path):
    with pytest.raises(ValueError, match="name the model"):
        trained.save(tmp_path / "a", {})
    with pytest.raises(ValueError, match="threshold"):
        trained.save(tmp_path / "b", {"model": "m", "threshold": 0.3})
