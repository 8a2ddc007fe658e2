"""The retriever interface shared by every backend (Lucene, bm25s, dense, hybrid)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from skillrag.data.schema import Passage
from skillrag.errors import ArtifactError


@dataclass(frozen=True)
class Hit:
    passage: Passage
    score: float


class Retriever(Protocol):
    """`k` (passages per query) must be at least 1: every backend raises ValueError otherwise."""

    def search(self, query: str, k: int) -> list[Hit]: ...

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]: ...


class IndexMissingError(ArtifactError):
    """Searching before the index exists; the message names the command that builds it."""


def require_index(path: Path, marker: str, backend: str) -> Path:
    """Return `path` if it holds a built index (a file matching `marker`), else raise
    IndexMissingError: a clear "build it first" beats a Java stack trace or a numpy load error."""
    if not any(path.glob(marker)):
        raise IndexMissingError(
            f"no {backend} index at {path}: run `skillrag index` (or `dvc repro index`) to build it"
        )
    return path


def check_k(k: int) -> int:
    """`k` if it is a usable number of passages (>= 1), else ValueError: Lucene would raise a Java
    exception for 0, and bm25s a numpy one."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k (passages per query) must be an integer >= 1, got {k!r}")
    return k


def ranked(hits: Sequence[Hit], k: int) -> list[Hit]:
    """The top `k` of `hits` by score, ties broken by passage id: Lucene breaks them by its internal
    doc ids, which a multi-threaded build assigns in no fixed order, so a caller that needs the
    same order on every build asks for more hits than it keeps and ranks them here."""
    return sorted(hits, key=lambda h: (-h.score, h.passage.id))[:k]
