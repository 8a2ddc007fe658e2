"""The retriever interface shared by the Lucene and bm25s backends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from skillrag.data.schema import Passage


@dataclass(frozen=True)
class Hit:
    passage: Passage
    score: float


class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[Hit]: ...

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]: ...


class IndexMissingError(FileNotFoundError):
    """Searching before the index exists; the message names the command that builds it."""


def require_index(path: Path, marker: str, backend: str) -> Path:
    """Return `path` if it holds a built index (a file matching `marker`), else raise
    IndexMissingError: a clear "build it first" beats a Java stack trace or a numpy load error."""
    if not any(path.glob(marker)):
        raise IndexMissingError(
            f"no {backend} index at {path}: run `skillrag index` (or `dvc repro index`) to build it"
        )
    return path
