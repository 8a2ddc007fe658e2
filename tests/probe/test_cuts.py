"""The acceptance cut chosen by what it does to answers (skillrag.probe.cuts)."""

import numpy as np
import pytest

from skillrag.probe.cuts import ACCEPT_ALL, REJECT_ALL, choose_cut


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


def _after_evidence(n: int, retry_rights_wrong: float, retry_keeps_right: float, seed: int = 0):
    """An after-evidence dev set: answers over passages right on 40%, the prober's score tracks
    correctness; a retry rights a wrong answer / keeps a right one at the given rates."""
    rng = np.random.default_rng(seed)
    right = (rng.uniform(size=n) < 0.4).astype(float)
    scores = 0.6 * right + 0.4 * rng.uniform(size=n)
    return scores, right, np.where(right == 1, retry_keeps_right, retry_rights_wrong)


def test_retries_that_hurt_on_dev_accept_everything_after_evidence():
    """A retry that rights no wrong answer and breaks 30% of right ones: even a prober that
    separates right from wrong answers retries nothing."""
    scores, right, after_retry = _after_evidence(200, retry_rights_wrong=0.0, retry_keeps_right=0.7)
    choice = choose_cut(scores, right, after_retry, calls_if_rejected=2, call_cost=0.0, null="accept_all")
    assert choice.cut == ACCEPT_ALL and choice.reject_rate == 0.0 and choice.is_null
    assert choice.acc == choice.acc_accept_all == choice.acc_null == pytest.approx(right.mean())


def test_a_gain_within_noise_does_not_leave_the_null_after_evidence():
    """A retry that rights 10% of the 20 doubted wrong answers is expected to gain 2 answers:
    within the chance of 20 tries at 10% (sqrt(20 x 0.1) = 1.4; 1.645 x 1.4 > 2)."""
    scores = np.concatenate([np.linspace(0.01, 0.2, 20), [0.9, 0.95]])
    right = np.concatenate([np.zeros(20), np.ones(2)])
    after_retry = np.where(right == 1, 1.0, 0.1)
    assert choose_cut(scores, right, after_retry, 1, 0.0, null="accept_all").cut == ACCEPT_ALL


def test_retries_that_help_retry_the_answers_the_prober_doubts():
    scores, right, after_retry = _after_evidence(200, retry_rights_wrong=0.6, retry_keeps_right=0.9)
    choice = choose_cut(scores, right, after_retry, calls_if_rejected=2, call_cost=0.0, null="accept_all")
    assert 0.0 < choice.cut < REJECT_ALL and not choice.is_null
    assert choice.acc > choice.acc_accept_all and 0.0 < choice.reject_rate < 1.0
    assert np.all(right[scores <= choice.cut] == 0)  # it retries only wrong answers here
