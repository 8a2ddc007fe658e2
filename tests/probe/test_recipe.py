"""The recipe chosen by question-grouped cross-validation (skillrag.probe.recipe)."""

import numpy as np
import pytest
import torch

from skillrag.config import ProbeParams
from skillrag.probe.recipe import cross_validate, grouped_folds
from skillrag.probe.training import holdout_split
from tests.probe.conftest import LAYERS


def _questions(n_questions: int, seed: int):
    """Two rows per question (closed-book, single-step), right on ~35% of rows."""
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"q{i}" for i in range(n_questions)], 2)
    labels = (rng.uniform(size=2 * n_questions) < 0.35).astype(int)
    return labels, groups


def test_grouped_folds_never_put_one_questions_rows_on_both_sides():
    labels, groups = _questions(60, seed=0)
    folds = grouped_folds(labels, groups, 5, seed=13)
    assert len(folds) == 5
    held_all = np.concatenate([held for _, held in folds])
    assert sorted(held_all) == list(range(len(labels)))  # every row held out exactly once
    for train, held in folds:
        assert not set(groups[train]) & set(groups[held])
        assert set(labels[held]) == {0, 1}


def test_too_few_questions_with_a_right_answer_is_a_clear_error():
    labels = np.array([1, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="at least 2 train questions with a correct answer.*got 1"):
        grouped_folds(labels, np.array(["a", "a", "b", "b", "c", "c"]), 5, seed=0)


def test_the_early_stopping_holdout_keeps_each_question_on_one_side():
    labels, groups = _questions(60, seed=1)
    fit, held = holdout_split(torch.as_tensor(labels), 0.2, seed=13, groups=groups)
    assert sorted(fit.tolist() + held.tolist()) == list(range(len(labels)))
    assert not set(groups[fit.numpy()]) & set(groups[held.numpy()])
    assert set(labels[held.numpy()]) == set(labels[fit.numpy()]) == {0, 1}


def _states(labels: np.ndarray, informative: str, seed: int) -> dict[str, dict[int, torch.Tensor]]:
    """Three poolings; only `informative` carries the label (along one direction per layer)."""
    generator = torch.Generator().manual_seed(seed)
    y = torch.as_tensor(labels, dtype=torch.float32)[:, None]
    out = {}
    for pooling in ("generated_mean", "answer_mean", "answer_last"):
        signal = 2.0 if pooling == informative else 0.0
        out[pooling] = {layer: torch.randn(len(labels), 16, generator=generator) + signal * y * torch.eye(16)[layer] for layer in LAYERS}
    return out


@pytest.mark.parametrize("informative", ["answer_last", "generated_mean"])
def test_cv_picks_the_pooling_that_carries_the_label(informative):
    labels, groups = _questions(80, seed=2)
    params = ProbeParams(cv_folds=4, cv_c=[0.01, 1.0], cv_hidden=[8], max_epochs=10, patience=2)
    table, chosen = cross_validate(_states(labels, informative, seed=3), labels, groups, params)
    assert chosen.pooling == informative
    assert len(table) == (3 * 2 + 1) * 2  # (poolings x regressions + the mlp on the best pooling) x (all layers, best layer)
    assert {row["pooling"] for row in table if row["network"] == "mlp [8]"} == {informative}
    best = max(row["auroc_mean"] for row in table)
    assert best > 0.85
    assert max(row["auroc_mean"] for row in table if row["pooling"] != informative) < 0.75
    assert all(row["auroc_sd"] >= 0 and len(row["folds"]) == 4 for row in table)
    assert {row["network"] for row in table} == {"logistic C=0.01", "logistic C=1", "mlp [8]"}
