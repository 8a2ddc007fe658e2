"""Paired comparisons on the same questions (Koehn 2004; Dror et al. 2018): two methods, or two
commits of one method, scored 0/1 per question.

- the difference of the means with a 95% paired percentile bootstrap interval: the questions are
  resampled (RESAMPLES times, seed SEED), each resample keeping a question's two outcomes together
  (scipy.stats.bootstrap, paired=True);
- won / lost: the questions right (1) under the first and wrong (0) under the second, and the reverse;
- the exact McNemar p-value: a two-sided binomial test on the won and lost questions alone
  (statsmodels), and its one-sided form (scipy's binomtest) for "did it get worse?".

With 30-50 questions one question moves a mean by 2-3 points, so a difference means something
only where the interval leaves out 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest, bootstrap
from statsmodels.stats.contingency_tables import mcnemar

from skillrag.report.outcomes import KEY

RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
ALPHA = 0.05  # family-wise, after Holm's adjustment
INDISTINGUISHABLE = "not distinguishable at this n"


@dataclass(frozen=True)
class Paired:
    """First minus second on `n` questions both were scored on."""

    n: int
    difference: float  # mean(first) - mean(second)
    low: float  # its 95% paired bootstrap interval
    high: float
    won: int  # first right, second wrong
    lost: int  # first wrong, second right
    p_value: float  # exact McNemar, two-sided

    @property
    def distinguishable(self) -> bool:
        """The interval leaves out 0."""
        return self.low > 0 or self.high < 0


def reading(test: Paired, first: str, second: str, adjusted_p: float) -> str:
    """Which of two methods scored higher, said only where `adjusted_p` (the test's McNemar p
    adjusted for every test it is read with) is below ALPHA; the direction is the difference's."""
    if adjusted_p >= ALPHA or test.difference == 0:
        return INDISTINGUISHABLE
    return f"{first} higher" if test.difference > 0 else f"{second} higher"


def _mean_difference(first: np.ndarray, second: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(first, axis=axis) - np.mean(second, axis=axis)


def paired(first: Sequence[float], second: Sequence[float]) -> Paired:
    """Compare two aligned 0/1 outcome lists (question i of each is the same question)."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ValueError(f"paired outcomes must be two non-empty lists of one length, got {a.shape} and {b.shape}")
    if not np.isin(np.concatenate([a, b]), (0.0, 1.0)).all():
        raise ValueError("paired outcomes must be 0/1")
    won, lost = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    difference = float(a.mean() - b.mean())
    if won + lost == 0 or len(a) < 2:  # every resample gives the same difference
        low = high = difference
    else:
        interval = bootstrap(
            (a, b), _mean_difference, paired=True, vectorized=True, n_resamples=RESAMPLES,
            confidence_level=LEVEL, method="percentile", rng=np.random.default_rng(SEED),
        ).confidence_interval
        low, high = float(interval.low), float(interval.high)
    both, neither = int(np.sum((a == 1) & (b == 1))), int(np.sum((a == 0) & (b == 0)))
    p_value = float(mcnemar([[both, won], [lost, neither]], exact=True).pvalue)
    return Paired(len(a), difference, low, high, won, lost, p_value)


def one_sided_p(worse: int, better: int) -> float:
    """Exact one-sided McNemar p-value that outcomes got worse: the chance of at least `worse`
    of the `worse + better` changed questions changing for the worse if each way were as likely."""
    if worse + better == 0:
        return 1.0
    return float(binomtest(worse, worse + better, 0.5, alternative="greater").pvalue)


def aligned(
    first: pd.DataFrame, second: pd.DataFrame, metric: str, datasets: Sequence[str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """`metric` of the questions (dataset, question id) both outcome frames hold, in one order;
    only `datasets` when given."""
    on = [k for k in KEY if k != "method"]
    merged = first[[*on, metric]].merge(second[[*on, metric]], on=on, suffixes=("_1", "_2"))
    if datasets is not None:
        merged = merged[merged["dataset"].isin(list(datasets))]
    merged = merged.sort_values(on)
    return merged[f"{metric}_1"].to_numpy(float), merged[f"{metric}_2"].to_numpy(float)


def scopes(datasets: Sequence[str], in_domain: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Each dataset, then the pools: in-domain (the prober's training datasets), OOD, overall;
    a pool with no dataset, or the same datasets as one already listed, is left out."""
    ind = [d for d in datasets if d in in_domain]
    ood = [d for d in datasets if d not in in_domain]
    out: list[tuple[str, list[str]]] = [(d, [d]) for d in datasets]
    for name, members in (("in-domain", ind), ("OOD", ood), ("overall", [*ind, *ood])):
        if members and all(set(members) != set(seen) for _, seen in out):
            out.append((name, members))
    return out


BASELINE = "single_step"


def comparisons(methods: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs the report tests: each method against single_step, and skill_rag against
    probing_rag (the paper's claim), of the methods evaluated."""
    pairs = [(m, BASELINE) for m in methods if m != BASELINE] if BASELINE in methods else []
    if {"skill_rag", "probing_rag"} <= set(methods):
        pairs.append(("skill_rag", "probing_rag"))
    return pairs


LOWER_IS_BETTER = ("no_answer",)
ALL = "all datasets"


@dataclass(frozen=True)
class OutcomeChange:
    """One metric of one method on one scope (a dataset, or ALL) between two runs on the same
    `n` questions: the means before and after, and how many questions changed each way."""

    method: str
    scope: str
    metric: str
    n: int
    before: float
    after: float
    worse: int  # questions whose outcome got worse (right -> wrong; for no_answer, answered -> empty)
    better: int

    @property
    def p_two_sided(self) -> float:
        """Exact McNemar: did the runs differ at all?"""
        # the exact test reads the changed questions only (the off-diagonal cells)
        return float(mcnemar([[0, self.worse], [self.better, 0]], exact=True).pvalue)

    @property
    def p_worse(self) -> float:
        """One-sided: did the second run get worse?"""
        return one_sided_p(self.worse, self.better)


def outcome_changes(before: pd.DataFrame, after: pd.DataFrame, metrics: Sequence[str]) -> list[OutcomeChange]:
    """Every method both outcome frames hold, on each dataset and on all of them together, for each of
    `metrics` (0/1 columns), paired on the questions both runs answered."""
    changes = []
    for method in sorted(set(before["method"]) & set(after["method"])):
        old, new = before[before["method"] == method], after[after["method"] == method]
        datasets = sorted(set(old["dataset"]) & set(new["dataset"]))
        pooled = [(ALL, datasets)] if len(datasets) > 1 else []  # one dataset: the pool would repeat it
        for scope, members in [*((d, [d]) for d in datasets), *pooled]:
            for metric in metrics:
                first, second = aligned(old, new, metric, members)
                if not len(first):
                    continue
                sign = -1 if metric in LOWER_IS_BETTER else 1
                worse = int(np.sum(sign * (second - first) < 0))
                better = int(np.sum(sign * (second - first) > 0))
                changes.append(OutcomeChange(method, scope, metric, len(first), float(first.mean()),
                                             float(second.mean()), worse, better))
    return changes
