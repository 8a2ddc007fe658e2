"""Probing-RAG (Baek et al.): the prober checks retrieval; on failure, retrieve again.

Re-issuing a query would only fetch the same passages again, so each re-query is new: the
question plus the current (rejected) answer, which names the entity the model is reasoning
about; when that query was already issued (the answer did not change), the question plus the
current reasoning; when both were issued, the run stops ("exhausted"). No LLM call goes into
forming the query: each retry costs one retrieval and one answer.
"""

from __future__ import annotations

from skillrag.methods.base import Attempt, Session
from skillrag.methods.checked import CheckedRAG
from skillrag.skills.queries import fresh


class ProbingRAG(CheckedRAG):
    name = "probing_rag"

    def retry(self, session: Session, rejected: Attempt, round_index: int) -> Attempt | None:
        question = session.question.question
        queries = fresh([f"{question} {rejected.answer}", f"{question} {rejected.reasoning}"], session.issued)
        if not queries:
            session.stop("exhausted")
            return None
        return session.answer_round("requery", queries[:1])
