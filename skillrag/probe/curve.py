"""The prober's learning curve: does it rank dev answers better than the logit baselines, and
does it keep improving with more train questions?

Pools are nested and balanced: per dataset a seeded permutation of its train questions, taken
one of each dataset in turn; a pool is a prefix of that order (`CURVE_SHARES` of the train
questions: 125 / 250 / 500 / 1,000 at 1,000 questions), so each smaller pool lies inside the
larger. At each pool the recipe is chosen again by the same rule (question-grouped CV on that
pool, skillrag.probe.recipe), which shows which pooling wins at each size, and its dev
AUROC is read beside the baselines' (skillrag.probe.baselines) on the same dev answers: all of
them, and per decision point (closed-book answers: before retrieval; answers over passages:
after evidence), since the two are different populations with cuts chosen on their own.
Intervals are 95% percentile bootstraps over dev questions (a question's rows resampled
together), the same resamples for every score, so prober - entropy is a paired difference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import zip_longest
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from skillrag.files import atomic_path
from skillrag.probe.assessment import grouped_bootstrap_auroc
from skillrag.probe.baselines import BASELINES

CURVE_SHARES = (0.125, 0.25, 0.5, 1.0)  # of the train questions
POPULATIONS = {"all": None, "closed_book": "no_retrieval", "over_evidence": "single_step"}  # name -> extract strategy
RULE = (
    "nested, balanced pools: per dataset a seeded permutation of its train questions, one of each dataset in turn, "
    "a pool a prefix of that order; at each pool the recipe is chosen again by question-grouped CV on it and "
    "trained on all of it; dev AUROC with 95% bootstrap intervals over dev questions, the same resamples for the "
    "prober and every baseline (prober - entropy: a paired difference); per population: every dev answer, the "
    "closed-book ones (before retrieval) and those over passages (after evidence)"
)

Selected = tuple[dict[str, Any], float | None, np.ndarray]  # (recipe, its CV AUROC, dev scores)


def nested_pools(train: pd.DataFrame, shares: Sequence[float], seed: int) -> list[np.ndarray]:
    """The question ids of each pool (see the module docstring), smallest first."""
    rng = np.random.default_rng(seed)
    columns = [rng.permutation(np.sort(group["id"].unique())) for _, group in sorted(train.groupby("dataset"))]
    order = np.array([qid for row in zip_longest(*columns) for qid in row if qid is not None])
    return [order[: math.ceil(share * len(order))] for share in shares]


def _population(dev: pd.DataFrame, strategy: str | None) -> np.ndarray:
    return np.ones(len(dev), dtype=bool) if strategy is None else (dev["strategy"] == strategy).to_numpy()


def compare_on_dev(
    prober: np.ndarray, baselines: Mapping[str, np.ndarray], dev: pd.DataFrame, replicates: int, seed: int
) -> dict[str, dict[str, Any]]:
    """population -> n, positives, each score's AUROC with its interval (the prober's first) and
    the paired difference prober - entropy."""
    out = {}
    for name, strategy in POPULATIONS.items():
        rows = _population(dev, strategy)
        labels = dev["acc"].to_numpy(dtype=int)[rows]
        scores = {"prober": np.asarray(prober)[rows], **{b: np.asarray(baselines[b])[rows] for b in BASELINES}}
        found = grouped_bootstrap_auroc(scores, labels, dev["id"].to_numpy()[rows], replicates, seed)
        out[name] = {
            "n": int(rows.sum()),
            "n_pos": int(labels.sum()),
            **{score: found[score] for score in scores},
            "prober_minus_entropy": found["difference"],
        }
    return out


def learning_curve(
    select: Callable[[pd.DataFrame], Selected],
    full: Selected,
    train: pd.DataFrame,
    dev: pd.DataFrame,
    baselines: Mapping[str, np.ndarray],
    replicates: int,
    seed: int,
) -> dict[str, Any]:
    """The curve over `CURVE_SHARES` of `train`'s questions: `select(rows)` chooses, trains and
    scores dev for a pool's rows; `full` is what it gave on all of `train` (not recomputed).
    Baselines do not train: their AUROCs stand once, per population, under `baselines`."""
    points, compared = [], {}
    for share, pool in zip(CURVE_SHARES, nested_pools(train, CURVE_SHARES, seed)):
        rows = train[train["id"].isin(pool)]
        point: dict[str, Any] = {"share": share, "questions": len(pool), "answers": len(rows), "positives": int(rows["acc"].sum())}
        try:
            recipe, cv_auroc, scores = full if share == 1.0 else select(rows)
        except ValueError as err:  # too few right answers in a small pool
            points.append({**point, "note": str(err).splitlines()[0]})
            continue
        compared = compare_on_dev(scores, baselines, dev, replicates, seed)
        point.update(recipe=recipe, cv_auroc=cv_auroc, dev={
            name: {key: block[key] for key in ("n", "n_pos", "prober", "prober_minus_entropy")} for name, block in compared.items()
        })
        points.append(point)
    return {  # the last point is the full pool's, always measured
        "rule": RULE,
        "points": points,
        "baselines": {name: {key: block[key] for key in ("n", "n_pos", *BASELINES)} for name, block in compared.items()},
    }


def curve_plot(curve: Mapping[str, Any], path: str | Path) -> None:
    """Dev AUROC against train answers, one panel per population: the prober at each pool with
    its interval, each baseline as a line with its band (they do not train). PNG, atomic."""
    fig = Figure(figsize=(4.0 * len(POPULATIONS), 4.0))
    FigureCanvasAgg(fig)
    measured = [p for p in curve["points"] if "dev" in p]
    answers = [p["answers"] for p in measured] or [1]
    span = (min(answers) / 1.3, max(answers) * 1.3)
    for k, name in enumerate(POPULATIONS):
        ax = fig.add_subplot(1, len(POPULATIONS), k + 1)
        base = curve["baselines"][name]
        for b, colour in zip(BASELINES, ("tab:orange", "tab:green", "tab:red")):
            ci = base[b]["auroc_ci"]
            if base[b]["auroc"] is not None:
                ax.axhline(base[b]["auroc"], color=colour, linestyle="--", label=b.replace("_", " "))
            if ci is not None:
                ax.axhspan(ci[0], ci[1], color=colour, alpha=0.12)
        blocks = [p["dev"][name]["prober"] for p in measured]
        shown = [(p["answers"], b) for p, b in zip(measured, blocks) if b["auroc"] is not None and b["auroc_ci"] is not None]
        if shown:
            x = [a for a, _ in shown]
            y = [b["auroc"] for _, b in shown]
            err = [[b["auroc"] - b["auroc_ci"][0] for _, b in shown], [b["auroc_ci"][1] - b["auroc"] for _, b in shown]]
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, color="tab:blue", label="prober")
        ax.axhline(0.5, color="grey", linewidth=0.8)
        ax.set(xscale="log", xlim=span, ylim=(0.3, 1.0), xlabel="train answers", ylabel="dev AUROC",
               title=f"{name.replace('_', ' ')} (n={base['n']}, {base['n_pos']} right)")
        ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
