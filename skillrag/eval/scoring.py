"""Per-question scores and per (method, dataset) summaries of traces.

Scores read the final answers only, never the rationale: em / acc / acc_substring / f1 the strict
answer (the headline), flexible_em / flexible_acc / flexible_f1 the flexible one
(skillrag.prompts.cot). Every mean comes with a 95% bootstrap interval: BOOTSTRAP_RESAMPLES
resamples of the questions with replacement (numpy, fixed seed, so a summary is reproducible),
and the 2.5th and 97.5th percentiles of the resampled means (the percentile method).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from skillrag.methods import Trace
from skillrag.metrics import score_answer
from skillrag.skills import SKILL_NAMES

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
FLEXIBLE = ("em", "acc", "f1")
COSTS = ("llm_calls", "tokens_in", "tokens_out", "retrievals", "latency_s")
HEADLINE = ("n", "em", "acc", "f1", "no_answer_rate", "retrievals", "retrieved_rate", "llm_calls", "tokens_out", "latency_s")


def score_trace(trace: Trace, abstain: str | None) -> dict[str, float]:
    """One question's scores (what `Trace.scores` holds); `abstain` is the methods' abstain
    answer, which scores 0 everywhere."""
    strict = score_answer(trace.answer, trace.golds, abstain)
    flexible = score_answer(trace.flexible_answer, trace.golds, abstain)
    return {**strict, **{f"flexible_{name}": flexible[name] for name in FLEXIBLE}}


def bootstrap_interval(values: Sequence[float]) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean of `values` (see the module docstring)."""
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = data[rng.integers(0, len(data), size=(BOOTSTRAP_RESAMPLES, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def summarize(traces: Sequence[Trace], abstain: str | None) -> dict[str, Any]:
    """Everything about one set of traces: each per-question mean `<name>` with its interval
    `<name>_ci95` ([low, high]): the scores, no_answer_rate (the strict answer is empty),
    budget_hit_rate (some round's generation ended on the token budget), retrieved_rate (the
    question retrieved at least once) and the mean costs;
    then counts: rounds that hit the budget, questions never retrieved for, terminations,
    skills used."""
    if not traces:
        return {"n": 0}
    scores = [score_trace(t, abstain) for t in traces]
    per_question: dict[str, list[float]] = {name: [s[name] for s in scores] for name in scores[0]}
    per_question["no_answer_rate"] = [float(not t.answer) for t in traces]
    per_question["budget_hit_rate"] = [float(any(r.budget_hit for r in t.rounds)) for t in traces]
    per_question["retrieved_rate"] = [float(t.totals.retrievals > 0) for t in traces]
    for cost in COSTS:
        per_question[cost] = [float(getattr(t.totals, cost)) for t in traces]
    summary: dict[str, Any] = {"n": len(traces)}
    for name, values in per_question.items():
        summary[name] = float(np.mean(values))
        summary[f"{name}_ci95"] = list(bootstrap_interval(values))
    skills = Counter(r.stage for t in traces for r in t.rounds if r.stage in SKILL_NAMES)
    return summary | {
        "budget_hit_rounds": sum(r.budget_hit for t in traces for r in t.rounds),
        "never_retrieved": sum(t.totals.retrievals == 0 for t in traces),
        "terminations": dict(Counter(t.termination for t in traces)),
        "skills": {skill: skills.get(skill, 0) for skill in SKILL_NAMES},
    }


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The numbers `dvc metrics show` prints (reports/metrics.json); the rest goes to the detail file."""
    return {name: summary[name] for name in HEADLINE if name in summary}
