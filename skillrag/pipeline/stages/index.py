"""Stage `index`: the corpus collection, both BM25 indexes and the dense index (data/corpus/,
data/index/; DVC cache only, rebuilt on a new machine), their fingerprints (data/fingerprints/
index.json and dense.json, in git: what the stages that read the index depend on and what their
runs record) and the gate."""

from __future__ import annotations

from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths


def index(params: Params, paths: Paths) -> Any:
    """Corpus -> data/corpus (JsonCollection) + data/index/{lucene,bm25s,dense}, then their
    fingerprints (skillrag.retrieval.fingerprint); returns IndexStats."""
    from skillrag.data.corpus import read_corpus
    from skillrag.files import write_json
    from skillrag.retrieval import build_indexes, dense_fingerprint, index_fingerprint
    from skillrag.retrieval.fingerprint import smoke_queries

    passages = list(read_corpus(params.index.corpus_file, params.index.max_passages))
    stats = build_indexes(
        passages, paths.corpus, paths.index, params.index.threads, params.retrieval.k1, params.retrieval.b
    )
    queries = smoke_queries([p.title for p in passages], params.index.smoke_queries)
    fingerprint = index_fingerprint(paths.corpus, paths.index, params.retrieval.k1, params.retrieval.b, queries)
    write_json(paths.index_fingerprint, fingerprint)
    write_json(paths.dense_fingerprint, dense_fingerprint(paths.corpus, paths.index, queries))
    return stats


def gate_index(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.index import gate_index as run

    return run(paths.corpus, paths.index, params.index, params.retrieval.k1, params.retrieval.b, paths.validation("index"))
