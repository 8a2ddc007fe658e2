"""How well a router's choices fit the explored failure states, and the prompt router's label
offsets fitted on them.

Skill exploration (skillrag.methods.exploration) tries every query skill from each failure
state (a wrong single-step answer), so each state knows which skills fixed it (their answer was
right by gold). A choice is right when the chosen skill fixed the state, or when it is exit and
none did (stopping was right). `choice_report` tabulates a router's choices against that.

`fit_offsets` picks the per-label offsets on the prompt router's raw label log-likelihoods by
what a choice is worth, not by how often it is right: a fix turns a wrong answer right, a stop
where nothing would have fixed it only saves a call. So the offsets maximise the states fixed
and, among choices fixing as many, the stops where nothing would have (each worth 1/(n+1) of a
fix). Plain accuracy counts the two alike, and on the default run's first 23 states, 18 of
which no skill fixed, its optimum was to always exit: the loop would never have retried.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from skillrag.skills.base import EXIT, QUERY_SKILLS, SKILL_NAMES

PASSES = 20  # coordinate-ascent sweeps at most (it stops at the first sweep that changes nothing)
FOLDS = 5


def right_choices(fixers: Sequence[frozenset[str]]) -> np.ndarray:
    """[n, len(SKILL_NAMES)] booleans: label j is right for state i (it fixed it; exit: none did)."""
    return np.array([[skill in fixed if skill != EXIT else not fixed for skill in SKILL_NAMES] for fixed in fixers], dtype=bool).reshape(
        len(fixers), len(SKILL_NAMES)
    )


def state_label(fixed: frozenset[str], chosen: str | None = None) -> str:
    """The skill that fixed a state: `chosen` when it is one of them, else the first in
    QUERY_SKILLS order; exit when none did."""
    if chosen in fixed:
        return chosen
    return next((skill for skill in QUERY_SKILLS if skill in fixed), EXIT)


def choice_report(choices: Sequence[str], fixers: Sequence[frozenset[str]]) -> dict:
    """A router's choices on explored failure states against the skills that fixed them: the
    confusion table (row: the skill that fixed the state, see `state_label`; column: the choice),
    how often each label was chosen, accuracy (the choice was right), how many states the chosen
    skill fixed of those some skill fixed, per-label recall (of the states a label is right for,
    the share where it was chosen), and the majority baseline (the one constant choice that is
    right most often)."""
    if len(choices) != len(fixers):
        raise ValueError(f"need one choice per failure state, got {len(choices)} choices and {len(fixers)} states")
    right = right_choices(fixers)
    table = {label: dict.fromkeys(SKILL_NAMES, 0) for label in SKILL_NAMES}
    for chosen, fixed in zip(choices, fixers, strict=True):
        table[state_label(fixed, chosen)][chosen] += 1
    hits = [bool(right[i, SKILL_NAMES.index(c)]) for i, c in enumerate(choices)]
    n = len(choices)
    constant = {skill: float(right[:, j].mean()) if n else None for j, skill in enumerate(SKILL_NAMES)}
    majority = max(SKILL_NAMES, key=lambda s: constant[s] or 0.0)
    recall = {
        skill: sum(bool(r) and c == skill for c, r in zip(choices, right[:, j])) / int(right[:, j].sum())
        if right[:, j].any()
        else None
        for j, skill in enumerate(SKILL_NAMES)
    }
    return {
        "states": n,
        "confusion": table,
        "chosen": {skill: Counter(choices)[skill] for skill in SKILL_NAMES},
        "accuracy": sum(hits) / n if n else None,
        "fixed": sum(hit and c != EXIT for hit, c in zip(hits, choices)),
        "fixable": sum(bool(fixed) for fixed in fixers),
        "recall": recall,
        "majority": {"label": majority, "accuracy": constant[majority]},
        "constant_accuracy": constant,
    }


def choose(raw: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Index of the chosen label per state: argmax of raw + offsets."""
    return np.argmax(raw + offsets, axis=1)


def choice_values(right: np.ndarray) -> np.ndarray:
    """[n, labels] what choosing label j on state i is worth: 1 for a fix, 1/(n+1) for exit
    where no skill fixed it (every stop together worth less than one fix), 0 otherwise."""
    right = np.asarray(right, dtype=bool)
    worth = np.where(np.array(SKILL_NAMES) == EXIT, 1.0 / (len(right) + 1), 1.0)
    return right * worth


def fit_offsets(raw: np.ndarray, right: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per-label offsets maximising the summed `choice_values` of argmax(raw + offsets), by
    coordinate ascent from `start`: each label's offset in turn moves to the value (a midpoint
    between the points where that label starts or stops winning a state) with the highest total,
    staying put on ties, until a sweep changes nothing."""
    raw, values = np.asarray(raw, dtype=float), choice_values(right)
    offsets = np.asarray(start, dtype=float).copy()
    rows = np.arange(len(raw))

    def total(candidate: np.ndarray) -> float:
        return float(values[rows, choose(raw, candidate)].sum())

    for _ in range(PASSES):
        moved = False
        for j in range(raw.shape[1]):
            others = np.delete(raw + offsets, j, axis=1).max(axis=1)
            points = np.unique(others - raw[:, j])  # label j wins state i iff its offset exceeds points[i]
            candidates = np.concatenate([[points[0] - 1.0], (points[:-1] + points[1:]) / 2, [points[-1] + 1.0]]) if len(points) else []
            best, best_total = offsets[j], total(offsets)
            for value in sorted(candidates, key=lambda v: abs(v - offsets[j])):
                trial = offsets.copy()
                trial[j] = value
                if total(trial) > best_total + 1e-12:
                    best, best_total = value, total(trial)
            if best != offsets[j]:
                offsets[j], moved = best, True
        if not moved:
            break
    return offsets


def cross_validated_choices(raw: np.ndarray, right: np.ndarray, start: np.ndarray, folds: int = FOLDS) -> list[str] | None:
    """Each state's choice under offsets fitted on the other folds (contiguous folds; None with
    fewer than two states per fold): what `choice_report` should judge, not the in-sample fit."""
    n = len(raw)
    k = min(folds, n // 2)
    if k < 2:
        return None
    chosen = np.empty(n, dtype=int)
    for test in np.array_split(np.arange(n), k):
        fit = np.setdiff1d(np.arange(n), test)
        chosen[test] = choose(raw[test], fit_offsets(raw[fit], right[fit], start))
    return [SKILL_NAMES[i] for i in chosen]
