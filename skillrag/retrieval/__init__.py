"""Retrieval: Lucene BM25 through pyserini (default), bm25s as a JVM-free option, dense vectors
(all-MiniLM-L6-v2 + faiss) and hybrid (reciprocal rank fusion of Lucene and dense).

`build_indexes` (the index stage) builds the BM25 indexes with a manifest of their files,
`build_dense` the dense index (on first use: it takes minutes where BM25 takes seconds);
`open_retriever` picks a backend at query time from `retrieval.backend` in params.yaml and checks
its files against the manifest; `index_fingerprint` and `dense_fingerprint` are the built indexes'
identities by content (`index_identity` a fingerprint's digest, `retrieval_identity` what a run
records for its backend).
"""

from __future__ import annotations

from pathlib import Path

from skillrag.errors import ConfigError
from skillrag.retrieval.base import Hit, IndexMissingError, Retriever
from skillrag.retrieval.bm25s_backend import BM25sRetriever
from skillrag.retrieval.build import IndexStats, build_indexes
from skillrag.retrieval.dense import DenseRetriever, build_dense
from skillrag.retrieval.fingerprint import (
    dense_fingerprint,
    index_fingerprint,
    index_identity,
    retrieval_identity,
)
from skillrag.retrieval.fusion import HybridRetriever
from skillrag.retrieval.index_manifest import IndexCorruptError
from skillrag.retrieval.lucene_backend import LuceneRetriever

BM25_BACKENDS = ("lucene", "bm25s")
BACKENDS = (*BM25_BACKENDS, "dense", "hybrid")


def open_retriever(
    backend: str,
    index_dir: str | Path,
    k1: float = 0.9,
    b: float = 0.4,
    fusion_k: float = 60,
    fusion_depth: int = 20,
    dense_dir: str | Path | None = None,
) -> Retriever:
    """The retriever for `backend` (one of BACKENDS) over the BM25 indexes in `index_dir` and the
    dense index in `dense_dir` (default `index_dir`); `k1`, `b` matter to the BM25 backends and
    hybrid, `fusion_k` and `fusion_depth` to hybrid only."""
    dense_dir = index_dir if dense_dir is None else dense_dir
    if backend == "lucene":
        return LuceneRetriever(index_dir, k1=k1, b=b)
    if backend == "bm25s":
        return BM25sRetriever(index_dir, k1=k1, b=b)
    if backend == "dense":
        return DenseRetriever(dense_dir)
    if backend == "hybrid":
        return HybridRetriever(LuceneRetriever(index_dir, k1=k1, b=b), DenseRetriever(dense_dir), fusion_k, fusion_depth)
    raise ConfigError(f"unknown retrieval backend {backend!r} (choose from {', '.join(BACKENDS)})")


__all__ = [
    "BACKENDS",
    "BM25_BACKENDS",
    "BM25sRetriever",
    "DenseRetriever",
    "Hit",
    "HybridRetriever",
    "IndexCorruptError",
    "IndexMissingError",
    "IndexStats",
    "LuceneRetriever",
    "Retriever",
    "build_dense",
    "build_indexes",
    "dense_fingerprint",
    "index_fingerprint",
    "index_identity",
    "open_retriever",
    "retrieval_identity",
]
