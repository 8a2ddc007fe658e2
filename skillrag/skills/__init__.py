"""Failure diagnosis: routers pick a skill; skills write the next retrieval queries."""

from skillrag.lm.base import LM
from skillrag.skills.base import (
    EXIT,
    QUERY_SKILLS,
    SKILL_NAMES,
    FailureState,
    Router,
    Routing,
    Skill,
    SkillResult,
    fallback_skill,
)
from skillrag.skills.calibration import choice_report, fit_offsets
from skillrag.skills.decompose import QuestionDecomposition
from skillrag.skills.exit import exit_answer
from skillrag.skills.focus import EvidenceFocusing
from skillrag.skills.learned_router import LearnedRouter, load_learned_router
from skillrag.skills.rewrite import QueryRewriting
from skillrag.skills.router import SKILL_TYPES, PromptRouter


def build_skills(lm: LM) -> dict[str, Skill]:
    """The three query skills by name (exit needs no LM: see exit_answer)."""
    return {skill.name: skill(lm) for skill in SKILL_TYPES}


__all__ = [
    "EXIT",
    "QUERY_SKILLS",
    "SKILL_NAMES",
    "EvidenceFocusing",
    "FailureState",
    "LearnedRouter",
    "PromptRouter",
    "QueryRewriting",
    "QuestionDecomposition",
    "Router",
    "Routing",
    "Skill",
    "SkillResult",
    "build_skills",
    "choice_report",
    "exit_answer",
    "fallback_skill",
    "fit_offsets",
    "load_learned_router",
]
