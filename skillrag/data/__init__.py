"""QA datasets and the retrieval corpus, normalised to one schema."""

from skillrag.data.schema import Passage, Question

__all__ = ["Passage", "Question"]
