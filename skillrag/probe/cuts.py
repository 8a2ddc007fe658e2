"""Acceptance cuts chosen by what they do to answers, not by how well they classify.

A gate accepts an answer iff P(correct) > cut; a rejected answer costs more LLM calls and is
replaced by what the next step gives (before retrieval: the answer over the retrieved passages;
after evidence: a retry). Over a labelled dev set where each row knows the ACC it scores if
accepted and the (expected) ACC if rejected, `choose_cut` picks the cut that maximises

    mean ACC - call_cost x mean extra LLM calls

among the cuts whose net dev gain over the decision point's null is beyond noise. The null is
what the method does without evidence that the prober helps:

- before retrieval, reject everything (always retrieve: retrieving measurably helps). A cut must
  show that *accepting* gains: over the accepted rows, with d = ACC if accepted - ACC if rejected,
  sum(d) >= Z x sqrt(sum(d^2)).
- after evidence, accept everything (keep the answer over passages: what a retry is worth is
  unknown). A cut must show that *retrying* gains: over the rejected rows, with d = ACC if
  rejected - ACC if accepted, the same test.

The test is a one-sided 95% sign test in normal approximation, with sum(d^2) read as the expected
square when the rejected ACC is a rate (a retry's success rate p replacing an answer scored k
changes it by X - k, X ~ Bernoulli(p): E[(X - k)^2] = p - 2pk + k^2), so an expected gain of a
few rows' worth of chance retries is not taken for a real one; a cut whose changed rows do not
change any outcome passes with gain 0. Searching many cuts on a few dozen dev questions would
otherwise find a chance gain for a prober that knows nothing. Ties and no gain go to the null,
so an uninformative prober always retrieves and never retries, and the published cut never
scores below the null on dev. Dev figures at the chosen cut are still optimistic (the cut was
chosen on them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from skillrag.probe.prober import accepted

REJECT_ALL = 1.0  # P(correct) is at most 1: "accept iff P > 1" accepts nothing
ACCEPT_ALL = 0.0  # a softmax probability is above 0: "accept iff P > 0" accepts everything
TOLERANCE = 1e-12
Z = 1.645  # one-sided 95%

Null = Literal["reject_all", "accept_all"]
NULLS: dict[str, Null] = {"before_retrieval": "reject_all", "after_evidence": "accept_all"}

CUT_RULE = (
    "the cut c on P(correct) maximising dev mean ACC - probe.call_cost x mean extra LLM calls of "
    "'accept iff P(correct) > c', among cuts whose net dev gain d over the null passes "
    f"sum(d) >= {Z} x sqrt(sum(E[d^2])) (E[d^2] = p - 2pk + k^2 for a rejected ACC p that is a rate); the null before retrieval is rejecting everything (always retrieve; "
    "d = accepting minus rejecting, over the accepted rows), after evidence accepting everything (never retry; "
    "d = rejecting minus accepting, over the rejected rows); "
    "candidates: midpoints between adjacent distinct dev scores, 0 (accept all) and 1 (reject all); "
    "ties and no gain go to the null, then to the cut nearest it"
)


@dataclass(frozen=True)
class CutChoice:
    """A cut and what it does on dev, next to rejecting and accepting everything. `null`: the
    cut the rule falls back to without a gain beyond noise; `acc_null` its dev ACC."""

    cut: float
    acc: float  # mean dev ACC with this cut
    reject_rate: float  # share of dev rows rejected (each costs the extra calls)
    extra_calls: float  # mean extra LLM calls per row
    acc_reject_all: float
    acc_accept_all: float
    n: int
    null: Null = "reject_all"

    @property
    def acc_null(self) -> float:
        return self.acc_reject_all if self.null == "reject_all" else self.acc_accept_all

    @property
    def is_null(self) -> bool:
        return self.cut == (REJECT_ALL if self.null == "reject_all" else ACCEPT_ALL)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "acc_null": self.acc_null, "is_null": self.is_null}


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
    null: Null = "reject_all",
) -> CutChoice:
    """The cut by CUT_RULE over dev rows: `scores` P(correct) of the answer at hand,
    `acc_if_accepted` its ACC, `acc_if_rejected` the (expected) ACC of what replaces it,
    `calls_if_rejected` the extra LLM calls a rejection costs, `null` the decision point's
    default (see the module docstring)."""
    scores = np.asarray(scores, dtype=float)
    kept, replaced = np.asarray(acc_if_accepted, dtype=float), np.asarray(acc_if_rejected, dtype=float)
    if not len(scores) or not scores.shape == kept.shape == replaced.shape:
        raise ValueError(
            f"need one score, one accepted and one rejected ACC per dev row, got {scores.shape}, {kept.shape}, {replaced.shape}"
        )
    distinct = np.unique(scores)
    second = replaced - 2 * replaced * kept + np.square(kept)  # E[d^2] either way round
    candidates = np.concatenate([[REJECT_ALL], ((distinct[:-1] + distinct[1:]) / 2)[::-1], [ACCEPT_ALL]])  # fewest accepts first
    if null == "accept_all":
        candidates = candidates[::-1]  # nearest the null first

    def value(cut: float) -> float:
        acc, rejected = outcome(scores, kept, replaced, cut)
        return acc - call_cost * calls_if_rejected * rejected

    best = float(candidates[0])
    best_value = value(best)
    for cut in candidates[1:]:
        accepts = accepted(scores, cut)
        changed = accepts if null == "reject_all" else ~accepts
        gained = (kept - replaced)[changed] if null == "reject_all" else (replaced - kept)[changed]
        if gained.sum() < Z * np.sqrt(second[changed].sum()) - TOLERANCE:
            continue  # no gain beyond noise
        if value(cut) > best_value + TOLERANCE:
            best, best_value = float(cut), value(cut)
    acc, rejected = outcome(scores, kept, replaced, best)
    return CutChoice(best, acc, rejected, rejected * calls_if_rejected, float(replaced.mean()), float(kept.mean()), len(scores), null)
