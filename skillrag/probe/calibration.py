"""How good and how honest the prober is on a labelled set: AUROC, expected calibration error
and accuracy / balanced accuracy / acceptance rate at each acceptance cut, per layer and for
the ensemble, next to an entropy baseline (a prober that cannot beat mean token entropy adds
nothing); and the rule that chooses the acceptance cut on dev."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from sklearn.calibration import calibration_curve
from sklearn.metrics import accuracy_score, balanced_accuracy_score, roc_auc_score

from skillrag.files import atomic_path
from skillrag.probe.prober import PAPER_CUT, Prober, accepted

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


CUT_RULE = (
    "auto: the cut c on the ensemble's dev P(correct) that maximises the balanced accuracy of "
    "'accept iff P(correct) > c', over the midpoints between adjacent distinct dev scores plus 0 "
    "(accept all) and 1 (accept none); ties go to the higher cut (fewer acceptances); a dev set "
    "with one class gives the paper cut 0.5 (dev figures at the auto cut are optimistic: the cut "
    "was chosen on them). paper: accept iff P(correct) > 0.5 + probe.threshold"
)


def choose_cut(probs: np.ndarray, labels: np.ndarray) -> float:
    """The acceptance cut on `probs` chosen by CUT_RULE: it balances wrongly accepted against
    wrongly rejected answers whatever the base rate, where 0.5 accepts most wrong answers of a
    prober trained on 50/50 data. Midpoints keep the cut off the dev scores themselves."""
    probs, labels = np.asarray(probs, dtype=float), np.asarray(labels, dtype=int)
    if len(np.unique(labels)) < 2:
        return PAPER_CUT
    distinct = np.unique(probs)
    candidates = np.concatenate([[0.0], (distinct[:-1] + distinct[1:]) / 2, [1.0]])
    values = np.array([balanced_accuracy_score(labels, accepted(probs, cut)) for cut in candidates])
    return float(candidates[np.isclose(values, values.max(), rtol=0.0, atol=1e-12)].max())


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
