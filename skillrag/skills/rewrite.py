"""Query rewriting: the question's information need in the words a Wikipedia paragraph uses."""

from __future__ import annotations

from skillrag.skills.base import FailureState, Skill
from skillrag.skills.queries import join_terms, keywords


class QueryRewriting(Skill):
    """For a query worded unlike the corpus; one reformulated query.

    Fallback: the question's content words plus the current answer's (the entity the model
    believes in names the article), then plus the reasoning's.
    """

    name = "query_rewriting"
    label = " rewrite"

    def fallback(self, state: FailureState) -> list[str]:
        question, answer = keywords(state.question), keywords(state.answer)
        return [join_terms(question, answer), join_terms(question, answer, keywords(state.reasoning))]
