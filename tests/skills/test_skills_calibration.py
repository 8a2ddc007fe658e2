"""Router choices scored against the explored failure states, and the prompt router's fitted offsets."""

import numpy as np
import pytest

from skillrag.skills.calibration import choice_report, cross_validated_choices, fit_offsets, right_choices

RW, QD, EF, EXIT = "query_rewriting", "question_decomposition", "evidence_focusing", "exit"


def test_the_confusion_table_puts_each_state_under_the_skill_that_fixed_it():
    fixers = [frozenset({QD}), frozenset({QD, EF}), frozenset(), frozenset(), frozenset({RW})]
    choices = [QD, EF, EF, EXIT, QD]
    report = choice_report(choices, fixers)
    table = report["confusion"]
    assert table[QD] == {RW: 0, QD: 1, EF: 0, EXIT: 0}  # state 0
    assert table[EF] == {RW: 0, QD: 0, EF: 1, EXIT: 0}  # state 1: fixed by both, the chosen one counts
    assert table[EXIT] == {RW: 0, QD: 0, EF: 1, EXIT: 1}  # states 2, 3: no skill helped
    assert table[RW] == {RW: 0, QD: 1, EF: 0, EXIT: 0}  # state 4
    assert report["accuracy"] == pytest.approx(3 / 5)  # states 0, 1, 3
    assert report["chosen"] == {RW: 0, QD: 2, EF: 2, EXIT: 1}
    # always exit is right on 2 of 5, always decomposition on 2 of 5: the first in label order wins the tie
    assert report["majority"] == {"label": QD, "accuracy": pytest.approx(2 / 5)}
    assert report["recall"] == {RW: 0.0, QD: 0.5, EF: 1.0, EXIT: 0.5}
    assert (report["fixed"], report["fixable"]) == (2, 3)  # states 0 and 1 of 0, 1 and 4


def test_a_choice_per_state_is_required():
    with pytest.raises(ValueError, match="one choice per failure state"):
        choice_report([EXIT], [])


def test_fitted_offsets_let_every_label_win_where_it_is_right():
    """Raw likelihoods that always favour decomposition (a label prior): offsets fitted on the
    states recover the skill that fixed each one, exit included."""
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 4, size=80)
    raw = rng.normal(0, 0.3, size=(80, 4)) + np.eye(4)[truth] + np.array([-2.0, 3.0, -1.0, -3.0])
    fixers = [frozenset() if t == 3 else frozenset({(RW, QD, EF)[t]}) for t in truth]
    right = right_choices(fixers)
    start = np.zeros(4)
    before = right[np.arange(80), np.argmax(raw + start, axis=1)].mean()
    offsets = fit_offsets(raw, right, start)
    chosen = np.argmax(raw + offsets, axis=1)
    assert before == pytest.approx((truth == 1).mean())  # uncorrected: always decomposition
    assert right[np.arange(80), chosen].mean() > 0.9
    assert set(chosen) == {0, 1, 2, 3}
    assert choice_report(cross_validated_choices(raw, right, start), fixers)["accuracy"] > 0.8


def test_a_fix_outweighs_every_saved_call():
    """18 of 23 states no skill fixed, 5 evidence focusing did, and the raw likelihoods cannot
    tell them apart: always exit is right most often (18 of 23), but the offsets choose the skill
    that fixes 5 (the default run's first exploration, where accuracy alone chose exit everywhere)."""
    fixers = [frozenset({EF})] * 5 + [frozenset()] * 18
    raw = np.tile([-3.0, -2.0, -1.0, -0.5], (23, 1))  # exit most likely, as the content-free start leaves it
    offsets = fit_offsets(raw, right_choices(fixers), np.zeros(4))
    report = choice_report([(RW, QD, EF, EXIT)[i] for i in np.argmax(raw + offsets, axis=1)], fixers)
    assert report["chosen"] == {RW: 0, QD: 0, EF: 23, EXIT: 0} and report["fixed"] == 5
    assert report["majority"] == {"label": EXIT, "accuracy": pytest.approx(18 / 23)}


def test_exit_is_chosen_where_nothing_fixes_when_no_fix_is_lost():
    """Where the likelihoods separate the states, the offsets keep every fix and stop on the rest."""
    fixers = [frozenset({QD})] * 4 + [frozenset()] * 6
    raw = np.array([[0.0, 1.0, 0.0, 0.0]] * 4 + [[0.0, 1.0, 0.0, 0.8]] * 6)  # exit a little likelier where nothing fixes
    offsets = fit_offsets(raw, right_choices(fixers), np.zeros(4))
    chosen = [(RW, QD, EF, EXIT)[i] for i in np.argmax(raw + offsets, axis=1)]
    assert chosen == [QD] * 4 + [EXIT] * 6


def test_offsets_stay_where_no_change_gains():
    raw = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]])
    right = right_choices([frozenset({QD}), frozenset({QD})])
    start = np.array([0.1, 0.2, 0.3, 0.4])
    assert np.array_equal(fit_offsets(raw, right, start), start)
