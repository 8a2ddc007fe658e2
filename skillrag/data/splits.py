"""The written question splits, as later stages read them: data/questions/<split>/<dataset>.jsonl."""

from __future__ import annotations

from pathlib import Path

from skillrag.data.schema import Question
from skillrag.errors import ArtifactError
from skillrag.files import numbered_jsonl

SPLITS = ("train", "dev", "eval")


def load_split(questions_dir: Path, split: str, max_question_chars: int | None = None) -> dict[str, list[Question]]:
    """dataset -> questions of one written split (what later stages read). Stages that answer the
    questions pass `max_question_chars` (prepare.max_question_chars): a longer question, e.g. in
    a hand-edited file, is a DataError naming file:line, not an out-of-memory failure later."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (one of {', '.join(SPLITS)})")
    folder = Path(questions_dir) / split
    if not folder.is_dir():
        raise ArtifactError(f"{folder} does not exist: run `skillrag prepare` (or `dvc repro prepare`) first")
    return {
        path.stem: [
            Question.from_dict(row, where=f"{path}:{number}", max_chars=max_question_chars)
            for number, row in numbered_jsonl(path)
        ]
        for path in sorted(folder.glob("*.jsonl"))
    }


def gold_passage_ids(questions_dir: Path) -> set[str]:
    """The corpus ids of the gold (supporting) passages of every written question, all splits:
    what a small index must hold for retrieval to find their evidence (`index.question_evidence`)."""
    return {
        str(pid)
        for path in sorted(Path(questions_dir).glob("*/*.jsonl"))
        for _, row in numbered_jsonl(path)
        for pid in (row.get("meta") or {}).get("gold_passage_ids", [])
    }
