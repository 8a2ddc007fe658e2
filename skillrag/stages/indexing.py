"""Stage `index`: the corpus collection and both BM25 indexes (data/corpus/, data/index/) and their gate."""

from __future__ import annotations

from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths


def index(params: Params, paths: Paths) -> Any:
    """Corpus -> data/corpus (JsonCollection) + data/index/{lucene,bm25s}; returns IndexStats."""
    from skillrag.data.corpus import read_corpus
    from skillrag.retrieval import build_indexes

    passages = read_corpus(params.index.corpus_file, params.index.max_passages)
    return build_indexes(
        passages, paths.corpus, paths.index, params.index.threads, params.retrieval.k1, params.retrieval.b
    )


def gate_index(params: Params, paths: Paths) -> dict[str, Any]:
    from skillrag.quality.index import gate_index as run

    return run(paths.corpus, paths.index, params.index, params.retrieval.k1, params.retrieval.b)
