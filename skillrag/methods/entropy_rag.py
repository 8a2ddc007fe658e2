"""entropy_rag: Probing-RAG's loop with the prober replaced by the answer's mean token entropy.

The simplest checker a practitioner would try first, and the baseline that tells whether
hidden-state probing earns its cost: the same rounds as probing_rag (closed-book, retrieve with
the question, re-query), accepting an answer when the mean entropy of its generated tokens is at
most `methods.entropy_rag.cut` (auto: tuned on dev, skillrag.methods.thresholds). It needs no
prober and no extra LLM call: the entropies come with the answer's generation.
"""

from __future__ import annotations

from dataclasses import dataclass

from skillrag.lm.base import Generation
from skillrag.methods.base import Components, Meter
from skillrag.methods.probing_rag import ProbingRAG
from skillrag.methods.thresholds import resolve_threshold

CUT = "methods.entropy_rag.cut"


def mean_entropy(generation: Generation) -> float:
    """The mean entropy (nats) of the generated tokens' distributions; 0 for an empty answer."""
    return sum(generation.entropies) / len(generation.entropies) if generation.entropies else 0.0


@dataclass(frozen=True)
class EntropyChecker:
    """Accepts an answer whose mean token entropy is at most `cut` (its score, in the round)."""

    cut: float

    @property
    def layers(self) -> list[int]:
        return []  # nothing to capture: the entropies come with every generation

    def score(self, generation: Generation) -> float:
        return mean_entropy(generation)

    def accepts(self, score: float, stage: str) -> bool:
        """One cut for both stages (closed-book and over passages)."""
        return score <= self.cut


class EntropyRAG(ProbingRAG):
    name = "entropy_rag"
    needs_prober = False

    def __init__(self, components: Components, meter: Meter | None = None) -> None:
        super().__init__(components, meter)
        self.checker = EntropyChecker(resolve_threshold(components.params.entropy_rag.cut, CUT, components.thresholds))
