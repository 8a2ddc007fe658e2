"""The learning curve's pools and its comparison with the baselines on dev."""

from itertools import pairwise

import numpy as np
import pandas as pd

from skillrag.probe.curve import CURVE_SHARES, compare_on_dev, curve_plot, learning_curve, nested_pools


def _train(per_dataset: int) -> pd.DataFrame:
    ids = [f"{d}-{i}" for d in ("hotpotqa", "nq", "triviaqa") for i in range(per_dataset)]
    return pd.DataFrame({
        "id": ids * 2, "dataset": [i.split("-")[0] for i in ids] * 2, "acc": [i % 2 for i in range(2 * len(ids))],
        "strategy": ["no_retrieval"] * len(ids) + ["single_step"] * len(ids),
    })


def test_pools_are_nested_and_balanced_over_the_datasets():
    pools = nested_pools(_train(40), CURVE_SHARES, seed=3)
    assert [len(p) for p in pools] == [15, 30, 60, 120]
    assert all(set(small) <= set(large) for small, large in pairwise(pools))
    for pool in pools:
        counts = pd.Series([qid.split("-")[0] for qid in pool]).value_counts()
        assert counts.max() - counts.min() <= 1
    assert [list(p) for p in nested_pools(_train(40), CURVE_SHARES, seed=3)] == [list(p) for p in pools]


def _dev(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    labels = rng.uniform(size=2 * n) < 0.3
    return pd.DataFrame({
        "id": [f"d{i}" for i in range(n)] * 2, "acc": labels.astype(int),
        "strategy": ["no_retrieval"] * n + ["single_step"] * n,
    })


def test_the_comparison_is_paired_and_per_decision_point():
    dev = _dev()
    labels = dev["acc"].to_numpy()
    noise = np.random.default_rng(1).uniform(size=len(dev))
    baselines = {"entropy": noise, "min_token_prob": noise, "answer_logprob": noise}
    compared = compare_on_dev(labels + 0.1 * noise, baselines, dev, replicates=300, seed=0)
    assert {name: block["n"] for name, block in compared.items()} == {"all": 120, "closed_book": 60, "over_evidence": 60}
    assert compared["closed_book"]["n_pos"] == int(labels[:60].sum())
    for block in compared.values():
        assert block["prober"]["auroc"] == 1.0
        lo, hi = block["prober_minus_entropy"]["auroc_ci"]
        assert 0 < lo <= hi
    same = compare_on_dev(noise, baselines, dev, replicates=300, seed=0)
    assert same["all"]["prober_minus_entropy"] == {"auroc": 0.0, "auroc_ci": [0.0, 0.0]}  # same resamples: paired


def test_a_pool_too_small_to_train_says_why_and_the_rest_of_the_curve_stands(tmp_path):
    train, dev = _train(40), _dev()
    noise = np.zeros(len(dev))
    baselines = {"entropy": noise, "min_token_prob": noise, "answer_logprob": noise}
    recipe = {"name": "cv", "pooling": "answer_last", "network": "logistic C=0.1", "layers": [3]}

    def select(rows):
        if rows["id"].nunique() < 30:
            raise ValueError("grouped cross-validation needs at least 2 train questions with a correct answer\nmore")
        return recipe, 0.8, dev["acc"].to_numpy(dtype=float)

    curve = learning_curve(select, (recipe, 0.9, dev["acc"].to_numpy(dtype=float)), train, dev, baselines, 200, 0)
    first, *rest = curve["points"]
    assert first["note"].startswith("grouped cross-validation needs") and "dev" not in first
    assert [p["cv_auroc"] for p in rest] == [0.8, 0.8, 0.9]
    assert curve["baselines"]["all"]["entropy"]["auroc"] == 0.5
    curve_plot(curve, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 0
