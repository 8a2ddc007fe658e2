"""Adaptive-RAG (Jeong et al. 2024): a query-complexity classifier picks, per question, no
retrieval (A), single-step retrieval (B) or multi-step retrieval interleaved with reasoning (C,
IRCoT), and that method answers.

The strategies are the project's own methods, run on this question's session and counted on
this method's meter, so their rounds and costs are exactly theirs; the classifier's call (one
prefill, skillrag.methods.complexity) is charged to a first "complexity" round that records
each strategy's probability.
"""

from __future__ import annotations

from skillrag.methods.base import Components, Meter, Method, Session
from skillrag.methods.complexity import REBUILD
from skillrag.methods.ircot import IRCoT
from skillrag.methods.simple import NoRetrieval, SingleStep

STRATEGY_METHODS: tuple[type[Method], ...] = (NoRetrieval, SingleStep, IRCoT)


class AdaptiveRAG(Method):
    """Rounds: "complexity" (the choice, no answer), then the chosen method's rounds; ends as it does."""

    name = "adaptive_rag"
    needs_classifier = True

    def __init__(self, components: Components, meter: Meter | None = None) -> None:
        if components.classifier is None:
            raise ValueError(f"method {self.name!r} needs the query-complexity classifier: run {REBUILD}")
        super().__init__(components, meter)
        self.strategies = {m.name: m(components, self.meter) for m in STRATEGY_METHODS}

    def run(self, session: Session) -> None:
        routing = self.components.classifier.choose(self.lm, session.question.question)
        session.decision_round("complexity", "", routing)
        self.strategies[routing.skill].run(session)
