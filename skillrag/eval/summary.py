"""Per (method, dataset) metrics and costs from traces. EM, ACC and F1 read the final answer
line only (never the rationale); costs are per-question means."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from statistics import mean
from typing import Any

from skillrag.eval.metrics import accuracy, exact_match, f1
from skillrag.methods import Trace
from skillrag.skills import SKILL_NAMES


def summarize(traces: Sequence[Trace]) -> dict[str, Any]:
    """Metrics, mean costs, termination counts and the skill distribution of one set of traces."""
    if not traces:
        return {"n": 0}
    skills = Counter(r.stage for t in traces for r in t.rounds if r.stage in SKILL_NAMES)
    return {
        "n": len(traces),
        "em": mean(exact_match(t.answer, t.golds) for t in traces),
        "acc": mean(accuracy(t.answer, t.golds) for t in traces),
        "f1": mean(f1(t.answer, t.golds) for t in traces),
        "llm_calls": mean(t.totals.llm_calls for t in traces),
        "tokens_in": mean(t.totals.tokens_in for t in traces),
        "tokens_out": mean(t.totals.tokens_out for t in traces),
        "retrievals": mean(t.totals.retrievals for t in traces),
        "latency_s": mean(t.totals.latency_s for t in traces),
        "never_retrieved": sum(t.totals.retrievals == 0 for t in traces),
        "terminations": dict(Counter(t.termination for t in traces)),
        "skills": {skill: skills.get(skill, 0) for skill in SKILL_NAMES},
    }
