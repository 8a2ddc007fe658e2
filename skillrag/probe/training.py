"""Train one prober per layer (cross-entropy on logits, AdamW) by one of two recipes.

- `weighted` (the default): every train row counts. Cross-entropy weighs each class by
  n / (2 * n_class), so the few correct answers of a small model (about 5%) count as much as
  the incorrect ones. Class weights rather than resampling: oversampling would repeat each of
  ~30 positives about 20 times an epoch (the network memorises them) and downsampling throws
  away most negatives (the paper recipe kept 58 of 600 rows). A seeded, stratified
  `holdout_fraction` of the train questions is held out (all rows of a question on one side:
  its closed-book and single-step answers share most of their state); each layer stops after `patience` epochs without a
  lower held-out (weighted) loss, at most `max_epochs`, and keeps its best epoch's weights.
  Last, the log prior odds of the fitted rows are added to the "correct" logit: weighting makes
  the network answer as if the classes were 50/50, and this brings P(correct) back to the real
  rate (what ECE measures) without changing any ranking.
- `paper`: the Probing-RAG recipe: 50/50 classes by downsampling the majority, `epochs` epochs
  (with the paper's `hidden: [256]` and `lr: 1e-3`).

The default network is the smallest of the family, LayerNorm -> Linear (`hidden: []`), at
lr 1e-2: on synthetic 576-d states shaped like SmolLM2's (offset, strong low-rank part, label
along one direction, 600 rows, 5-10% correct; 6 sets) it ranked new rows at AUROC 0.82 on
average, against 0.65 for `hidden: [256]` at lr 1e-3 and 0.58 at lr 1e-2, which overfit the
few positives within 1-2 epochs; a logistic probe on real states also beat the MLP (DESIGN §7).

Deterministic for a given seed and device: the split, the balancing, initialisation and
minibatch order all come from seeded generators, and the global torch RNG is left untouched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from skillrag.config import ProbeParams
from skillrag.errors import ConfigError, DataError
from skillrag.probe.model import LayerProber, from_logistic
from skillrag.probe.prober import Prober
from skillrag.provenance import bytes_digest


def _need_both_classes(labels: torch.Tensor, at_least: int, why: str) -> None:
    n_pos, n_neg = int((labels == 1).sum()), int((labels == 0).sum())
    if min(n_pos, n_neg) < at_least:
        raise DataError(
            f"the prober needs at least {at_least} correct and {at_least} incorrect answers{why}, got "
            f"{n_pos} correct and {n_neg} incorrect; use more training questions or add the single-step strategy"
        )


def balanced_indices(labels: torch.Tensor, seed: int) -> torch.Tensor:
    """Row indices with 50/50 classes (the paper recipe): every minority row plus a seeded random
    sample of the majority class of the same size (downsampling, so no row is repeated), in
    ascending order."""
    _need_both_classes(labels, 1, "")
    positives = torch.nonzero(labels == 1).flatten()
    negatives = torch.nonzero(labels == 0).flatten()
    minority, majority = sorted((positives, negatives), key=len)
    generator = torch.Generator().manual_seed(seed)
    kept = majority[torch.randperm(len(majority), generator=generator)[: len(minority)]]
    return torch.cat([minority, kept]).sort().values


def group_codes(groups: Sequence[object] | None, n: int) -> torch.Tensor:
    """Each row's question as an integer code; None: every row its own question."""
    if groups is None:
        return torch.arange(n)
    if len(groups) != n:
        raise ValueError(f"need one question id per row, got {len(groups)} for {n} rows")
    return torch.as_tensor(np.unique(np.asarray(groups, dtype=str), return_inverse=True)[1].reshape(-1))


def holdout_split(
    labels: torch.Tensor, fraction: float, seed: int, groups: Sequence[object] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(fit rows, held-out rows), each in ascending order, split by question (`groups`, None:
    every row its own): the questions with a correct answer and those without are each shuffled
    (seeded), and round(fraction * n) of each held out, but at least one and never all, so both
    parts hold both classes however rare the correct answers (sklearn's stratified split can
    leave the held-out part without any)."""
    why = " (the weighted recipe holds some of each out for early stopping)"
    _need_both_classes(labels, 2, why)
    codes = group_codes(groups, len(labels))
    has_correct = torch.zeros(int(codes.max()) + 1, dtype=torch.long).scatter_reduce(0, codes, labels.long(), "amax")
    generator = torch.Generator().manual_seed(seed)
    held_groups = []
    for value in (0, 1):
        members = torch.nonzero(has_correct == value).flatten()
        members = members[torch.randperm(len(members), generator=generator)]
        held_groups.append(members[: min(max(1, round(fraction * len(members))), len(members) - 1)])
    held_mask = torch.isin(codes, torch.cat(held_groups))
    fit, held = torch.nonzero(~held_mask).flatten(), torch.nonzero(held_mask).flatten()
    if {int(v) for v in labels[fit].unique()} != {0, 1} or {int(v) for v in labels[held].unique()} != {0, 1}:
        raise ValueError(f"the prober needs at least 2 questions with and 2 without a correct answer{why}")
    return fit, held


def class_weights(labels: torch.Tensor) -> torch.Tensor:
    """n / (2 * n_class) per class: both classes weigh the same in a weighted cross-entropy."""
    counts = torch.bincount(labels, minlength=2).to(torch.float32)
    return len(labels) / (2 * counts)


def data_sha256(features: Mapping[int, torch.Tensor], labels: torch.Tensor) -> str:
    """Digest of the training data, recorded in probe.json to tie a prober to its inputs."""
    chunks = []
    for layer in sorted(features):
        chunks += [f"layer {layer}\n".encode(), features[layer].detach().cpu().to(torch.float32).contiguous().numpy().tobytes()]
    return bytes_digest(*chunks, labels.cpu().to(torch.int64).contiguous().numpy().tobytes())


def _check_inputs(features: Mapping[int, torch.Tensor], labels: torch.Tensor) -> None:
    if not features:
        raise ValueError("no layers to train on")
    if labels.ndim != 1 or not ((labels == 0) | (labels == 1)).all():
        raise ValueError("labels must be a 1-D tensor of 0 (incorrect) and 1 (correct)")
    shapes = {layer: tuple(x.shape) for layer, x in features.items()}
    sizes = {shape[-1] for shape in shapes.values()}
    if any(len(shape) != 2 or shape[0] != len(labels) for shape in shapes.values()) or len(sizes) != 1:
        raise ValueError(f"features must all be [{len(labels)}, hidden_size], got {shapes}")


class _Run:
    """One layer's network, optimiser and minibatch order, all seeded from `seed`."""

    def __init__(self, input_size: int, params: ProbeParams, seed: int, device: torch.device) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model = LayerProber(input_size, params.hidden).to(device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=params.lr, weight_decay=params.weight_decay)
        self.generator = torch.Generator().manual_seed(seed)
        self.batch_size = params.batch_size

    def epoch(self, x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor | None) -> None:
        self.model.train()
        order = torch.randperm(len(y), generator=self.generator).to(x.device)
        for batch in order.split(self.batch_size):
            loss = F.cross_entropy(self.model(x[batch]), y[batch], weight=weight)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    @torch.no_grad()
    def loss(self, x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor | None) -> float:
        self.model.eval()
        return float(F.cross_entropy(self.model(x), y, weight=weight))


def _train_paper(
    x: torch.Tensor, y: torch.Tensor, rows: torch.Tensor, params: ProbeParams, seed: int, device: torch.device
) -> tuple[LayerProber, int]:
    run = _Run(x.shape[1], params, seed, device)
    for _ in range(params.epochs):
        run.epoch(x[rows], y[rows], None)
    return run.model, params.epochs


def _train_weighted(
    x: torch.Tensor, y: torch.Tensor, fit: torch.Tensor, held: torch.Tensor, params: ProbeParams, seed: int, device: torch.device
) -> tuple[LayerProber, int]:
    weight = class_weights(y[fit]).to(device)
    run = _Run(x.shape[1], params, seed, device)
    best_loss, best_epoch, best_state = math.inf, 0, {}
    for epoch in range(1, params.max_epochs + 1):
        run.epoch(x[fit], y[fit], weight)
        loss = run.loss(x[held], y[held], weight)
        if not math.isfinite(loss):
            raise ConfigError(
                f"prober training diverged (held-out loss {loss} at epoch {epoch}): lower probe.lr, "
                "or check data/states for non-finite values"
            )
        if loss < best_loss:
            best_loss, best_epoch = loss, epoch
            best_state = {key: value.clone() for key, value in run.model.state_dict().items()}
        elif epoch - best_epoch >= params.patience:
            break
    run.model.load_state_dict(best_state)
    n_pos = int(y[fit].sum())
    run.model.shift_prior(math.log(n_pos / (len(fit) - n_pos)))
    return run.model, best_epoch


def train_probers(
    features: Mapping[int, torch.Tensor],
    labels: torch.Tensor,
    params: ProbeParams,
    device: str | torch.device | None = None,
    groups: Sequence[object] | None = None,
) -> Prober:
    """Train a network per layer on `features` {layer: [N, d]} and `labels` [N] (1 = correct) by
    the `paper` recipe, or else `weighted` (with `params.hidden`); `groups` are the rows'
    question ids, which the early-stopping holdout keeps on one side (None: every row its own).
    Every layer trains on the same rows; layer `l` is seeded with `params.seed + l`. `device`
    defaults to CUDA when present."""
    _check_inputs(features, labels)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    labels = labels.to(torch.int64)
    y = labels.to(device)
    if params.recipe == "paper":
        rows = balanced_indices(labels, params.seed)
        n_fit, n_holdout = len(rows), 0
        train = partial(_train_paper, y=y, rows=rows.to(device), params=params, device=device)
    else:
        fit, held = holdout_split(labels, params.holdout_fraction, params.seed, groups)
        n_fit, n_holdout = len(fit), len(held)
        train = partial(_train_weighted, y=y, fit=fit.to(device), held=held.to(device), params=params, device=device)
    trained = {
        layer: train(features[layer].float().to(device), seed=params.seed + layer)
        for layer in tqdm(sorted(features), desc="train probers", unit="layer", leave=False)
    }
    info = {
        "recipe": "paper" if params.recipe == "paper" else "weighted",
        "network": "mlp" if params.hidden else "linear",
        "params": params.training(),
        **_facts(features, labels),
        "n_fit": n_fit,
        "n_holdout": n_holdout,
        "epochs": {str(layer): epochs for layer, (_, epochs) in trained.items()},
    }
    return Prober({layer: model.cpu().eval() for layer, (model, _) in trained.items()}, info)


def train_logistic(features: Mapping[int, torch.Tensor], labels: torch.Tensor, c: float) -> Prober:
    """A class-balanced, L2 logistic regression per layer on standardised states (sklearn,
    inverse strength `c`), each stored as an exact LayerProber (`from_logistic`). As in the
    weighted recipe, class weights make both classes count, and the log prior odds of the train
    rows are then added to the "correct" logit to bring P(correct) back to the real rate."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    _check_inputs(features, labels)
    _need_both_classes(labels, 1, "")
    y = labels.numpy().astype(int)
    prior = math.log(y.sum() / (len(y) - y.sum()))
    probers = {}
    for layer in sorted(features):
        pipeline = make_pipeline(StandardScaler(), LogisticRegression(C=c, class_weight="balanced", max_iter=1000))
        pipeline.fit(features[layer].float().numpy(), y)
        scaler, regression = pipeline[0], pipeline[1]
        probers[layer] = from_logistic(scaler.mean_, scaler.scale_, regression.coef_[0], float(regression.intercept_[0]) + prior)
    info = {"recipe": "logistic", "network": "linear", "params": {"c": c}, **_facts(features, labels), "n_fit": len(y), "n_holdout": 0}
    return Prober(probers, info)


def _facts(features: Mapping[int, torch.Tensor], labels: torch.Tensor) -> dict[str, object]:
    return {"data_sha256": data_sha256(features, labels), "n_rows": len(labels), "n_pos": int(labels.sum())}
