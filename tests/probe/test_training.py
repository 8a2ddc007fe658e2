import pytest
import torch
from sklearn.metrics import roc_auc_score

from skillrag.config import ProbeParams
from skillrag.probe.training import balanced_indices, class_weights, data_sha256, holdout_split, train_probers
from tests.probe.conftest import HIDDEN_SIZE, LAYERS


def held_out_auroc(prober, make_states, signal, rate=0.3):
    features, labels = make_states(1000, seed=99, signal=signal, rate=rate)
    return roc_auc_score(labels.numpy(), prober.score_batch(features).numpy())


def test_separable_data_gives_auroc_near_one_on_held_out_rows(trained, make_states):
    assert trained.layers == [3, 4, 5]
    assert held_out_auroc(trained, make_states, signal=3.0) > 0.98


def test_random_labels_give_chance_auroc(make_states, fast_params):
    features, labels = make_states(200, seed=1, signal=0.0)
    prober = train_probers(features, labels, fast_params, device="cpu")
    assert abs(held_out_auroc(prober, make_states, signal=0.0) - 0.5) < 0.06


def test_weighted_recipe_finds_the_direction_that_carries_the_label_and_not_noise(fast_params):
    """One direction of the hidden state carries the label (weakly, 10% correct); a prober on
    pure noise features with the same labels stays at chance."""
    generator = torch.Generator().manual_seed(21)
    n = 1600
    labels = (torch.rand(n, generator=generator) < 0.1).long()
    direction = torch.nn.functional.normalize(torch.randn(HIDDEN_SIZE, generator=generator), dim=0)
    signal = {layer: torch.randn(n, HIDDEN_SIZE, generator=generator) + 1.5 * labels[:, None] * direction for layer in LAYERS}
    noise = {layer: torch.randn(n, HIDDEN_SIZE, generator=generator) for layer in LAYERS}
    train, test = slice(0, 600), slice(600, n)
    aurocs = {}
    for name, features in (("signal", signal), ("noise", noise)):
        prober = train_probers({l: x[train] for l, x in features.items()}, labels[train], fast_params, device="cpu")
        scores = prober.score_batch({l: x[test] for l, x in features.items()})
        aurocs[name] = roc_auc_score(labels[test].numpy(), scores.numpy())
    assert aurocs["signal"] > 0.8
    assert abs(aurocs["noise"] - 0.5) < 0.1
    assert aurocs["signal"] - aurocs["noise"] > 0.25


def _real_like(n, seed, size=128):
    """States shaped like a small LM's: an offset, a strong low-rank common part, noise, and
    the label (about 10% correct) tied to a latent value along one direction."""
    generator, fixed = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(0)
    basis = torch.randn(8, size, generator=fixed)
    direction = torch.nn.functional.normalize(torch.randn(size, generator=fixed), dim=0)
    latent = torch.randn(n, generator=generator)
    labels = (torch.rand(n, generator=generator) < torch.sigmoid(2.0 * latent - 3.6)).long()
    features = {
        layer: 5.0 + torch.randn(n, 8, generator=generator) @ basis + torch.randn(n, size, generator=generator)
        + 3.0 * latent[:, None] * direction
        for layer in (0, 1)
    }
    return features, labels


def test_the_default_recipe_ranks_real_like_states_better_than_the_paper_recipe():
    features, labels = _real_like(600, seed=0)
    test_features, test_labels = _real_like(2000, seed=100)
    default = train_probers(features, labels, ProbeParams(), device="cpu")
    paper = train_probers(features, labels, ProbeParams(recipe="paper", hidden=[256], lr=1e-3), device="cpu")
    aurocs = [roc_auc_score(test_labels.numpy(), p.score_batch(test_features).numpy()) for p in (default, paper)]
    assert aurocs[0] > 0.8
    assert aurocs[0] - aurocs[1] > 0.08


def test_rare_positives_still_rank_well_with_every_row_fitted(make_states, fast_params):
    """5% correct: a prober trained on every row with class weights ranks new rows well."""
    features, labels = make_states(600, seed=31, signal=1.0, rate=0.05)
    prober = train_probers(features, labels, fast_params, device="cpu")
    test_features, test_labels = make_states(2000, seed=33, signal=1.0, rate=0.05)
    assert roc_auc_score(test_labels.numpy(), prober.score_batch(test_features).numpy()) > 0.95
    assert prober.info["n_fit"] + prober.info["n_holdout"] == 600  # no row thrown away


def test_rare_positives_get_probabilities_on_the_real_scale(make_states, fast_params):
    """Class weights train as if 50/50; the prior shift brings the mean P(correct) back near the base rate."""
    features, labels = make_states(600, seed=34, signal=1.0, rate=0.05)
    prober = train_probers(features, labels, fast_params, device="cpu")
    test_features, _ = make_states(2000, seed=35, signal=1.0, rate=0.05)
    assert float(prober.score_batch(test_features).mean()) < 0.15
    paper = train_probers(features, labels, fast_params.model_copy(update={"recipe": "paper"}), device="cpu")
    assert float(paper.score_batch(test_features).mean()) > 0.3


def test_early_stopping_stops_before_max_epochs_when_held_out_loss_rises(make_states):
    """Labels that are noise and a network big enough to memorise them: held-out loss rises
    after the first epochs, so every layer stops `patience` epochs after its best one."""
    features, labels = make_states(200, seed=41, signal=0.0)
    params = ProbeParams(hidden=[64], lr=1e-2, max_epochs=60, patience=3)
    prober = train_probers(features, labels, params, device="cpu")
    assert all(best + params.patience < params.max_epochs for best in prober.info["epochs"].values())


def test_paper_recipe_reproduces_the_previous_behaviour(make_states):
    """The scores of the recipe before the weighted one existed (50/50 downsampling, fixed
    epochs, no prior shift), recorded from that code on the same data and seed."""
    features, labels = make_states(100, seed=2, signal=1.0)
    params = ProbeParams(recipe="paper", hidden=[8], epochs=4, batch_size=32, lr=1e-2)
    prober = train_probers(features, labels, params, device="cpu")
    test_features, _ = make_states(4, seed=8, signal=1.0)
    expected = torch.tensor([0.414519, 0.519928, 0.435072, 0.669915])
    assert torch.allclose(prober.score_batch(test_features), expected, atol=1e-5)
    assert prober.info["n_fit"] == 2 * min(int(labels.sum()), int((labels == 0).sum()))
    assert prober.info["n_holdout"] == 0 and prober.info["epochs"] == {"3": 4, "4": 4, "5": 4}


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


@pytest.mark.parametrize("n_pos", [2, 3, 30])
def test_holdout_is_stratified_seeded_and_keeps_both_classes_on_both_sides(n_pos):
    labels = torch.tensor([1] * n_pos + [0] * 170)
    fit, held = holdout_split(labels, 0.2, seed=13)
    assert sorted(fit.tolist() + held.tolist()) == list(range(len(labels)))
    assert set(labels[fit].tolist()) == set(labels[held].tolist()) == {0, 1}
    assert int(labels[held].sum()) == min(max(1, round(0.2 * n_pos)), n_pos - 1)
    assert len(held) - int(labels[held].sum()) == 34
    assert torch.equal(held, holdout_split(labels, 0.2, seed=13)[1])
    assert not torch.equal(held, holdout_split(labels, 0.2, seed=14)[1])


def test_class_weights_make_both_classes_weigh_the_same():
    labels = torch.tensor([1] * 5 + [0] * 95)
    weights = class_weights(labels)
    assert float(weights[1] * 5) == pytest.approx(float(weights[0] * 95)) == pytest.approx(50.0)


def test_training_records_recipe_rows_params_and_data_hash(trained, make_states, fast_params):
    features, labels = make_states(300, seed=1)
    info = trained.info
    assert info["recipe"] == "weighted"
    assert (info["n_rows"], info["n_pos"]) == (300, int(labels.sum()))
    assert info["n_fit"] + info["n_holdout"] == 300 and info["n_holdout"] == pytest.approx(60, abs=1)
    assert sorted(info["epochs"]) == ["3", "4", "5"]
    assert all(1 <= e <= fast_params.max_epochs for e in info["epochs"].values())
    assert info["data_sha256"] == data_sha256(features, labels)
    assert info["params"] == fast_params.training()
    assert "threshold" not in info["params"]  # applied at load time: changing it must not retrain
    flipped = labels.clone()
    flipped[0] = 1 - flipped[0]
    assert data_sha256(features, flipped) != data_sha256(features, labels)


@pytest.mark.parametrize(("recipe", "n_pos", "needed"), [("paper", 0, 1), ("weighted", 0, 2), ("weighted", 1, 2)])
def test_too_few_of_a_class_is_a_clear_error(make_states, recipe, n_pos, needed):
    features, _ = make_states(20, seed=5)
    labels = torch.tensor([1] * n_pos + [0] * (20 - n_pos))
    with pytest.raises(ValueError, match=f"needs at least {needed} correct and {needed} incorrect.*got {n_pos} correct"):
        train_probers(features, labels, ProbeParams(recipe=recipe), device="cpu")


def test_mismatched_rows_are_rejected(make_states):
    features, labels = make_states(20, seed=6)
    with pytest.raises(ValueError, match=r"\[19, hidden_size\]"):
        train_probers(features, labels[:19], ProbeParams(), device="cpu")


def test_diverging_training_is_a_clear_error_naming_the_parameter(make_states):
    features, labels = make_states(60, seed=7)
    features[3][0, 0] = float("nan")  # the held-out loss can only be NaN once a NaN reaches the weights
    with pytest.raises(ValueError, match="diverged.*lower probe.lr, or check data/states"):
        train_probers(features, labels, ProbeParams(hidden=[8], max_epochs=3), device="cpu")
