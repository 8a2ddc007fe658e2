"""The prompt router: route and act in one LLM call, scoring skill labels instead of parsing text.

One prompt (`router.txt`) holds the failure state; its few-shot examples show each skill label
followed by that skill's output. The LM runs the prompt once, scores the four labels on its KV,
and continues the chosen label with the skill's output (`LM.choose_and_generate`), so a retry
costs one call here and one to answer (paper: routing "requires no additional LLM calls").

Small models cannot reliably emit a clean label, but they can say which of four short
continuations is likelier. Raw label likelihoods mostly reflect each label's prior (length,
frequency), so every score is calibrated against the same prompt with content-free fields
("N/A"), scored once per router (contextual calibration, Zhao et al. 2021). Scores that cannot
decide (non-finite, or a tie at the top) fall back to a fixed skill order by round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from skillrag.lm.base import LM, Option
from skillrag.skills.base import EXIT, FailureState, Routing, Skill, fallback_skill, render
from skillrag.skills.decompose import QuestionDecomposition
from skillrag.skills.focus import EvidenceFocusing
from skillrag.skills.rewrite import QueryRewriting

SKILL_TYPES: tuple[type[Skill], ...] = (QueryRewriting, QuestionDecomposition, EvidenceFocusing)
# Skill -> its continuation of the prompt after "Next step:"; router.txt uses the same words.
OPTIONS: dict[str, Option] = {**{skill.name: skill.option() for skill in SKILL_TYPES}, EXIT: Option(" stop")}
_CONTENT_FREE = dict.fromkeys(("question", "reasoning", "answer", "evidence"), "N/A")


def calibrated_choice(raw: Sequence[float], prior: Sequence[float], round_index: int) -> Routing:
    """The skill with the highest calibrated score (raw minus content-free log-likelihood), or
    the fixed order when the scores cannot decide."""
    scores = {skill: s - p for skill, s, p in zip(OPTIONS, raw, prior, strict=True)}
    ranked = sorted(scores.values(), reverse=True)
    if not all(math.isfinite(s) for s in ranked) or ranked[0] - ranked[1] < 1e-9:
        skill = fallback_skill(round_index)
        return Routing(skill, scores, f"router: scores cannot decide -> fixed order ({skill})")
    return Routing(max(scores, key=scores.__getitem__), scores)


class PromptRouter:
    """One `choose_and_generate` call per decision, plus one `loglikelihood` call per router
    for the calibration, on `calibrate_with` (default: `lm`). The calibration depends on no
    question: Skill-RAG scores it on the unmetered LM, so it is a cost of the run, charged to no
    question's trace (else which question pays would depend on the order questions run in)."""

    def __init__(self, lm: LM, calibrate_with: LM | None = None) -> None:
        self.lm = lm
        self.calibrate_with = calibrate_with or lm
        self._prior: list[float] | None = None

    def choose(self, state: FailureState) -> Routing:
        options = list(OPTIONS.values())
        if self._prior is None:
            prefix, body = render(_CONTENT_FREE)
            self._prior = self.calibrate_with.loglikelihood(prefix + body, [option.label for option in options])
        prior = self._prior
        prefix, body = render(state.fields())
        choice = self.lm.choose_and_generate(
            prefix + body,
            options,
            prefix=prefix,
            pick=lambda raw: list(OPTIONS).index(calibrated_choice(raw, prior, state.round).skill),
        )
        routing = calibrated_choice(choice.scores, prior, state.round)
        return replace(routing, output=choice.generation.text if choice.generation is not None else None)
