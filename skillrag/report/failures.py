"""The failure space (paper §4.3, Fig. 2): where the questions still wrong after Skill-RAG's
standard rounds (closed-book, then retrieval with the question) lie in the model's hidden
space, and whether the skill the router then chose can be read off that position.

A failure state is the retrieval round of a skill_rag trace that the prober rejected while its
answer was wrong by gold (ACC); its vector is the round's `state` (the mean of the pooled hidden
states over the prober's layers, kept by `evaluate`). Its skill is the next round's stage (a
query skill or exit); the skill fixed the question when that round's own answer is right by gold
(an exit, which writes no new answer, never does). Separability is the k-fold accuracy of a
logistic regression from state to skill, against always answering the most frequent skill and
against uniform chance, plus the silhouette of the skill labels; both are left out (with a note)
when there are too few states or skills to measure them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skillrag.files import atomic_path
from skillrag.metrics import accuracy
from skillrag.registry import studied_method
from skillrag.vectors import decode_vector

METHOD = studied_method()  # skillrag.registry: the method whose failure states are studied
STANDARD_STAGES = ("no_retrieval", "retrieval")


@dataclass(frozen=True)
class FailurePoint:
    question_id: str
    dataset: str
    skill: str
    fixed: bool
    state: tuple[float, ...] | None


@dataclass(frozen=True)
class FailureSpace:
    points: list[FailurePoint]
    # rejected retrieval rounds whose answer was right by gold (the prober erred): not failures
    rejected_but_right: int
    traces: int


def failure_points(traces: Iterable[Mapping[str, Any]]) -> FailureSpace:
    """The failure states of skill_rag trace dicts (see the module docstring)."""
    points, right, count = [], 0, 0
    for trace in traces:
        count += 1
        rounds = trace["rounds"]
        for i, round_ in enumerate(rounds[:-1]):
            if round_["stage"] != "retrieval" or round_.get("accepted") is not False:
                continue
            if accuracy(round_["answer"], trace["golds"]):
                right += 1
                break
            chosen = rounds[i + 1]
            fixed = chosen["stage"] != "exit" and bool(chosen["answer"]) and accuracy(chosen["answer"], trace["golds"])
            state = decode_vector(round_.get("state"))
            points.append(
                FailurePoint(
                    trace["question_id"], trace["dataset"], chosen["stage"], fixed,
                    tuple(state) if state else None,
                )
            )
            break
    return FailureSpace(points, right, count)


def separability(x: np.ndarray, skills: Sequence[str], folds: int, seed: int) -> dict[str, Any]:
    """k-fold accuracy of a standardised logistic regression from state to skill (k = `folds`,
    fewer when the rarest skill has fewer states), the majority and chance rates (over every
    state), and the silhouette of the skill labels. A skill with a single state cannot be split
    across folds and is left out of the probe and the silhouette (a note says so);
    `probe_accuracy` and `silhouette` are None, with a note, when they cannot be measured."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import silhouette_score
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    counts = Counter(skills)
    out: dict[str, Any] = {
        "skills": len(counts),
        "majority_accuracy": max(counts.values()) / len(skills) if skills else None,
        "chance_accuracy": 1 / len(counts) if counts else None,
        "folds": 0,
        "probe_accuracy": None,
        "probe_accuracy_std": None,
        "silhouette": None,
        "notes": [],
    }
    kept = [i for i, skill in enumerate(skills) if counts[skill] >= 2]
    left_out = sorted(skill for skill, n in counts.items() if n < 2)
    if left_out:
        out["notes"].append(f"skills with one failure state left out of the probe and silhouette: {left_out}")
    x, labels = x[kept], np.asarray(skills)[kept]
    k = min(folds, min((n for n in counts.values() if n >= 2), default=0))
    if len(set(labels)) < 2 or k < 2:
        out["notes"].append(
            f"separability not measured: needs two skills with at least two failure states each (have {dict(counts)})"
        )
        return out
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    splits = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    scores = cross_val_score(model, x, labels, cv=splits)
    out.update(folds=k, probe_accuracy=float(scores.mean()), probe_accuracy_std=float(scores.std()))
    if len(labels) > len(set(labels)):
        out["silhouette"] = float(silhouette_score(x, labels))
    return out


def project(x: np.ndarray, tsne_min_points: int, seed: int) -> dict[str, np.ndarray]:
    """2-d PCA of the states (at least three), and t-SNE (perplexity below a third of the points)
    when there are at least `tsne_min_points`."""
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE

    views: dict[str, np.ndarray] = {}
    if len(x) >= 3:
        views["pca"] = PCA(n_components=2, random_state=seed).fit_transform(x)
    if len(x) >= tsne_min_points:
        perplexity = min(30.0, (len(x) - 1) / 3)
        views["tsne"] = TSNE(n_components=2, perplexity=perplexity, random_state=seed, init="pca").fit_transform(x)
    return views


def analyze_failures(
    traces: Iterable[Mapping[str, Any]], space_figure: Path, separability_figure: Path, folds: int, tsne_min_points: int,
    seed: int,
) -> dict[str, Any]:
    """The failure space of skill_rag traces: counts, separability and the projections, drawn to
    `space_figure` and `separability_figure` (always written: with few states they say so instead
    of plotting)."""
    space = failure_points(traces)
    with_state = [p for p in space.points if p.state is not None]
    notes: list[str] = []
    if len(with_state) < len(space.points):
        notes.append(
            f"{len(space.points) - len(with_state)} failure states carry no hidden vector "
            "(traces written before evaluate kept skill_rag's states): left out of the projections"
        )
    x = np.asarray([p.state for p in with_state], dtype=float) if with_state else np.zeros((0, 0))
    skills = [p.skill for p in with_state]
    sep = separability(x, skills, folds, seed)
    views = project(x, tsne_min_points, seed) if len(with_state) else {}
    for name, need in (("pca", 3), ("tsne", tsne_min_points)):
        if name not in views:
            notes.append(f"{name} skipped: {len(with_state)} failure states with a vector, needs {need}")
    _draw_projections(views, with_state, space_figure)
    _draw_separability(sep, separability_figure)
    by_skill = Counter(p.skill for p in space.points)
    fixed = Counter(p.skill for p in space.points if p.fixed)
    return {
        "traces": space.traces,
        "failure_states": len(space.points),
        "with_state": len(with_state),
        "rejected_but_right": space.rejected_but_right,
        "by_skill": dict(sorted(by_skill.items())),
        "fixed_by_skill": {skill: fixed.get(skill, 0) for skill in sorted(by_skill)},
        "fixed_rate": sum(fixed.values()) / len(space.points) if space.points else None,
        "separability": {k: v for k, v in sep.items() if k != "notes"},
        "projections": sorted(views),
        "notes": notes + sep["notes"],
    }


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")


def _draw_projections(views: Mapping[str, np.ndarray], points: Sequence[FailurePoint], path: Path) -> None:
    """One row per projection: the points by chosen skill, and by whether that skill fixed the question."""
    if not views:
        fig = _figure(6, 1.6)
        fig.text(0.5, 0.5, f"failure space: {len(points)} failure states with a vector, too few to project",
                 ha="center", va="center")
        _save(fig, path)
        return
    fig = _figure(10, 4.2 * len(views))
    skills = sorted({p.skill for p in points})
    colours = {skill: f"C{i}" for i, skill in enumerate(skills)}
    for row, (name, xy) in enumerate(sorted(views.items())):
        by_skill = fig.add_subplot(len(views), 2, 2 * row + 1)
        for skill in skills:
            chosen = [i for i, p in enumerate(points) if p.skill == skill]
            by_skill.scatter(xy[chosen, 0], xy[chosen, 1], s=18, c=colours[skill], label=f"{skill} ({len(chosen)})")
        by_skill.set_title(f"{name.upper()}: skill the router chose")
        by_skill.legend(fontsize=7)
        by_fix = fig.add_subplot(len(views), 2, 2 * row + 2)
        for fixed, colour, label in ((True, "tab:green", "fixed"), (False, "tab:red", "still wrong")):
            chosen = [i for i, p in enumerate(points) if p.fixed == fixed]
            by_fix.scatter(xy[chosen, 0], xy[chosen, 1], s=18, c=colour, label=f"{label} ({len(chosen)})")
        by_fix.set_title(f"{name.upper()}: did that skill fix the question?")
        by_fix.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)


def _draw_separability(sep: Mapping[str, Any], path: Path) -> None:
    fig = _figure(5, 3.2)
    ax = fig.add_subplot(1, 1, 1)
    if sep["probe_accuracy"] is None:
        ax.axis("off")
        ax.text(0.5, 0.5, "\n".join(sep["notes"]) or "not measured", ha="center", va="center", wrap=True, fontsize=8)
    else:
        names = [f"linear probe\n({sep['folds']}-fold)", "most frequent\nskill", "chance"]
        values = [sep["probe_accuracy"], sep["majority_accuracy"], sep["chance_accuracy"]]
        ax.bar(names, values, yerr=[sep["probe_accuracy_std"], 0, 0], color=["C0", "C7", "C7"])
        ax.set_ylim(0, 1)
        ax.set_ylabel("accuracy of the chosen skill")
        ax.set_title("Is the skill readable from the failure state?")
    fig.tight_layout()
    _save(fig, path)
