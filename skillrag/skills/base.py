"""What the router and the skills exchange: the failure state in, a skill choice or queries out.

A skill turns a failure state into the next retrieval queries. Small models often return
nothing usable (an empty line, or the question echoed back), and a query already issued for
this question would only fetch the same passages again, so every skill has a deterministic
fallback and the result says when and why it was used.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import torch

from skillrag.data.schema import Passage
from skillrag.lm.base import LM
from skillrag.prompts import load_prompt
from skillrag.prompts.cot import format_passages
from skillrag.skills.text import clean_query, fresh, is_echo

QUERY_SKILLS = ("query_rewriting", "question_decomposition", "evidence_focusing")
EXIT = "exit"
SKILL_NAMES = (*QUERY_SKILLS, EXIT)
EVIDENCE_CHARS = 240  # per passage in skill and router prompts: enough to see what is covered


@dataclass(frozen=True)
class FailureState:
    """The rejected attempt a router diagnoses: question, failed reasoning and answer, evidence."""

    question: str
    reasoning: str
    answer: str
    passages: tuple[Passage, ...]
    hidden: Mapping[int, torch.Tensor] | None
    round: int  # 1-based index of the skill round about to run
    issued: frozenset[frozenset[str]] = frozenset()  # query_key of every query issued so far

    def fields(self) -> dict[str, str]:
        """The values prompt templates are filled with."""
        evidence = format_passages(self.passages, max_chars=EVIDENCE_CHARS) if self.passages else "(none)"
        return {
            "question": self.question,
            "reasoning": self.reasoning or "(none)",
            "answer": self.answer or "(none)",
            "evidence": evidence,
        }


@dataclass(frozen=True)
class Routing:
    skill: str
    scores: dict[str, float] = field(default_factory=dict)
    fallback: str | None = None  # why the router's own choice was not used


class Router(Protocol):
    def choose(self, state: FailureState) -> Routing: ...


def fallback_skill(round_index: int) -> str:
    """The router's deterministic fallback: the query skills in a fixed order by round."""
    return QUERY_SKILLS[(round_index - 1) % len(QUERY_SKILLS)]


@dataclass(frozen=True)
class SkillResult:
    queries: tuple[str, ...]  # empty: nothing new left to search for
    fallback: str | None = None


def render(name: str, fields: Mapping[str, str]) -> tuple[str, str]:
    """(prefix, body) of prompt `name`: the last paragraph is the case template, filled with
    `fields`; everything before it is the few-shot prefix every call shares (its KV is cached)."""
    prefix, _, template = load_prompt(name).rstrip("\n").rpartition("\n\n")
    return prefix + "\n\n", template.format(**fields)


class Skill(ABC):
    """Prompt `skill_<name>.txt` -> generated text -> parsed queries, else the fallback."""

    name: ClassVar[str]
    stop: ClassVar[tuple[str, ...]] = ("\n",)
    max_new_tokens: ClassVar[int] = 32
    max_queries: ClassVar[int] = 1

    def __init__(self, lm: LM) -> None:
        self.lm = lm

    def apply(self, state: FailureState) -> SkillResult:
        prefix, body = render(f"skill_{self.name}", state.fields())
        text = self.lm.generate([prefix + body], self.max_new_tokens, stop=self.stop, prefix=prefix)[0].text
        proposed = [q for q in self.parse(text) if q]
        usable = [q for q in proposed if not is_echo(q, state.question)]
        queries = fresh(usable, state.issued)[: self.max_queries]
        if queries:
            return SkillResult(tuple(queries))
        why = "repeats an issued query" if usable else "echoes the question" if proposed else "is empty"
        queries = fresh(self.fallback(state), state.issued)[: self.max_queries]
        tail = "" if queries else "; the fallback was issued before too"
        return SkillResult(tuple(queries), f"{self.name}: output {why} -> fallback{tail}")

    def parse(self, text: str) -> list[str]:
        """Candidate queries in the generated text: by default its first non-empty line."""
        lines = [clean_query(line) for line in text.splitlines() if line.strip()]
        return lines[:1]

    @abstractmethod
    def fallback(self, state: FailureState) -> Sequence[str]:
        """Deterministic candidate queries, best first, for when the output is unusable."""
