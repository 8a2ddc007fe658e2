"""The prompt router: route and act in one LLM call, scoring skill labels instead of parsing text.

One prompt (`router.txt`) holds the failure state; its few-shot examples show each skill label
followed by that skill's output. The LM runs the prompt once, scores the four labels on its KV,
and continues the chosen label with the skill's output (`LM.choose_and_generate`), so a retry
costs one call here and one to answer (paper: routing "requires no additional LLM calls").

Small models cannot reliably emit a clean label, but they can say which of four short
continuations is likelier. Raw label likelihoods mostly reflect each label's prior (length,
frequency), so a per-label offset is added to every raw score before the argmax. The offsets
are fitted by train_router on the explored train failure states (skillrag.skills.calibration:
the offsets under which the router's choices fix the most states, then stop where nothing
would have) and stored with the router data (`OFFSETS`, data/router/prompt_router.json). Without
them the content-free calibration is used (Zhao et al. 2021): minus the labels' log-likelihood on
the same prompt with content-free fields ("N/A"), scored once per router. Scores that cannot
decide (non-finite, or a tie at the top) fall back to a fixed skill order by round.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from skillrag.errors import ArtifactError
from skillrag.files import write_json
from skillrag.lm.base import LM, Option
from skillrag.provenance import check_identity
from skillrag.skills.base import EXIT, FailureState, Routing, Skill, fallback_skill, render
from skillrag.skills.decompose import QuestionDecomposition
from skillrag.skills.focus import EvidenceFocusing
from skillrag.skills.rewrite import QueryRewriting

SKILL_TYPES: tuple[type[Skill], ...] = (QueryRewriting, QuestionDecomposition, EvidenceFocusing)
# Skill -> its continuation of the prompt after "Next step:"; router.txt uses the same words.
OPTIONS: dict[str, Option] = {**{skill.name: skill.option() for skill in SKILL_TYPES}, EXIT: Option(" stop")}
_CONTENT_FREE = dict.fromkeys(("question", "reasoning", "answer", "evidence"), "N/A")
OFFSETS = "prompt_router.json"  # in the router data directory (data/router/)
REBUILD = "`skillrag train-router` (or `dvc repro train_router`)"


def calibrated_choice(raw: Sequence[float], offsets: Sequence[float], round_index: int) -> Routing:
    """The skill with the highest calibrated score (raw log-likelihood plus its label's offset),
    or the fixed order when the scores cannot decide."""
    scores = {skill: s + o for skill, s, o in zip(OPTIONS, raw, offsets, strict=True)}
    ranked = sorted(scores.values(), reverse=True)
    if not all(math.isfinite(s) for s in ranked) or ranked[0] - ranked[1] < 1e-9:
        skill = fallback_skill(round_index)
        return Routing(skill, scores, f"router: scores cannot decide -> fixed order ({skill})")
    return Routing(max(scores, key=scores.__getitem__), scores)


def content_free_offsets(lm: LM) -> dict[str, float]:
    """Minus each label's log-likelihood on the router prompt with content-free fields: one call."""
    prefix, body = render(_CONTENT_FREE)
    prior = lm.loglikelihood(prefix + body, [option.label for option in OPTIONS.values()])
    return {skill: -p for skill, p in zip(OPTIONS, prior, strict=True)}


def score_and_write(lm: LM, state: FailureState, skill: str) -> Routing:
    """The raw label log-likelihoods on `state` (the scores the router decides on, before any
    offset) and `skill`'s output continuing its label, in one `choose_and_generate` call: how
    skill exploration records what the router saw without spending a call on it."""
    prefix, body = render(state.fields())
    index = list(OPTIONS).index(skill)
    choice = lm.choose_and_generate(prefix + body, list(OPTIONS.values()), prefix=prefix, pick=lambda raw: index)
    output = choice.generation.text if choice.generation is not None else None
    return Routing(skill, dict(zip(OPTIONS, choice.scores, strict=True)), None, output)


class PromptRouter:
    """One `choose_and_generate` call per decision. With `offsets` (fitted on train failure
    states) nothing else; without, one `loglikelihood` call per router for the content-free
    calibration, on `calibrate_with` (default: `lm`). The calibration depends on no question:
    Skill-RAG scores it on the unmetered LM, so it is a cost of the run, charged to no question's
    trace (else which question pays would depend on the order questions run in)."""

    def __init__(self, lm: LM, calibrate_with: LM | None = None, offsets: Mapping[str, float] | None = None) -> None:
        self.lm = lm
        self.calibrate_with = calibrate_with or lm
        self._offsets: list[float] | None = [float(offsets[skill]) for skill in OPTIONS] if offsets else None

    def offsets(self) -> list[float]:
        if self._offsets is None:
            self._offsets = list(content_free_offsets(self.calibrate_with).values())
        return self._offsets

    def choose(self, state: FailureState) -> Routing:
        offsets = self.offsets()
        prefix, body = render(state.fields())
        choice = self.lm.choose_and_generate(
            prefix + body,
            list(OPTIONS.values()),
            prefix=prefix,
            pick=lambda raw: list(OPTIONS).index(calibrated_choice(raw, offsets, state.round).skill),
        )
        routing = calibrated_choice(choice.scores, offsets, state.round)
        return replace(routing, output=choice.generation.text if choice.generation is not None else None)


def save_offsets(directory: Path, offsets: Mapping[str, float], identity: Mapping[str, Any], record: Mapping[str, Any]) -> None:
    """Store the fitted label offsets with the router data, with the identity of the model whose
    label likelihoods they were fitted on and what the fit saw (`record`)."""
    write_json(directory / OFFSETS, {"offsets": dict(offsets), "identity": dict(identity), **record})


def load_offsets(directory: Path, identity: Mapping[str, Any]) -> dict[str, float] | None:
    """The stored label offsets (None when train_router stored none: the content-free calibration
    is used), refused when fitted on another model than `identity`."""
    path = directory / OFFSETS
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        offsets = {skill: float(record["offsets"][skill]) for skill in OPTIONS}
    except (ValueError, KeyError, TypeError):
        raise ArtifactError(f"{path} is not a valid prompt-router record: rebuild it with {REBUILD}") from None
    check_identity(record.get("identity"), identity, f"the prompt router's offsets at {path}", REBUILD)
    return offsets
