"""SQuAD-normalised answer metrics. All three read the extracted answer line, never the rationale.

EM:  the normalised answer equals some normalised gold answer.
ACC: some normalised gold answer is a substring of the normalised answer.
F1:  best token-level F1 against any gold answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from skillrag.text import normalize


def exact_match(prediction: str, golds: Sequence[str]) -> bool:
    pred = normalize(prediction)
    return any(pred == normalize(g) for g in golds)


def accuracy(prediction: str, golds: Sequence[str]) -> bool:
    pred = normalize(prediction)
    return bool(pred) and any(normalize(g) and normalize(g) in pred for g in golds)


def f1(prediction: str, golds: Sequence[str]) -> float:
    pred = normalize(prediction).split()
    best = 0.0
    for gold in golds:
        ref = normalize(gold).split()
        common = sum((Counter(pred) & Counter(ref)).values())
        if common:
            precision, recall = common / len(pred), common / len(ref)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best
