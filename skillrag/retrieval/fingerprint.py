"""The index fingerprints and a run's retrieval identity (the manifest of the index's files is
skillrag.retrieval.index_manifest).

The fingerprint (`data/fingerprints/index.json`, `Paths.index_fingerprint`; git-tracked) is: what
the index holds and how it answers (a digest of the corpus, BM25 k1 and b, the pyserini, Lucene and
bm25s versions, the document count, each backend's top-k ids for the smoke queries), with sorted
keys and no times, so every rebuild of the same corpus writes the same bytes. Stages that read the
index depend on it, and run settings and extract's fingerprint record its digest (`index_identity`):
traces made on one index are never resumed on another, and a rebuilt index is the same one.

The dense index, built on first use on each machine (`skillrag.retrieval.dense.build_dense`),
has its own fingerprint beside it (`data/dense/fingerprint.json`, `Paths.dense_fingerprint`; not in git)
made the same way (corpus digest, encoder, versions, dimension, count, the smoke queries' dense
top-k), so the BM25 fingerprint, and every BM25 run's identity, is what it was before dense
retrieval existed. Not a digest of the vectors: another CPU computes them ~1e-7 apart, and among
millions of values some would round the other way. `retrieval_identity` is what a run records
for the backend it uses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from skillrag.provenance import digest, text_digest
from skillrag.retrieval.base import IndexMissingError, ranked
from skillrag.retrieval.index_manifest import DENSE_DIR, REBUILD

SMOKE_K = 10  # hits per smoke query: the gate looks for the query's passage among them, the fingerprint records their ids


def smoke_queries(titles: Sequence[str], n: int) -> list[str]:
    """The titles of `n` evenly spaced passages of `titles`: the smoke queries of the index gate
    (each expected to find its own passage) and of the fingerprint."""
    if not n or not titles:
        return []
    return list(titles[:: max(1, len(titles) // n)][:n])


def corpus_digest(corpus_dir: Path) -> str:
    """sha256 over the collection's documents sorted by id: the same passages give the same digest
    however many shard files (`index.threads`) hold them."""
    docs = [line for path in sorted(Path(corpus_dir).glob("*.jsonl")) for line in path.read_text(encoding="utf-8").splitlines()]
    docs.sort(key=lambda line: json.loads(line)["id"])
    return text_digest("\n".join(docs))


def _top_ids(retriever: Any, queries: Sequence[str], k: int) -> list[list[str]]:
    """Each query's top-`k` passage ids, ties broken by id (`ranked`)."""
    return [[h.passage.id for h in ranked(hits, k)] for hits in retriever.batch_search(list(queries), 2 * k)]


def index_fingerprint(corpus_dir: Path, index_dir: Path, k1: float, b: float, queries: Sequence[str]) -> dict[str, Any]:
    """What the index holds and how it answers (see the module docstring); reads the corpus, the
    backends' document counts and their answers to `queries`, never the bytes of the index files."""
    from skillrag.retrieval.bm25s_backend import BM25sRetriever, count_bm25s_docs
    from skillrag.retrieval.java import java_class
    from skillrag.retrieval.lucene_backend import LuceneRetriever, count_lucene_docs

    lucene = LuceneRetriever(index_dir, k1=k1, b=b, threads=1)
    try:
        lucene_top = _top_ids(lucene, queries, SMOKE_K) if queries else []
    finally:
        lucene.close()
    bm25s_top = _top_ids(BM25sRetriever(index_dir, k1=k1, b=b), queries, SMOKE_K) if queries else []
    return {
        "corpus_sha256": corpus_digest(corpus_dir),
        "bm25": {"k1": k1, "b": b},
        "versions": {
            "pyserini": version("pyserini"),
            "lucene": str(java_class("org.apache.lucene.util.Version").LATEST.toString()),
            "bm25s": version("bm25s"),
        },
        "documents": {"lucene": count_lucene_docs(index_dir / "lucene"), "bm25s": count_bm25s_docs(index_dir / "bm25s")},
        "smoke": {"k": SMOKE_K, "queries": list(queries), "lucene": lucene_top, "bm25s": bm25s_top},
    }


def dense_fingerprint(corpus_dir: Path, dense_root: Path, queries: Sequence[str]) -> dict[str, Any]:
    """What the dense index in `dense_root` holds and how it answers (see the module docstring):
    the corpus digest, the encoder, the faiss and torch versions, the dimension, the vector count
    and the smoke queries' dense top-k ids."""
    from skillrag.retrieval.dense import META, DenseRetriever

    meta = json.loads((dense_root / DENSE_DIR / META).read_text())
    top = _top_ids(DenseRetriever(dense_root), queries, SMOKE_K) if queries else []
    return {
        "corpus_sha256": corpus_digest(corpus_dir),
        "encoder": meta["encoder"],
        "versions": {"faiss": version("faiss-cpu"), "torch": version("torch"), "transformers": version("transformers")},
        "dim": meta["dim"],
        "vectors": meta["count"],
        "smoke": {"k": SMOKE_K, "queries": list(queries), "dense": top},
    }


def index_identity(fingerprint_path: str | Path) -> str:
    """The index's identity: the digest of its fingerprint file (not of the index's files, which
    differ between builds of the same corpus). Raises IndexMissingError when there is none."""
    path = Path(fingerprint_path)
    if not path.is_file():
        raise IndexMissingError(f"no index fingerprint at {path}: {REBUILD}")
    return digest(path)


def retrieval_identity(backend: str, index_fingerprint_path: str | Path, dense_fingerprint_path: str | Path) -> str | dict[str, str]:
    """The identity of what `backend` retrieves from, as a run records it: the BM25 fingerprint's
    digest for lucene and bm25s (a plain string, as before dense retrieval existed, so a BM25
    run's records keep their bytes), the dense fingerprint's for dense, and both for hybrid."""
    if backend in ("lucene", "bm25s"):
        return index_identity(index_fingerprint_path)
    dense = {"dense": index_identity(dense_fingerprint_path)}
    return {"bm25": index_identity(index_fingerprint_path), **dense} if backend == "hybrid" else dense
