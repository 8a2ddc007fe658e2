"""Answer metrics on SQuAD-normalised text (skillrag.text.normalize). They read the extracted
answer, never the rationale; an empty answer never scores, and `score_answer` gives the
abstain answer no credit on any metric.

EM:            the normalised answer equals some normalised gold (SQuAD v1.1 exact_match_score).
ACC:           some normalised gold's tokens occur as a contiguous run of the normalised answer's
               tokens (whole tokens: "no" does not match "norway").
ACC_SUBSTRING: some normalised gold is a character substring of the normalised answer (the rule
               of FlashRAG's Sub_ExactMatch and Probing-RAG's accuracy; kept for comparison, it
               credits "no" inside "norway" and inside "i cannot answer this question").
F1:            best SQuAD token F1 against any gold, with HotpotQA's rule: when the answer or the
               gold normalises to yes / no / noanswer and the two differ, F1 is 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from skillrag.text import normalize, normalized_tokens

METRICS = ("em", "acc", "acc_substring", "f1")
_CLOSED = ("yes", "no", "noanswer")


def exact_match(prediction: str, golds: Sequence[str]) -> bool:
    pred = normalize(prediction)
    return bool(pred) and any(pred == normalize(g) for g in golds)


def accuracy(prediction: str, golds: Sequence[str]) -> bool:
    pred = normalized_tokens(prediction)
    return any(_contains_run(pred, normalized_tokens(g)) for g in golds)


def accuracy_substring(prediction: str, golds: Sequence[str]) -> bool:
    pred = normalize(prediction)
    return bool(pred) and any(normalize(g) and normalize(g) in pred for g in golds)


def f1(prediction: str, golds: Sequence[str]) -> float:
    return max((_f1(normalize(prediction), normalize(g)) for g in golds), default=0.0)


def score_answer(prediction: str, golds: Sequence[str], abstain: str | None = None) -> dict[str, float]:
    """Every metric of one answer (1.0 / 0.0 for the boolean ones); all 0 when the answer is
    `abstain` (the method's fixed abstention) once normalised."""
    if abstain is not None and normalize(prediction) == normalize(abstain):
        return dict.fromkeys(METRICS, 0.0)
    return {
        "em": float(exact_match(prediction, golds)),
        "acc": float(accuracy(prediction, golds)),
        "acc_substring": float(accuracy_substring(prediction, golds)),
        "f1": f1(prediction, golds),
    }


def _contains_run(tokens: Sequence[str], run: Sequence[str]) -> bool:
    width = len(run)
    return width > 0 and any(list(tokens[i : i + width]) == list(run) for i in range(len(tokens) - width + 1))


def _f1(pred: str, gold: str) -> float:
    if (pred in _CLOSED or gold in _CLOSED) and pred != gold:
        return 0.0
    pred_tokens, gold_tokens = pred.split(), gold.split()
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if not common:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)
