"""The learned router (beyond the paper): a logistic regression from the failure state's hidden
vector to the skill to use, so choosing costs no LLM call.

Training data comes from skill exploration (skillrag.methods.exploration builds it): a failure
state is a question whose single-step answer is wrong by gold, its vector the mean of that
answer's pooled hidden states over the resolved `lm.layers`, and its label the first query skill
(in the fixed `QUERY_SKILLS` order) whose answer was right by gold, else `exit` (no skill helped,
so stopping was right). Below a minimum number of examples per label nothing is trained; a note
says why. Weights are stored as safetensors arrays plus a JSON record (classes, layers, hidden size,
and the identity of the model whose states it learned from, checked on load by
`skillrag.provenance.check_identity`), never pickle, so loading cannot run code.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from skillrag.errors import ArtifactError
from skillrag.files import atomic_path, write_json
from skillrag.lm.base import state_vector
from skillrag.provenance import check_identity, digest
from skillrag.skills.base import SKILL_NAMES, FailureState, Routing, fallback_skill

WEIGHTS, RECORD, STATUS = "router.safetensors", "router.json", "status.json"
REBUILD = "`skillrag train-router` (or `dvc repro train_router`)"


def too_few_examples(labels: Sequence[str], min_per_skill: int) -> str | None:
    """Why no router should be fit on `labels` (some skill, exit included, has fewer than
    `min_per_skill` examples), or None when every skill has enough."""
    counts = Counter(labels)
    thin = {skill: counts[skill] for skill in SKILL_NAMES if counts[skill] < min_per_skill}
    if not thin:
        return None
    have = ", ".join(f"{skill} {counts[skill]}" for skill in SKILL_NAMES)
    return (
        f"too few failure states per skill to learn from (need train_router.min_examples_per_skill="
        f"{min_per_skill} each; have {have}): run more train_router.train_questions"
    )


@dataclass(frozen=True, eq=False)
class LearnedRouter:
    """Standardise, then softmax(coef @ x + intercept) over `classes`."""

    layers: tuple[int, ...]
    classes: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray  # [len(classes), d]
    intercept: np.ndarray  # [len(classes)]

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        logits = ((x - self.mean) / self.scale) @ self.coef.T + self.intercept
        logits = logits - logits.max(axis=-1, keepdims=True)
        odds = np.exp(logits)
        return odds / odds.sum(axis=-1, keepdims=True)

    def choose(self, state: FailureState) -> Routing:
        hidden = state.hidden or {}
        if any(layer not in hidden for layer in self.layers):
            skill = fallback_skill(state.round)
            return Routing(
                skill, {}, f"router: failure state lacks layers {list(self.layers)} -> fixed order"
            )
        probs = self.probabilities(state_vector(hidden, self.layers))
        scores = {skill: float(p) for skill, p in zip(self.classes, probs)}
        if not np.isfinite(probs).all():
            skill = fallback_skill(state.round)
            return Routing(skill, scores, f"router: scores cannot decide -> fixed order ({skill})")
        return Routing(self.classes[int(probs.argmax())], scores)

    def save(self, directory: str | Path, identity: Mapping[str, Any]) -> None:
        """Weights and record, `identity` being the model whose states the router learned from
        (`skillrag.lm.loading.model_identity`)."""
        arrays = {"mean": self.mean, "scale": self.scale, "coef": self.coef, "intercept": self.intercept}
        with atomic_path(directory) as tmp:
            tmp.mkdir()
            save_file(
                {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items()}, tmp / WEIGHTS
            )
            write_json(
                tmp / RECORD,
                {
                    "classes": list(self.classes),
                    "layers": list(self.layers),
                    "hidden_size": int(self.mean.shape[0]),
                    "identity": dict(identity),
                    "sha256": digest(tmp / WEIGHTS),
                },
            )


def load_learned_router(directory: str | Path, identity: Mapping[str, Any], rebuild: str = REBUILD) -> LearnedRouter:
    """Read a saved router, checking its weights against the sha256 in its record, and refuse one
    learned from another model than `identity` (the running one). `rebuild`: the command that
    trains it (the same linear model serves Adaptive-RAG's complexity classifier)."""
    directory = Path(directory)
    if not (directory / RECORD).is_file() or not (directory / WEIGHTS).is_file():
        status = directory / STATUS
        why = f": {json.loads(status.read_text())['reason']}" if status.is_file() else ""
        raise ArtifactError(f"no learned router at {directory}{why}; run {rebuild}, or use methods.router=prompt")
    try:
        record = json.loads((directory / RECORD).read_text())
        recorded = record["sha256"]
    except (ValueError, KeyError, TypeError):
        raise ArtifactError(f"{directory / RECORD} is not a valid router record: retrain it with {rebuild}") from None
    if digest(directory / WEIGHTS) != recorded:
        raise ArtifactError(
            f"{directory / WEIGHTS} is corrupted (its sha256 differs from {RECORD}): retrain it with {rebuild}"
        )
    check_identity(record.get("identity"), identity, f"the linear model at {directory}", rebuild)
    arrays = load_file(str(directory / WEIGHTS))
    return LearnedRouter(
        tuple(record["layers"]),
        tuple(record["classes"]),
        arrays["mean"],
        arrays["scale"],
        arrays["coef"],
        arrays["intercept"],
    )


def fit_router(x: np.ndarray, labels: Sequence[str], layers: Sequence[int], c: float = 1.0) -> LearnedRouter:
    """Logistic regression on standardised features, stored in softmax form for every class count
    (one class: a constant router; two: sklearn's single logit w becomes rows -w/2, +w/2)."""
    from sklearn.linear_model import LogisticRegression  # only training needs sklearn (slow import)

    classes = sorted(set(labels))
    mean = x.mean(axis=0)
    scale = np.where(x.std(axis=0) > 1e-6, x.std(axis=0), 1.0)
    d = x.shape[1]
    if len(classes) == 1:
        coef, intercept = np.zeros((1, d)), np.zeros(1)
    else:
        model = LogisticRegression(C=c, max_iter=1000).fit((x - mean) / scale, labels)
        coef, intercept = model.coef_, model.intercept_
        if len(classes) == 2:
            coef, intercept = (
                np.vstack([-coef / 2, coef / 2]),
                np.array([-intercept[0] / 2, intercept[0] / 2]),
            )
    f32 = np.float32
    return LearnedRouter(
        tuple(layers),
        tuple(classes),
        mean.astype(f32),
        scale.astype(f32),
        coef.astype(f32),
        intercept.astype(f32),
    )


def cross_validate_router(x: np.ndarray, labels: Sequence[str], c: float = 1.0, folds: int = 5) -> dict:
    """How well failure states predict the skill that worked, on examples the fit did not see:
    stratified k-fold accuracy against always answering the most frequent skill. Folds shrink
    to the rarest skill's count; with fewer than two per skill there is nothing to measure."""
    from sklearn.model_selection import StratifiedKFold

    counts = Counter(labels)
    report: dict = {"examples": len(labels), "by_skill": dict(sorted(counts.items()))}
    report["majority_accuracy"] = max(counts.values()) / len(labels)
    k = min(folds, min(counts.values()))
    if len(counts) < 2 or k < 2:
        report.update(cv_folds=0, cv_accuracy=None)
        return report
    y = np.asarray(labels)
    hits = 0
    for fit_rows, test_rows in StratifiedKFold(k, shuffle=True, random_state=0).split(x, y):
        router = fit_router(x[fit_rows], y[fit_rows].tolist(), layers=(), c=c)
        predicted = np.asarray(router.classes)[router.probabilities(x[test_rows]).argmax(axis=-1)]
        hits += int((predicted == y[test_rows]).sum())
    report.update(cv_folds=k, cv_accuracy=hits / len(labels))
    return report


def record_untrained(out_dir: str | Path, reason: str) -> None:
    """Leave a note instead of weights when there are too few examples, so the pipeline goes on
    and `load_learned_router` explains why there is no router."""
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        write_json(tmp / STATUS, {"trained": False, "reason": reason})
