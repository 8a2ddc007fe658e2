"""Question decomposition: one sub-query per fact a multi-hop question joins (paper §3.2).

Each sub-query is retrieved in turn; the question is then answered over their merged
evidence, so a bridge fact and the final fact can sit in the same context.
"""

from __future__ import annotations

import re

from skillrag.skills.base import FailureState, Skill
from skillrag.skills.queries import clean_query, join_terms, keywords

_CLAUSE_BREAK = re.compile(
    r"[,;]|\b(?:and|or|but|while|who|whom|whose|which|that|where|when)\b", re.IGNORECASE
)
_ENTITY = re.compile(r"\"([^\"]+)\"|([A-Z][\w'-]*(?:\s+(?:(?:of|the|and|de)\s+)*[A-Z][\w'-]*)*)")


def clauses(question: str) -> list[str]:
    """The question cut at conjunctions and relative pronouns; pieces under two content words
    join their neighbour (so "Kiss and Tell" does not yield a query "tell")."""
    parts: list[list[str]] = []
    pending: list[str] = []
    for piece in _CLAUSE_BREAK.split(question):
        pending += keywords(piece)
        if len(pending) >= 2:
            parts.append(pending)
            pending = []
    if pending:
        if parts:
            parts[-1] += pending
        else:
            parts.append(pending)
    return [join_terms(part) for part in parts]


def entity_spans(question: str) -> list[str]:
    """Quoted titles and capitalised name runs ("Corliss Archer", "Kiss and Tell")."""
    spans = (join_terms(keywords(quoted or name)) for quoted, name in _ENTITY.findall(question))
    return [span for span in spans if span]  # a capitalised question word alone leaves nothing


class QuestionDecomposition(Skill):
    """For a question that joins several facts; up to three sub-queries, one per line.

    Fallback: the question's clauses; when it has fewer than two, its entity spans first.
    """

    name = "question_decomposition"
    label = " decompose"
    lead = "\nQueries:\n-"
    stop = ("\n\n", "\nPassages:", "\nQuestion:")
    max_new_tokens = 64
    max_queries = 3

    def parse(self, text: str) -> list[str]:
        return [clean_query(line) for line in text.splitlines() if line.strip()]

    def fallback(self, state: FailureState) -> list[str]:
        parts = clauses(state.question)
        return parts if len(parts) >= 2 else [*entity_spans(state.question), *parts]
