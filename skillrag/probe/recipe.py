"""The prober's recipe chosen by question-grouped cross-validation on the train rows.

Candidates: every pooling the states hold (or the one `probe.pooling` names) x a network (a
class-balanced logistic regression on standardised states per inverse strength in `probe.cv_c`,
or one hidden layer per width in `probe.cv_hidden`, trained by the weighted recipe, on the
pooling the regressions rank best) x the layers it reads (all prober layers, P(correct) averaged, or the single layer with the best CV AUROC).
Folds are sklearn's StratifiedGroupKFold by question id: a question's closed-book and
single-step rows share most of their state, and splitting them would leak the label. Each
candidate scores the mean (and sd) over folds of the held-out AUROC; the best mean wins, ties
going to the earlier (simpler) candidate. The single best layer is picked on the same folds, so
its CV figure is a little optimistic; the dev set, never seen here, gives the honest one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from sklearn.model_selection import StratifiedGroupKFold

from skillrag.config import ProbeParams
from skillrag.probe.assessment import auroc
from skillrag.probe.prober import Prober
from skillrag.probe.training import train_logistic, train_probers

Features = Mapping[int, torch.Tensor]


@dataclass(frozen=True)
class Network:
    """`linear`: logistic regression with inverse L2 strength `strength`; `mlp`: one hidden
    layer `strength` wide (weighted recipe: early stopping on held-out questions)."""

    kind: Literal["linear", "mlp"]
    strength: float

    @property
    def label(self) -> str:
        return f"logistic C={self.strength:g}" if self.kind == "linear" else f"mlp [{int(self.strength)}]"


@dataclass(frozen=True)
class Recipe:
    """What the published prober is: pooling, network, and the layers it reads."""

    pooling: str
    network: Network
    layers: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"pooling": self.pooling, "network": self.network.label, "layers": list(self.layers)}


def networks(params: ProbeParams) -> list[Network]:
    return [Network("linear", c) for c in params.cv_c] + [Network("mlp", width) for width in params.cv_hidden]


def fit(network: Network, features: Features, labels: torch.Tensor, groups: Sequence[object], params: ProbeParams) -> Prober:
    """Train `network` on every layer of `features`."""
    if network.kind == "linear":
        return train_logistic(features, labels, network.strength)
    weighted = params.model_copy(update={"recipe": "weighted", "hidden": [int(network.strength)]})
    return train_probers(features, labels, weighted, device="cpu", groups=groups)


def grouped_folds(labels: np.ndarray, groups: np.ndarray, n_splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train rows, held-out rows) per fold, stratified by label, never splitting a question;
    fewer folds than asked when fewer questions than that have a correct (or only wrong) answer."""
    has_correct = {g: False for g in groups}
    for g, y in zip(groups, labels, strict=True):
        has_correct[g] |= bool(y)
    n_pos = sum(has_correct.values())
    n_splits = min(n_splits, n_pos, len(has_correct) - n_pos)
    if n_splits < 2:
        raise ValueError(
            f"grouped cross-validation needs at least 2 train questions with a correct answer and 2 without, "
            f"got {n_pos} and {len(has_correct) - n_pos}; use more training questions or probe.recipe: weighted"
        )
    splitter = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(labels)), labels, groups))


def _summary(values: list[float | None]) -> dict[str, Any]:
    defined = [v for v in values if v is not None]
    return {
        "auroc_mean": float(np.mean(defined)) if defined else None,
        "auroc_sd": float(np.std(defined)) if defined else None,
        "folds": values,
    }


def _evaluate(
    pooling: str, by_layer: Features, network: Network, folds: list[tuple[np.ndarray, np.ndarray]],
    labels: np.ndarray, groups: np.ndarray, params: ProbeParams,
) -> list[tuple[Recipe, dict[str, Any]]]:
    """The candidates (all layers averaged, single best layer) of one pooling and network, each
    with its CV row."""
    layers = sorted(by_layer)
    per_layer: dict[int, list[float | None]] = {layer: [] for layer in layers}
    ensemble: list[float | None] = []
    for train, held in folds:
        prober = fit(network, {layer: by_layer[layer][train] for layer in layers}, torch.as_tensor(labels[train]), groups[train], params)
        probs = prober.layer_probs({layer: by_layer[layer][held] for layer in layers})
        for layer, p in probs.items():
            per_layer[layer].append(auroc(p.numpy(), labels[held]))
        ensemble.append(auroc(torch.stack(list(probs.values())).mean(dim=0).numpy(), labels[held]))
    best = max(layers, key=lambda layer: _summary(per_layer[layer])["auroc_mean"] or 0.0)
    out = []
    for subset, chosen, values in (("all", tuple(layers), ensemble), ("best", (best,), per_layer[best])):
        recipe = Recipe(pooling, network, chosen)
        out.append((recipe, {**recipe.to_dict(), "subset": subset, **_summary(values)}))
    return out


def _best(candidates: list[tuple[Recipe, dict[str, Any]]]) -> Recipe:
    """The highest mean CV AUROC; ties go to the earlier candidate."""
    means = [row["auroc_mean"] if row["auroc_mean"] is not None else -1.0 for _, row in candidates]
    return candidates[int(np.argmax(means))][0]


def cross_validate(
    features: Mapping[str, Features], labels: np.ndarray, groups: np.ndarray, params: ProbeParams
) -> tuple[list[dict[str, Any]], Recipe]:
    """The CV table (one row per candidate, JSON-ready) and the chosen recipe, over the train
    rows' `features` {pooling: {layer: [N, d]}}, `labels` [N] and question ids `groups` [N].

    The logistic regressions run on every pooling; the one-hidden-layer networks, which cost
    seconds per layer and fold where a regression costs a tenth of one, only on the pooling the
    regressions rank best."""
    labels, groups = np.asarray(labels, dtype=int), np.asarray(groups, dtype=str)
    folds = grouped_folds(labels, groups, params.cv_folds, params.seed)
    linear = [n for n in networks(params) if n.kind == "linear"]
    candidates = [
        candidate
        for pooling, by_layer in features.items()
        for network in linear
        for candidate in _evaluate(pooling, by_layer, network, folds, labels, groups, params)
    ]
    pooling = _best(candidates).pooling if candidates else next(iter(features))
    candidates += [
        candidate
        for network in networks(params)
        if network.kind == "mlp"
        for candidate in _evaluate(pooling, features[pooling], network, folds, labels, groups, params)
    ]
    if not candidates:
        raise ValueError("probe.cv_c and probe.cv_hidden are both empty: recipe cv has no candidate")
    return [row for _, row in candidates], _best(candidates)
