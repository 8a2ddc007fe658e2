"""The prober-checked loop that Probing-RAG and Skill-RAG share; they differ only in `retry`."""

from __future__ import annotations

from abc import abstractmethod

from skillrag.answering import Attempt
from skillrag.methods.base import Method, Session

# The methods that run this loop, each with its own after-evidence cut (skillrag.probe.prober):
# what a retry is worth depends on how the method retries.
CHECKED_METHODS = ("probing_rag", "skill_rag")


class CheckedRAG(Method):
    """Before retrieval: answer closed-book and probe; after evidence: retrieve with the
    question, answer, probe.
    While the prober rejects, `retry` forms the next round, at most `max_rounds` times; the
    final answer is the last round's. An answer without an `Answer:` line is rejected whatever
    the prober says (skillrag.answering.NO_ANSWER, noted in its round): the loop never
    ends "accepted" on an answer the parser could not read."""

    needs_prober = True

    def run(self, session: Session) -> None:
        attempt: Attempt | None = session.answer_round("no_retrieval")
        if not attempt.accepted:
            attempt = session.answer_round("retrieval", [session.question.question])
        round_index = 0
        while not attempt.accepted and round_index < self.components.params.max_rounds:
            round_index += 1
            attempt = self.retry(session, attempt, round_index)
            if attempt is None:
                return  # retry ended the run: exit, or no new query left
        session.stop("accepted" if attempt.accepted else "max_rounds")

    @abstractmethod
    def retry(self, session: Session, rejected: Attempt, round_index: int) -> Attempt | None:
        """After `rejected`, record the next round and return its attempt, or stop the session
        and return None."""
