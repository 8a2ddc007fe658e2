import pytest
import torch
from sklearn.metrics import roc_auc_score

from skillrag.config import ProbeParams
from skillrag.probe.training import balanced_indices, data_sha256, train_probers


def held_out_auroc(prober, make_states, signal):
    features, labels = make_states(1000, seed=99, signal=signal)
    return roc_auc_score(labels.numpy(), prober.score_batch(features).numpy())


def test_separable_data_gives_auroc_near_one_on_held_out_rows(trained, make_states):
    assert trained.layers == [3, 4, 5]
    assert held_out_auroc(trained, make_states, signal=3.0) > 0.98


def test_random_labels_give_chance_auroc(make_states, fast_params):
    features, labels = make_states(200, seed=1, signal=0.0)
    prober = train_probers(features, labels, fast_params, device="cpu")
    assert abs(held_out_auroc(prober, make_states, signal=0.0) - 0.5) < 0.06


def test_same_seed_gives_identical_weights_and_another_seed_does_not(make_states, fast_params):
    features, labels = make_states(100, seed=2)
    first, second = (train_probers(features, labels, fast_params, device="cpu") for _ in range(2))
    other = train_probers(features, labels, fast_params.model_copy(update={"seed": 14}), device="cpu")
    for layer in first.layers:
        a, b, c = (p.probers[layer].state_dict() for p in (first, second, other))
        assert all(torch.equal(a[key], b[key]) for key in a)
        assert not all(torch.equal(a[key], c[key]) for key in a)


def test_training_leaves_the_global_rng_alone(make_states, fast_params):
    features, labels = make_states(40, seed=3)
    state = torch.random.get_rng_state()
    train_probers(features, labels, fast_params, device="cpu")
    assert torch.equal(state, torch.random.get_rng_state())


def test_balancing_keeps_every_minority_row_and_as_many_seeded_majority_rows():
    labels = torch.tensor([1, 0, 0, 0, 1, 0, 0, 0, 0, 0])
    rows = balanced_indices(labels, seed=13)
    assert labels[rows].sum() * 2 == len(rows) == 4
    assert {0, 4} <= set(rows.tolist())
    assert torch.equal(rows, balanced_indices(labels, seed=13))
    picks = {tuple(balanced_indices(labels, seed=s).tolist()) for s in range(10)}
    assert len(picks) > 1


def test_training_records_balanced_row_count_params_and_data_hash(trained, make_states, fast_params):
    features, labels = make_states(300, seed=1)
    assert trained.info["n_trained"] == 2 * min(int(labels.sum()), int((labels == 0).sum()))
    assert trained.info["data_sha256"] == data_sha256(features, labels)
    assert trained.info["params"] == fast_params.model_dump()
    flipped = labels.clone()
    flipped[0] = 1 - flipped[0]
    assert data_sha256(features, flipped) != data_sha256(features, labels)


@pytest.mark.parametrize("value", [0, 1])
def test_a_missing_class_is_a_clear_error(make_states, value):
    features, _ = make_states(20, seed=5)
    with pytest.raises(ValueError, match="needs both classes"):
        train_probers(features, torch.full((20,), value), ProbeParams(), device="cpu")


def test_mismatched_rows_are_rejected(make_states):
    features, labels = make_states(20, seed=6)
    with pytest.raises(ValueError, match=r"\[19, hidden_size\]"):
        train_probers(features, labels[:19], ProbeParams(), device="cpu")
