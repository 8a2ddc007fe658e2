"""Train one prober per layer on balanced data (Probing-RAG recipe, cross-entropy on logits).

Deterministic for a given seed and device: balancing, initialisation and minibatch order all
come from seeded generators, and the global torch RNG is left untouched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from tqdm import tqdm

from skillrag.config import ProbeParams
from skillrag.probe.model import LayerProber
from skillrag.probe.prober import Prober


def balanced_indices(labels: torch.Tensor, seed: int) -> torch.Tensor:
    """Row indices with 50/50 classes: every minority row plus a seeded random sample of the
    majority class of the same size (downsampling, so no row is repeated), in ascending order.

    Correct answers are rare for small models (6% closed-book here), and an unbalanced prober
    would learn to say "incorrect" to everything.
    """
    positives = torch.nonzero(labels == 1).flatten()
    negatives = torch.nonzero(labels == 0).flatten()
    if len(positives) == 0 or len(negatives) == 0:
        raise ValueError(
            f"the prober needs both classes, got {len(positives)} correct and {len(negatives)} incorrect "
            "answers; use more training questions or add the single-step strategy"
        )
    minority, majority = sorted((positives, negatives), key=len)
    generator = torch.Generator().manual_seed(seed)
    kept = majority[torch.randperm(len(majority), generator=generator)[: len(minority)]]
    return torch.cat([minority, kept]).sort().values


def data_sha256(features: Mapping[int, torch.Tensor], labels: torch.Tensor) -> str:
    """Hash of the training data, recorded in probe.json to tie a prober to its inputs."""
    digest = hashlib.sha256()
    for layer in sorted(features):
        digest.update(f"layer {layer}\n".encode())
        digest.update(features[layer].detach().cpu().to(torch.float32).contiguous().numpy().tobytes())
    digest.update(labels.cpu().to(torch.int64).contiguous().numpy().tobytes())
    return digest.hexdigest()


def _check_inputs(features: Mapping[int, torch.Tensor], labels: torch.Tensor) -> None:
    if not features:
        raise ValueError("no layers to train on")
    if labels.ndim != 1 or not ((labels == 0) | (labels == 1)).all():
        raise ValueError("labels must be a 1-D tensor of 0 (incorrect) and 1 (correct)")
    shapes = {layer: tuple(x.shape) for layer, x in features.items()}
    sizes = {shape[-1] for shape in shapes.values()}
    if any(len(shape) != 2 or shape[0] != len(labels) for shape in shapes.values()) or len(sizes) != 1:
        raise ValueError(f"features must all be [{len(labels)}, hidden_size], got {shapes}")


def _train_layer(
    x: torch.Tensor, y: torch.Tensor, params: ProbeParams, seed: int, device: torch.device
) -> LayerProber:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LayerProber(x.shape[1], params.hidden)
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=params.lr, weight_decay=params.weight_decay)
    generator = torch.Generator().manual_seed(seed)
    x, y = x.to(device), y.to(device)
    for _ in range(params.epochs):
        order = torch.randperm(len(y), generator=generator).to(device)
        for batch in order.split(params.batch_size):
            loss = F.cross_entropy(model(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.cpu().eval()


def train_probers(
    features: Mapping[int, torch.Tensor],
    labels: torch.Tensor,
    params: ProbeParams,
    device: str | torch.device | None = None,
) -> Prober:
    """Train a prober per layer on `features` {layer: [N, d]} and `labels` [N] (1 = correct).

    The classes are balanced once (see `balanced_indices`) and every layer trains on the same
    rows; layer `l` is seeded with `params.seed + l`. `device` defaults to CUDA when present.
    """
    _check_inputs(features, labels)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    labels = labels.to(torch.int64)
    rows = balanced_indices(labels, params.seed)
    probers = {
        layer: _train_layer(features[layer][rows].float(), labels[rows], params, params.seed + layer, device)
        for layer in tqdm(sorted(features), desc="train probers", unit="layer")
    }
    info = {
        "params": params.model_dump(),
        "data_sha256": data_sha256(features, labels),
        "n_rows": len(labels),
        "n_pos": int(labels.sum()),
        "n_trained": len(rows),
    }
    return Prober(probers, params.threshold, info)
