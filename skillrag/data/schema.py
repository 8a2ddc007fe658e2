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
        """Build from a stored row; a row without id, question or answers, or (when `max_chars` is
        given) with a question longer than `max_chars` characters, raises DataError."""
        prefix = f"{where}: " if where else ""
        for key in ("id", "dataset", "question", "answers"):
            if key not in row:
                raise DataError(f"{prefix}missing field {key!r}")
        answers = row["answers"]
        if not isinstance(answers, list) or not [a for a in answers if str(a).strip()]:
            raise DataError(f"{prefix}question {row['id']!r} has no answers")
        if not str(row["question"]).strip():
            raise DataError(f"{prefix}question {row['id']!r} has an empty question text")
        if max_chars is not None and len(str(row["question"]).strip()) > max_chars:
            raise DataError(
                f"{prefix}question {row['id']!r} has {len(str(row['question']).strip()):,} characters, over "
                f"prepare.max_question_chars={max_chars:,}"
            )
        return cls(
            id=str(row["id"]),
            dataset=str(row["dataset"]),
            question=str(row["question"]).strip(),
            answers=[str(a) for a in answers if str(a).strip()],
            split=str(row.get("split", "")),
            meta=dict(row.get("meta", {})),
        )


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
