"""The two fixed baselines: answer closed-book, or retrieve once with the question and answer."""

from __future__ import annotations

from skillrag.methods.base import Method, Session


class NoRetrieval(Method):
    """Closed-book CoT answer; the prober's score is recorded when a prober is given."""

    name = "no_retrieval"

    def run(self, session: Session) -> None:
        session.answer_round("no_retrieval")
        session.stop("done")


class SingleStep(Method):
    """BM25 top-k with the question, then a CoT answer over those passages."""

    name = "single_step"

    def run(self, session: Session) -> None:
        session.answer_round("retrieval", [session.question.question])
        session.stop("done")
