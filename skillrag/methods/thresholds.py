"""The retrieving baselines' trigger thresholds (FLARE's theta, DRAGIN's RIND threshold,
entropy_rag's cut): the rule that picks one on dev, and the file the methods read it from.

A threshold param is `auto` (the value tuned on dev by `skillrag tune-thresholds`, in
data/thresholds/thresholds.json) or a number that overrides it. The rule (stage tune_thresholds,
skillrag.pipeline.stages.tune_thresholds): each trigger scores every dev question's closed-book generation for
its first decision, and the threshold is the candidate whose share of dev questions sent to
retrieval is closest to the target rate; a target no candidate reaches (`reaches`) is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path

from skillrag.errors import ArtifactError, ConfigError


def load_thresholds(path: Path) -> dict[str, float]:
    """The tuned thresholds by param key (e.g. "methods.flare.theta"); {} when not tuned yet. A
    file that does not read as {"thresholds": {key: number}} is an ArtifactError naming it and the
    command that rewrites it."""
    if not path.exists():
        return {}
    try:
        tuned = json.loads(path.read_text(encoding="utf-8"))["thresholds"]
        values = {str(key): float(value) for key, value in tuned.items()}
    except (ValueError, TypeError, KeyError, AttributeError) as err:  # ValueError covers JSON and UTF-8
        raise ArtifactError(
            f"{path} is corrupted ({type(err).__name__}: {str(err)[:80]}): rewrite it with `skillrag tune-thresholds` "
            "(or `dvc repro tune_thresholds`), or restore it with `git checkout -- " + str(path) + "`"
        ) from None
    if not all(math.isfinite(v) for v in values.values()):
        raise ArtifactError(f"{path} is corrupted (a threshold that is not a finite number): rewrite it with `skillrag tune-thresholds`")
    return values


def resolve_threshold(value: str | float, key: str, tuned: Mapping[str, float]) -> float:
    """A threshold param's value: the number given, or for `auto` the value tuned on dev."""
    if value != "auto":
        return float(value)
    if key not in tuned:
        raise ConfigError(
            f"{key} is auto but no tuned value is in data/thresholds/thresholds.json: "
            f"run `skillrag tune-thresholds` (or set {key} to a number)"
        )
    return tuned[key]


def retrieval_rate(scores: Sequence[float], threshold: float, above: bool) -> float:
    """The share of scores that trigger retrieval: above the threshold (`above`), else below it."""
    if not scores:
        return 0.0
    return sum((s > threshold) if above else (s < threshold) for s in scores) / len(scores)


def reaches(rate: float, target: float, questions: int) -> bool:
    """Whether a retrieval rate over `questions` questions is the target up to half a question,
    the finest a rate over that many can get (a target between two questions' shares is reached
    by either)."""
    return abs(rate - target) * questions <= 0.5 + 1e-9


def pick_threshold(scores: Sequence[float], above: bool, target: float) -> tuple[float, float]:
    """(threshold, the retrieval rate it gives) whose rate is closest to `target`, among the
    midpoints between adjacent distinct scores and one value just beyond each extreme score (by
    1% of the score range, at least 1e-8), so that none and all are reachable; retrieval iff a
    score is strictly beyond the threshold; ties go to the lower retrieval rate."""
    if not scores:
        raise ValueError("no dev scores to choose a threshold from")
    values = sorted(set(scores))
    margin = max((values[-1] - values[0]) / 100, 1e-8)
    candidates = [values[0] - margin, *((a + b) / 2 for a, b in pairwise(values)), values[-1] + margin]
    rated = [(abs(retrieval_rate(scores, c, above) - target), retrieval_rate(scores, c, above), c) for c in candidates]
    _, rate, threshold = min(rated)
    return threshold, rate
