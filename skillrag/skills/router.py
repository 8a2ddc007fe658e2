"""The prompt router: score the four skill labels by likelihood instead of parsing free text.

Small models cannot reliably emit a clean label, but they can say which of four short
continuations is likelier. Raw label likelihoods mostly reflect each label's prior (length,
frequency), so every score is calibrated against the same prompt with content-free fields
("N/A"), scored once per router (contextual calibration, Zhao et al. 2021). Scores that cannot
decide (non-finite, or a tie at the top) fall back to a fixed skill order by round.
"""

from __future__ import annotations

import math

from skillrag.lm.base import LM
from skillrag.prompts import load_prompt
from skillrag.skills.base import FailureState, Routing, fallback_skill

# Skill -> the continuation scored after "Next step:"; router.txt defines the same words.
LABELS = {
    "query_rewriting": " rewrite",
    "question_decomposition": " decompose",
    "evidence_focusing": " focus",
    "exit": " stop",
}
_CONTENT_FREE = dict.fromkeys(("question", "reasoning", "answer", "evidence"), "N/A")


class PromptRouter:
    """One batched `loglikelihood` call per decision (plus one calibration call per router)."""

    def __init__(self, lm: LM) -> None:
        self.lm = lm
        self._prior: list[float] | None = None

    def _score(self, fields: dict[str, str]) -> list[float]:
        template = load_prompt("router").rstrip("\n")  # the label continues the "Next step:" line
        return self.lm.loglikelihood(template.format(**fields), list(LABELS.values()))

    def choose(self, state: FailureState) -> Routing:
        if self._prior is None:
            self._prior = self._score(_CONTENT_FREE)
        raw = self._score(state.fields())
        scores = {skill: s - p for skill, s, p in zip(LABELS, raw, self._prior, strict=True)}
        ranked = sorted(scores.values(), reverse=True)
        if not all(math.isfinite(s) for s in ranked) or ranked[0] - ranked[1] < 1e-9:
            skill = fallback_skill(state.round)
            return Routing(skill, scores, f"router: scores cannot decide -> fixed order ({skill})")
        return Routing(max(scores, key=scores.__getitem__), scores)
