"""Evidence focusing: the passages are on topic but miss one fact; search for that gap."""

from __future__ import annotations

from skillrag.skills.base import FailureState, Skill
from skillrag.skills.queries import join_terms, keywords


class EvidenceFocusing(Skill):
    """For context that covers the question only partly; one query for the missing slot,
    grounded in names from the passages.

    Fallback: the question's content words that no passage contains (the uncovered slot),
    anchored by the current answer, then by the reasoning.
    """

    name = "evidence_focusing"
    label = " focus"

    def fallback(self, state: FailureState) -> list[str]:
        covered = {t for passage in state.passages for t in keywords(passage.contents)}
        absent = [t for t in keywords(state.question) if t not in covered]
        return [join_terms(absent, keywords(state.answer)), join_terms(absent, keywords(state.reasoning))]
