"""Retrieval: Lucene BM25 through pyserini (default) and bm25s as a JVM-free option.

`build_indexes` (the index stage) builds both with a manifest of their files; `open_retriever`
picks one at query time from `retrieval.backend` in params.yaml and checks its files against the
manifest; `index_fingerprint` is the built index's identity by content (`index_identity` its digest).
"""

from __future__ import annotations

from pathlib import Path

from skillrag.errors import ConfigError
from skillrag.retrieval.base import Hit, IndexMissingError, Retriever
from skillrag.retrieval.bm25s_backend import BM25sRetriever
from skillrag.retrieval.fingerprint import IndexCorruptError, index_fingerprint, index_identity
from skillrag.retrieval.index import IndexStats, build_indexes
from skillrag.retrieval.lucene_backend import LuceneRetriever

BACKENDS = ("lucene", "bm25s")


def open_retriever(backend: str, index_dir: str | Path, k1: float = 0.9, b: float = 0.4) -> Retriever:
    """The retriever for `backend` ("lucene" or "bm25s") over the indexes in `index_dir`."""
    if backend == "lucene":
        return LuceneRetriever(index_dir, k1=k1, b=b)
    if backend == "bm25s":
        return BM25sRetriever(index_dir, k1=k1, b=b)
    raise ConfigError(f"unknown retrieval backend {backend!r} (choose from {', '.join(BACKENDS)})")


__all__ = [
    "BACKENDS",
    "BM25sRetriever",
    "Hit",
    "IndexCorruptError",
    "IndexMissingError",
    "IndexStats",
    "LuceneRetriever",
    "Retriever",
    "build_indexes",
    "index_fingerprint",
    "index_identity",
    "open_retriever",
]
