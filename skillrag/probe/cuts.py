"""Acceptance cuts chosen by what they do to answers, not by how well they classify.

A gate accepts an answer iff P(correct) > cut; a rejected answer costs more LLM calls and is
replaced by what the next step gives (stage 1: the answer over the retrieved passages; stage 2:
a retry). Over a labelled dev set where each row knows the ACC it scores if accepted and the
(expected) ACC if rejected, `choose_cut` picks the cut that maximises

    mean ACC - call_cost x mean extra LLM calls

among the cuts whose net dev gain over rejecting everything (always retrieve / always retry) is
beyond noise: over the accepted rows, with d = ACC if accepted - ACC if rejected, sum(d) >=
Z x sqrt(sum(d^2)) (a one-sided 95% sign test in normal approximation; accepting only rows whose
outcome does not change passes with gain 0). Searching many cuts on a few dozen dev questions
would otherwise find a chance gain for a prober that knows nothing. Rejecting everything is the
default: ties and no gain go to it, so an uninformative prober falls back to always retrieving,
and the published cut never scores below it on dev. Dev figures at the chosen cut are still
optimistic (the cut was chosen on them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from skillrag.probe.prober import accepted

REJECT_ALL = 1.0  # P(correct) is at most 1: "accept iff P > 1" accepts nothing
TOLERANCE = 1e-12
Z = 1.645  # one-sided 95%

CUT_RULE = (
    "the cut c on P(correct) maximising dev mean ACC - probe.call_cost x mean extra LLM calls of "
    "'accept iff P(correct) > c', among cuts whose net dev gain d over rejecting everything passes "
    f"sum(d) >= {Z} x sqrt(sum(d^2)) over the accepted rows; "
    "candidates: midpoints between adjacent distinct dev scores, 0 (accept all) and 1 (reject all); "
    "ties and no gain go to rejecting everything, then to the higher cut"
)


@dataclass(frozen=True)
class CutChoice:
    """A cut and what it does on dev, next to rejecting and accepting everything."""

    cut: float
    acc: float  # mean dev ACC with this cut
    reject_rate: float  # share of dev rows rejected (each costs the extra calls)
    extra_calls: float  # mean extra LLM calls per row
    acc_reject_all: float
    acc_accept_all: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def outcome(scores: np.ndarray, acc_if_accepted: np.ndarray, acc_if_rejected: np.ndarray, cut: float) -> tuple[float, float]:
    """(mean ACC, share rejected) of 'accept iff score > cut'."""
    accepts = accepted(scores, cut)
    return float(np.where(accepts, acc_if_accepted, acc_if_rejected).mean()), float(1.0 - accepts.mean())


def choose_cut(
    scores: np.ndarray,
    acc_if_accepted: np.ndarray,
    acc_if_rejected: np.ndarray,
    calls_if_rejected: float,
    call_cost: float,
) -> CutChoice:
    """The cut by CUT_RULE over dev rows: `scores` P(correct) of the answer at hand,
    `acc_if_accepted` its ACC, `acc_if_rejected` the (expected) ACC of what replaces it,
    `calls_if_rejected` the extra LLM calls a rejection costs."""
    scores = np.asarray(scores, dtype=float)
    kept, replaced = np.asarray(acc_if_accepted, dtype=float), np.asarray(acc_if_rejected, dtype=float)
    if not len(scores) or not scores.shape == kept.shape == replaced.shape:
        raise ValueError(
            f"need one score, one accepted and one rejected ACC per dev row, got {scores.shape}, {kept.shape}, {replaced.shape}"
        )
    distinct = np.unique(scores)
    candidates = np.concatenate([[REJECT_ALL], ((distinct[:-1] + distinct[1:]) / 2)[::-1], [0.0]])  # fewest accepts first
    floor, change = float(replaced.mean()), kept - replaced
    best, best_value = REJECT_ALL, floor - call_cost * calls_if_rejected
    for cut in candidates[1:]:
        gained = change[accepted(scores, cut)]
        if gained.sum() < Z * np.sqrt(np.square(gained).sum()) - TOLERANCE:
            continue  # no gain beyond noise
        acc, rejected = outcome(scores, kept, replaced, cut)
        value = acc - call_cost * calls_if_rejected * rejected
        if value > best_value + TOLERANCE:
            best, best_value = float(cut), value
    acc, rejected = outcome(scores, kept, replaced, best)
    return CutChoice(best, acc, rejected, rejected * calls_if_rejected, floor, float(kept.mean()), len(scores))
