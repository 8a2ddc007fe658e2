"""How good and how honest the prober is on a labelled set: AUROC, expected calibration error
and accuracy / balanced accuracy / acceptance rate at a cut, per layer and for the ensemble,
next to an entropy baseline (a prober that cannot beat mean token entropy adds nothing), and
AUROC intervals by a question-grouped bootstrap. The acceptance cuts themselves are chosen by
what they do to answers (skillrag.probe.cuts)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy.stats import rankdata
from sklearn.calibration import calibration_curve
from sklearn.metrics import accuracy_score, balanced_accuracy_score, roc_auc_score

from skillrag.files import atomic_path
from skillrag.probe.prober import Prober, accepted

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


def _mann_whitney_auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """AUROC as the Mann-Whitney U of the positives' ranks (ties averaged): sklearn's value,
    without its input validation, which dominates a thousand bootstrap replicates."""
    ranks = rankdata(scores)
    n_pos = int(labels.sum())
    return float((ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * (len(labels) - n_pos)))


def _interval(values: list[float] | np.ndarray) -> list[float] | None:
    """The 95% percentile interval, None without any value."""
    return [float(v) for v in np.percentile(values, [2.5, 97.5])] if len(values) else None


def grouped_bootstrap_auroc(
    scores: Mapping[str, np.ndarray], labels: np.ndarray, groups: np.ndarray, replicates: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """AUROC with a 95% percentile interval for each named score, resampling questions (`groups`)
    with replacement so a question's rows stay together, plus the paired difference of the first
    two names (same resamples). Replicates holding one class only are skipped."""
    labels, groups = np.asarray(labels, dtype=int), np.asarray(groups, dtype=str)
    rows_of = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {name: [] for name in scores}
    for _ in range(replicates):
        rows = np.concatenate([rows_of[i] for i in rng.integers(len(rows_of), size=len(rows_of))])
        if len(np.unique(labels[rows])) == 2:
            for name, values in scores.items():
                draws[name].append(_mann_whitney_auroc(np.asarray(values)[rows], labels[rows]))
    out: dict[str, Any] = {name: {"auroc": auroc(np.asarray(v), labels), "auroc_ci": _interval(draws[name])} for name, v in scores.items()}
    first, second = list(scores)[:2]
    point = None if out[first]["auroc"] is None else out[first]["auroc"] - out[second]["auroc"]
    out["difference"] = {"auroc": point, "auroc_ci": _interval(np.subtract(draws[first], draws[second]))}
    out["replicates"] = len(draws[first])
    return out


def cut_metrics(probs: np.ndarray, labels: np.ndarray, cut: float) -> dict[str, float | None]:
    """Accuracy, balanced accuracy (None with one class) and acceptance rate of "accept iff P > cut"."""
    accepts = accepted(probs, cut)
    return {
        "accuracy": float(accuracy_score(labels, accepts)),
        "balanced_accuracy": float(balanced_accuracy_score(labels, accepts)) if len(np.unique(labels)) == 2 else None,
        "acceptance_rate": float(np.mean(accepts)),
    }


def binary_metrics(probs: np.ndarray, labels: np.ndarray, cuts: Mapping[str, float]) -> dict[str, Any]:
    """AUROC, ECE and, per named cut, `cut_metrics` under the key `at_<name>_cut`."""
    return {
        "auroc": auroc(probs, labels),
        "ece": expected_calibration_error(probs, labels),
        **{f"at_{name}_cut": cut_metrics(probs, labels, cut) for name, cut in cuts.items()},
    }


def calibration_report(
    prober: Prober,
    features: Mapping[int, torch.Tensor],
    labels: torch.Tensor,
    mean_entropy: np.ndarray,
    cuts: Mapping[str, float],
) -> dict[str, Any]:
    """Metrics on a labelled set (JSON-serialisable; layer keys are strings), at each of `cuts`
    (e.g. {"auto": 0.12, "paper": 0.5}): the report does not depend on the cut in use.

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
    notes = []
    if len(np.unique(y)) < 2:
        notes.append(
            f"the set holds one class only ({int(y.sum())} correct of {len(y)}): AUROC is undefined (null)"
        )
    return {
        "n": len(y),
        "n_pos": int(y.sum()),
        "per_layer": {str(layer): binary_metrics(p, y, cuts) for layer, p in layer_probs.items()},
        "ensemble": binary_metrics(prober.score_batch(features).numpy(), y, cuts),
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
