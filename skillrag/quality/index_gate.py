"""The index gate (after `index`): corpus ids unique and texts non-empty, both BM25 indexes hold
every passage, smoke queries find their passage with Lucene. The dense gate (after the dense
index is built on first use): it holds every passage, its vectors have unit length, smoke queries
find their passage.

A gate result is git-tracked (the index's) or compared across machines, so it records properties,
never a float the CPU computes: a vector's length is checked as "within NORM_TOLERANCE of 1"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import great_expectations.expectations as gxe
import numpy as np
import pandas as pd

from skillrag.config import IndexParams
from skillrag.files import read_jsonl
from skillrag.quality.gate import Check, run_gate

NORM_TOLERANCE = 1e-3  # float32 unit vectors are within ~1e-6 of length 1; an unnormalised one is far off


def index_checks(
    passage_ids: Sequence[str],
    texts: Sequence[str],
    counts: Mapping[str, int],
    smoke_hits: Mapping[str, Sequence[bool]],
    norms: Sequence[float] = (),
) -> dict[str, Check]:
    """Corpus ids unique and texts non-empty; every index holds as many docs (dense: vectors) as
    the corpus; every dense vector has unit length (`norms` within NORM_TOLERANCE of 1, recorded as
    that property per vector, so the result's bytes do not depend on the CPU), as inner product =
    cosine needs;
    each retriever's smoke queries (passage titles) find a passage of that title in the top 10
    (`smoke_hits`: per retriever, one bool per query)."""
    passages = pd.DataFrame({"id": list(passage_ids), "text": list(texts)})
    index = pd.DataFrame(
        [{"backend": name, "count": count, "expected": len(passage_ids)} for name, count in counts.items()],
        columns=["backend", "count", "expected"],
    )
    checks = {
        "passages": Check(
            passages,
            [
                gxe.ExpectTableRowCountToBeBetween(min_value=1),
                gxe.ExpectColumnValuesToBeUnique(column="id"),
                gxe.ExpectColumnValueLengthsToBeBetween(column="text", min_value=1),
            ],
        ),
        "index": Check(index, [gxe.ExpectColumnPairValuesToBeEqual(column_A="count", column_B="expected")]),
    }
    if len(norms):
        checks["norms"] = Check(
            pd.DataFrame({"unit_length": [bool(abs(n - 1) <= NORM_TOLERANCE) for n in norms]}),
            [gxe.ExpectColumnValuesToBeInSet(column="unit_length", value_set=[True])],
        )
    for name, hits in smoke_hits.items():
        if hits:
            checks[name] = Check(
                pd.DataFrame({"hit": list(hits)}),
                [gxe.ExpectColumnValuesToBeInSet(column="hit", value_set=[True], mostly=0.8)],
            )
    return checks


def _read_collection(corpus_dir: Path) -> pd.DataFrame:
    rows = []
    for path in sorted(corpus_dir.glob("*.jsonl")):
        for row in read_jsonl(path):
            title, _, text = str(row.get("contents", "")).partition("\n")
            rows.append({"id": str(row.get("id", "")), "title": title, "text": text.strip()})
    return pd.DataFrame(rows, columns=["id", "title", "text"])


def gate_index(
    corpus_dir: Path, index_dir: Path, params: IndexParams, k1: float, b: float, result_path: Path
) -> dict[str, Any]:
    """The gate after `index`: the written collection, both BM25 indexes' doc counts, and smoke
    queries (the titles of `smoke_queries` evenly spaced passages, each expected to retrieve a
    passage of that title in the Lucene top 10). Every index's files are first checked against the
    index manifest (IndexCorruptError naming the file otherwise)."""
    from skillrag.retrieval import LuceneRetriever
    from skillrag.retrieval.bm25s_backend import count_bm25s_docs
    from skillrag.retrieval.index_manifest import BM25_DIRS, verify_index
    from skillrag.retrieval.lucene_backend import count_lucene_docs

    for backend in BM25_DIRS:
        verify_index(index_dir, backend)
    collection = _read_collection(corpus_dir)
    counts = {"lucene": count_lucene_docs(index_dir / "lucene"), "bm25s": count_bm25s_docs(index_dir / "bm25s")}
    hits = {"smoke": _smoke_hits(LuceneRetriever(index_dir, k1=k1, b=b), collection, params.smoke_queries)}
    checks = index_checks(collection["id"].tolist(), collection["text"].tolist(), counts, hits)
    return run_gate("index", checks, result_path)


def gate_dense(corpus_dir: Path, dense_root: Path, smoke_queries: int, result_path: Path) -> dict[str, Any]:
    """The gate after the dense index is built (`skillrag.pipeline.runtime.ensure_dense`): its files
    against its manifest, one vector per passage of the collection, unit-length vectors, and the
    index gate's smoke queries in the dense top 10."""
    from skillrag.retrieval import DenseRetriever
    from skillrag.retrieval.dense import stored_vectors
    from skillrag.retrieval.index_manifest import DENSE_DIR, verify_index

    verify_index(dense_root, DENSE_DIR)
    collection = _read_collection(corpus_dir)
    vectors = stored_vectors(dense_root / DENSE_DIR)
    hits = {"dense_smoke": _smoke_hits(DenseRetriever(dense_root), collection, smoke_queries)}
    norms = np.linalg.norm(vectors, axis=1)
    checks = index_checks(collection["id"].tolist(), collection["text"].tolist(), {"dense": len(vectors)}, hits, norms)
    return run_gate("dense", checks, result_path)


def _smoke_hits(retriever: Any, collection: pd.DataFrame, n: int) -> list[bool]:
    """Per smoke query (the titles of `n` evenly spaced passages): a passage of that title is in
    the retriever's top SMOKE_K."""
    from skillrag.retrieval.fingerprint import SMOKE_K, smoke_queries

    queries = smoke_queries(collection["title"].tolist(), n)
    return [any(hit.passage.title == title for hit in retriever.search(title, SMOKE_K)) for title in queries]
