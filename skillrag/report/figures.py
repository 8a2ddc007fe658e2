"""The report's own figures, drawn by the report stage from the traces (reports/figures/):

- accuracy_cost.png: each method's overall ACC (95% Wilson interval) against its cost per
  question, LLM calls and seconds, side by side: who buys accuracy with compute;
- accuracy_overall.png: the answer-quality table's overall ACC column as bars with intervals;
- prober_reliability_eval.png: the prober on the studied method's evaluation answers (closed-book
  and after evidence): the share right per score bin with its interval, the answers per bin, and
  each decision point's dev-chosen cut. The dev reliability plot (train_probe's) shows the set the
  cuts were chosen on; this one shows how they carried to the evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillrag.config import DATASETS
from skillrag.files import atomic_path
from skillrag.metrics import accuracy
from skillrag.paths import Paths
from skillrag.registry import studied_method
from skillrag.report.inputs import Inputs, load_inputs
from skillrag.report.paired import wilson
from skillrag.report.tables import scored

BINS = 10
# the prober's decision points on the studied method's rounds: (round stage, label, cut key)
DECISIONS = (("no_retrieval", "closed-book answer", "before_retrieval"), ("retrieval", "answer after evidence", "after_evidence"))


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})


def overall_acc(inputs: Inputs, method: str, datasets: Sequence[str]) -> tuple[float, float, float, int]:
    """(ACC, Wilson low, high, n) over the method's scored questions on `datasets`."""
    scores = scored(inputs, method, datasets, "acc")
    right = round(sum(scores))
    low, high = wilson(right, len(scores))
    return right / len(scores), low, high, len(scores)


def _per_question(inputs: Inputs, method: str, key: str) -> float:
    traces = inputs.all_traces(method)
    return float(np.mean([t["totals"][key] for t in traces]))


def _methods(inputs: Inputs, datasets: Sequence[str]) -> list[str]:
    return [m for m in inputs.methods if scored(inputs, m, datasets, "acc")]


def draw_accuracy_cost(inputs: Inputs, datasets: Sequence[str], studied: str, path: Path) -> Any:
    methods = _methods(inputs, datasets)
    fig = _figure(11, 4.4)
    for column, (key, label) in enumerate((("llm_calls", "LLM calls per question"),
                                           ("latency_s", "seconds per question (compute, reuse charged)"))):
        ax = fig.add_subplot(1, 2, column + 1)
        for i, method in enumerate(methods):
            acc, low, high, n = overall_acc(inputs, method, datasets)
            x = _per_question(inputs, method, key)
            ax.errorbar([x], [100 * acc], yerr=[[100 * max(0.0, acc - low)], [100 * max(0.0, high - acc)]], fmt="o", capsize=3,
                        color=f"C{i}", markersize=8 if method == studied else 5)
            ax.annotate(method, (x, 100 * acc), textcoords="offset points", xytext=(5, 4), fontsize=8,
                        fontweight="bold" if method == studied else "normal")
        ax.set_xlabel(label)
        ax.set_ylabel(f"ACC % over all {n} questions (95% Wilson interval)")
        ax.set_title(f"Accuracy against cost: {label.split(' (')[0]}")
        ax.grid(alpha=0.3)
    _save(fig, path)
    return fig


def draw_accuracy_overall(inputs: Inputs, datasets: Sequence[str], studied: str, path: Path) -> Any:
    methods = _methods(inputs, datasets)
    values = [overall_acc(inputs, m, datasets) for m in methods]
    fig = _figure(8, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    acc = np.asarray([100 * v[0] for v in values])
    err = np.clip([[100 * (v[0] - v[1]) for v in values], [100 * (v[2] - v[0]) for v in values]], 0, None)
    colours = ["C3" if m == studied else "C0" for m in methods]
    ax.bar(methods, acc, yerr=err, capsize=4, color=colours)
    for x, (a, _, _, n) in enumerate(values):
        ax.text(x, 1, f"{100 * a:.1f}", ha="center", va="bottom", fontsize=8, color="white")
    ax.set_xlabel("method")
    ax.set_ylabel(f"ACC % over all questions (n = {values[0][3]}, 95% Wilson interval)" if values else "ACC %")
    ax.set_title("Overall ACC (the answer-quality table's last column)")
    ax.tick_params(axis="x", rotation=30)
    _save(fig, path)
    return fig


def reliability_points(inputs: Inputs, method: str, stage: str) -> tuple[np.ndarray, np.ndarray]:
    """(prober score, answer right by ACC) of each of `method`'s rounds of `stage` that the prober scored."""
    pairs = [(r["score"], accuracy(r["answer"], t["golds"])) for t in inputs.all_traces(method)
             for r in t["rounds"] if r["stage"] == stage and r.get("score") is not None]
    return np.asarray([p for p, _ in pairs], dtype=float), np.asarray([y for _, y in pairs], dtype=float)


def _cut(cuts: Mapping[str, Any], key: str, method: str) -> float | None:
    cut = cuts.get(key) if key == "before_retrieval" else cuts.get(key, {}).get(method)
    return None if not cut else float(cut["cut"])


def draw_reliability(inputs: Inputs, studied: str, path: Path) -> Any:
    cuts = inputs.probe.get("cuts", {})
    fig = _figure(11, 5.2)
    edges = np.linspace(0, 1, BINS + 1)
    for column, (stage, label, key) in enumerate(DECISIONS):
        scores, right = reliability_points(inputs, studied, stage)
        top = fig.add_subplot(2, 2, column + 1)
        bottom = fig.add_subplot(2, 2, column + 3, sharex=top)
        top.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfectly calibrated")
        which = np.clip(np.digitize(scores, edges) - 1, 0, BINS - 1)
        counts = np.bincount(which, minlength=BINS)
        for b in np.flatnonzero(counts):
            inside = which == b
            k, n = int(right[inside].sum()), int(inside.sum())
            low, high = wilson(k, n)
            mean = float(scores[inside].mean())
            top.errorbar([mean], [k / n], yerr=[[max(0.0, k / n - low)], [max(0.0, high - k / n)]], fmt="o", color="C0",
                         capsize=3)
            top.annotate(f"n={n}", (mean, k / n), textcoords="offset points", xytext=(4, 4), fontsize=7)
        bottom.bar(edges[:-1], counts, width=1 / BINS, align="edge", color="C7", edgecolor="white")
        cut = _cut(cuts, key, studied)
        for ax in (top, bottom):
            if cut is not None:
                ax.axvline(min(cut, 1.0), color="C3", linestyle=":",
                           label=f"dev cut {cut:.3f} (accept iff above)" if ax is top else None)
        top.set(xlim=(0, 1.02), ylim=(0, 1), xlabel="prober P(correct), mean of the bin", ylabel="share right (ACC), 95% Wilson",
                title=f"{studied}: {label} ({len(scores)} answers)")
        top.legend(loc="upper left", fontsize=7)
        bottom.set(xlabel="prober P(correct)", ylabel="answers per bin")
    _save(fig, path)
    return fig


def _placeholder(text: str, path: Path) -> None:
    fig = _figure(6, 1.6)
    fig.text(0.5, 0.5, text, ha="center", va="center")
    _save(fig, path)


def report_figures(paths: Paths) -> tuple[Path, Path, Path]:
    """The report stage's figures: accuracy against cost, overall accuracy, and the prober's
    reliability on the evaluation."""
    return paths.accuracy_cost_figure, paths.accuracy_overall_figure, paths.eval_reliability_figure


def draw_figures(inputs: Inputs, datasets: Sequence[str], studied: str, paths: Paths) -> dict[str, bool]:
    """Draw every one of `report_figures` (the stage's outputs always exist: with nothing to plot a
    figure says so); returns file name -> whether it holds a plot."""
    scored_methods = bool(_methods(inputs, datasets))
    probed = any(len(reliability_points(inputs, studied, stage)[0]) for stage, _, _ in DECISIONS)
    cost, overall, reliability = report_figures(paths)
    for file, draw in ((cost, draw_accuracy_cost), (overall, draw_accuracy_overall)):
        if scored_methods:
            draw(inputs, datasets, studied, file)
        else:
            _placeholder("no scored traces to plot", file)
    if probed:
        draw_reliability(inputs, studied, reliability)
    else:
        _placeholder(f"no {studied} round carries a prober score", reliability)
    return {cost.name: scored_methods, overall.name: scored_methods, reliability.name: probed}


def draw_report_figures(paths: Paths) -> dict[str, bool]:
    """The report stage's figures from its inputs, into reports/figures/ (see draw_figures)."""
    inputs = load_inputs(paths)
    return draw_figures(inputs, inputs.datasets(list(DATASETS)), studied_method(), paths)
