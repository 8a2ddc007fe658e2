"""How good and how honest the prober is on a labelled set: AUROC, accuracy at the acceptance
threshold and expected calibration error, per layer and for the ensemble, next to an entropy
baseline (a prober that cannot beat mean token entropy adds nothing)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from sklearn.calibration import calibration_curve
from sklearn.metrics import accuracy_score, roc_auc_score

from skillrag.files import atomic_path
from skillrag.probe.prober import Prober

N_BINS = 10


def expected_calibration_error(probs: np.ndarray, labels: np.ndarray, n_bins: int = N_BINS) -> float:
    """Sum over equal-width bins of (rows in bin / rows) * |fraction correct - mean P(correct)|.

    Bins are those of sklearn's `calibration_curve` ([0, 0.1], (0.1, 0.2], ...), which drops
    empty bins and their weights, so the weighting is computed here.
    """
    probs, labels = np.asarray(probs, dtype=float), np.asarray(labels, dtype=float)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    bins = np.searchsorted(edges[1:-1], probs)
    counts = np.bincount(bins, minlength=n_bins)
    prob_sums = np.bincount(bins, weights=probs, minlength=n_bins)
    label_sums = np.bincount(bins, weights=labels, minlength=n_bins)
    occupied = counts > 0
    weights = counts[occupied] / len(probs)
    gaps = np.abs(label_sums[occupied] - prob_sums[occupied]) / counts[occupied]
    return float((weights * gaps).sum())


def auroc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """ROC AUC, or None when the labels hold one class only (AUROC is undefined then)."""
    return float(roc_auc_score(labels, scores)) if len(np.unique(labels)) == 2 else None


def binary_metrics(probs: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, float | None]:
    """AUROC, accuracy of "accept iff P(correct) > 0.5 + threshold", and ECE."""
    accepted = probs > 0.5 + threshold
    return {
        "auroc": auroc(probs, labels),
        "accuracy": float(accuracy_score(labels, accepted)),
        "ece": expected_calibration_error(probs, labels),
    }


def calibration_report(
    prober: Prober, features: Mapping[int, torch.Tensor], labels: torch.Tensor, mean_entropy: np.ndarray
) -> dict[str, Any]:
    """Metrics on a labelled set (JSON-serialisable; layer keys are strings).

    `mean_entropy` is each row's mean token entropy; its negation is the baseline score
    (confident answers are more often correct).
    """
    y = labels.cpu().numpy().astype(int)
    entropy = np.asarray(mean_entropy, dtype=float)
    if len(y) == 0 or entropy.shape != y.shape:
        raise ValueError(
            f"need a non-empty set with one mean entropy per row, got {len(y)} labels, {entropy.shape}"
        )
    layer_probs = {layer: p.numpy() for layer, p in prober.layer_probs(features).items()}
    ensemble = np.mean(list(layer_probs.values()), axis=0)
    notes = []
    if len(np.unique(y)) < 2:
        notes.append(
            f"the set holds one class only ({int(y.sum())} correct of {len(y)}): AUROC is undefined (null)"
        )
    return {
        "n": len(y),
        "n_pos": int(y.sum()),
        "threshold": prober.threshold,
        "per_layer": {str(layer): binary_metrics(p, y, prober.threshold) for layer, p in layer_probs.items()},
        "ensemble": binary_metrics(ensemble, y, prober.threshold),
        "entropy_baseline": {"auroc": auroc(-entropy, y)},
        "notes": notes,
    }


def reliability_plot(probs: np.ndarray, labels: np.ndarray, path: str | Path) -> None:
    """Reliability diagram (fraction correct vs mean P(correct) per bin) as a PNG, written atomically."""
    probs, labels = np.asarray(probs, dtype=float), np.asarray(labels, dtype=int)
    fraction_correct, mean_prob = calibration_curve(labels, probs, n_bins=N_BINS)
    fig = Figure(figsize=(4.5, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfectly calibrated")
    ax.plot(mean_prob, fraction_correct, marker="o", label="prober")
    ax.set(
        xlim=(0, 1),
        ylim=(0, 1),
        xlabel="mean P(correct)",
        ylabel="fraction correct",
        title=f"reliability (ECE {expected_calibration_error(probs, labels):.3f}, n={len(labels)})",
    )
    ax.legend(loc="upper left")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
