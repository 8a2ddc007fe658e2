"""Paired comparisons on the same questions (Koehn 2004; Dror et al. 2018): two methods, or two
commits of one method, scored 0/1 per question.

- the difference of the means with a 95% Agresti-Min interval (Agresti & Min 2005, "Simple improved
  confidence intervals for comparing matched proportions"): the Wald interval of the paired
  difference after adding 1/2 to each cell of the 2x2 table. Unlike a percentile bootstrap it is
  never zero-width: with no discordant question it still says how far a difference could be at
  this n (a bootstrap of identical outcomes gives "0.0 to 0.0");
- won / lost: the questions right (1) under the first and wrong (0) under the second, and the reverse;
- the exact McNemar p-value: a two-sided binomial test on the won and lost questions alone
  (statsmodels), and its one-sided form (scipy's binomtest) for "did it get worse?".

Single proportions (a method's ACC) get the Wilson score interval (statsmodels), which likewise
stays wide at 0 or n right answers.

With 30-50 questions one question moves a mean by 2-3 points, so a difference means something
only where the interval leaves out 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest, norm
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from skillrag.report.outcomes import KEY

LEVEL = 0.95
ALPHA = 0.05  # family-wise, after Holm's adjustment
INDISTINGUISHABLE = "not distinguishable at this n"


@dataclass(frozen=True)
class Paired:
    """First minus second on `n` questions both were scored on."""

    n: int
    difference: float  # mean(first) - mean(second)
    low: float  # its 95% Agresti-Min interval (never zero-width)
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


def wilson(right: int, n: int) -> tuple[float, float]:
    """The LEVEL Wilson score interval of `right` of `n` (n > 0)."""
    low, high = proportion_confint(right, n, alpha=1 - LEVEL, method="wilson")
    return float(low), float(high)


def paired_interval(won: int, lost: int, n: int) -> tuple[float, float]:
    """The LEVEL Agresti-Min interval of a paired difference of proportions from its discordant
    counts (`won`: first right only, `lost`: second right only) on `n` questions: 1/2 added to
    each of the four cells, then the Wald interval, clipped to [-1, 1]."""
    b, c, total = won + 0.5, lost + 0.5, n + 2.0
    centre = (b - c) / total
    half = norm.ppf(0.5 + LEVEL / 2) * np.sqrt((b + c) - (b - c) ** 2 / total) / total
    return max(-1.0, float(centre - half)), min(1.0, float(centre + half))


def paired(first: Sequence[float], second: Sequence[float]) -> Paired:
    """Compare two aligned 0/1 outcome lists (question i of each is the same question)."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ValueError(f"paired outcomes must be two non-empty lists of one length, got {a.shape} and {b.shape}")
    if not np.isin(np.concatenate([a, b]), (0.0, 1.0)).all():
        raise ValueError("paired outcomes must be 0/1")
    won, lost = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    difference = float(a.mean() - b.mean())
    low, high = paired_interval(won, lost, len(a))
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
POOLS = ("in-domain", "OOD", "overall")


@dataclass(frozen=True)
class Planned:
    """One paired test the report makes: `first` minus `second` on `scope` (a pool or a dataset)."""

    first: str
    second: str
    scope: str


def planned_tests(
    methods: Sequence[str], primary: Sequence[Planned], studied: str, pools: Sequence[str] = POOLS
) -> tuple[list[Planned], list[Planned]]:
    """The report's two families of tests over the evaluated `methods`: the primary comparisons
    (named in params.yaml before the run; those of unevaluated methods left out), and the
    exploratory rest: `studied` against every other method, then every other method against
    single_step, on each of `pools`, the primary ones left out. Each family is Holm-corrected on its
    own."""
    evaluated = set(methods)
    first_family = [p for p in primary if {p.first, p.second} <= evaluated]
    rest: list[Planned] = []
    if studied in evaluated:
        rest += [Planned(studied, m, scope) for m in methods if m != studied for scope in pools]
    if BASELINE in evaluated:
        rest += [Planned(m, BASELINE, scope) for m in methods if m not in (BASELINE, studied) for scope in pools]
    return first_family, [p for p in rest if p not in first_family]


@dataclass(frozen=True)
class PairedResult:
    planned: Planned
    first_mean: float  # the first method's ACC on the paired questions
    second_mean: float
    test: Paired


def run_tests(
    outcomes: pd.DataFrame, tests: Sequence[Planned], datasets: Sequence[str], in_domain: Sequence[str], metric: str = "acc"
) -> list[PairedResult]:
    """Each planned test on the questions both methods answered in its scope (a scope with no
    dataset, or no shared question, is left out)."""
    ind = [d for d in datasets if d in in_domain]
    ood = [d for d in datasets if d not in in_domain]
    pools = {"in-domain": ind, "OOD": ood, "overall": [*ind, *ood]}
    members = {**{d: [d] for d in datasets}, **{name: m for name, m in pools.items() if m}}
    results = []
    for planned in tests:
        if planned.scope not in members:
            continue
        a = outcomes[outcomes["method"] == planned.first]
        b = outcomes[outcomes["method"] == planned.second]
        right_a, right_b = aligned(a, b, metric, members[planned.scope])
        if len(right_a):
            results.append(PairedResult(planned, float(right_a.mean()), float(right_b.mean()), paired(right_a, right_b)))
    return results


def holm(results: Sequence[PairedResult]) -> list[float]:
    """Holm's family-wise adjustment of the results' McNemar p-values (one family)."""
    if not results:
        return []
    return [float(p) for p in multipletests([r.test.p_value for r in results], method="holm")[1]]


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
