"""The two records every stage exchanges: a question with its gold answers, and a passage."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from skillrag.errors import DataError


@dataclass(frozen=True)
class Question:
    id: str
    dataset: str
    question: str
    answers: list[str]
    split: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any], where: str = "", max_chars: int | None = None) -> Question:
        """Build from a stored row; raises DataError naming `where` for a row without id, question
        or answers, a field of the wrong type (a question that is not a string, answers that are
        not a list of strings or numbers, meta that is not an object: a null is never read as the
        text "None"), or (when `max_chars` is given) a question longer than `max_chars` characters."""
        prefix = f"{where}: " if where else ""
        for key in ("id", "dataset", "question", "answers"):
            if key not in row:
                raise DataError(f"{prefix}missing field {key!r}")
        if not isinstance(row["id"], str | int) or isinstance(row["id"], bool) or not str(row["id"]).strip():
            raise DataError(f"{prefix}id must be a non-empty string, got {row['id']!r}")
        qid, question, answers, meta = row["id"], row["question"], row["answers"], row.get("meta", {})
        if not isinstance(question, str):
            raise DataError(f"{prefix}question {qid!r}: the question must be a string, got {_kind(question)}")
        if not isinstance(answers, list) or not all(_is_answer(a) for a in answers):
            raise DataError(f"{prefix}question {qid!r}: answers must be a list of strings, got {_kind(answers)}")
        if not [a for a in answers if str(a).strip()]:
            raise DataError(f"{prefix}question {qid!r} has no answers")
        if not isinstance(meta, dict):
            raise DataError(f"{prefix}question {qid!r}: meta must be an object, got {_kind(meta)}")
        if not question.strip():
            raise DataError(f"{prefix}question {qid!r} has an empty question text")
        if max_chars is not None and len(question.strip()) > max_chars:
            raise DataError(
                f"{prefix}question {qid!r} has {len(question.strip()):,} characters, over "
                f"prepare.max_question_chars={max_chars:,}"
            )
        return cls(
            id=str(qid),
            dataset=str(row["dataset"]),
            question=question.strip(),
            answers=[str(a) for a in answers if str(a).strip()],
            split=str(row.get("split", "")),
            meta=dict(meta),
        )


def _is_answer(value: Any) -> bool:
    """A gold answer as the bundles write them: a string, or a number (a year, a count)."""
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return f"a list holding {', '.join(sorted({_kind(v) for v in value}))}" if value else "an empty list"
    return "null" if value is None else f"a {'string' if isinstance(value, str) else type(value).__name__} ({value!r:.40})"


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @property
    def contents(self) -> str:
        """What BM25 indexes and what the LM reads: title, newline, text."""
        return f"{self.title}\n{self.text}"
