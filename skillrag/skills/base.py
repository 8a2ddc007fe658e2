"""What the router and the skills exchange: the failure state in, a skill choice or queries out.

A skill turns a failure state into the next retrieval queries. Small models often return
nothing usable (an empty line, the question echoed back, or a line of the prompt's own few-shot
examples), and a query already issued for this question would only fetch the same passages
again, so every skill has a deterministic fallback and the result says when and why it was used.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import ClassVar, Protocol

import torch

from skillrag.data.schema import Passage
from skillrag.lm.base import LM, Option
from skillrag.prompts import load_prompt
from skillrag.prompts.cot import format_passages
from skillrag.skills.queries import ECHO_JACCARD, clean_query, fresh, is_echo, query_key

QUERY_SKILLS = ("query_rewriting", "question_decomposition", "evidence_focusing")
EXIT = "exit"
SKILL_NAMES = (*QUERY_SKILLS, EXIT)
EVIDENCE_WORDS = 40  # per passage in the router prompt: enough to see what is covered


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
        evidence = format_passages(self.passages, EVIDENCE_WORDS) if self.passages else "(none)"
        return {
            "question": self.question,
            "reasoning": self.reasoning or "(none)",
            "answer": self.answer or "(none)",
            "evidence": evidence,
        }


@dataclass(frozen=True)
class Routing:
    """A router's decision: the skill, the scores behind it, why its own choice was not used
    (when it was not), and the chosen skill's output when the router generated it in the same
    call (None: the skill writes its output itself)."""

    skill: str
    scores: dict[str, float] = field(default_factory=dict)
    fallback: str | None = None
    output: str | None = None


class Router(Protocol):
    def choose(self, state: FailureState) -> Routing: ...


def fallback_skill(round_index: int) -> str:
    """The router's deterministic fallback: the query skills in a fixed order by round."""
    return QUERY_SKILLS[(round_index - 1) % len(QUERY_SKILLS)]


@dataclass(frozen=True)
class SkillResult:
    queries: tuple[str, ...]  # empty: nothing new left to search for
    fallback: str | None = None


PROMPT = "router"  # one prompt: the failure state, then the skill label, then that skill's output


def _split(name: str) -> tuple[str, str]:
    """(few-shot prefix, case template) of prompt `name`: the last paragraph is the template."""
    prefix, _, template = load_prompt(name).rstrip("\n").rpartition("\n\n")
    return prefix + "\n\n", template


def render(fields: Mapping[str, str], name: str = PROMPT) -> tuple[str, str]:
    """(prefix, body) of prompt `name`: the shared few-shot prefix (its KV is cached) and the
    case template filled with `fields`."""
    prefix, template = _split(name)
    return prefix, template.format(**fields)


@cache
def exemplar_lines(name: str = PROMPT) -> tuple[frozenset[str], ...]:
    """The content-word sets of the few-shot lines of prompt `name` (its instructions,
    questions, passages and example outputs)."""
    keys = (query_key(clean_query(line)) for line in _split(name)[0].splitlines())
    return tuple(key for key in keys if key)


def copies_exemplar(query: str, state: FailureState) -> bool:
    """True when the query repeats a few-shot line rather than the failure state: most of its
    content words come from one exemplar line, and fewer than half occur in the question,
    reasoning, answer or evidence (so a real question about an exemplar's topic is no copy)."""
    key = query_key(query)
    if not key:
        return False
    grounded = key & query_key(" ".join(state.fields().values()))
    if len(grounded) >= len(key) / 2:
        return False
    return any(len(key & line) >= ECHO_JACCARD * len(key) for line in exemplar_lines())


class Skill(ABC):
    """A query skill: its label and output continue the router prompt (`router.txt`), after the
    failure state. The output is parsed into queries, else the deterministic fallback is used."""

    name: ClassVar[str]
    label: ClassVar[str]  # the words after "Next step:" that choose this skill
    lead: ClassVar[str] = "\nQuery:"  # what the exemplars write between the label and the output
    stop: ClassVar[tuple[str, ...]] = ("\n",)
    max_new_tokens: ClassVar[int] = 32
    max_queries: ClassVar[int] = 1

    def __init__(self, lm: LM) -> None:
        self.lm = lm

    @classmethod
    def option(cls) -> Option:
        """This skill as a continuation of the router prompt (scored label, then its output)."""
        return Option(cls.label, cls.lead, cls.max_new_tokens, cls.stop)

    def write(self, state: FailureState) -> str:
        """The output for a skill chosen without the LM (the learned router): one generate call
        on the router prompt continued with this skill's label and lead."""
        prefix, body = render(state.fields())
        prompt = prefix + body + self.label + self.lead
        return self.lm.generate([prompt], self.max_new_tokens, stop=self.stop, prefix=prefix)[0].text

    def apply(self, state: FailureState, output: str | None = None) -> SkillResult:
        """Queries from `output` (the router's continuation; None: write it now), else the fallback."""
        text = self.write(state) if output is None else output
        proposed = [q for q in self.parse(text) if q]
        echoes = [q for q in proposed if is_echo(q, state.question)]
        copies = [q for q in proposed if q not in echoes and copies_exemplar(q, state)]
        usable = [q for q in proposed if q not in echoes and q not in copies]
        queries = fresh(usable, state.issued)[: self.max_queries]
        if queries:
            return SkillResult(tuple(queries))
        why = (
            "repeats an issued query"
            if usable
            else "copies a few-shot example"
            if copies
            else "echoes the question"
            if echoes
            else "is empty"
        )
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
