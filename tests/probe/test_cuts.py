"""The acceptance cut chosen by what it does to answers (skillrag.probe.cuts)."""

import numpy as np
import pytest

from skillrag.probe.cuts import REJECT_ALL, choose_cut


def _dev(n: int, informative: bool, seed: int = 0):
    """A stage-1 dev set: closed-book right on 20%, the answer over passages right on 40%
    (independently, so retrieving loses some closed-book right answers); the prober's score
    tracks closed-book correctness or is noise."""
    rng = np.random.default_rng(seed)
    closed = (rng.uniform(size=n) < 0.2).astype(float)
    retrieved = (rng.uniform(size=n) < 0.4).astype(float)
    noise = rng.uniform(size=n)
    scores = 0.7 * closed + 0.3 * noise if informative else noise
    return scores, closed, retrieved


def test_a_random_prober_falls_back_to_always_retrieving():
    for seed in range(5):
        scores, closed, retrieved = _dev(200, informative=False, seed=seed)
        choice = choose_cut(scores, closed, retrieved, calls_if_rejected=1, call_cost=0.0)
        assert choice.cut == REJECT_ALL and choice.reject_rate == 1.0
        assert choice.acc == choice.acc_reject_all == pytest.approx(retrieved.mean())


def test_an_informative_prober_gets_a_selective_cut_that_keeps_dev_acc_and_saves_calls():
    scores, closed, retrieved = _dev(200, informative=True)
    choice = choose_cut(scores, closed, retrieved, calls_if_rejected=1, call_cost=0.0)
    assert 0.0 < choice.cut < REJECT_ALL
    assert 0.0 < choice.reject_rate < 1.0
    assert choice.acc > choice.acc_reject_all and choice.extra_calls == pytest.approx(choice.reject_rate)
    assert np.all(closed[scores > choice.cut] == 1)  # it accepts only right closed-book answers here


def test_a_call_cost_accepts_more_but_never_below_always_retrieving():
    scores, closed, retrieved = _dev(300, informative=True, seed=3)
    scores = np.where(closed == 1, 0.6 + 0.4 * scores, scores)  # a clean split...
    free = choose_cut(scores, closed, retrieved, 1, call_cost=0.0)
    costly = choose_cut(scores, closed, retrieved, 1, call_cost=0.5)
    assert costly.reject_rate <= free.reject_rate
    assert costly.acc >= costly.acc_reject_all


def test_a_tie_with_rejecting_everything_rejects_everything():
    scores = np.array([0.1, 0.9, 0.5])
    same = np.array([1.0, 0.0, 1.0])  # accepting or rejecting gives the same ACC on every row
    assert choose_cut(scores, same, same, 1, 0.0).cut == REJECT_ALL


def test_mismatched_inputs_are_a_clear_error():
    with pytest.raises(ValueError, match="one score, one accepted and one rejected ACC per dev row"):
        choose_cut(np.array([0.1, 0.2]), np.array([1.0]), np.array([0.0, 1.0]), 1, 0.0)
